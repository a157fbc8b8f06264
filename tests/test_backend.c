/*
 * test_backend.c - the backend layer on the CPU: the registry, buffer types
 * and buffers, tensor set/get/copy across buffers, zero-copy binding over
 * caller memory, allocating a context's tensors; then every op as a graph
 * allocated by the graph allocator on the CPU buffer type and computed with
 * kt_backend_graph_compute, compared bit for bit with the plain engine
 * (kt_graph_compute_with_ctx over a context where every tensor has its own
 * memory); thread counts, the abort callback, and computes that allocate
 * nothing once warm; a large buffer cleared to zeros without keeping its pages.
 */
#define _DEFAULT_SOURCE /* mincore */
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend-impl.h"
#include "kt-alloc.h"
#include "cpu/test_hooks.h"
#include "kt-cpu.h"
#include "testutil.h"

static bool covered[KT_OP_COUNT];

/* ------------------------------------------------------------------ op cases */

/* Leaves are named for how to fill them: "ids<N>" I32 in [0, N), anything else random. */
static struct kt_tensor *leaf(struct kt_context *ctx, enum kt_type type, int64_t n0, int64_t n1, int64_t n2,
                              int64_t n3) {
    struct kt_tensor *t = kt_new_tensor_4d(ctx, type, n0, n1, n2, n3);
    kt_set_input(t);
    return t;
}

static struct kt_tensor *ids(struct kt_context *ctx, int64_t n, int64_t bound) {
    struct kt_tensor *t = leaf(ctx, KT_TYPE_I32, n, 1, 1, 1);
    kt_format_name(t, "ids%lld", (long long)bound);
    return t;
}

static struct kt_tensor *f32(struct kt_context *ctx, int64_t n0, int64_t n1, int64_t n2) {
    return leaf(ctx, KT_TYPE_F32, n0, n1, n2, 1);
}

