/*
 * test_sched.c - the scheduler over two CPU backend instances, the first
 * restricted by an op filter (so it stands in for a discrete device: its own
 * non-host buffer type, nothing else reachable). Graphs must really split and
 * copy, and results must be bit for bit those of a plain single-engine run
 * (kt_graph_compute_with_ctx over a context where every tensor has its own
 * memory). Also: exact splits/copies on a hand-made graph, pinning, the
 * caller's graph left unchanged, reserve then smaller batches.
 */
#include <malloc.h>

#include "backend-impl.h"
#include "kt-alloc.h"
#include "cpu/test_hooks.h"
#include "kt-cpu.h"
#include "randgraph.h"

#ifndef N_THREADS
#define N_THREADS 2
#endif

static bool only_mul_mat_add(const struct kt_tensor *op, void *data) {
    (void)data;
    return op->op == KT_OP_MUL_MAT || op->op == KT_OP_ADD;
}
static bool only_mul_mat(const struct kt_tensor *op, void *data) { return op->op == KT_OP_MUL_MAT; }
static bool only_add(const struct kt_tensor *op, void *data) { return op->op == KT_OP_ADD; }

struct stats {
    int graphs, split_graphs, splits, copies;
};

/* Random graph of seed through the scheduler; weights in wbuft (the device's or the host's). */
static void run_sched(struct kt_sched *s, struct kt_buffer_type *wbuft, uint64_t seed, int n_ops, int64_t n_tok,
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
    struct kt_buffer *wbuf = kt_backend_alloc_ctx_tensors(wctx, wbuft);
    CHECK(wbuf != NULL);

    /* the caller's graph must be the same after compute */
    static struct kt_tensor *before[4096][KT_MAX_SRC];
    for (int i = 0; i < g.gf->n_nodes; i++) memcpy(before[i], g.gf->nodes[i]->src, sizeof before[i]);

    bool ok = kt_sched_alloc_graph(s, g.gf);
    CHECKF(ok, "seed %llu: %s", (unsigned long long)seed, kt_last_error());
    if (ok) {
        /* every backend's memory: nothing alive at once overlaps, in the planned order */
        for (int b = 0; b < 3; b++) {
            struct kt_gallocr *ga = kt_sched_gallocr(s, b);
            if (ga && kt_gallocr_get_buffer(ga)) rg_check_lifetimes(kt_sched_plan_graph(s), kt_gallocr_get_buffer(ga), (int)seed);
        }
        rg_fill(g.gf, seed); /* inputs may live in the device's memory: set through the buffer */
        enum kt_status stt = kt_sched_graph_compute(s, g.gf);
        CHECKF(stt == KT_STATUS_SUCCESS, "seed %llu: %s", (unsigned long long)seed, kt_last_error());
        rg_collect(&g, &got);
        CHECK(rg_same(&got, &want, seed));
        bool same = true;
        for (int i = 0; i < g.gf->n_nodes; i++) same &= !memcmp(before[i], g.gf->nodes[i]->src, sizeof before[i]);
        CHECK(same);
        if (st) {
            st->graphs++;
            st->split_graphs += kt_sched_get_n_splits(s) > 1;
            st->splits += kt_sched_get_n_splits(s);
            st->copies += kt_sched_get_n_copies(s);
        }
    }
    rg_run_free(&want);
    rg_run_free(&got);
    kt_buffer_free(wbuf);
    kt_free(ctx);
    kt_free(wctx);
}

/* x -> mul_mat(w1) -> silu -> mul_mat(w2) -> add x -> rms_norm, weights on the device:
 * [mm] dev, [silu] cpu, [mm, add] dev, [rms_norm] cpu = 4 splits, 3 copies (h, g, r). */
