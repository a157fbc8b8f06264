/*
 * sched.c - the scheduler: runs one graph over several backends in priority
 * order. Each compute node goes to the first backend that supports its op and
 * reaches the memory of its pre-allocated inputs (weights, KV cache) and of
 * its own output; the graph is split where the backend changes; an input a
 * split's backend cannot reach is copied into that backend's compute memory
 * before the split runs. One graph allocator per backend plans the shared
 * node order, so liveness counts consumers on every backend.
 *
 * While a graph is allocated, its nodes' sources that need a copy point at
 * the copies; they are restored after the compute (or on reset/free), so the
 * caller's graph is unchanged afterwards.
 */
#include "backend-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BACKENDS 16
#define COPY_CHUNK 256
#define NEED_ALLOC 0x100 /* map value flag: the scheduler allocates this root */
#define ID_MASK 0xff

/* ------------------------------------------------------------------ pointer map */

struct pmap {
    const void **keys;
    int *vals;
    size_t cap, n;
};

static size_t pmap_slot(const struct pmap *m, const void *k) {
    size_t mask = m->cap - 1;
    size_t i = ((uintptr_t)k >> 6) * 0x9E3779B97F4A7C15ULL & mask;
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & mask;
    return i;
}

/* Room for n keys at load <= 1/2 (rehashes; allocates only when growing). */
static bool pmap_reserve(struct pmap *m, size_t n) {
    if (m->cap >= 2 * n && m->cap) return true;
    size_t cap = 64;
    while (cap < 2 * n) cap <<= 1;
    const void **keys = calloc(cap, sizeof *keys);
    int *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        kt_set_error("kt sched: out of memory");
        return false;
    }
    struct pmap old = *m;
    *m = (struct pmap){keys, vals, cap, 0};
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i]) {
            size_t s = pmap_slot(m, old.keys[i]);
            m->keys[s] = old.keys[i];
            m->vals[s] = old.vals[i];
            m->n++;
        }
    free(old.keys);
    free(old.vals);
    return true;
}

static int *pmap_get(const struct pmap *m, const void *k) {
    if (!m->cap) return NULL;
    size_t s = pmap_slot(m, k);
    return m->keys[s] ? &m->vals[s] : NULL;
}

/* Caller reserved room. */
static void pmap_set(struct pmap *m, const void *k, int v) {
    size_t s = pmap_slot(m, k);
    if (!m->keys[s]) {
        m->keys[s] = k;
        m->n++;
    }
    m->vals[s] = v;
}

static void pmap_clear(struct pmap *m) {
    if (m->cap) memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}

static void pmap_free(struct pmap *m) {
    free(m->keys);
    free(m->vals);
}

/* ------------------------------------------------------------------ state */

struct split {
    int backend;
    int first, end;           /* user node range [first, end) */
    int first_copy, n_copies; /* in copies[] */
    struct kt_cgraph gf;      /* the split's nodes inside the global graph */
};

struct rewrite {
    struct kt_tensor *node;
    int j;
    struct kt_tensor *orig;
};

struct copy_chunk {
    struct copy_chunk *next;
    struct kt_tensor t[COPY_CHUNK];
};

struct kt_sched {
    int n_backends;
    struct kt_backend *backends[MAX_BACKENDS];
    struct kt_gallocr *galloc[MAX_BACKENDS];

    struct pmap map;  /* tensor -> backend id | NEED_ALLOC, for the graph being split */
    struct pmap pins; /* tensor -> backend id, set by the caller until reset */
    struct pmap mark; /* tensor -> split that computes it (building the global order) */

    struct split *splits;
    int n_splits, splits_cap;
    struct kt_tensor **copies; /* copy tensors in creation order (their src[0] is the original) */
    int n_copies, copies_cap;
    struct copy_chunk *chunks; /* storage of copy tensors: never moves */
    struct rewrite *rewrites;
    int n_rewrites, rewrites_cap;
    struct kt_tensor **gnodes; /* the global node order: per split its copies, then its nodes */
    int gnodes_cap;
    struct kt_cgraph global;

    struct kt_cgraph *allocated; /* the graph whose rewrites are applied and memory assigned */
    struct kt_buffer_type *host; /* the CPU device's memory (the last backend's) */
    kt_abort_callback abort_cb;  /* asked before every split */
    void *abort_data;
};

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) {
        kt_set_error("kt sched: out of memory");
        return false;
    }
    *p = q;
    *cap = n;
    return true;
}

