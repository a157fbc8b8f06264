/*
 * randgraph.h - random compute graphs for the allocator and scheduler tests:
 * DAGs of element-wise ops, norms, softmax, views, reshapes, permutes,
 * concats and mul_mats of random shapes, all F32, deterministic in a seed.
 * Every activation has n_tok rows, so one seed at a smaller n_tok is the
 * same graph over a smaller batch (what reserve-then-alloc is for).
 */
#ifndef KILN_RANDGRAPH_H
#define KILN_RANDGRAPH_H

#include "kt-backend.h"
#include "kt-cpu.h"
#include "testutil.h"

#define RG_POOL 512

struct rg_graph {
    struct kt_cgraph *gf;
    int n_sinks;
    struct kt_tensor *sinks[64]; /* what the test compares */
};

/* A leaf: weights go to wctx, activations-to-be-filled (flagged input) to ctx. */
static struct kt_tensor *rg_leaf(struct kt_context *ctx, int64_t ne0, int64_t ne1, bool input) {
    struct kt_tensor *t = kt_new_tensor_2d(ctx, KT_TYPE_F32, ne0, ne1);
    if (t && input) kt_set_input(t);
    return t;
}

static int64_t rg_pick_ne0(uint64_t *s) { return 16 * (int64_t)(1 + tu_rand_u64(s) % 4); }

