/*
 * test_alloc.c - the graph allocator on random graphs (randgraph.h), checked
 * three ways: (1) no two tensors alive at the same time overlap, with
 * lifetimes computed here from the node order alone; (2) results are bit for
 * bit those of a run where every tensor has its own memory (a plain context,
 * kt_graph_compute_with_ctx); (3) after reserve on the largest batch, smaller
 * batches allocate nothing. Plus the linear allocator and hand-made cases
 * whose buffer size is known.
 */
#include "backend-impl.h"
#include "kt-alloc.h"
#include "kt-cpu.h"
#include "randgraph.h"

#define N_SEEDS 300
#ifndef N_THREADS
#define N_THREADS 2
#endif

struct stats {
    int inplace;
    size_t planned, naive;
};

/* Build (weights in their own buffer), allocate with galloc, compute on the backend,
 * check (1) and (2). */
static void run_galloc(struct kt_gallocr *ga, struct kt_backend *be, uint64_t seed, int n_ops, int64_t n_tok,
                       struct stats *st) {
    struct rg_run want = {0}, got = {0};
    if (!rg_run_plain(seed, n_ops, n_tok, N_THREADS, &want)) {
        CHECK(false);
        return;
    }
    size_t meta = 4096 * kt_tensor_overhead() + kt_graph_overhead_custom(4096);
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
    struct kt_context *wctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
    struct rg_graph g;
    CHECK(rg_build(ctx, wctx, seed, n_ops, n_tok, &g));
    struct kt_buffer *wbuf = kt_backend_alloc_ctx_tensors(wctx, kt_cpu_buffer_type());
    CHECK(wbuf != NULL);
    bool ok = kt_gallocr_alloc_graph(ga, g.gf);
    CHECKF(ok, "seed %llu: %s", (unsigned long long)seed, kt_last_error());
    if (ok) {
        /* weights keep the memory they had */
        for (int i = 0; i < g.gf->n_leafs; i++)
            if (!(g.gf->leafs[i]->flags & KT_FLAG_INPUT)) CHECK(g.gf->leafs[i]->buffer == wbuf);
        struct kt_buffer *buf = kt_gallocr_get_buffer(ga);
        int ip = rg_check_lifetimes(g.gf, buf, (int)seed);
        if (st) {
            st->inplace += ip;
            st->planned += kt_gallocr_get_buffer_size(ga);
            for (int i = 0; i < g.gf->n_nodes; i++)
                if (!g.gf->nodes[i]->view_src) st->naive += kt_nbytes(g.gf->nodes[i]);
            for (int i = 0; i < g.gf->n_leafs; i++)
                if (g.gf->leafs[i]->buffer == buf) st->naive += kt_nbytes(g.gf->leafs[i]);
        }
        rg_fill(g.gf, seed);
        CHECK(kt_backend_graph_compute(be, g.gf) == KT_STATUS_SUCCESS);
        rg_collect(&g, &got);
        CHECK(rg_same(&got, &want, seed));
    }
    rg_run_free(&want);
    rg_run_free(&got);
    kt_buffer_free(wbuf);
    kt_free(ctx);
    kt_free(wctx);
}

/* ---- hand-made cases */

static void test_tallocr(void) {
    struct kt_buffer *buf = kt_buft_alloc_buffer(kt_cpu_buffer_type(), 1000);
    CHECK(buf && kt_buffer_size(buf) == 1000);
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *a = kt_new_tensor_1d(ctx, KT_TYPE_F32, 100); /* 400 -> 448 aligned */
    struct kt_tensor *b = kt_new_tensor_1d(ctx, KT_TYPE_F32, 100);
    struct kt_tensor *c = kt_new_tensor_1d(ctx, KT_TYPE_F32, 100);
    struct kt_tallocr ta = kt_tallocr_new(buf);
    CHECK(kt_tallocr_alloc(&ta, a) && kt_tallocr_alloc(&ta, b));
    CHECK(a->buffer == buf && (uint8_t *)b->data - (uint8_t *)a->data == 448);
    CHECK(!kt_tallocr_alloc(&ta, c)); /* 896 + 448 > 1000 */
    CHECK(c->data == NULL && strstr(kt_last_error(), "left") != NULL);
    kt_free(ctx);
    kt_buffer_free(buf);
}