struct kt_sched *kt_sched_new(struct kt_backend **backends, int n_backends, int graph_size) {
    if (n_backends < 1 || n_backends > MAX_BACKENDS) {
        kt_set_error("kt_sched_new: %d backends (1..%d allowed)", n_backends, MAX_BACKENDS);
        return NULL;
    }
    struct kt_backend *last = backends[n_backends - 1];
    struct kt_device *last_dev = last ? kt_backend_get_device(last) : NULL;
    if (!last_dev || kt_dev_type(last_dev) != KT_DEVICE_TYPE_CPU ||
        !kt_backend_supports_buft(last, kt_dev_buffer_type(last_dev))) {
        kt_set_error("kt_sched_new: the last backend must be a CPU backend reaching host memory (the fallback)");
        return NULL;
    }
    struct kt_sched *s = calloc(1, sizeof *s);
    if (!s) {
        kt_set_error("kt_sched_new: out of memory");
        return NULL;
    }
    s->n_backends = n_backends;
    s->host = kt_dev_buffer_type(last_dev);
    for (int i = 0; i < n_backends; i++) {
        s->backends[i] = backends[i];
        s->galloc[i] = kt_gallocr_new(kt_backend_get_default_buffer_type(backends[i]));
        if (!s->galloc[i]) {
            kt_sched_free(s);
            return NULL;
        }
    }
    if (graph_size < 1) graph_size = KT_DEFAULT_GRAPH_SIZE;
    if (!pmap_reserve(&s->map, (size_t)graph_size * 2) || !grow((void **)&s->gnodes, &s->gnodes_cap, graph_size,
                                                                   sizeof *s->gnodes)) {
        kt_sched_free(s);
        return NULL;
    }
    return s;
}

static void restore(struct kt_sched *s) {
    for (int i = s->n_rewrites - 1; i >= 0; i--) s->rewrites[i].node->src[s->rewrites[i].j] = s->rewrites[i].orig;
    s->n_rewrites = 0;
    s->allocated = NULL;
}

void kt_sched_free(struct kt_sched *s) {
    if (!s) return;
    restore(s);
    for (int i = 0; i < s->n_backends; i++) kt_gallocr_free(s->galloc[i]);
    pmap_free(&s->map);
    pmap_free(&s->pins);
    pmap_free(&s->mark);
    free(s->splits);
    free(s->copies);
    free(s->rewrites);
    free(s->gnodes);
    while (s->chunks) {
        struct copy_chunk *c = s->chunks->next;
        free(s->chunks);
        s->chunks = c;
    }
    free(s);
}

void kt_sched_reset(struct kt_sched *s) {
    restore(s);
    pmap_clear(&s->pins);
    s->n_splits = s->n_copies = 0;
}

static int backend_index(const struct kt_sched *s, const struct kt_backend *b) {
    for (int i = 0; i < s->n_backends; i++)
        if (s->backends[i] == b) return i;
    return -1;
}

bool kt_sched_set_tensor_backend(struct kt_sched *s, struct kt_tensor *t, struct kt_backend *b) {
    int id = backend_index(s, b);
    if (id < 0) {
        kt_set_error("kt_sched_set_tensor_backend: %s is not one of the scheduler's backends",
                     b ? kt_backend_name(b) : "(null)");
        return false;
    }
    if (!pmap_reserve(&s->pins, s->pins.n + 1)) return false;
    pmap_set(&s->pins, t, id);
    return true;
}

void kt_sched_set_abort_callback(struct kt_sched *s, kt_abort_callback cb, void *data) {
    s->abort_cb = cb;
    s->abort_data = data;
    for (int i = 0; i < s->n_backends; i++) kt_backend_set_abort_callback(s->backends[i], cb, data);
}

struct kt_backend *kt_sched_get_tensor_backend(const struct kt_sched *s, const struct kt_tensor *t) {
    const int *v = pmap_get(&s->map, t);
    if (!v) v = pmap_get(&s->pins, t);
    return v ? s->backends[*v & ID_MASK] : NULL;
}

struct kt_cgraph *kt_sched_plan_graph(struct kt_sched *s) { return &s->global; }
struct kt_gallocr *kt_sched_gallocr(struct kt_sched *s, int i) {
    return i >= 0 && i < s->n_backends ? s->galloc[i] : NULL;
}

