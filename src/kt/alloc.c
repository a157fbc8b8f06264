/*
 * alloc.c - memory planning: the linear allocator (a context's tensors one
 * after another in a buffer) and the graph allocator, which walks a graph in
 * node order and gives every intermediate tensor an offset in one compute
 * buffer, reusing memory after a tensor's last consumer has run.
 *
 * The graph allocator's rules:
 *   - a tensor's consumers are counted first; when the last one has run (and
 *     no view of it is still in use) its block goes back to a free list
 *     (best fit, neighbours merged) inside one virtual buffer whose high-water
 *     mark becomes the buffer size;
 *   - graph leafs and KT_FLAG_INPUT nodes get memory before any node runs and
 *     keep it (the caller fills them after allocation, and may compute the
 *     graph again without filling them again); KT_FLAG_OUTPUT tensors and
 *     graph sinks are never freed either;
 *   - views share their root's memory and keep it alive while they are used;
 *   - tensors that already have memory (weights bound to a mapping, a KV
 *     cache) are left alone;
 *   - an element-wise op writes over an input that dies with it (same type,
 *     shape and contiguous layout; not a leaf, input or output), where the CPU
 *     kernel reads each element before writing the same index (in_place_ok).
 */
#include "backend-impl.h"

#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------ linear allocator */

struct kt_tallocr kt_tallocr_new(struct kt_buffer *buffer) {
    void *base = kt_buffer_base(buffer);
    size_t align = kt_buft_alignment(kt_buffer_get_type(buffer));
    /* start at the first aligned address of the buffer */
    size_t skew = base ? (align - (uintptr_t)base % align) % align : 0;
    return (struct kt_tallocr){.buffer = buffer, .base = base, .alignment = align, .offset = skew};
}

bool kt_tallocr_alloc(struct kt_tallocr *ta, struct kt_tensor *t) {
    size_t size = align_up(kt_buft_alloc_size(kt_buffer_get_type(ta->buffer), t), ta->alignment);
    size_t cap = kt_buffer_size(ta->buffer);
    if (t->view_src || t->data) {
        kt_set_error("kt_tallocr_alloc: '%s' already has memory or is a view", t->name);
        return false;
    }
    if (ta->offset > cap || size > cap - ta->offset) {
        kt_set_error("kt_tallocr_alloc: '%s' needs %zu bytes, %zu of %zu left", t->name, size,
                     ta->offset > cap ? 0 : cap - ta->offset, cap);
        return false;
    }
    t->data = (uint8_t *)ta->base + ta->offset;
    t->buffer = ta->buffer;
    ta->offset += size;
    if (ta->buffer->iface.init_tensor) ta->buffer->iface.init_tensor(ta->buffer, t);
    return true;
}

/* ------------------------------------------------------------------ graph allocator */

struct tinfo {
    const struct kt_tensor *t; /* hash key */
    int n_children;            /* consumers that have not run yet */
    int n_views;               /* views of this root still in use */
    bool decided, own;         /* ownership asked once per plan */
    bool placed;               /* got a block in this plan (offset valid) */
    bool holds;                /* holds its block now (false after free or hand-over) */
    size_t offset, size;
};

struct block {
    size_t offset, size;
};

struct kt_gallocr {
    struct kt_buffer_type *buft;
    struct kt_buffer *buffer;
    size_t alignment;
    int n_reallocs;

    /* planning state, kept between plans so that steady state allocates nothing */
    struct tinfo *info;
    size_t info_cap; /* power of two */
    struct block *free_list; /* sorted by offset; the last block is the unbounded tail */
    int n_free, free_cap;
    size_t max_size;

    kt_gallocr_owns_fn owns;
    void *owns_data;
};

struct kt_gallocr *kt_gallocr_new(struct kt_buffer_type *buft) {
    struct kt_gallocr *g = calloc(1, sizeof *g);
    if (!g) {
        kt_set_error("kt_gallocr_new: out of memory");
        return NULL;
    }
    g->buft = buft;
    g->alignment = kt_buft_alignment(buft);
    if (g->alignment == 0) g->alignment = 1;
    return g;
}