/* Case c of the list, built in ctx; persistent tensors (a KV cache) in pctx. NULL past the end. */
static struct kt_tensor *build_case(int c, struct kt_context *ctx, struct kt_context *pctx, const char **label) {
    struct kt_rope_params rp = {.n_dims = 32, .mode = KT_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    struct kt_tensor *a, *b;
#define CASE(text, expr)  \
    if (c-- == 0) {       \
        *label = text;    \
        return (expr);    \
    }
    CASE("dup", kt_dup(ctx, f32(ctx, 33, 5, 2)));
    CASE("dup permuted", kt_dup(ctx, kt_permute(ctx, f32(ctx, 16, 3, 5), 1, 2, 0, 3)));
    CASE("cast f16", kt_cast(ctx, f32(ctx, 64, 3, 1), KT_TYPE_F16));
    CASE("add", kt_add(ctx, f32(ctx, 32, 4, 3), f32(ctx, 32, 4, 3)));
    CASE("add broadcast", kt_add(ctx, f32(ctx, 32, 4, 3), f32(ctx, 32, 1, 3)));
    CASE("sub broadcast", kt_sub(ctx, f32(ctx, 32, 4, 3), f32(ctx, 16, 4, 1)));
    CASE("mul broadcast", kt_mul(ctx, f32(ctx, 32, 4, 3), f32(ctx, 32, 1, 1)));
    CASE("div", kt_div(ctx, f32(ctx, 20, 7, 1), kt_scale_bias(ctx, kt_sqr(ctx, f32(ctx, 20, 7, 1)), 1.0f, 1.0f)));
    CASE("add in place", (a = f32(ctx, 24, 3, 1), kt_add_inplace(ctx, kt_scale(ctx, a, 2.0f), f32(ctx, 24, 3, 1))));
    CASE("mul in place", (a = f32(ctx, 24, 3, 1), kt_mul_inplace(ctx, kt_silu(ctx, a), f32(ctx, 24, 1, 1))));
    CASE("scale", kt_scale_bias(ctx, f32(ctx, 40, 3, 2), -1.5f, 0.25f));
    CASE("sqr", kt_sqr(ctx, f32(ctx, 40, 3, 2)));
    CASE("sqrt", kt_sqrt(ctx, kt_scale_bias(ctx, kt_sqr(ctx, f32(ctx, 40, 3, 2)), 1.0f, 0.5f)));
    CASE("sum_rows", kt_sum_rows(ctx, f32(ctx, 37, 4, 3)));
    CASE("mean", kt_mean(ctx, f32(ctx, 37, 4, 3)));
    CASE("argmax", kt_argmax(ctx, f32(ctx, 50, 6, 1)));
    CASE("norm", kt_norm(ctx, f32(ctx, 64, 5, 1), 1e-5f));
    CASE("rms_norm", kt_rms_norm(ctx, f32(ctx, 64, 5, 2), 1e-6f));
    CASE("mul_mat f32", kt_mul_mat(ctx, f32(ctx, 64, 24, 1), f32(ctx, 64, 5, 1)));
    CASE("mul_mat f16", kt_mul_mat(ctx, leaf(ctx, KT_TYPE_F16, 64, 24, 1, 1), f32(ctx, 64, 5, 1)));
    CASE("mul_mat q4_0", kt_mul_mat(ctx, leaf(ctx, KT_TYPE_Q4_0, 64, 24, 1, 1), f32(ctx, 64, 5, 1)));
    CASE("mul_mat q8_0", kt_mul_mat(ctx, leaf(ctx, KT_TYPE_Q8_0, 64, 24, 1, 1), f32(ctx, 64, 1, 1)));
    CASE("mul_mat q4_K", kt_mul_mat(ctx, leaf(ctx, KT_TYPE_Q4_K, 256, 8, 1, 1), f32(ctx, 256, 3, 1)));
    CASE("mul_mat q6_K", kt_mul_mat(ctx, leaf(ctx, KT_TYPE_Q6_K, 256, 8, 1, 1), f32(ctx, 256, 3, 1)));
    CASE("mul_mat gqa", kt_mul_mat(ctx, f32(ctx, 32, 8, 2), f32(ctx, 32, 5, 4)));
    CASE("mul_mat transposed act", kt_mul_mat(ctx, f32(ctx, 16, 8, 1), kt_transpose(ctx, f32(ctx, 5, 16, 1))));
    CASE("rope", kt_rope(ctx, f32(ctx, 64, 4, 6), ids(ctx, 6, 100), rp));
    CASE("rope neox partial", (rp.mode = KT_ROPE_NEOX, rp.n_dims = 16, kt_rope(ctx, f32(ctx, 32, 2, 3), ids(ctx, 3, 50), rp)));
    CASE("soft_max", kt_soft_max(ctx, f32(ctx, 33, 4, 2)));
    CASE("attn gqa f16", kt_attn_ext(ctx, f32(ctx, 32, 4, 3), leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1),
                                     leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1), f32(ctx, 10, 3, 1), NULL, 0.17f));
    CASE("attn ordered", kt_attn_ext(ctx, f32(ctx, 32, 4, 3), leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1),
                                     leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1), f32(ctx, 10, 3, 1), ids(ctx, 10, 12), 0.17f));
    CASE("soft_max mask alibi", kt_soft_max_ext(ctx, f32(ctx, 16, 4, 8), f32(ctx, 16, 4, 1), 0.125f, 8.0f));
    CASE("diag_mask_inf", kt_diag_mask_inf(ctx, f32(ctx, 8, 8, 2), 0));
    CASE("silu", kt_silu(ctx, f32(ctx, 40, 3, 1)));
    CASE("gelu", kt_gelu(ctx, f32(ctx, 40, 3, 1)));
    CASE("relu", kt_relu(ctx, f32(ctx, 40, 3, 1)));
    CASE("swiglu", kt_swiglu(ctx, f32(ctx, 40, 3, 1), f32(ctx, 40, 3, 1)));
    CASE("geglu", kt_geglu(ctx, f32(ctx, 40, 3, 1), f32(ctx, 40, 3, 1)));
    CASE("softcap", kt_softcap(ctx, f32(ctx, 40, 3, 1), 0.5f));
    CASE("attn softcap", kt_attn_ext_softcap(ctx, f32(ctx, 32, 4, 3), leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1),
                                             leaf(ctx, KT_TYPE_F16, 32, 10, 2, 1), f32(ctx, 10, 3, 1), NULL, 0.17f, 0.3f));
    CASE("cpy f16", kt_cpy(ctx, f32(ctx, 32, 4, 1), leaf(ctx, KT_TYPE_F16, 32, 4, 1, 1)));
    CASE("cpy q8_0", kt_cpy(ctx, f32(ctx, 64, 4, 1), leaf(ctx, KT_TYPE_Q8_0, 64, 4, 1, 1)));
    CASE("cpy into a cache slot", (b = kt_new_tensor_2d(pctx, KT_TYPE_F16, 32, 8),
                                   kt_cpy(ctx, f32(ctx, 32, 2, 1), kt_view_2d(ctx, b, 32, 2, b->nb[1], 3 * b->nb[1]))));
    CASE("concat 0", kt_concat(ctx, f32(ctx, 8, 3, 2), f32(ctx, 5, 3, 2), 0));
    CASE("concat 1", kt_concat(ctx, f32(ctx, 8, 3, 2), f32(ctx, 8, 4, 2), 1));
    CASE("cont transposed", kt_cont(ctx, kt_transpose(ctx, f32(ctx, 12, 7, 1))));
    CASE("cont_4d", kt_cont_4d(ctx, kt_permute(ctx, f32(ctx, 6, 5, 4), 2, 0, 1, 3), 5, 4, 6, 1));
    CASE("get_rows f32", kt_get_rows(ctx, f32(ctx, 16, 10, 1), ids(ctx, 7, 10)));
    CASE("get_rows q4_0", kt_get_rows(ctx, leaf(ctx, KT_TYPE_Q4_0, 64, 10, 1, 1), ids(ctx, 4, 10)));
    /* mixtures of experts: router choices by top_k, experts by mul_mat_id */
    CASE("top_k", kt_top_k(ctx, f32(ctx, 10, 6, 2), 3));
    CASE("mul_mat_id q4_0", kt_mul_mat_id(ctx, leaf(ctx, KT_TYPE_Q4_0, 64, 24, 4, 1), f32(ctx, 64, 1, 5),
                                          kt_top_k(ctx, f32(ctx, 4, 5, 1), 2)));
    CASE("mul_mat_id f32 per slot", kt_mul_mat_id(ctx, f32(ctx, 32, 8, 3), f32(ctx, 32, 2, 9),
                                                  kt_top_k(ctx, f32(ctx, 3, 9, 1), 2)));
    CASE("swiglu_oai", kt_swiglu_oai(ctx, kt_scale(ctx, f32(ctx, 40, 3, 1), 10.0f), f32(ctx, 40, 3, 1), 1.702f, 7.0f));
    CASE("reshape", kt_reshape_3d(ctx, kt_silu(ctx, f32(ctx, 24, 4, 1)), 8, 3, 4));
    CASE("view", kt_view_2d(ctx, kt_gelu(ctx, f32(ctx, 24, 4, 1)), 10, 3, 24 * 4, 8));
    CASE("permute", kt_permute(ctx, kt_relu(ctx, f32(ctx, 8, 3, 2)), 2, 0, 1, 3));
    CASE("transpose", kt_transpose(ctx, kt_sqr(ctx, f32(ctx, 8, 3, 1))));
    CASE("a small attention", (a = f32(ctx, 16, 4, 6), /* q [d, heads, tokens] */
                               b = kt_soft_max_ext(ctx,
                                                   kt_mul_mat(ctx, kt_permute(ctx, f32(ctx, 16, 2, 6), 0, 2, 1, 3),
                                                              kt_permute(ctx, a, 0, 2, 1, 3)),
                                                   NULL, 0.25f, 0.0f),
                               kt_cont(ctx, kt_permute(ctx, kt_mul_mat(ctx, kt_cont(ctx, kt_transpose(ctx, kt_permute(
                                                                                 ctx, f32(ctx, 16, 2, 6), 0, 2, 1, 3))),
                                                                     b),
                                                       0, 2, 1, 3))));