static void test_hand_made(struct kt_backend *dev, struct kt_backend *cpu) {
    struct kt_context *ref = kt_init((struct kt_init_params){.mem_size = 1 << 20});
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_context *wctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *y[2], *w[2][2], *x[2], *mm[2];
    for (int k = 0; k < 2; k++) {
        struct kt_context *c = k ? ctx : ref, *wc = k ? wctx : ref;
        x[k] = kt_new_tensor_2d(c, KT_TYPE_F32, 32, 4);
        kt_set_input(x[k]);
        w[k][0] = kt_new_tensor_2d(wc, KT_TYPE_F32, 32, 16);
        w[k][1] = kt_new_tensor_2d(wc, KT_TYPE_F32, 16, 32);
        mm[k] = kt_mul_mat(c, w[k][0], x[k]);
        struct kt_tensor *o = kt_mul_mat(c, w[k][1], kt_silu(c, mm[k]));
        y[k] = kt_rms_norm(c, kt_add(c, o, x[k]), 1e-6f);
        kt_set_output(y[k]);
    }
    struct kt_buffer *wbuf = kt_backend_alloc_ctx_tensors(wctx, kt_backend_get_default_buffer_type(dev));
    CHECK(wbuf && !kt_buffer_is_host(wbuf));
    float vx[128], vw0[512], vw1[512];
    uint64_t s = 7;
    for (int i = 0; i < 128; i++) vx[i] = tu_rand_f(&s);
    for (int i = 0; i < 512; i++) vw0[i] = tu_rand_f(&s), vw1[i] = tu_rand_f(&s);
    struct kt_cgraph *g0 = kt_new_graph(ref), *g1 = kt_new_graph(ctx);
    kt_build_forward_expand(g0, y[0]);
    kt_build_forward_expand(g1, y[1]);
    memcpy(x[0]->data, vx, sizeof vx);
    memcpy(w[0][0]->data, vw0, sizeof vw0);
    memcpy(w[0][1]->data, vw1, sizeof vw1);
    CHECK(kt_graph_compute_with_ctx(ref, g0, N_THREADS) == KT_STATUS_SUCCESS);

    struct kt_backend *bs[2] = {dev, cpu};
    struct kt_sched *sc = kt_sched_new(bs, 2, 64);
    CHECK(sc != NULL);
    CHECK(kt_sched_reserve(sc, g1));
    size_t dev_size = kt_sched_get_buffer_size(sc, dev), cpu_size = kt_sched_get_buffer_size(sc, cpu);
    CHECK(dev_size > 0 && cpu_size > 0);
    CHECK(kt_sched_alloc_graph(sc, g1));
    CHECKF(kt_sched_get_n_splits(sc) == 4 && kt_sched_get_n_copies(sc) == 3, "%d splits, %d copies",
           kt_sched_get_n_splits(sc), kt_sched_get_n_copies(sc));
    CHECK(kt_sched_get_tensor_backend(sc, mm[1]) == dev && kt_sched_get_tensor_backend(sc, y[1]) == cpu);
    CHECK(x[1]->buffer && !kt_buffer_is_host(x[1]->buffer)); /* first used on the device */
    kt_tensor_set(x[1], vx, 0, sizeof vx);
    kt_tensor_set(w[1][0], vw0, 0, sizeof vw0);
    kt_tensor_set(w[1][1], vw1, 0, sizeof vw1);
    for (int rep = 0; rep < 3; rep++) { /* steady state: same memory, same bits */
        CHECK(kt_sched_graph_compute(sc, g1) == KT_STATUS_SUCCESS);
        float got[128];
        kt_tensor_get(y[1], got, 0, sizeof got);
        CHECK(!memcmp(got, y[0]->data, sizeof got));
        kt_tensor_set(x[1], vx, 0, sizeof vx); /* setting an input again between computes is fine */
    }
    CHECK(kt_sched_get_buffer_size(sc, dev) == dev_size && kt_sched_get_buffer_size(sc, cpu) == cpu_size);
    /* warm: splitting, planning, copying and computing again allocate nothing */
    struct mallinfo2 m0 = mallinfo2();
    for (int rep = 0; rep < 3; rep++) CHECK(kt_sched_graph_compute(sc, g1) == KT_STATUS_SUCCESS);
    struct mallinfo2 m1 = mallinfo2();
    CHECKF(m0.uordblks == m1.uordblks && m0.hblkhd == m1.hblkhd, "heap in use %zu -> %zu", m0.uordblks, m1.uordblks);

    /* pinning the first projection to the CPU: it copies the weight over instead */
    kt_sched_reset(sc);
    CHECK(kt_sched_set_tensor_backend(sc, mm[1], cpu));
    /* a backend the scheduler does not have: refused, saying so */
    struct kt_backend *stray = kt_backend_cpu_init();
    kt_clear_error();
    CHECK(!kt_sched_set_tensor_backend(sc, mm[0], stray) && strstr(kt_last_error(), "not one of"));
    kt_backend_free(stray);
    CHECK(kt_sched_alloc_graph(sc, g1));
    CHECK(kt_sched_get_tensor_backend(sc, mm[1]) == cpu);
    CHECKF(kt_sched_get_n_splits(sc) == 3, "%d splits", kt_sched_get_n_splits(sc));
    kt_tensor_set(x[1], vx, 0, sizeof vx);
    CHECK(kt_sched_graph_compute(sc, g1) == KT_STATUS_SUCCESS);
    float got[128];
    kt_tensor_get(y[1], got, 0, sizeof got);
    CHECK(!memcmp(got, y[0]->data, sizeof got));

    /* the CPU alone on a fresh copy of the graph (the tensors above belong to sc's memory):
     * one split; the two weights in the device's memory are copied in */
    struct kt_context *ctx2 = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *x2 = kt_new_tensor_2d(ctx2, KT_TYPE_F32, 32, 4);
    kt_set_input(x2);
    struct kt_tensor *h2 = kt_silu(ctx2, kt_mul_mat(ctx2, w[1][0], x2));
    struct kt_tensor *y2 = kt_rms_norm(ctx2, kt_add(ctx2, kt_mul_mat(ctx2, w[1][1], h2), x2), 1e-6f);
    struct kt_cgraph *g2 = kt_new_graph(ctx2);
    kt_build_forward_expand(g2, y2);
    struct kt_sched *one = kt_sched_new(&cpu, 1, 64);
    CHECK(kt_sched_alloc_graph(one, g2));
    kt_tensor_set(x2, vx, 0, sizeof vx);
    CHECKF(kt_sched_graph_compute(one, g2) == KT_STATUS_SUCCESS, "%s", kt_last_error());
    CHECKF(kt_sched_get_n_splits(one) == 1 && kt_sched_get_n_copies(one) == 2, "%d splits %d copies",
           kt_sched_get_n_splits(one), kt_sched_get_n_copies(one));
    kt_tensor_get(y2, got, 0, sizeof got);
    CHECK(!memcmp(got, y[0]->data, sizeof got));
    kt_sched_free(one);
    kt_free(ctx2);

    kt_sched_free(sc);
    kt_buffer_free(wbuf);
    kt_free(ref);
    kt_free(ctx);
    kt_free(wctx);
}