void kt_gallocr_free(struct kt_gallocr *g) {
    if (!g) return;
    kt_buffer_free(g->buffer);
    free(g->info);
    free(g->free_list);
    free(g);
}

size_t kt_gallocr_get_buffer_size(const struct kt_gallocr *g) { return g->buffer ? kt_buffer_size(g->buffer) : 0; }
int kt_gallocr_n_reallocs(const struct kt_gallocr *g) { return g->n_reallocs; }
struct kt_buffer *kt_gallocr_get_buffer(const struct kt_gallocr *g) { return g->buffer; }

/* ---- tensor table */

static struct tinfo *info_of(struct kt_gallocr *g, const struct kt_tensor *t) {
    size_t mask = g->info_cap - 1;
    size_t i = ((uintptr_t)t >> 6) * 0x9E3779B97F4A7C15ULL & mask;
    while (g->info[i].t && g->info[i].t != t) i = (i + 1) & mask;
    if (!g->info[i].t) g->info[i].t = t;
    return &g->info[i];
}

/* Room for every tensor of gf (nodes, leafs, view roots) at load <= 1/2. */
static bool reset_tables(struct kt_gallocr *g, const struct kt_cgraph *gf) {
    size_t n = 2 * (size_t)gf->n_nodes + (size_t)gf->n_leafs + 1;
    size_t cap = 64;
    while (cap < 2 * n) cap <<= 1;
    if (cap > g->info_cap) {
        struct tinfo *p = malloc(cap * sizeof *p);
        if (!p) goto oom;
        free(g->info);
        g->info = p;
        g->info_cap = cap;
    }
    memset(g->info, 0, g->info_cap * sizeof *g->info);
    int fcap = gf->n_nodes + gf->n_leafs + 2;
    if (fcap > g->free_cap) {
        struct block *b = malloc((size_t)fcap * sizeof *b);
        if (!b) goto oom;
        free(g->free_list);
        g->free_list = b;
        g->free_cap = fcap;
    }
    g->free_list[0] = (struct block){0, SIZE_MAX / 2};
    g->n_free = 1;
    g->max_size = 0;
    return true;
oom:
    kt_set_error("kt gallocr: out of memory for the plan of %d nodes", gf->n_nodes);
    return false;
}

/* ---- free list */

static size_t block_offset(struct kt_gallocr *g, size_t size) {
    int best = -1;
    for (int i = 0; i < g->n_free - 1; i++)
        if (g->free_list[i].size >= size && (best < 0 || g->free_list[i].size < g->free_list[best].size)) best = i;
    if (best < 0) best = g->n_free - 1; /* the tail */
    struct block *b = &g->free_list[best];
    size_t off = b->offset;
    b->offset += size;
    b->size -= size;
    if (b->size == 0 && best != g->n_free - 1) {
        memmove(b, b + 1, (size_t)(g->n_free - best - 1) * sizeof *b);
        g->n_free--;
    }
    if (off + size > g->max_size) g->max_size = off + size;
    return off;
}

static void block_free(struct kt_gallocr *g, size_t off, size_t size) {
    int i = 0;
    while (i < g->n_free && g->free_list[i].offset < off) i++;
    bool prev = i > 0 && g->free_list[i - 1].offset + g->free_list[i - 1].size == off;
    bool next = i < g->n_free && off + size == g->free_list[i].offset;
    if (prev && next) {
        g->free_list[i - 1].size += size + g->free_list[i].size;
        memmove(&g->free_list[i], &g->free_list[i + 1], (size_t)(g->n_free - i - 1) * sizeof(struct block));
        g->n_free--;
    } else if (prev) {
        g->free_list[i - 1].size += size;
    } else if (next) {
        g->free_list[i].offset = off;
        g->free_list[i].size += size;
    } else {
        /* cannot overflow: there are never more free blocks than tensors + 1 */
        memmove(&g->free_list[i + 1], &g->free_list[i], (size_t)(g->n_free - i) * sizeof(struct block));
        g->free_list[i] = (struct block){off, size};
        g->n_free++;
    }
}

/* ---- ownership and liveness */

static bool is_own(struct kt_gallocr *g, const struct kt_tensor *root) {
    struct tinfo *ti = info_of(g, root);
    if (!ti->decided) {
        ti->decided = true;
        if (g->owns) ti->own = g->owns(root, g->owns_data);
        else ti->own = !root->data || (g->buffer && root->buffer == g->buffer);
    }
    return ti->own;
}