#undef CASE
    return NULL;
}

static void fill(struct kt_tensor *t, uint64_t seed) { tu_fill(t, seed, NULL); }

/* The result's elements, read through its strides into a packed byte array. */
static uint8_t *read_result(const struct kt_tensor *t, size_t *len) {
    size_t ts = kt_type_size(t->type);
    if (kt_is_quantized(t->type) || kt_is_contiguous(t)) {
        *len = kt_nbytes(t);
        uint8_t *out = malloc(*len);
        kt_tensor_get(t, out, 0, *len);
        return out;
    }
    *len = (size_t)kt_nelements(t) * ts;
    uint8_t *out = malloc(*len), *p = out;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++, p += ts)
                    kt_tensor_get(t, p, i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], ts);
    return out;
}

static void fill_graph(struct kt_cgraph *gf, struct kt_context *pctx) {
    for (int i = 0; i < gf->n_leafs; i++) fill(gf->leafs[i], 1000 + (uint64_t)i);
    int k = 0;
    for (struct kt_tensor *t = kt_get_first_tensor(pctx); t; t = kt_get_next_tensor(pctx, t), k++)
        if (!t->view_src) fill(t, 5000 + (uint64_t)k);
}

static void mark_covered(const struct kt_cgraph *gf) {
    for (int i = 0; i < gf->n_nodes; i++) covered[gf->nodes[i]->op] = true;
}

