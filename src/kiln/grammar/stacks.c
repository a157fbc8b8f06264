/*
 * stacks.c - the stack machine that runs a compiled grammar on bytes. Stacks
 * are interned nodes (parent, top state); a configuration is the sorted set of
 * stacks the text so far allows, normalized so that every top state reads a
 * byte (calls pushed, finished rules popped). Configurations are interned too
 * and their transitions memoized per byte class: a byte is one table lookup
 * once the machine has seen that configuration.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

static uint64_t mix2(int32_t a, int32_t b) {
    uint64_t h = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t hash_items(const int32_t *s, int32_t n) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static bool fail(struct gsm *m) {
    m->failed = true;
    return false;
}

/* ------------------------------------------------------------------ nodes */

static bool node_hash_grow(struct gsm *m) {
    int32_t cap = m->node_hash_cap ? m->node_hash_cap * 2 : 1024;
    if (cap <= 0) return false;
    int32_t *h = malloc(sizeof *h * (size_t)cap);
    if (!h) return false;
    memset(h, 0xff, sizeof *h * (size_t)cap);
    for (int32_t i = 2; i < m->n_nodes; i++) {
        uint64_t k = mix2(m->nodes[i].parent, m->nodes[i].state) & (uint64_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
        h[k] = i;
    }
    free(m->node_hash);
    m->node_hash = h;
    m->node_hash_cap = cap;
    return true;
}

int32_t gsm_node(struct gsm *m, int32_t parent, int32_t state) {
    if (m->failed || parent < 0) return -1;
    if ((int64_t)m->n_nodes * 2 >= m->node_hash_cap && !node_hash_grow(m)) return fail(m), -1;
    uint64_t k = mix2(parent, state) & (uint64_t)(m->node_hash_cap - 1);
    for (; m->node_hash[k] >= 0; k = (k + 1) & (uint64_t)(m->node_hash_cap - 1)) {
        const struct gsm_node *n = &m->nodes[m->node_hash[k]];
        if (n->parent == parent && n->state == state) return m->node_hash[k];
    }
    if (m->n_nodes >= m->max_nodes) return fail(m), -1;
    if (m->n_nodes == m->cap_nodes) {
        int32_t cap = m->cap_nodes * 2;
        struct gsm_node *nn = realloc(m->nodes, sizeof *nn * (size_t)cap);
        uint32_t *ns = realloc(m->seen, sizeof *ns * (size_t)cap);
        if (nn) m->nodes = nn;
        if (ns) m->seen = ns;
        if (!nn || !ns) return fail(m), -1;
        memset(m->seen + m->cap_nodes, 0, sizeof *ns * (size_t)(cap - m->cap_nodes));
        m->cap_nodes = cap;
    }
    m->nodes[m->n_nodes] = (struct gsm_node){parent, state};
    m->node_hash[k] = m->n_nodes;
    return m->n_nodes++;
}

/* ------------------------------------------------------------------ configurations */

static bool cfg_hash_grow(struct gsm *m) {
    int32_t cap = m->cfg_hash_cap ? m->cfg_hash_cap * 2 : 256;
    if (cap <= 0) return false;
    int32_t *h = malloc(sizeof *h * (size_t)cap);
    if (!h) return false;
    memset(h, 0xff, sizeof *h * (size_t)cap);
    for (int32_t i = 0; i < m->n_cfgs; i++) {
        const struct gsm_cfg *c = &m->cfgs[i];
        uint64_t k = hash_items(m->items + c->off, c->n) & (uint64_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
        h[k] = i;
    }
    free(m->cfg_hash);
    m->cfg_hash = h;
    m->cfg_hash_cap = cap;
    return true;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* the configuration of the stacks in work[0..n) (any order, no duplicates) */
static int32_t intern(struct gsm *m, int32_t *s, int32_t n) {
    if (m->failed) return -1;
    if (n > 1) qsort(s, (size_t)n, sizeof *s, cmp_i32);
    if ((int64_t)(m->n_cfgs + 1) * 2 >= m->cfg_hash_cap && !cfg_hash_grow(m)) return fail(m), -1;
    uint64_t k = hash_items(s, n) & (uint64_t)(m->cfg_hash_cap - 1);
    for (; m->cfg_hash[k] >= 0; k = (k + 1) & (uint64_t)(m->cfg_hash_cap - 1)) {
        const struct gsm_cfg *c = &m->cfgs[m->cfg_hash[k]];
        if (c->n == n && (n == 0 || !memcmp(m->items + c->off, s, sizeof *s * (size_t)n))) return m->cfg_hash[k];
    }
    if (m->n_cfgs >= m->max_cfgs) return fail(m), -1;
    if (m->n_cfgs == m->cap_cfgs) {
        int32_t cap = m->cap_cfgs ? m->cap_cfgs * 2 : 256;
        struct gsm_cfg *nc = realloc(m->cfgs, sizeof *nc * (size_t)cap);
        if (!nc) return fail(m), -1;
        m->cfgs = nc;
        m->cap_cfgs = cap;
    }
    if (m->n_items + n > m->cap_items) {
        int64_t cap = m->cap_items ? m->cap_items * 2 : 4096;
        while (cap < m->n_items + n) cap *= 2;
        int32_t *ni = realloc(m->items, sizeof *ni * (size_t)cap);
        if (!ni) return fail(m), -1;
        m->items = ni;
        m->cap_items = cap;
    }
    struct gsm_cfg *c = &m->cfgs[m->n_cfgs];
    memset(c, 0, sizeof *c);
    c->off = m->n_items;
    c->n = n;
    if (n > 0) memcpy(m->items + m->n_items, s, sizeof *s * (size_t)n);
    m->n_items += n;
    for (int32_t i = 0; i < n; i++) {
        if (s[i] == GS_EMPTY) c->has_empty = 1;
        else if (s[i] == GS_EXIT) c->has_exit = 1;
        else c->live = 1;
    }
    m->cfg_hash[k] = m->n_cfgs;
    return m->n_cfgs++;
}

static bool work_push(struct gsm *m, int32_t v) {
    /* an ambiguous grammar can keep ever more parses alive (each a stack): past a
     * bound the text is refused rather than every byte costing more */
    if (m->n_work >= GSM_MAX_STACKS) return fail(m);
    if (m->n_work == m->cap_work) {
        int32_t cap = m->cap_work ? m->cap_work * 2 : 256;
        int32_t *w = realloc(m->work, sizeof *w * (size_t)cap);
        if (!w) return fail(m);
        m->work = w;
        m->cap_work = cap;
    }
    m->work[m->n_work++] = v;
    return true;
}

/* Add the normalized stacks of node n0 to work (each node once per stamp). */
static bool normalize(struct gsm *m, int32_t n0) {
    const struct kiln_grammar *g = m->g;
    int32_t sp = 0;
#define TODO_PUSH(v)                                                                     \
    do {                                                                                 \
        if (sp == m->cap_todo) {                                                         \
            int32_t c_ = m->cap_todo ? m->cap_todo * 2 : 64;                             \
            int32_t *t_ = c_ > (1 << 24) ? NULL : realloc(m->todo, sizeof *t_ * (size_t)c_); \
            if (!t_) return fail(m);                                                     \
            m->todo = t_;                                                                \
            m->cap_todo = c_;                                                            \
        }                                                                                \
        m->todo[sp++] = (v);                                                             \
    } while (0)
    TODO_PUSH(n0);
    while (sp > 0) {
        int32_t n = m->todo[--sp];
        if (n < 0) return fail(m);
        if (m->seen[n] == m->stamp) continue;
        m->seen[n] = m->stamp;
        if (n == GS_EMPTY || n == GS_EXIT) {
            if (!work_push(m, n)) return false;
            continue;
        }
        const struct gsm_node nd = m->nodes[n];
        const struct gstate *q = &g->states[nd.state];
        if (q->consuming && !work_push(m, n)) return false;
        for (int32_t k = 0; k < q->n_calls; k++) {
            const struct gcall *cl = &g->calls[q->calls + k];
            int32_t ret = gsm_node(m, nd.parent, cl->target);
            TODO_PUSH(gsm_node(m, ret, g->rule_start[cl->rule]));
        }
        if (q->accepting) TODO_PUSH(nd.parent);
    }
#undef TODO_PUSH
    return !m->failed;
}

int32_t gsm_cfg_of_stack(struct gsm *m, int32_t n) {
    if (m->failed || n < 0) return -1;
    m->stamp++;
    m->n_work = 0;
    return normalize(m, n) ? intern(m, m->work, m->n_work) : -1;
}

int32_t gsm_cfg_single(struct gsm *m, int32_t n) {
    if (m->failed || n < 0) return -1;
    return intern(m, &n, 1);
}

int32_t gsm_cfg_start(struct gsm *m, int32_t rule) {
    return gsm_cfg_of_stack(m, gsm_node(m, GS_EMPTY, m->g->rule_start[rule]));
}

int32_t gsm_step_slow(struct gsm *m, int32_t cfg, uint8_t b) {
    if (m->failed || cfg < 0) return -1;
    const struct kiln_grammar *g = m->g;
    if (!m->cfgs[cfg].next) {
        int32_t *nx = malloc(sizeof *nx * (size_t)g->n_classes);
        if (!nx) return fail(m), -1;
        memset(nx, 0xff, sizeof *nx * (size_t)g->n_classes);
        m->cfgs[cfg].next = nx;
    }
    m->stamp++;
    m->n_work = 0;
    for (int32_t i = 0; i < m->cfgs[cfg].n; i++) {
        int32_t n = m->items[m->cfgs[cfg].off + i];
        if (n == GS_EMPTY || n == GS_EXIT) continue;
        int32_t t = g_next(g, m->nodes[n].state, b);
        if (t < 0) continue;
        if (!normalize(m, gsm_node(m, m->nodes[n].parent, t))) break;
    }
    int32_t r = m->failed ? -1 : intern(m, m->work, m->n_work);
    if (r >= 0) m->cfgs[cfg].next[g->byte_class[b]] = r; /* cfgs may have moved: index again */
    return r;
}

int32_t gsm_run(struct gsm *m, int32_t cfg, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n && cfg > GC_DEAD; i++) cfg = gsm_step(m, cfg, s[i]);
    return cfg;
}

/* ------------------------------------------------------------------ lifetime */

bool gsm_init(struct gsm *m, const struct kiln_grammar *g, int64_t max_nodes, int64_t max_cfgs) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->max_nodes = max_nodes;
    m->max_cfgs = max_cfgs;
    m->cap_nodes = 1024;
    m->nodes = malloc(sizeof *m->nodes * (size_t)m->cap_nodes);
    m->seen = calloc((size_t)m->cap_nodes, sizeof *m->seen);
    m->cap_items = 4096; /* never NULL: the empty configuration points into it too */
    m->items = malloc(sizeof *m->items * (size_t)m->cap_items);
    if (!m->nodes || !m->seen || !m->items) {
        gsm_free(m);
        return false;
    }
    gsm_clear(m);
    return !m->failed;
}

void gsm_clear(struct gsm *m) {
    for (int32_t i = 0; i < m->n_cfgs; i++) free(m->cfgs[i].next);
    m->n_cfgs = 0;
    m->n_items = 0;
    m->failed = false;
    m->nodes[GS_EMPTY] = (struct gsm_node){-1, -1};
    m->nodes[GS_EXIT] = (struct gsm_node){-1, -1};
    m->n_nodes = 2;
    if (m->node_hash) memset(m->node_hash, 0xff, sizeof *m->node_hash * (size_t)m->node_hash_cap);
    if (m->cfg_hash) memset(m->cfg_hash, 0xff, sizeof *m->cfg_hash * (size_t)m->cfg_hash_cap);
    memset(m->seen, 0, sizeof *m->seen * (size_t)m->cap_nodes);
    m->stamp = 0;
    intern(m, NULL, 0); /* GC_DEAD */
}

void gsm_free(struct gsm *m) {
    for (int32_t i = 0; i < m->n_cfgs; i++) free(m->cfgs[i].next);
    free(m->nodes);
    free(m->node_hash);
    free(m->cfgs);
    free(m->cfg_hash);
    free(m->items);
    free(m->work);
    free(m->todo);
    free(m->seen);
    memset(m, 0, sizeof *m);
}

/* the node of `from`'s stack n, rebuilt in m */
static int32_t import_node(struct gsm *m, const struct gsm *from, int32_t n) {
    if (n == GS_EMPTY || n == GS_EXIT) return n;
    int32_t depth = 0;
    for (int32_t x = n; x > GS_EXIT; x = from->nodes[x].parent) depth++;
    int32_t *st = malloc(sizeof *st * (size_t)depth);
    if (!st) return fail(m), -1;
    int32_t k = 0, bottom = GS_EMPTY;
    for (int32_t x = n; x > GS_EXIT; x = from->nodes[x].parent) st[k++] = from->nodes[x].state, bottom = from->nodes[x].parent;
    int32_t r = bottom;
    while (k > 0) r = gsm_node(m, r, st[--k]);
    free(st);
    return r;
}

int32_t gsm_import(struct gsm *m, const struct gsm *from, int32_t cfg) {
    const struct gsm_cfg *c = &from->cfgs[cfg];
    int32_t *s = malloc(sizeof *s * (size_t)(c->n > 0 ? c->n : 1));
    if (!s) return fail(m), -1;
    for (int32_t i = 0; i < c->n; i++) s[i] = import_node(m, from, from->items[c->off + i]);
    int32_t r = m->failed ? -1 : intern(m, s, c->n);
    free(s);
    return r;
}