/* Writing into memory that existed before (a KV cache): the node goes where that memory is
 * reachable; when no backend that runs the op reaches it, an error names the node. */
static void test_cache_writes(struct kt_backend *dev, struct kt_backend *cpu) {
    struct kt_backend *bs[2] = {dev, cpu};
    for (int on_dev = 0; on_dev < 2; on_dev++) {
        struct kt_context *kctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
        struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
        struct kt_tensor *cache = kt_new_tensor_2d(kctx, KT_TYPE_F16, 16, 8);
        struct kt_buffer *kb = kt_backend_alloc_ctx_tensors(
            kctx, on_dev ? kt_backend_get_default_buffer_type(dev) : kt_cpu_buffer_type());
        kt_tensor_memset(cache, 0, 0, kt_nbytes(cache));
        struct kt_tensor *x = kt_new_tensor_2d(ctx, KT_TYPE_F32, 16, 2);
        kt_set_input(x);
        struct kt_tensor *w = kt_new_tensor_2d(ctx, KT_TYPE_F32, 16, 16);
        kt_set_input(w);
        struct kt_tensor *y = kt_add(ctx, kt_mul_mat(ctx, w, x), x); /* on the device */
        struct kt_tensor *slot = kt_view_2d(ctx, cache, 16, 2, cache->nb[1], 5 * cache->nb[1]);
        struct kt_tensor *c = kt_cpy(ctx, kt_silu(ctx, y), slot);
        struct kt_cgraph *gf = kt_new_graph(ctx);
        kt_build_forward_expand(gf, c);
        struct kt_sched *sc = kt_sched_new(bs, 2, 64);
        bool ok = kt_sched_alloc_graph(sc, gf);
        if (on_dev) {
            /* the device does not copy, the CPU cannot reach the device's cache */
            CHECKF(!ok && strstr(kt_last_error(), "CPY") != NULL, "%s", kt_last_error());
        } else {
            CHECKF(ok, "%s", kt_last_error());
            float vx[32], vw[256];
            uint64_t r = 99;
            for (int i = 0; i < 32; i++) vx[i] = tu_rand_f(&r);
            for (int i = 0; i < 256; i++) vw[i] = tu_rand_f(&r);
            kt_tensor_set(x, vx, 0, sizeof vx);
            kt_tensor_set(w, vw, 0, sizeof vw);
            CHECK(kt_sched_graph_compute(sc, gf) == KT_STATUS_SUCCESS);
            CHECKF(kt_sched_get_tensor_backend(sc, c) == cpu && kt_sched_get_n_splits(sc) == 2, "%d splits", kt_sched_get_n_splits(sc));
            /* rows 5 and 6 of the cache hold silu(w x + x) in f16, naive double reference */
            bool good = true;
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < 16; i++) {
                    double v = vx[t * 16 + i];
                    for (int k = 0; k < 16; k++) v += (double)vw[i * 16 + k] * vx[t * 16 + k];
                    v = v / (1.0 + exp(-v));
                    kt_fp16_t h;
                    kt_tensor_get(cache, &h, ((size_t)(5 + t) * 16 + (size_t)i) * sizeof h, sizeof h);
                    good &= fabs(kt_fp16_to_fp32(h) - v) <= 2e-3 * (1 + fabs(v));
                }
            CHECK(good);
            kt_fp16_t h4;
            kt_tensor_get(cache, &h4, 4 * 16 * sizeof h4, sizeof h4);
            CHECK(h4 == 0); /* the rest of the cache untouched */
        }
        kt_sched_free(sc);
        kt_buffer_free(kb);
        kt_free(ctx);
        kt_free(kctx);
    }
}