/* Case c: plain engine vs graph allocator + backend; false past the last case. */
static bool run_case(int c, struct kt_backend *be, struct kt_gallocr *ga) {
    const char *label = NULL;
    struct kt_context *c0 = kt_init((struct kt_init_params){.mem_size = 16 << 20});
    struct kt_context *p0 = kt_init((struct kt_init_params){.mem_size = 1 << 20});
    struct kt_tensor *r0 = build_case(c, c0, p0, &label);
    if (!label) {
        kt_free(c0);
        kt_free(p0);
        return false;
    }
    CHECKF(r0 != NULL, "%s: %s", label, kt_last_error());
    struct kt_context *c1 = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_context *p1 = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *r1 = build_case(c, c1, p1, &label);
    struct kt_buffer *pbuf = NULL;
    if (r0 && r1) {
        struct kt_cgraph *g0 = kt_new_graph(c0), *g1 = kt_new_graph(c1);
        kt_build_forward_expand(g0, r0);
        kt_build_forward_expand(g1, r1);
        mark_covered(g1);
        fill_graph(g0, p0);
        CHECKF(kt_graph_compute_with_ctx(c0, g0, 2) == KT_STATUS_SUCCESS, "%s: %s", label, kt_last_error());

        if (kt_get_first_tensor(p1)) pbuf = kt_backend_alloc_ctx_tensors(p1, kt_cpu_buffer_type());
        bool ok = kt_gallocr_alloc_graph(ga, g1);
        CHECKF(ok, "%s: %s", label, kt_last_error());
        if (ok) {
            fill_graph(g1, p1);
            CHECKF(kt_backend_graph_compute(be, g1) == KT_STATUS_SUCCESS, "%s: %s", label, kt_last_error());
            size_t n0, n1;
            uint8_t *v0 = read_result(r0, &n0), *v1 = read_result(r1, &n1);
            CHECKF(n0 == n1 && !memcmp(v0, v1, n0), "%s: backend result differs from the plain engine", label);
            /* the cache slot and the rest of the cache */
            if (kt_get_first_tensor(p1)) {
                struct kt_tensor *k0 = kt_get_first_tensor(p0), *k1 = kt_get_first_tensor(p1);
                free(v0);
                free(v1);
                v0 = read_result(k0, &n0);
                v1 = read_result(k1, &n1);
                CHECKF(n0 == n1 && !memcmp(v0, v1, n0), "%s: cache differs", label);
            }
            free(v0);
            free(v1);
        }
    }
    kt_buffer_free(pbuf);
    kt_free(c0);
    kt_free(p0);
    kt_free(c1);
    kt_free(p1);
    return true;
}

/* ------------------------------------------------------------------ devices, buffers, data */