int kt_sched_get_n_splits(const struct kt_sched *s) { return s->n_splits; }
int kt_sched_get_n_copies(const struct kt_sched *s) { return s->n_copies; }

size_t kt_sched_get_buffer_size(const struct kt_sched *s, const struct kt_backend *b) {
    int id = backend_index(s, b);
    return id < 0 ? 0 : kt_gallocr_get_buffer_size(s->galloc[id]);
}

/* ------------------------------------------------------------------ where memory lives */

/* Whether the scheduler gives root memory (none yet, or stale in one of our compute buffers). */
static bool needs_alloc(const struct kt_sched *s, const struct kt_tensor *root) {
    if (!root->data) return true;
    for (int i = 0; i < s->n_backends; i++) {
        struct kt_buffer *b = kt_gallocr_get_buffer(s->galloc[i]);
        if (b && root->buffer == b) return true;
    }
    return false;
}

enum loc_kind { LOC_UNKNOWN, LOC_BACKEND, LOC_BUFT };
struct loc {
    enum loc_kind kind;
    int id;                           /* LOC_BACKEND */
    const struct kt_buffer_type *buft; /* LOC_BUFT: memory that was there before scheduling */
};

static struct loc location(const struct kt_sched *s, const struct kt_tensor *t) {
    const struct kt_tensor *r = kt_tensor_root(t);
    const int *v = pmap_get(&s->map, r);
    if (v && (*v & NEED_ALLOC)) return (struct loc){LOC_BACKEND, *v & ID_MASK, NULL};
    if (!v && needs_alloc(s, r)) return (struct loc){LOC_UNKNOWN, -1, NULL};
    /* memory without a buffer is context memory: the host's */
    return (struct loc){LOC_BUFT, -1, r->buffer ? kt_buffer_get_type(r->buffer) : s->host};
}

static bool reaches(struct kt_sched *s, int id, struct loc l) {
    switch (l.kind) {
    case LOC_BACKEND:
        return l.id == id ||
               kt_backend_supports_buft(s->backends[id], kt_backend_get_default_buffer_type(s->backends[l.id]));
    case LOC_BUFT: return kt_backend_supports_buft(s->backends[id], l.buft);
    default: return true; /* not placed yet: it will be placed where it is first used */
    }
}

/* Memory node writes that existed before (a view's root, or a node given memory by the caller). */
static bool output_loc(const struct kt_sched *s, const struct kt_tensor *node, struct loc *out) {
    if (!node->view_src && needs_alloc(s, node)) return false;
    *out = location(s, kt_tensor_root(node));
    return true;
}

static bool can_run(struct kt_sched *s, int id, const struct kt_tensor *node, bool check_inputs) {
    if (!kt_backend_supports_op(s->backends[id], node)) return false;
    struct loc out;
    if (output_loc(s, node, &out) && !reaches(s, id, out)) return false;
    if (check_inputs)
        for (int j = 0; j < KT_MAX_SRC; j++) {
            if (!node->src[j]) continue;
            struct loc l = location(s, node->src[j]);
            if (l.kind == LOC_BUFT && !reaches(s, id, l)) return false;
        }
    return true;
}

static int choose(struct kt_sched *s, const struct kt_tensor *node) {
    const int *pin = pmap_get(&s->pins, node);
    if (pin) return *pin;
    for (int id = 0; id < s->n_backends; id++)
        if (can_run(s, id, node, true)) return id;
    /* the CPU fallback copies inputs it cannot reach */
    int cpu = s->n_backends - 1;
    return can_run(s, cpu, node, false) ? cpu : -1;
}

/* Give root (which the scheduler allocates) to backend id unless it has one. */
static void place_root(struct kt_sched *s, const struct kt_tensor *root, int id) {
    if (pmap_get(&s->map, root) || !needs_alloc(s, root)) return;
    const int *pin = pmap_get(&s->pins, root);
    pmap_set(&s->map, root, (pin ? *pin : id) | NEED_ALLOC);
}

/* ------------------------------------------------------------------ splitting */