static void test_chain_in_place(struct kt_backend *be) {
    /* x (input) -> sqr -> silu -> scale -> relu: the chain runs in one block beside x */
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *x = kt_new_tensor_2d(ctx, KT_TYPE_F32, 64, 4);
    kt_set_input(x);
    struct kt_tensor *y = kt_relu(ctx, kt_scale(ctx, kt_silu(ctx, kt_sqr(ctx, x)), -1.0f));
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, y);
    struct kt_gallocr *ga = kt_gallocr_new(kt_cpu_buffer_type());
    CHECK(kt_gallocr_alloc_graph(ga, gf));
    CHECKF(kt_gallocr_get_buffer_size(ga) == 2 * 64 * 4 * sizeof(float), "%zu", kt_gallocr_get_buffer_size(ga));
    CHECK(y->data == gf->nodes[0]->data && x->data != y->data);
    /* allocating the same graph again plans the same addresses (its tensors are ours) */
    void *xd = x->data, *yd = y->data;
    CHECK(kt_gallocr_alloc_graph(ga, gf) && x->data == xd && y->data == yd && kt_gallocr_n_reallocs(ga) == 1);
    float in[256], out[256];
    for (int i = 0; i < 256; i++) in[i] = (float)(i % 7) - 3.0f;
    kt_tensor_set(x, in, 0, sizeof in);
    CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);
    kt_tensor_get(y, out, 0, sizeof out);
    bool ok = true;
    for (int i = 0; i < 256; i++) {
        double v = (double)in[i] * in[i];
        v = v / (1.0 + exp(-v)); /* silu of a square is >= 0, so -v is <= 0 and relu gives 0 */
        ok &= fabs(out[i] - fmax(-v, 0.0)) < 1e-6;
    }
    CHECK(ok);
    /* the output flag keeps a tensor's memory from being written over */
    kt_gallocr_free(ga);
    kt_free(ctx);

    ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    x = kt_new_tensor_2d(ctx, KT_TYPE_F32, 64, 4);
    kt_set_input(x);
    struct kt_tensor *a = kt_sqr(ctx, x);
    kt_set_output(a);
    y = kt_silu(ctx, a);
    gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, y);
    ga = kt_gallocr_new(kt_cpu_buffer_type());
    CHECK(kt_gallocr_alloc_graph(ga, gf));
    CHECK(a->data != y->data && x->data != a->data);
    kt_gallocr_free(ga);
    kt_free(ctx);
}

static void test_view_of_leaf(void) {
    /* a view of a leaf shares the leaf's memory */
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *x = kt_new_tensor_1d(ctx, KT_TYPE_F32, 64);
    struct kt_tensor *v = kt_view_1d(ctx, x, 32, 0);
    struct kt_tensor *y = kt_silu(ctx, v);
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, y);
    struct kt_gallocr *ga = kt_gallocr_new(kt_cpu_buffer_type());
    CHECK(kt_gallocr_alloc_graph(ga, gf) && v->data == x->data);
    kt_gallocr_free(ga);
    kt_free(ctx);
}

int main(void) {
    struct kt_backend *be = kt_backend_cpu_init();
    CHECK(be != NULL);
    kt_backend_set_n_threads(be, N_THREADS);
    test_tallocr();
    test_chain_in_place(be);
    test_view_of_leaf();

    /* (1) and (2): a fresh allocator per graph, so its size is that graph's need */
    struct stats st = {0};
    for (int seed = 1; seed <= N_SEEDS; seed++) {
        struct kt_gallocr *ga = kt_gallocr_new(kt_cpu_buffer_type());
        run_galloc(ga, be, (uint64_t)seed, 4 + seed % 70, 1 + seed % 9, &st);
        kt_gallocr_free(ga);
    }
    printf("random graphs: %d seeds, %d in-place hand-overs, planned %zu bytes vs %zu without reuse\n", N_SEEDS,
           st.inplace, st.planned, st.naive);
    CHECK(st.inplace > 0);
    CHECK(st.planned < st.naive / 2);

    /* (3) reserve on the largest batch, then every smaller one: no reallocation */
    int grown = 0;
    for (int seed = 1; seed <= 40; seed++) {
        struct kt_gallocr *g3 = kt_gallocr_new(kt_cpu_buffer_type());
        size_t meta = 4096 * kt_tensor_overhead() + kt_graph_overhead_custom(4096);
        struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
        struct rg_graph g;
        int n_ops = 10 + seed % 60;
        CHECK(rg_build(ctx, ctx, (uint64_t)seed, n_ops, 16, &g));
        CHECK(kt_gallocr_reserve(g3, g.gf));
        size_t size = kt_gallocr_get_buffer_size(g3);
        CHECK(size > 0 && kt_gallocr_n_reallocs(g3) == 0);
        for (int t = 0; t < g.gf->n_nodes; t++) CHECK(g.gf->nodes[t]->data == NULL || g.gf->nodes[t]->view_src);
        kt_free(ctx);
        for (int64_t n_tok = 16; n_tok >= 1; n_tok -= 3) run_galloc(g3, be, (uint64_t)seed, n_ops, n_tok, NULL);
        grown += kt_gallocr_n_reallocs(g3);
        CHECKF(kt_gallocr_n_reallocs(g3) == 0 && kt_gallocr_get_buffer_size(g3) == size,
               "seed %d: %d reallocations after reserve", seed, kt_gallocr_n_reallocs(g3));
        kt_gallocr_free(g3);
    }
    printf("reserve then smaller batches: %d reallocations\n", grown);

    kt_backend_free(be);
    return tu_finish("test_alloc");
}