/* Build the graph of `seed` with n_ops random steps over n_tok rows. */
static bool rg_build(struct kt_context *ctx, struct kt_context *wctx, uint64_t seed, int n_ops, int64_t n_tok,
                     struct rg_graph *out) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 12345;
    struct kt_tensor *pool[RG_POOL];
    int np = 0;
    int n_in = 1 + (int)(tu_rand_u64(&s) % 3);
    for (int i = 0; i < n_in; i++) pool[np++] = rg_leaf(ctx, rg_pick_ne0(&s), n_tok, true);

    for (int step = 0; step < n_ops && np < RG_POOL - 4; step++) {
        /* prefer recent tensors so chains form, sometimes reach back */
        int ia = tu_rand_u64(&s) % 4 ? np - 1 - (int)(tu_rand_u64(&s) % (np < 4 ? np : 4)) : (int)(tu_rand_u64(&s) % np);
        struct kt_tensor *a = pool[ia], *r = NULL;
        const int64_t ne0 = a->ne[0];
        int kind = (int)(tu_rand_u64(&s) % 16);
        switch (kind) {
        case 0: r = kt_scale_bias(ctx, a, 0.5f + (float)(tu_rand_u64(&s) % 4) * 0.25f, 0.125f); break;
        case 1: r = tu_rand_u64(&s) % 2 ? kt_silu(ctx, a) : kt_gelu(ctx, a); break;
        case 2: r = tu_rand_u64(&s) % 2 ? kt_relu(ctx, a) : kt_sqr(ctx, kt_scale(ctx, a, 0.5f)); break;
        case 3: r = tu_rand_u64(&s) % 2 ? kt_rms_norm(ctx, a, 1e-5f) : kt_norm(ctx, a, 1e-5f); break;
        case 4: r = kt_soft_max(ctx, a); break;
        case 5: case 6: { /* binary with a partner of the same shape if any, else a broadcast weight */
            struct kt_tensor *b = NULL;
            for (int k = np - 1; k >= 0 && !b; k--)
                if (k != ia && kt_are_same_shape(pool[k], a) && tu_rand_u64(&s) % 2) b = pool[k];
            if (!b) b = rg_leaf(wctx, ne0, tu_rand_u64(&s) % 2 ? 1 : a->ne[1], false);
            int op = (int)(tu_rand_u64(&s) % 5);
            r = op == 0 ? kt_add(ctx, a, b)
              : op == 1 ? kt_sub(ctx, a, b)
              : op == 2 ? kt_mul(ctx, a, b)
              : op == 3 ? kt_div(ctx, a, kt_scale_bias(ctx, kt_sqr(ctx, b), 1.0f, 1.0f)) /* >= 1 */
                        : (kt_are_same_shape(a, b) ? kt_swiglu(ctx, a, b) : kt_add(ctx, a, b));
            break;
        }
        case 7: case 8: { /* projection by a weight */
            struct kt_tensor *w = rg_leaf(wctx, ne0, rg_pick_ne0(&s), false);
            r = kt_mul_mat(ctx, w, a);
            break;
        }
        case 9: { /* activations x activations: [n_tok, n_tok] scores */
            struct kt_tensor *b = NULL;
            for (int k = np - 1; k >= 0 && !b; k--)
                if (pool[k]->ne[0] == ne0 && pool[k]->ne[2] == a->ne[2]) b = pool[k];
            r = kt_mul_mat(ctx, b ? b : a, a);
            break;
        }
        case 10: { /* split rows into heads, swap axes, make contiguous, back to 2-D */
            if (a->ne[2] != 1 || ne0 % 4) { r = kt_sqrt(ctx, kt_scale_bias(ctx, kt_sqr(ctx, a), 1.0f, 1.0f)); break; }
            struct kt_tensor *h = kt_reshape_3d(ctx, a, ne0 / 4, 4, a->ne[1]);
            struct kt_tensor *p = kt_cont(ctx, kt_permute(ctx, h, 0, 2, 1, 3));
            r = kt_reshape_2d(ctx, p, ne0, a->ne[1]);
            break;
        }
        case 11: { /* a column block as a strided view, then a consumer */
            int64_t w = ne0 / 2;
            if (w < 1) { r = kt_gelu(ctx, a); break; }
            struct kt_tensor *v = kt_view_2d(ctx, a, w, a->ne[1], a->nb[1], (size_t)(tu_rand_u64(&s) % 2) * w * 4);
            r = kt_cont(ctx, v);
            break;
        }
        case 12: { /* rows view (contiguous) feeding an element-wise op */
            if (a->ne[2] != 1) { r = kt_silu(ctx, a); break; }
            struct kt_tensor *v = kt_view_2d(ctx, a, ne0, a->ne[1], a->nb[1], 0);
            r = kt_scale(ctx, v, 2.0f);
            break;
        }
        case 13: { /* transpose twice through cont: same shape back */
            struct kt_tensor *t1 = kt_cont(ctx, kt_transpose(ctx, a));
            r = kt_cont(ctx, kt_transpose(ctx, t1));
            break;
        }
        case 14: { /* concat along rows' length with a partner of the same row count */
            struct kt_tensor *b = NULL;
            for (int k = np - 1; k >= 0 && !b; k--)
                if (k != ia && pool[k]->ne[1] == a->ne[1] && pool[k]->ne[2] == a->ne[2] &&
                    pool[k]->ne[0] + ne0 <= 128)
                    b = pool[k];
            r = b ? kt_concat(ctx, a, b, 0) : kt_relu(ctx, a);
            break;
        }
        default: r = kt_add(ctx, a, kt_scale(ctx, a, -0.25f)); break; /* a node read twice */
        }
        if (!r) return false;
        pool[np++] = r;
    }

    out->gf = kt_new_graph_custom(ctx, 4096);
    if (!out->gf) return false;
    out->n_sinks = 0;
    /* the last tensor and a few random ones are results; some flagged output */
    int n_res = 1 + (int)(tu_rand_u64(&s) % 4);
    for (int i = 0; i < n_res && out->n_sinks < 64; i++) {
        struct kt_tensor *t = i == 0 ? pool[np - 1] : pool[tu_rand_u64(&s) % np];
        if (t->op == KT_OP_NONE) continue;
        if (tu_rand_u64(&s) % 2) kt_set_output(t);
        if (!kt_build_forward_expand(out->gf, t)) return false;
    }
    /* sinks: nodes nobody in the graph reads, plus outputs (both are never freed) */
    for (int i = 0; i < out->gf->n_nodes && out->n_sinks < 64; i++) {
        struct kt_tensor *t = out->gf->nodes[i];
        bool read = false;
        for (int k = i + 1; k < out->gf->n_nodes && !read; k++)
            for (int j = 0; j < KT_MAX_SRC; j++) read |= out->gf->nodes[k]->src[j] == t;
        if (!read || (t->flags & KT_FLAG_OUTPUT)) out->sinks[out->n_sinks++] = t;
    }
    return true;
}