static void test_registry(void) {
    CHECK(kt_dev_count() >= 1);
    struct kt_device *d = kt_dev_by_name("CPU");
    CHECK(d && d == kt_dev_get(0) && d == kt_dev_by_type(KT_DEVICE_TYPE_CPU));
    CHECK(kt_dev_get(kt_dev_count()) == NULL && kt_dev_by_name("NOPE") == NULL && kt_dev_by_name(NULL) == NULL);
    CHECK(kt_dev_type(d) == KT_DEVICE_TYPE_CPU && kt_dev_description(d) != NULL);
    size_t fr = 0, tot = 0;
    kt_dev_memory(d, &fr, &tot);
    CHECK(tot > 0 && fr <= tot);
    struct kt_buffer_type *bt = kt_dev_buffer_type(d);
    CHECK(bt == kt_cpu_buffer_type() && !strcmp(kt_buft_name(bt), "CPU") && kt_buft_is_host(bt));
    size_t al = kt_buft_alignment(bt);
    CHECK(al >= 32 && (al & (al - 1)) == 0 && kt_buft_max_size(bt) > ((size_t)1 << 40));
    CHECK(kt_buft_device(bt) == d);
    struct kt_backend *b = kt_dev_init_backend(d);
    CHECK(b && kt_backend_is_cpu(b) && kt_backend_get_device(b) == d && !strcmp(kt_backend_name(b), "CPU"));
    CHECK(kt_backend_get_default_buffer_type(b) == bt && kt_backend_supports_buft(b, bt));
    kt_backend_synchronize(b);
    kt_backend_free(b);
}


/* What a buffer's release callback was told. */
struct released {
    int calls;
    const void *addr;
    size_t size;
};
static void note_release(void *data, const void *addr, size_t size) {
    struct released *r = data;
    r->calls++;
    r->addr = addr;
    r->size = size;
}
static bool is_tensor(const struct kt_tensor *t, void *data) { return t == data; }

static void test_buffers(void) {
    struct kt_buffer *buf = kt_buft_alloc_buffer(kt_cpu_buffer_type(), 4096);
    CHECK(buf && kt_buffer_size(buf) == 4096 && kt_buffer_is_host(buf));
    CHECK((uintptr_t)kt_buffer_base(buf) % kt_buft_alignment(kt_cpu_buffer_type()) == 0);
    kt_buffer_set_usage(buf, KT_BUFFER_USAGE_WEIGHTS);
    CHECK(kt_buffer_get_usage(buf) == KT_BUFFER_USAGE_WEIGHTS && kt_buffer_get_type(buf) == kt_cpu_buffer_type());
    kt_buffer_clear(buf, 0xAB);
    CHECK(((uint8_t *)kt_buffer_base(buf))[4095] == 0xAB);

    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *t = kt_new_tensor_2d(ctx, KT_TYPE_F32, 8, 4);
    struct kt_tensor *early = kt_view_1d(ctx, t, 8, 8 * sizeof(float)); /* made before t has memory */
    struct kt_tensor *q = kt_new_tensor_1d(ctx, KT_TYPE_Q4_0, 64);
    struct kt_buffer *cb = kt_backend_alloc_ctx_tensors(ctx, kt_cpu_buffer_type());
    CHECK(cb && t->buffer == cb && q->buffer == cb && t->data != q->data);
    CHECK(early->data == (uint8_t *)t->data + 32 && early->buffer == cb);
    float v[32], w[32];
    for (int i = 0; i < 32; i++) v[i] = (float)i;
    CHECK(kt_tensor_set(t, v, 0, sizeof v));
    CHECK(kt_tensor_get(t, w, 0, sizeof w));
    CHECK(!memcmp(v, w, sizeof v));
    CHECK(kt_tensor_memset(t, 0, 4 * sizeof(float), 2 * sizeof(float)));
    kt_tensor_get(t, w, 0, sizeof w);
    CHECK(w[3] == 3.0f && w[4] == 0.0f && w[5] == 0.0f && w[6] == 6.0f);
    kt_clear_error();
    /* past the end: refused, saying so, nothing written or read */
    CHECK(!kt_tensor_set(t, v, 4, sizeof v) && strstr(kt_last_error(), "outside"));
    float before = w[31];
    kt_clear_error();
    CHECK(!kt_tensor_get(t, w, 4, sizeof w) && kt_last_error()[0] != 0 && w[31] == before);
    CHECK(!kt_tensor_memset(t, 1, sizeof v, 1));

    /* zero-copy over caller memory */
    static float mapping[1024];
    for (int i = 0; i < 1024; i++) mapping[i] = (float)i * 0.5f;
    struct kt_buffer *hb = kt_buffer_from_host_ptr(mapping, sizeof mapping);
    CHECK(hb && kt_buffer_is_host(hb) && kt_buffer_base(hb) == mapping);
    struct kt_context *wctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *wt = kt_new_tensor_2d(wctx, KT_TYPE_F32, 16, 4);
    struct kt_tensor *wv = kt_view_1d(wctx, wt, 4, 0);
    CHECK(!kt_buffer_bind_tensor(hb, wv, mapping));                /* views follow their source */
    CHECK(!kt_buffer_bind_tensor(hb, wt, mapping + 1024 - 32));    /* does not fit */
    CHECK(kt_buffer_bind_tensor(hb, wt, mapping + 100));
    CHECK(wt->data == mapping + 100 && wt->buffer == hb);
    struct kt_tensor *late = kt_view_1d(wctx, wt, 4, 16);
    CHECK(late->data == (uint8_t *)(mapping + 100) + 16 && late->buffer == hb);
    kt_tensor_get(wt, w, 0, 4 * sizeof(float));
    CHECK(w[0] == 50.0f && w[3] == 51.5f);
    /* moved out of the caller's memory: copied, views following, and the owner told which
     * bytes it may hand back */
    struct released rel = {0};
    kt_buffer_set_release_callback(hb, note_release, &rel);
    struct kt_buffer *moved = kt_backend_move_ctx_tensors(wctx, kt_cpu_buffer_type(), is_tensor, wt);
    CHECK(moved && wt->buffer == moved && wt->data != mapping + 100 && late->data == (uint8_t *)wt->data + 16);
    CHECKF(rel.calls == 1 && rel.addr == mapping + 100 && rel.size == 64 * sizeof(float),
           "release callback: %d calls, last %p + %zu", rel.calls, rel.addr, rel.size);
    kt_tensor_get(wt, w, 0, 4 * sizeof(float));
    CHECK(w[0] == 50.0f && w[3] == 51.5f);
    kt_buffer_free(moved);
    kt_buffer_free(hb); /* the mapping is the caller's: still there */
    CHECK(mapping[1023] == 511.5f);

    kt_buffer_free(cb);
    kt_buffer_free(buf);
    kt_free(ctx);
    kt_free(wctx);
}