static void place(struct kt_gallocr *g, const struct kt_tensor *t) {
    struct tinfo *ti = info_of(g, t);
    size_t sz = kt_buft_alloc_size(g->buft, t);
    ti->size = align_up(sz ? sz : 1, g->alignment);
    ti->offset = block_offset(g, ti->size);
    ti->placed = ti->holds = true;
}

static void free_root(struct kt_gallocr *g, const struct kt_tensor *root) {
    struct tinfo *ti = info_of(g, root);
    /* outputs are read after the graph; inputs (and leafs: the caller fills them) stay so that
     * a graph can be computed again without setting them again */
    if (!ti->holds || (root->flags & (KT_FLAG_OUTPUT | KT_FLAG_INPUT)) || root->op == KT_OP_NONE) return;
    block_free(g, ti->offset, ti->size);
    ti->holds = false;
}

/* t's last consumer has run */
static void release(struct kt_gallocr *g, const struct kt_tensor *t) {
    if (t->view_src) {
        if (t->flags & KT_FLAG_OUTPUT) return; /* a view read after compute keeps its root */
        struct tinfo *r = info_of(g, t->view_src);
        if (--r->n_views == 0 && r->n_children == 0) free_root(g, t->view_src);
    } else if (info_of(g, t)->n_views == 0) {
        free_root(g, t);
    }
}

/* ---- in-place */

/* Whether node's CPU kernel may write over src[j]: it reads every element before
 * writing the same index and never reads another row it already wrote. Only src0:
 * that is the aliasing the kernels promise (scalar loops and ISA row kernels say
 * "d may alias a"); SOFT_MAX's mask, ROPE's positions and a broadcast src1 are
 * never overwritten. */
static bool in_place_ok(enum kt_op op, int j) {
    switch (op) {
    case KT_OP_ADD:
    case KT_OP_SUB:
    case KT_OP_MUL:
    case KT_OP_DIV:
    case KT_OP_SWIGLU:
    case KT_OP_GEGLU:
    case KT_OP_SOFTCAP:
    case KT_OP_SCALE:
    case KT_OP_SQR:
    case KT_OP_SQRT:
    case KT_OP_SILU:
    case KT_OP_GELU:
    case KT_OP_RELU:
    case KT_OP_RMS_NORM:
    case KT_OP_NORM:
    case KT_OP_SOFT_MAX:
    case KT_OP_ROPE:
    case KT_OP_DIAG_MASK_INF:
        return j == 0;
    default:
        return false;
    }
}

static bool same_layout(const struct kt_tensor *a, const struct kt_tensor *b) {
    return a->type == b->type && kt_are_same_shape(a, b) && kt_is_contiguous(a) && kt_is_contiguous(b);
}

/* Hand a dying parent's block to node; true if it did. */
static bool try_in_place(struct kt_gallocr *g, const struct kt_tensor *node) {
    for (int j = 0; j < KT_MAX_SRC; j++) {
        const struct kt_tensor *p = node->src[j];
        if (!p || !in_place_ok(node->op, j) || !same_layout(p, node)) continue;
        if (p->op == KT_OP_NONE || (p->flags & (KT_FLAG_INPUT | KT_FLAG_OUTPUT))) continue;
        int refs = 0;
        for (int k = 0; k < KT_MAX_SRC; k++) refs += node->src[k] == p;
        struct tinfo *pi = info_of(g, p);
        if (pi->n_children != refs) continue;
        const struct kt_tensor *root = p;
        if (p->view_src) {
            /* a view that covers the start of a root nobody else needs any more */
            root = p->view_src;
            if (p->view_offs != 0 || root->op == KT_OP_NONE || (root->flags & (KT_FLAG_INPUT | KT_FLAG_OUTPUT)))
                continue;
            struct tinfo *ri = info_of(g, root);
            if (ri->n_children != 0 || ri->n_views != 1) continue;
        } else if (pi->n_views != 0) {
            continue;
        }
        struct tinfo *ri = info_of(g, root);
        if (!is_own(g, root) || !ri->holds || ri->size < align_up(kt_buft_alloc_size(g->buft, node), g->alignment))
            continue;
        struct tinfo *ni = info_of(g, node);
        ni->offset = ri->offset;
        ni->size = ri->size;
        ni->placed = ni->holds = true;
        ri->holds = false;
        return true;
    }
    return false;
}