/* Fill every leaf of gf with values fixed by (seed, leaf index), through kt_tensor_set. */
static void rg_fill(struct kt_cgraph *gf, uint64_t seed) {
    for (int i = 0; i < gf->n_leafs; i++) {
        struct kt_tensor *t = gf->leafs[i];
        int64_t n = kt_nelements(t);
        float *v = malloc((size_t)n * sizeof *v);
        uint64_t s = seed * 7919 + (uint64_t)i * 104729 + 1;
        for (int64_t k = 0; k < n; k++) v[k] = tu_rand_f(&s);
        kt_tensor_set(t, v, 0, (size_t)n * sizeof *v);
        free(v);
    }
}

/* Contiguous F32 copy of t's values (t may be a view). */
static float *rg_values(const struct kt_tensor *t) {
    int64_t n = kt_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    size_t off = i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    kt_tensor_get(t, &v[k++], off, sizeof(float));
                }
    return v;
}

/* ---- the overlap check */

#define RG_FOREVER (1 << 30)

static bool rg_inplace_op(enum kt_op op) {
    switch (op) {
    case KT_OP_ADD: case KT_OP_SUB: case KT_OP_MUL: case KT_OP_DIV: case KT_OP_SCALE: case KT_OP_SQR:
    case KT_OP_SQRT: case KT_OP_SILU: case KT_OP_GELU: case KT_OP_RELU: case KT_OP_SWIGLU: case KT_OP_RMS_NORM:
    case KT_OP_NORM: case KT_OP_SOFT_MAX: case KT_OP_ROPE: case KT_OP_DIAG_MASK_INF:
        return true;
    default:
        return false;
    }
}

static struct kt_tensor *rg_root(struct kt_tensor *t) { return t->view_src ? t->view_src : t; }

struct rg_life {
    struct kt_tensor *t;
    int def, last;
};

/* The one legal sharing: node y, element-wise, writes over x (same bytes) at x's last use. */
static bool rg_written_over(const struct rg_life *x, const struct rg_life *y) {
    struct kt_tensor *n = y->t;
    if (y->def != x->last || x->def < 0 || !rg_inplace_op(n->op)) return false;
    if (n->data != x->t->data || kt_nbytes(n) > kt_nbytes(x->t)) return false;
    for (int j = 0; j < KT_MAX_SRC; j++)
        if (n->src[j] && rg_root(n->src[j]) == x->t) return true;
    return false;
}

/* No two tensors of gf placed in buf (not views) overlap in memory while both are alive;
 * lifetimes come from the node order alone: from the node that writes a tensor to the last
 * node that reads it or a view of it; leafs and inputs live from before the first node, and
 * they, outputs and what nothing reads live on after the last. Returns the in-place hand-overs seen. */