static struct kt_tensor *new_copy(struct kt_sched *s, struct kt_tensor *src, int id) {
    int slot = s->n_copies % COPY_CHUNK;
    struct copy_chunk **pc = &s->chunks;
    for (int k = 0; k < s->n_copies / COPY_CHUNK; k++) pc = &(*pc)->next;
    if (!*pc) {
        *pc = calloc(1, sizeof **pc);
        if (!*pc) {
            kt_set_error("kt sched: out of memory for copies");
            return NULL;
        }
    }
    if (!grow((void **)&s->copies, &s->copies_cap, s->n_copies + 1, sizeof *s->copies)) return NULL;
    struct kt_tensor *c = &(*pc)->t[slot];
    memset(c, 0, sizeof *c);
    c->type = src->type;
    memcpy(c->ne, src->ne, sizeof c->ne);
    c->nb[0] = kt_type_size(src->type);
    c->nb[1] = kt_row_size(src->type, src->ne[0]);
    for (int i = 2; i < KT_MAX_DIMS; i++) c->nb[i] = c->nb[i - 1] * (size_t)src->ne[i - 1];
    c->op = KT_OP_DUP;
    c->src[0] = src;
    snprintf(c->name, sizeof c->name, "%.40s#%s", src->name, kt_backend_name(s->backends[id]));
    s->copies[s->n_copies++] = c;
    pmap_set(&s->map, c, id | NEED_ALLOC);
    return c;
}

static bool split_graph(struct kt_sched *s, struct kt_cgraph *gf) {
    restore(s);
    pmap_clear(&s->map);
    s->n_splits = s->n_copies = 0;
    size_t max_tensors = (size_t)gf->n_nodes * (1 + KT_MAX_SRC) + (size_t)gf->n_leafs;
    if (!pmap_reserve(&s->map, max_tensors)) return false;

    /* 1. a backend for every compute node; roots we allocate go where first used */
    for (int i = 0; i < gf->n_nodes; i++) {
        struct kt_tensor *n = gf->nodes[i];
        if (kt_is_view_op(n->op)) continue;
        int id = choose(s, n);
        if (id < 0) {
            kt_set_error("kt sched: no backend can run %s of '%s' where its output lives", kt_op_name(n->op),
                         n->name);
            return false;
        }
        pmap_set(&s->map, n, id | (!n->view_src && needs_alloc(s, n) ? NEED_ALLOC : 0));
        if (n->view_src) place_root(s, n->view_src, id);
        for (int j = 0; j < KT_MAX_SRC; j++)
            if (n->src[j]) place_root(s, kt_tensor_root(n->src[j]), id);
    }
    /* roots only views use (or nothing) still need a home: the CPU */
    for (int i = 0; i < gf->n_leafs; i++) place_root(s, gf->leafs[i], s->n_backends - 1);
    for (int i = 0; i < gf->n_nodes; i++)
        if (!gf->nodes[i]->view_src) place_root(s, gf->nodes[i], s->n_backends - 1);

    /* 2. splits where the backend changes (view ops join the split they fall in) */
    for (int i = 0; i < gf->n_nodes; i++) {
        struct kt_tensor *n = gf->nodes[i];
        if (kt_is_view_op(n->op) && s->n_splits > 0) continue;
        int id = kt_is_view_op(n->op) ? -1 : *pmap_get(&s->map, n) & ID_MASK;
        struct split *cur = s->n_splits ? &s->splits[s->n_splits - 1] : NULL;
        if (cur && (cur->backend == id || cur->backend < 0)) {
            cur->backend = id;
            continue;
        }
        if (cur) cur->end = i; /* before growing: cur points into the old array */
        if (!grow((void **)&s->splits, &s->splits_cap, s->n_splits + 1, sizeof *s->splits)) return false;
        s->splits[s->n_splits++] = (struct split){.backend = id, .first = i};
    }
    if (s->n_splits) {
        struct split *last = &s->splits[s->n_splits - 1];
        last->end = gf->n_nodes;
        if (last->backend < 0) last->backend = s->n_backends - 1; /* a graph of views only */
    }

    /* 3. copies of inputs a split's backend cannot reach */
    for (int k = 0; k < s->n_splits; k++) {
        struct split *sp = &s->splits[k];
        sp->first_copy = s->n_copies;
        for (int i = sp->first; i < sp->end; i++) {
            struct kt_tensor *n = gf->nodes[i];
            if (kt_is_view_op(n->op)) continue;
            for (int j = 0; j < KT_MAX_SRC; j++) {
                struct kt_tensor *src = n->src[j];
                if (!src || reaches(s, sp->backend, location(s, src))) continue;
                struct kt_tensor *c = NULL;
                for (int q = sp->first_copy; q < s->n_copies && !c; q++)
                    if (s->copies[q]->src[0] == src) c = s->copies[q];
                if (!c && !(c = new_copy(s, src, sp->backend))) return false;
                if (!grow((void **)&s->rewrites, &s->rewrites_cap, s->n_rewrites + 1, sizeof *s->rewrites))
                    return false;
                s->rewrites[s->n_rewrites++] = (struct rewrite){n, j, src};
                n->src[j] = c;
            }
        }
        sp->n_copies = s->n_copies - sp->first_copy;
    }

    /* 4. the global order: per split, the views its copies may read (views of memory from
     * before the split), its copies, then its nodes. A copy is made at the split's start, so
     * everything it reads must come before it for the allocators' liveness to be right. */
    if (!grow((void **)&s->gnodes, &s->gnodes_cap, gf->n_nodes + s->n_copies, sizeof *s->gnodes) ||
        !pmap_reserve(&s->mark, (size_t)gf->n_nodes))
        return false;
    pmap_clear(&s->mark);
    int n = 0;
    for (int k = 0; k < s->n_splits; k++) {
        struct split *sp = &s->splits[k];
        /* mark what this split computes; a view op of unmarked memory moves to the front */
        for (int i = sp->first; i < sp->end; i++) {
            struct kt_tensor *t = gf->nodes[i];
            const int *m = kt_is_view_op(t->op) ? pmap_get(&s->mark, t->src[0]) : NULL;
            if (!kt_is_view_op(t->op) || (m && *m == k)) pmap_set(&s->mark, t, k);
            else s->gnodes[n++] = t;
        }
        for (int q = 0; q < sp->n_copies; q++) s->gnodes[n++] = s->copies[sp->first_copy + q];
        int start = n;
        for (int i = sp->first; i < sp->end; i++) {
            const int *m = pmap_get(&s->mark, gf->nodes[i]);
            if (m && *m == k) s->gnodes[n++] = gf->nodes[i];
        }
        sp->gf = (struct kt_cgraph){.size = n - start, .n_nodes = n - start, .nodes = s->gnodes + start};
    }
    s->global = (struct kt_cgraph){
        .size = n, .n_nodes = n, .n_leafs = gf->n_leafs, .nodes = s->gnodes, .leafs = gf->leafs};
    return true;
}