static void test_bad_args(struct kt_backend *dev, struct kt_backend *cpu) {
    struct kt_backend *bs[2] = {cpu, dev};
    CHECK(kt_sched_new(bs, 2, 64) == NULL); /* the fallback must reach host memory */
    CHECK(kt_sched_new(bs, 0, 64) == NULL && kt_last_error()[0]);
}

int main(void) {
    struct kt_backend *dev = kt_backend_cpu_init(), *cpu = kt_backend_cpu_init();
    CHECK(dev && cpu);
    kt_backend_set_n_threads(dev, N_THREADS);
    kt_backend_set_n_threads(cpu, N_THREADS);
    kt_backend_cpu_set_op_filter(dev, only_mul_mat_add, NULL);
    CHECK(!kt_backend_supports_buft(cpu, kt_backend_get_default_buffer_type(dev)));
    CHECK(!kt_backend_supports_buft(dev, kt_cpu_buffer_type()));

    test_hand_made(dev, cpu);
    test_cache_writes(dev, cpu);

    /* random graphs, weights on the device: mul_mats and adds there, the rest on the CPU */
    struct kt_backend *bs[2] = {dev, cpu};
    struct kt_sched *s = kt_sched_new(bs, 2, 256);
    struct stats st = {0};
    for (int seed = 1; seed <= 150; seed++)
        run_sched(s, kt_backend_get_default_buffer_type(dev), (uint64_t)seed, 4 + seed % 60, 1 + seed % 7, &st);
    printf("weights on the device: %d graphs, %d split, %d splits, %d copies\n", st.graphs, st.split_graphs,
           st.splits, st.copies);
    CHECK(st.graphs == 150 && st.split_graphs > 100 && st.copies > 0);

    /* weights in host memory: the device only gets adds of computed tensors */
    struct stats st2 = {0};
    for (int seed = 1; seed <= 60; seed++)
        run_sched(s, kt_cpu_buffer_type(), (uint64_t)seed, 4 + seed % 60, 1 + seed % 7, &st2);
    printf("weights on the host: %d graphs, %d split, %d copies\n", st2.graphs, st2.split_graphs, st2.copies);
    CHECK(st2.graphs == 60 && st2.split_graphs > 0);

    /* reserve on the largest batch, then smaller ones: the compute buffers stay */
    for (int seed = 1; seed <= 20; seed++) {
        size_t meta = 4096 * kt_tensor_overhead() + kt_graph_overhead_custom(4096);
        struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
        struct rg_graph g;
        CHECK(rg_build(ctx, ctx, (uint64_t)seed, 30, 12, &g));
        kt_sched_reset(s);
        CHECK(kt_sched_reserve(s, g.gf));
        size_t a = kt_sched_get_buffer_size(s, dev), b = kt_sched_get_buffer_size(s, cpu);
        kt_free(ctx);
        for (int64_t n_tok = 12; n_tok >= 1; n_tok -= 4)
            run_sched(s, kt_backend_get_default_buffer_type(dev), (uint64_t)seed, 30, n_tok, NULL);
        CHECKF(kt_sched_get_buffer_size(s, dev) == a && kt_sched_get_buffer_size(s, cpu) == b, "seed %d grew", seed);
    }
    kt_sched_free(s);

    /* three backends: matmuls on one device, adds on another */
    struct kt_backend *d1 = kt_backend_cpu_init(), *d2 = kt_backend_cpu_init();
    kt_backend_set_n_threads(d1, N_THREADS);
    kt_backend_set_n_threads(d2, N_THREADS);
    kt_backend_cpu_set_op_filter(d1, only_mul_mat, NULL);
    kt_backend_cpu_set_op_filter(d2, only_add, NULL);
    struct kt_backend *b3[3] = {d1, d2, cpu};
    struct kt_sched *s3 = kt_sched_new(b3, 3, 256);
    struct stats st3 = {0};
    for (int seed = 1; seed <= 60; seed++)
        run_sched(s3, kt_backend_get_default_buffer_type(d1), (uint64_t)seed, 4 + seed % 60, 1 + seed % 7, &st3);
    printf("three backends: %d graphs, %d split, %d splits, %d copies\n", st3.graphs, st3.split_graphs, st3.splits,
           st3.copies);
    CHECK(st3.graphs == 60 && st3.split_graphs > 40 && st3.copies > 0);
    kt_sched_free(s3);
    kt_backend_free(d1);
    kt_backend_free(d2);

    test_bad_args(dev, cpu);
    kt_backend_free(dev);
    kt_backend_free(cpu);
    return tu_finish("test_sched");
}