static int rg_check_lifetimes(struct kt_cgraph *gf, struct kt_buffer *buf, int seed) {
    static struct rg_life L[8192];
    int n = 0;
    const uint8_t *base = kt_buffer_base(buf);
    for (int pass = 0; pass < 2; pass++) {
        int cnt = pass ? gf->n_nodes : gf->n_leafs;
        for (int i = 0; i < cnt && n < 8192; i++) {
            struct kt_tensor *t = pass ? gf->nodes[i] : gf->leafs[i];
            if (t->view_src || t->buffer != buf) continue;
            bool early = !pass || (t->flags & KT_FLAG_INPUT);
            L[n++] = (struct rg_life){t, early ? -1 : i, early ? RG_FOREVER : i};
        }
    }
    /* readers of a root: any node with it (or a view of it) as a source; views or roots that
     * nobody reads, and outputs, are read after the graph */
    for (int k = 0; k < gf->n_nodes; k++) {
        struct kt_tensor *node = gf->nodes[k];
        for (int j = 0; j < KT_MAX_SRC; j++) {
            if (!node->src[j]) continue;
            struct kt_tensor *r = rg_root(node->src[j]);
            for (int q = 0; q < n; q++)
                if (L[q].t == r && L[q].last < k) L[q].last = k;
        }
        bool read = false;
        for (int m = k + 1; m < gf->n_nodes && !read; m++)
            for (int j = 0; j < KT_MAX_SRC; j++) read |= gf->nodes[m]->src[j] == node;
        if (!read || (node->flags & KT_FLAG_OUTPUT)) {
            struct kt_tensor *r = rg_root(node);
            for (int q = 0; q < n; q++)
                if (L[q].t == r) L[q].last = RG_FOREVER;
        }
    }
    int inplace = 0;
    for (int a = 0; a < n; a++) {
        const uint8_t *a0 = L[a].t->data, *a1 = a0 + kt_nbytes(L[a].t);
        CHECKF(a0 >= base && a1 <= base + kt_buffer_size(buf), "seed %d: '%s' outside the buffer", seed,
               L[a].t->name);
        for (int b = a + 1; b < n; b++) {
            const uint8_t *b0 = L[b].t->data, *b1 = b0 + kt_nbytes(L[b].t);
            if (!(a0 < b1 && b0 < a1)) continue;
            if (L[a].last < L[b].def || L[b].last < L[a].def) continue;
            if (rg_written_over(&L[a], &L[b]) || rg_written_over(&L[b], &L[a])) {
                inplace++;
                continue;
            }
            CHECKF(false, "seed %d: '%s' [%d,%d] and '%s' [%d,%d] overlap in memory", seed, L[a].t->name, L[a].def,
                   L[a].last, L[b].t->name, L[b].def, L[b].last);
        }
    }
    return inplace;
}

/* ---- results of a run, and the reference run */

struct rg_run {
    int n_sinks;
    float *v[64];
    int64_t n[64];
};

static void rg_run_free(struct rg_run *r) {
    for (int i = 0; i < r->n_sinks; i++) free(r->v[i]);
    r->n_sinks = 0;
}

static void rg_collect(struct rg_graph *g, struct rg_run *r) {
    r->n_sinks = g->n_sinks;
    for (int i = 0; i < g->n_sinks; i++) {
        r->v[i] = rg_values(g->sinks[i]);
        r->n[i] = kt_nelements(g->sinks[i]);
    }
}

/* Every tensor with its own memory: the reference. */
static bool rg_run_plain(uint64_t seed, int n_ops, int64_t n_tok, int n_threads, struct rg_run *out) {
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 16u << 20});
    struct rg_graph g;
    bool ok = ctx && rg_build(ctx, ctx, seed, n_ops, n_tok, &g);
    if (ok) {
        rg_fill(g.gf, seed);
        ok = kt_graph_compute_with_ctx(ctx, g.gf, n_threads) == KT_STATUS_SUCCESS;
    }
    if (ok) rg_collect(&g, out);
    else fprintf(stderr, "plain run of seed %llu: %s\n", (unsigned long long)seed, kt_last_error());
    kt_free(ctx);
    return ok;
}

static bool rg_same(const struct rg_run *a, const struct rg_run *b, uint64_t seed) {
    if (a->n_sinks != b->n_sinks) return false;
    for (int i = 0; i < a->n_sinks; i++)
        if (a->n[i] != b->n[i] || memcmp(a->v[i], b->v[i], (size_t)a->n[i] * sizeof(float))) {
            fprintf(stderr, "seed %llu: result %d differs\n", (unsigned long long)seed, i);
            return false;
        }
    return true;
}

#endif