struct owns_ctx {
    const struct kt_sched *s;
    int id;
};

static bool owns_root(const struct kt_tensor *root, void *data) {
    const struct owns_ctx *o = data;
    const int *v = pmap_get(&o->s->map, root);
    return v && (*v & NEED_ALLOC) && (*v & ID_MASK) == o->id;
}

static bool plan_all(struct kt_sched *s, bool assign) {
    for (int id = 0; id < s->n_backends; id++) {
        struct owns_ctx o = {s, id};
        if (!kt_gallocr_plan(s->galloc[id], &s->global, owns_root, &o, assign)) return false;
    }
    return true;
}

bool kt_sched_reserve(struct kt_sched *s, struct kt_cgraph *gf) {
    bool ok = split_graph(s, gf) && plan_all(s, false);
    restore(s);
    return ok;
}

bool kt_sched_alloc_graph(struct kt_sched *s, struct kt_cgraph *gf) {
    if (!split_graph(s, gf) || !plan_all(s, true)) {
        restore(s);
        return false;
    }
    s->allocated = gf;
    return true;
}

enum kt_status kt_sched_graph_compute(struct kt_sched *s, struct kt_cgraph *gf) {
    if (s->allocated != gf && !kt_sched_alloc_graph(s, gf)) return KT_STATUS_ALLOC_FAILED;
    enum kt_status st = KT_STATUS_SUCCESS;
    for (int k = 0; k < s->n_splits && st == KT_STATUS_SUCCESS; k++) {
        struct split *sp = &s->splits[k];
        struct kt_backend *b = s->backends[sp->backend];
        if (s->abort_cb && s->abort_cb(s->abort_data)) {
            st = KT_STATUS_ABORTED;
            break;
        }
        for (int q = 0; q < sp->n_copies; q++) {
            struct kt_tensor *c = s->copies[sp->first_copy + q];
            if (!kt_tensor_copy(c->src[0], c)) {
                st = KT_STATUS_FAILED;
                break;
            }
        }
        if (st == KT_STATUS_SUCCESS) st = kt_backend_graph_compute(b, &sp->gf);
        kt_backend_synchronize(b);
    }
    restore(s);
    return st;
}