/* A large CPU buffer cleared to zeros reads as zeros everywhere, its unaligned ends
 * included, and its whole pages are no longer resident (handed back rather than
 * written: a KV cache sized for the whole context costs memory only where used). */
static void test_clear_large(void) {
    const size_t n = ((size_t)3 << 20) + 4097;
    struct kt_buffer *buf = kt_buft_alloc_buffer(kt_cpu_buffer_type(), n);
    CHECK(buf != NULL);
    uint8_t *p = kt_buffer_base(buf);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *a = (uint8_t *)(((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1));
    const size_t whole = ((size_t)(p + n - a)) / page;
    unsigned char *vec = malloc(whole);
    for (int round = 0; round < 2; round++) {
        kt_buffer_clear(buf, 0x5A); /* every byte written: every page resident */
        CHECK(p[0] == 0x5A && p[n - 1] == 0x5A);
        CHECK(mincore(a, whole * page, vec) == 0);
        size_t resident = 0;
        for (size_t i = 0; i < whole; i++) resident += vec[i] & 1;
        CHECK(resident == whole);
        kt_buffer_clear(buf, 0);
        size_t nonzero = 0;
        CHECK(mincore(a, whole * page, vec) == 0);
        resident = 0;
        for (size_t i = 0; i < whole; i++) resident += vec[i] & 1;
        CHECKF(resident == 0, "%zu of %zu pages still resident after clearing to zeros", resident, whole);
        for (size_t i = 0; i < n; i++) nonzero += p[i] != 0;
        CHECKF(nonzero == 0, "%zu bytes not zero after the clear (round %d)", nonzero, round);
    }
    free(vec);
    kt_buffer_free(buf);
}

static bool no_ops(const struct kt_tensor *op, void *data) { return false; }

static void test_copy(void) {
    /* host -> an isolated (non-host) buffer -> host, strided sources included */
    struct kt_backend *dev = kt_backend_cpu_init();
    kt_backend_cpu_set_op_filter(dev, no_ops, NULL);
    struct kt_buffer_type *dbt = kt_backend_get_default_buffer_type(dev);
    CHECK(dbt != kt_cpu_buffer_type() && !kt_buft_is_host(dbt));
    struct kt_context *h = kt_init((struct kt_init_params){.mem_size = 1 << 16});
    struct kt_context *d = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *src = kt_new_tensor_2d(h, KT_TYPE_F32, 5, 7);
    for (int i = 0; i < 35; i++) ((float *)src->data)[i] = (float)i;
    struct kt_tensor *tr = kt_transpose(h, src); /* [7, 5], strided */
    struct kt_tensor *dst = kt_new_tensor_2d(d, KT_TYPE_F32, 7, 5);
    struct kt_tensor *dst2 = kt_new_tensor_2d(d, KT_TYPE_F32, 7, 5);
    struct kt_tensor *bad = kt_new_tensor_2d(d, KT_TYPE_F16, 7, 5);
    struct kt_buffer *db = kt_backend_alloc_ctx_tensors(d, dbt);
    CHECK(db && !kt_buffer_is_host(db));
    CHECK(kt_tensor_copy(tr, dst));
    CHECK(kt_tensor_copy(dst, dst2)); /* device to device */
    struct kt_tensor *back = kt_new_tensor_2d(h, KT_TYPE_F32, 7, 5);
    CHECK(kt_tensor_copy(dst2, back));
    bool ok = true;
    for (int i1 = 0; i1 < 5; i1++)
        for (int i0 = 0; i0 < 7; i0++) ok &= ((float *)back->data)[i1 * 7 + i0] == (float)(i0 * 5 + i1);
    CHECK(ok);
    CHECK(!kt_tensor_copy(tr, bad) && strstr(kt_last_error(), "differ") != NULL);
    kt_buffer_free(db);
    kt_free(h);
    kt_free(d);
    kt_backend_free(dev);
}

static bool named_w(const struct kt_tensor *t, void *data) { return t->name[0] == *(const char *)data; }

/* tensors bound over caller memory (a mapping), some moved into an isolated buffer: their
 * bytes come along, their views follow, the rest stay where they were */
static void test_move(void) {
    struct kt_backend *dev = kt_backend_cpu_init();
    kt_backend_cpu_set_op_filter(dev, no_ops, NULL);
    struct kt_buffer_type *dbt = kt_backend_get_default_buffer_type(dev);
    float map[3][40];
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 40; i++) map[r][i] = (float)(100 * r + i);
    struct kt_buffer *hb = kt_buffer_from_host_ptr(map, sizeof map);
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *t[3];
    for (int r = 0; r < 3; r++) {
        t[r] = kt_format_name(kt_new_tensor_2d(ctx, KT_TYPE_F32, 8, 5), "%c%d", r == 1 ? 'k' : 'w', r);
        CHECK(kt_buffer_bind_tensor(hb, t[r], map[r]));
    }
    struct kt_tensor *view = kt_view_2d(ctx, t[2], 8, 2, t[2]->nb[1], 3 * t[2]->nb[1]);
    struct kt_buffer *mb = kt_backend_move_ctx_tensors(ctx, dbt, named_w, "w");
    CHECK(mb && !kt_buffer_is_host(mb) && kt_buffer_size(mb) >= 2 * sizeof map[0]);
    CHECK(t[0]->buffer == mb && t[2]->buffer == mb && t[1]->buffer == hb && t[1]->data == map[1]);
    CHECK(view->buffer == mb && view->data == (uint8_t *)t[2]->data + 3 * t[2]->nb[1]);
    memset(map, 0, sizeof map[0]); /* the moved bytes no longer depend on the mapping */
    float got[40];
    kt_tensor_get(t[0], got, 0, sizeof got);
    CHECK(got[0] == 0.0f && got[39] == 39.0f);
    kt_tensor_get(t[2], got, 0, sizeof got);
    CHECK(got[0] == 200.0f && got[39] == 239.0f);
    kt_tensor_get(view, got, 0, 16 * sizeof(float));
    CHECK(got[0] == 224.0f && got[15] == 239.0f);
    kt_buffer_free(mb);
    kt_buffer_free(hb);
    kt_free(ctx);
    kt_backend_free(dev);
}