/* ---- the plan */

static void set_data(struct kt_tensor *t, struct kt_buffer *buf, void *data) {
    t->data = data;
    t->buffer = buf;
    if (buf && buf->iface.init_tensor) buf->iface.init_tensor(buf, t);
}

static bool assign(struct kt_gallocr *g, struct kt_cgraph *gf) {
    uint8_t *base = kt_buffer_base(g->buffer);
    for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? gf->n_leafs : gf->n_nodes;
        struct kt_tensor **list = pass == 0 ? gf->leafs : gf->nodes;
        for (int i = 0; i < n; i++) {
            struct kt_tensor *t = list[i];
            if (t->view_src) continue;
            struct tinfo *ti = info_of(g, t);
            if (ti->placed) set_data(t, g->buffer, base + ti->offset);
        }
    }
    /* views after every root has its address */
    for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? gf->n_leafs : gf->n_nodes;
        struct kt_tensor **list = pass == 0 ? gf->leafs : gf->nodes;
        for (int i = 0; i < n; i++) {
            struct kt_tensor *t = list[i];
            if (!t->view_src) continue;
            struct kt_tensor *r = t->view_src;
            if (info_of(g, r)->placed || (!t->data && r->data))
                set_data(t, r->buffer, (uint8_t *)r->data + t->view_offs);
        }
    }
    return true;
}

bool kt_gallocr_plan(struct kt_gallocr *g, struct kt_cgraph *gf, kt_gallocr_owns_fn owns, void *owns_data,
                     bool do_assign) {
    if (!reset_tables(g, gf)) return false;
    g->owns = owns;
    g->owns_data = owns_data;

    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *n = gf->nodes[i];
        if (n->view_src) info_of(g, n->view_src)->n_views++;
        for (int j = 0; j < KT_MAX_SRC; j++)
            if (n->src[j]) info_of(g, n->src[j])->n_children++;
    }
    /* memory the caller fills after allocation: given before any node runs */
    for (int i = 0; i < gf->n_leafs; i++) {
        const struct kt_tensor *l = gf->leafs[i];
        if (!l->view_src && is_own(g, l) && !info_of(g, l)->placed) place(g, l);
    }
    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *n = gf->nodes[i];
        if ((n->flags & KT_FLAG_INPUT) && !n->view_src && is_own(g, n) && !info_of(g, n)->placed) place(g, n);
    }
    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *n = gf->nodes[i];
        if (!n->view_src && is_own(g, n) && !info_of(g, n)->placed && !try_in_place(g, n)) place(g, n);
        if (n->view_src && is_own(g, n->view_src) && !info_of(g, n->view_src)->placed) {
            kt_set_error("kt gallocr: '%s' views '%s', which is not in the graph and has no memory of its own",
                         n->name, n->view_src->name);
            return false;
        }
        for (int j = 0; j < KT_MAX_SRC; j++) {
            const struct kt_tensor *s = n->src[j];
            if (s && --info_of(g, s)->n_children == 0) release(g, s);
        }
    }

    size_t need = g->max_size;
    if (!g->buffer || kt_buffer_size(g->buffer) < need) {
        struct kt_buffer *nb = kt_buft_alloc_buffer(g->buft, need);
        if (!nb) return false;
        kt_buffer_set_usage(nb, KT_BUFFER_USAGE_COMPUTE);
        kt_buffer_free(g->buffer);
        g->buffer = nb;
        if (do_assign) g->n_reallocs++;
    }
    return do_assign ? assign(g, gf) : true;
}

bool kt_gallocr_reserve(struct kt_gallocr *g, struct kt_cgraph *gf) { return kt_gallocr_plan(g, gf, NULL, NULL, false); }

bool kt_gallocr_alloc_graph(struct kt_gallocr *g, struct kt_cgraph *gf) {
    return kt_gallocr_plan(g, gf, NULL, NULL, true);
}