/* ------------------------------------------------------------------ compute */

static int abort_calls;
static bool abort_now(void *data) {
    (void)data;
    return ++abort_calls >= 1;
}

/* A chain long enough to have barriers between nodes. */
static struct kt_tensor *chain(struct kt_context *ctx, struct kt_tensor *x) {
    struct kt_tensor *w = kt_new_tensor_2d(ctx, KT_TYPE_F32, 128, 128);
    kt_set_input(w);
    for (int i = 0; i < 6; i++) x = kt_rms_norm(ctx, kt_mul_mat(ctx, w, kt_silu(ctx, x)), 1e-6f);
    return x;
}

static void test_compute(struct kt_backend *be) {
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *x = kt_new_tensor_2d(ctx, KT_TYPE_F32, 128, 9);
    kt_set_input(x);
    struct kt_tensor *y = chain(ctx, x);
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, y);
    struct kt_gallocr *ga = kt_gallocr_new(kt_cpu_buffer_type());
    CHECK(kt_gallocr_alloc_graph(ga, gf));
    for (int i = 0; i < gf->n_leafs; i++) fill(gf->leafs[i], 77 + (uint64_t)i);

    float ref[128 * 9], got[128 * 9];
    /* thread counts: out of range refused with a message, the old count kept */
    kt_clear_error();
    CHECK(!kt_backend_set_n_threads(be, 0) && strstr(kt_last_error(), "threads"));
    CHECK(!kt_backend_set_n_threads(be, 513) && !kt_backend_set_n_threads(be, -1));
    CHECK(kt_backend_set_n_threads(be, 1));
    CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);
    kt_tensor_get(y, ref, 0, sizeof ref);
    for (int nt = 2; nt <= 4; nt++) {
        kt_backend_set_n_threads(be, nt);
        CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);
        kt_tensor_get(y, got, 0, sizeof got);
        CHECKF(!memcmp(ref, got, sizeof ref), "%d threads", nt);
    }

    /* warm: more computes allocate nothing (the pool and the work memory persist) */
    kt_backend_set_n_threads(be, 2);
    CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);
    struct mallinfo2 m0 = mallinfo2();
    for (int i = 0; i < 5; i++) CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);
    struct mallinfo2 m1 = mallinfo2();
    CHECKF(m1.uordblks == m0.uordblks && m1.hblkhd == m0.hblkhd, "heap changed: %zu -> %zu bytes in use",
           m0.uordblks, m1.uordblks);

    /* abort between nodes: a status, not a crash */
    abort_calls = 0;
    kt_backend_set_abort_callback(be, abort_now, NULL);
    CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_ABORTED && abort_calls > 0);
    kt_backend_set_abort_callback(be, NULL, NULL);
    CHECK(kt_backend_graph_compute(be, gf) == KT_STATUS_SUCCESS);

    /* an op the filter refuses is not supported; the engine's own limits still apply */
    kt_backend_cpu_set_op_filter(be, no_ops, NULL);
    CHECK(!kt_backend_supports_op(be, y) && !kt_backend_supports_buft(be, kt_cpu_buffer_type()));
    kt_backend_cpu_set_op_filter(be, NULL, NULL);
    CHECK(kt_backend_supports_op(be, y) && kt_backend_supports_buft(be, kt_cpu_buffer_type()));

    kt_gallocr_free(ga);
    kt_free(ctx);
}

int main(void) {
    test_registry();
    test_buffers();
    test_clear_large();
    test_copy();
    test_move();

    struct kt_backend *be = kt_backend_cpu_init();
    CHECK(be != NULL);
    kt_backend_set_n_threads(be, 2);
    test_compute(be);

    /* every op: one allocator for all cases, as a runtime would reuse it */
    struct kt_gallocr *ga = kt_gallocr_new(kt_cpu_buffer_type());
    int n = 0;
    while (run_case(n, be, ga)) n++;
    printf("%d op cases through the backend\n", n);
    for (int op = 1; op < KT_OP_COUNT; op++) CHECKF(covered[op], "no case runs %s", kt_op_name((enum kt_op)op));
    kt_gallocr_free(ga);
    kt_backend_free(be);
    return tu_finish("test_backend");
}
