/*
 * test_cuda.c - the CUDA backend against the CPU: the registry and device
 * buffers (set/get/copy/clear round trips), then every op the CUDA backend
 * claims, each as a graph with random shapes and fresh random inputs (the
 * seed is printed; KILN_TEST_SEED repeats a run), computed by the plain CPU
 * engine and by the CUDA backend over device memory poisoned with NaN, and
 * compared by normalized mean squared error:
 *   - element-wise ops, rows, rope, get_rows, copies into F32/F16: 1e-10 (float rounding);
 *   - mul_mat on every weight type: against the CPU multiplying the weights
 *     dequantized to F32 (so the GPU's own dequantization is what is checked), 1e-9;
 *     decoding on quantized weights multiplies int8 quants of the activations, so
 *     there the CPU's activations go through Q8_0 and back (see act());
 *     more than 16 columns go through cuBLAS with F16 operands: 2e-6 (with
 *     KILN_CUDA_NO_CUBLAS=1, kiln's own F32 tiles: 1e-9);
 *   - fused attention over F16/F32/Q8_0 caches with masks and cell orders: 1e-9;
 *     prompts (32 tokens or more) over F16 caches run on the tensor cores: 2e-6.
 * KILN_TEST_NMSE=1 prints every case's error, to see the margin under each tolerance.
 * Ops the backend refuses must be refused (supports_op) and still run on the
 * CPU through the scheduler (one mixed graph at the end). Without a CUDA build
 * or a GPU the test says why and is skipped (exit 77).
 */
#include <time.h>
#include <unistd.h>

#include "backend-impl.h"
#include "kt-alloc.h"
#include "kt-cpu.h"
#include "testutil.h"

static uint64_t g_seed;
static bool g_cublas; /* the device says prompts go through cuBLAS */

/* Leaves: named "ids<N>" I32 in [0, N); "pos" positions; "mask" F32 with some -inf;
 * "deq:<type>" F32 holding random values quantized to <type> and dequantized (the
 * CPU's stand-in for a quantized weight); else random values in the leaf's type. */
static struct kt_tensor *leaf(struct kt_context *ctx, enum kt_type type, int64_t n0, int64_t n1, int64_t n2,
                              int64_t n3) {
    struct kt_tensor *t = kt_new_tensor_4d(ctx, type, n0, n1, n2, n3);
    kt_set_input(t);
    return t;
}
static struct kt_tensor *f32(struct kt_context *ctx, int64_t n0, int64_t n1, int64_t n2) {
    return leaf(ctx, KT_TYPE_F32, n0, n1, n2, 1);
}
static struct kt_tensor *named(struct kt_tensor *t, const char *name) {
    kt_set_name(t, name);
    return t;
}
static struct kt_tensor *ids(struct kt_context *ctx, int64_t n, int64_t bound) {
    return kt_format_name(leaf(ctx, KT_TYPE_I32, n, 1, 1, 1), "ids%lld", (long long)bound);
}
/* A weight of type `type` for the GPU; for the CPU reference, its dequantized F32. */
static struct kt_tensor *weight(struct kt_context *ctx, bool ref, enum kt_type type, int64_t n0, int64_t n1,
                                int64_t n2) {
    if (!ref) return leaf(ctx, type, n0, n1, n2, 1);
    return kt_format_name(f32(ctx, n0, n1, n2), "deq:%d", (int)type);
}

/* Activations for a product with weights of type wt: decoding (16 columns or fewer) on
 * quantized weights with 16-byte rows goes through int8 dot products on activations
 * quantized like the CPU's Q8_0, so the CPU reference gets them through Q8_0 and back. */
static struct kt_tensor *act(struct kt_context *ctx, bool ref, enum kt_type wt, int64_t K, int64_t n, int64_t n2) {
    struct kt_tensor *t = f32(ctx, K, n, n2);
    const bool int8 = kt_is_quantized(wt) && n <= 16 && kt_row_size(wt, K) % 16 == 0;
    return ref && int8 ? kt_format_name(t, "deq:%d", (int)KT_TYPE_Q8_0) : t;
}

static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) { return lo + (int64_t)(tu_rand_u64(s) % (uint64_t)(hi - lo + 1)); }

static const enum kt_type wtypes[] = {KT_TYPE_F32,  KT_TYPE_F16,  KT_TYPE_Q4_0, KT_TYPE_Q4_1, KT_TYPE_Q5_0,
                                      KT_TYPE_Q5_1, KT_TYPE_Q8_0, KT_TYPE_Q4_K, KT_TYPE_Q5_K, KT_TYPE_Q6_K};
#define N_WTYPES (int)(sizeof wtypes / sizeof wtypes[0])
static const int64_t mm_cols[] = {1, 2, 7, 8, 16, 17, 64, 129};
#define N_MM_COLS (int)(sizeof mm_cols / sizeof mm_cols[0])

/* Case c built in ctx (pctx: persistent tensors, a cache); ref: the CPU's version.
 * Shapes come from s, which the caller seeds the same way for both builds. */
static struct kt_tensor *build_case(int c, struct kt_context *ctx, struct kt_context *pctx, bool ref, uint64_t *s,
                                    char *label, size_t ll) {
    const int64_t n0 = 16 * rnd(s, 1, 12) + rnd(s, 0, 1) * 3, n1 = rnd(s, 1, 9), n2 = rnd(s, 1, 4);
    struct kt_tensor *a, *b;
#define CASE(text, expr)                                    \
    if (c-- == 0) {                                         \
        snprintf(label, ll, "%s [%lld %lld %lld]", text, (long long)n0, (long long)n1, (long long)n2); \
        return (expr);                                      \
    }
    CASE("add", kt_add(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, n1, n2)));
    CASE("add broadcast row", kt_add(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, 1, 1)));
    CASE("sub broadcast", kt_sub(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, n1, 1)));
    CASE("mul broadcast", kt_mul(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, 1, n2)));
    CASE("div", kt_div(ctx, f32(ctx, n0, n1, n2), kt_scale_bias(ctx, kt_sqr(ctx, f32(ctx, n0, n1, n2)), 1.0f, 1.0f)));
    CASE("mul permuted", kt_mul(ctx, kt_permute(ctx, f32(ctx, n0, n1, n2), 0, 2, 1, 3), f32(ctx, n0, 1, 1)));
    CASE("scale", kt_scale_bias(ctx, f32(ctx, n0, n1, n2), -1.5f, 0.25f));
    CASE("sqrt", kt_sqrt(ctx, kt_scale_bias(ctx, kt_sqr(ctx, f32(ctx, n0, n1, n2)), 1.0f, 0.5f)));
    CASE("silu", kt_silu(ctx, f32(ctx, n0, n1, n2)));
    CASE("gelu", kt_gelu(ctx, f32(ctx, n0, n1, n2)));
    CASE("relu", kt_relu(ctx, f32(ctx, n0, n1, n2)));
    CASE("swiglu", kt_swiglu(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, n1, n2)));
    CASE("geglu", kt_geglu(ctx, f32(ctx, n0, n1, n2), f32(ctx, n0, n1, n2)));
    CASE("softcap", kt_softcap(ctx, kt_scale(ctx, f32(ctx, n0, n1, n2), 40.0f), 30.0f));
    CASE("rms_norm", kt_rms_norm(ctx, f32(ctx, n0 * 8, n1, n2), 1e-6f));
    CASE("norm", kt_norm(ctx, f32(ctx, n0, n1, n2), 1e-5f));
    CASE("rms_norm x weight", kt_mul(ctx, kt_rms_norm(ctx, f32(ctx, n0, n1, n2), 1e-5f), f32(ctx, n0, 1, 1)));
    CASE("rms_norm x weight, rows of 4096", kt_mul(ctx, kt_rms_norm(ctx, f32(ctx, 4096, n1, n2), 1e-5f), f32(ctx, 4096, 1, 1)));
    CASE("norm x weight, rows of 320", kt_mul(ctx, kt_norm(ctx, f32(ctx, 320, n1, n2), 1e-5f), f32(ctx, 320, 1, 1)));
    CASE("argmax", kt_argmax(ctx, f32(ctx, n0 * 40, n1, 1)));
    CASE("soft_max", kt_soft_max(ctx, f32(ctx, n0, n1, n2)));
    CASE("soft_max mask scale", kt_soft_max_ext(ctx, f32(ctx, n0, n1, n2), named(f32(ctx, n0, n1, 1), "mask"), 0.3f, 0.0f));
    CASE("rope normal", kt_rope(ctx, f32(ctx, 64, n1, n2), named(leaf(ctx, KT_TYPE_I32, n2, 1, 1, 1), "pos"),
                                (struct kt_rope_params){.n_dims = 64, .mode = KT_ROPE_NORMAL, .freq_base = 10000.0f,
                                                        .freq_scale = 1.0f}));
    CASE("rope neox partial", kt_rope(ctx, f32(ctx, 128, n1, n2), named(leaf(ctx, KT_TYPE_I32, n2, 1, 1, 1), "pos"),
                                      (struct kt_rope_params){.n_dims = 96, .mode = KT_ROPE_NEOX,
                                                              .freq_base = 500000.0f, .freq_scale = 0.5f}));
    CASE("rope freq factors", kt_rope_ext(ctx, f32(ctx, 64, n1, n2), named(leaf(ctx, KT_TYPE_I32, n2, 1, 1, 1), "pos"),
                                          named(leaf(ctx, KT_TYPE_F32, 32, 1, 1, 1), "ff"),
                                          (struct kt_rope_params){.n_dims = 64, .mode = KT_ROPE_NORMAL,
                                                                  .freq_base = 500000.0f, .freq_scale = 1.0f}));
    for (int w = 0; w < N_WTYPES; w++) {
        char text[64];
        snprintf(text, sizeof text, "get_rows %s", kt_type_name(wtypes[w]));
        CASE(text, kt_get_rows(ctx, leaf(ctx, wtypes[w], 256, 10, 1, 1), ids(ctx, n1 + 2, 10)));
    }
    CASE("cpy f32 -> f16", kt_cpy(ctx, f32(ctx, n0, n1, n2), leaf(ctx, KT_TYPE_F16, n0, n1, n2, 1)));
    CASE("cont permuted", kt_cont(ctx, kt_permute(ctx, f32(ctx, n0, n1, n2), 0, 2, 1, 3)));
    CASE("dup f16", kt_dup(ctx, leaf(ctx, KT_TYPE_F16, n0, n1, n2, 1)));
    CASE("cpy into a cache slot", (b = kt_new_tensor_3d(pctx, KT_TYPE_F16, 64, 40, 2),
                                   kt_cpy(ctx, kt_permute(ctx, f32(ctx, 64, 2, n1), 0, 2, 1, 3),
                                          kt_view_3d(ctx, b, 64, n1, 2, b->nb[1], b->nb[2], 5 * b->nb[1]))));
    for (int w = 0; w < N_WTYPES; w++)
        for (int nc = 0; nc < N_MM_COLS; nc++) {
            char text[64];
            snprintf(text, sizeof text, "mul_mat %s x %lld", kt_type_name(wtypes[w]), (long long)mm_cols[nc]);
            const int64_t K = 256 * rnd(s, 1, 3), M = rnd(s, 1, 80);
            CASE(text, kt_mul_mat(ctx, weight(ctx, ref, wtypes[w], K, M, 1), act(ctx, ref, wtypes[w], K, mm_cols[nc], 1)));
        }
    CASE("mul_mat broadcast", kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q8_0, 64, 24, 2), act(ctx, ref, KT_TYPE_Q8_0, 64, 5, 4)));
    CASE("mul_mat row view", (a = weight(ctx, ref, KT_TYPE_Q4_0, 256, 48, 1),
                              kt_mul_mat(ctx, kt_view_2d(ctx, a, 256, 16, a->nb[1], 16 * a->nb[1]),
                                         act(ctx, ref, KT_TYPE_Q4_0, 256, 3, 1))));
    /* rows of 54 bytes: not whole 16-byte vectors, so decoding dequantizes to float */
    CASE("mul_mat q4_0 rows of 96", kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q4_0, 96, 33, 1), f32(ctx, 96, 2, 1)));
    CASE("mul_mat q6_k rows of 4096 x 3", kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q6_K, 4096, 20, 1),
                                                     act(ctx, ref, KT_TYPE_Q6_K, 4096, 3, 1)));
    /* the second product takes the first one's int8 quants of the shared input */
    CASE("mul_mat q4_0 + q4_k on one input", (b = act(ctx, ref, KT_TYPE_Q4_0, 512, 3, 1),
                                              kt_add(ctx, kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q4_0, 512, 40, 1), b),
                                                     kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q4_K, 512, 40, 1), b))));
    CASE("mul_mat q4_0 rows of 5120", kt_mul_mat(ctx, weight(ctx, ref, KT_TYPE_Q4_0, 5120, 40, 1),
                                                 act(ctx, ref, KT_TYPE_Q4_0, 5120, 1, 1)));
    static const enum kt_type cache_types[] = {KT_TYPE_F16, KT_TYPE_F32, KT_TYPE_Q8_0};
    for (int ct = 0; ct < 3; ct++)
        for (int ordered = 0; ordered < 2; ordered++) {
            char text[64];
            const int64_t D = ct == 1 ? 128 : 64, T = rnd(s, 1, 7), n_kv = rnd(s, 1, 300), Hkv = rnd(s, 1, 2);
            const int64_t H = Hkv * rnd(s, 1, 4);
            snprintf(text, sizeof text, "attn %s%s T=%lld n_kv=%lld H=%lld/%lld", kt_type_name(cache_types[ct]),
                     ordered ? " ordered" : "", (long long)T, (long long)n_kv, (long long)H, (long long)Hkv);
            CASE(text, kt_attn_ext(ctx, f32(ctx, D, H, T), leaf(ctx, cache_types[ct], D, n_kv, Hkv, 1),
                                   leaf(ctx, cache_types[ct], D, n_kv, Hkv, 1), named(f32(ctx, n_kv, T, 1), "mask"),
                                   ordered ? ids(ctx, n_kv, n_kv + 3) : NULL, 0.125f));
        }
    CASE("attn f16 D=128 T=2 H=8/2 ordered", kt_attn_ext(ctx, f32(ctx, 128, 8, 2), leaf(ctx, KT_TYPE_F16, 128, 333, 2, 1),
                                                       leaf(ctx, KT_TYPE_F16, 128, 333, 2, 1),
                                                       named(f32(ctx, 333, 2, 1), "mask"), ids(ctx, 333, 340), 0.09f));
    CASE("attn prompt f16 T=80 H=8/2", kt_attn_ext(ctx, f32(ctx, 64, 8, 80), leaf(ctx, KT_TYPE_F16, 64, 150, 2, 1),
                                                  leaf(ctx, KT_TYPE_F16, 64, 150, 2, 1),
                                                  named(f32(ctx, 150, 80, 1), "mask"), ids(ctx, 150, 150), 0.125f));
    CASE("attn prompt f16 D=128 T=100 H=8/8", kt_attn_ext(ctx, f32(ctx, 128, 8, 100), leaf(ctx, KT_TYPE_F16, 128, 230, 8, 1),
                                                        leaf(ctx, KT_TYPE_F16, 128, 230, 8, 1),
                                                        named(f32(ctx, 230, 100, 1), "mask"), NULL, 0.09f));
    CASE("attn prompt f16 no mask T=33 H=4/1", kt_attn_ext(ctx, f32(ctx, 64, 4, 33), leaf(ctx, KT_TYPE_F16, 64, 70, 1, 1),
                                                         leaf(ctx, KT_TYPE_F16, 64, 70, 1, 1), NULL,
                                                         ids(ctx, 70, 75), 0.125f));
#undef CASE
    return NULL;
}

/* This test's named leaves (see leaf()): positions, a mask with -inf, frequency factors,
 * and "deq:" weights, the random values through their type's blocks and back. */
static bool cuda_leaf(const struct kt_tensor *t, const float *v, uint64_t *s, void *raw) {
    const int64_t n = kt_nelements(t);
    int qt;
    if (t->type == KT_TYPE_I32 && !strcmp(t->name, "pos")) {
        for (int64_t i = 0; i < n; i++) ((int32_t *)raw)[i] = (int32_t)(tu_rand_u64(s) % 5000);
    } else if (!strcmp(t->name, "mask")) {
        for (int64_t i = 0; i < n; i++) ((float *)raw)[i] = tu_rand_u64(s) % 4 == 0 ? -INFINITY : v[i];
    } else if (!strcmp(t->name, "ff")) {
        for (int64_t i = 0; i < n; i++) ((float *)raw)[i] = 1.0f + 4.0f * fabsf(v[i]);
    } else if (sscanf(t->name, "deq:%d", &qt) == 1) {
        const enum kt_type q = (enum kt_type)qt;
        const size_t rb = kt_row_size(q, t->ne[0]);
        void *qb = malloc(rb * (size_t)kt_nrows(t));
        tu_encode(q, v, qb, kt_nrows(t), t->ne[0]);
        for (int64_t r = 0; r < kt_nrows(t); r++)
            kt_get_type_traits(q)->to_float((const char *)qb + r * rb, (float *)raw + r * t->ne[0], t->ne[0]);
        free(qb);
    } else {
        return false;
    }
    return true;
}

static void fill(struct kt_tensor *t, uint64_t seed) { tu_fill(t, seed, cuda_leaf); }

static void fill_graph(struct kt_cgraph *gf, struct kt_context *pctx) {
    for (int i = 0; i < gf->n_leafs; i++) fill(gf->leafs[i], g_seed * 7919 + 1000 + (uint64_t)i);
    int k = 0;
    for (struct kt_tensor *t = kt_get_first_tensor(pctx); t; t = kt_get_next_tensor(pctx, t), k++)
        if (!t->view_src) fill(t, g_seed * 7919 + 5000 + (uint64_t)k);
}

/* t's elements as floats in index order (any type with to_float, I32 as values). */
static float *as_floats(const struct kt_tensor *t) {
    const int64_t n = kt_nelements(t);
    float *out = malloc((size_t)n * sizeof *out);
    const size_t rb = kt_row_size(t->type, t->ne[0]);
    uint8_t *row = malloc(rb);
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++, k += t->ne[0]) {
                const size_t off = i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (t->nb[0] == kt_type_size(t->type) || kt_is_quantized(t->type)) {
                    kt_tensor_get(t, row, off, rb);
                } else {
                    const size_t ts = kt_type_size(t->type);
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) kt_tensor_get(t, row + i0 * ts, off + i0 * t->nb[0], ts);
                }
                if (t->type == KT_TYPE_I32)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) out[k + i0] = (float)((int32_t *)row)[i0];
                else if (t->type == KT_TYPE_F32)
                    memcpy(out + k, row, rb);
                else
                    kt_get_type_traits(t->type)->to_float(row, out + k, t->ne[0]);
            }
    free(row);
    return out;
}

/* For a cpy, what changed is the destination's whole tensor. */
static const struct kt_tensor *result_of(const struct kt_tensor *r) {
    if (r->op != KT_OP_CPY) return r;
    return r->src[1]->view_src ? r->src[1]->view_src : r->src[1];
}

static int n_ops_run;

/* Case c: plain CPU engine vs the CUDA backend; false past the last case. */
static bool run_case(int c, struct kt_backend *gpu) {
    char label[160] = "";
    uint64_t s0 = g_seed * 31 + (uint64_t)c, s = s0;
    struct kt_context *c0 = kt_init((struct kt_init_params){.mem_size = 64 << 20});
    struct kt_context *p0 = kt_init((struct kt_init_params){.mem_size = 1 << 20});
    struct kt_tensor *r0 = build_case(c, c0, p0, true, &s, label, sizeof label);
    if (!label[0]) {
        kt_free(c0);
        kt_free(p0);
        return false;
    }
    s = s0;
    struct kt_context *c1 = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_context *p1 = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_tensor *r1 = build_case(c, c1, p1, false, &s, label, sizeof label);
    CHECKF(r0 && r1, "%s: %s", label, kt_last_error());
    struct kt_buffer *gbuf = NULL, *pbuf = NULL;
    if (r0 && r1) {
        struct kt_cgraph *g0 = kt_new_graph(c0), *g1 = kt_new_graph(c1);
        kt_build_forward_expand(g0, r0);
        kt_build_forward_expand(g1, r1);
        for (int i = 0; i < g1->n_nodes; i++)
            CHECKF(kt_backend_supports_op(gpu, g1->nodes[i]), "%s: CUDA refuses %s", label,
                   kt_op_name(g1->nodes[i]->op));
        fill_graph(g0, p0);
        CHECKF(kt_graph_compute_with_ctx(c0, g0, 2) == KT_STATUS_SUCCESS, "%s: %s", label, kt_last_error());

        struct kt_buffer_type *bt = kt_backend_get_default_buffer_type(gpu);
        /* the cache first: views of it in c1 take their addresses from it */
        if (kt_get_first_tensor(p1)) pbuf = kt_backend_alloc_ctx_tensors(p1, bt);
        gbuf = kt_backend_alloc_ctx_tensors(c1, bt);
        CHECKF(gbuf != NULL, "%s: %s", label, kt_last_error());
        if (gbuf) {
            kt_buffer_clear(gbuf, 0xFF); /* NaN everywhere: an element nobody writes fails */
            fill_graph(g1, p1);
            CHECKF(kt_backend_graph_compute(gpu, g1) == KT_STATUS_SUCCESS, "%s: %s", label, kt_last_error());
            const struct kt_tensor *w0 = result_of(r0), *w1 = result_of(r1);
            float *v0 = as_floats(w0), *v1 = as_floats(w1);
            const int64_t n = kt_nelements(w0);
            const double e = tu_nmse(v1, v0, n);
            double tol = r0->op == KT_OP_MUL_MAT || r0->op == KT_OP_ATTN ? 1e-9 : 1e-10;
            /* more than 16 columns go through cuBLAS with F16 operands (each rounded to 11 bits) */
            if (r0->op == KT_OP_MUL_MAT && r0->src[1]->ne[1] > 16 && g_cublas) tol = 2e-6;
            /* prompts' attention over F16 caches (32 tokens or more) runs on the tensor cores
             * with the queries and probabilities rounded to F16 */
            if (r0->op == KT_OP_ATTN && r0->src[0]->ne[2] >= 32 && r0->src[1]->type == KT_TYPE_F16) tol = 2e-6;
            if (getenv("KILN_TEST_NMSE")) fprintf(stderr, "%s: nmse %.3g\n", label, e);
            CHECKF(e <= tol, "%s: nmse %.3g > %.1g", label, e, tol);
            if (!(e <= tol)) {
                tu_close(label, v1, v0, n, 1e-4, 1e-3);
                for (int64_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %lld:%g/%g", (long long)i, v1[i], v0[i]);
                fputc('\n', stderr);
            }
            free(v0);
            free(v1);
            n_ops_run++;
        }
    }
    kt_buffer_free(gbuf);
    kt_buffer_free(pbuf);
    kt_free(c0);
    kt_free(p0);
    kt_free(c1);
    kt_free(p1);
    return true;
}

static void test_device(struct kt_device *d, struct kt_backend *gpu) {
    CHECK(kt_dev_type(d) == KT_DEVICE_TYPE_GPU && !strcmp(kt_dev_name(d), "CUDA0"));
    CHECK(kt_dev_by_name("CUDA0") == d && kt_dev_by_type(KT_DEVICE_TYPE_CPU) != NULL);
    CHECK(kt_dev_unavailable(KT_DEVICE_TYPE_GPU) == NULL);
    size_t fr = 0, tot = 0;
    kt_dev_memory(d, &fr, &tot);
    CHECK(tot > ((size_t)1 << 30) && fr <= tot);
    struct kt_buffer_type *bt = kt_dev_buffer_type(d);
    CHECK(!kt_buft_is_host(bt) && kt_buft_device(bt) == d && kt_backend_supports_buft(gpu, bt));
    CHECK(!kt_backend_supports_buft(gpu, kt_cpu_buffer_type()));

    /* set/get, clear, copies host <-> device <-> device, strided copy into device memory */
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
    struct kt_tensor *a = kt_new_tensor_2d(ctx, KT_TYPE_F32, 1000, 3);
    struct kt_tensor *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, 1000, 3);
    struct kt_buffer *buf = kt_backend_alloc_ctx_tensors(ctx, bt);
    CHECK(buf && !kt_buffer_is_host(buf) && kt_buffer_size(buf) >= 2 * 12000);
    float v[3000], w[3000];
    for (int i = 0; i < 3000; i++) v[i] = (float)i * 0.5f;
    kt_tensor_set(a, v, 0, sizeof v);
    kt_tensor_get(a, w, 0, sizeof w);
    CHECK(!memcmp(v, w, sizeof v));
    CHECK(kt_tensor_copy(a, b));
    memset(w, 0, sizeof w);
    kt_tensor_get(b, w, 4000, 8000);
    CHECK(!memcmp(v + 1000, w, 8000));
    kt_buffer_clear(buf, 0);
    kt_tensor_get(a, w, 0, sizeof w);
    CHECK(w[0] == 0.0f && w[2999] == 0.0f);
    struct kt_context *hc = kt_init((struct kt_init_params){.mem_size = 1 << 16});
    struct kt_tensor *h = kt_new_tensor_2d(hc, KT_TYPE_F32, 1000, 3);
    memcpy(h->data, v, sizeof v);
    CHECK(kt_tensor_copy(h, a)); /* host -> device */
    struct kt_tensor *h2 = kt_new_tensor_2d(hc, KT_TYPE_F32, 1000, 3);
    CHECK(kt_tensor_copy(a, h2)); /* device -> host */
    CHECK(!memcmp(h2->data, v, sizeof v));
    kt_buffer_free(buf);
    kt_free(ctx);
    kt_free(hc);

    /* an impossible allocation is an error with a message, not a crash */
    struct kt_buffer *huge = kt_buft_alloc_buffer(bt, (size_t)1 << 50);
    CHECK(huge == NULL && strstr(kt_last_error(), "CUDA0") != NULL);
}

/* A graph with an op CUDA refuses (concat) between ops it runs: the scheduler splits it,
 * copies across, and the result equals the CPU's. */
static void test_mixed(struct kt_backend *gpu, struct kt_backend *cpu) {
    CHECK(!kt_backend_supports_op(gpu, &(struct kt_tensor){.op = KT_OP_CONCAT}));
    { /* writes into Q8_0 are refused (see backend_cuda.cu) */
        struct kt_context *qc = kt_init((struct kt_init_params){.mem_size = 1 << 16, .no_alloc = true});
        struct kt_tensor *q8 = kt_cpy(qc, f32(qc, 64, 2, 1), kt_new_tensor_2d(qc, KT_TYPE_Q8_0, 64, 2));
        CHECK(!kt_backend_supports_op(gpu, q8));
        /* soft-capped attention scores (Gemma 2) are refused: no CUDA kernel caps them */
        struct kt_tensor *capped = kt_attn_ext_softcap(qc, f32(qc, 64, 4, 2), kt_new_tensor_3d(qc, KT_TYPE_F16, 64, 8, 2),
                                                       kt_new_tensor_3d(qc, KT_TYPE_F16, 64, 8, 2), NULL, NULL, 0.125f, 50.0f);
        CHECK(capped && !kt_backend_supports_op(gpu, capped));
        kt_free(qc);
    }
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1 << 20, .no_alloc = true});
    struct kt_context *rc = kt_init((struct kt_init_params){.mem_size = 1 << 20});
    struct kt_tensor *r[2];
    struct kt_tensor *x[2][2];
    for (int k = 0; k < 2; k++) {
        struct kt_context *cc = k ? ctx : rc;
        x[k][0] = f32(cc, 64, 5, 1);
        x[k][1] = f32(cc, 64, 3, 1);
        struct kt_tensor *y = kt_concat(cc, kt_silu(cc, x[k][0]), kt_rms_norm(cc, x[k][1], 1e-5f), 1);
        r[k] = kt_scale(cc, kt_mul_mat(cc, f32(cc, 64, 20, 1), y), 2.0f);
        kt_set_output(r[k]);
    }
    struct kt_cgraph *g0 = kt_new_graph(rc), *g1 = kt_new_graph(ctx);
    kt_build_forward_expand(g0, r[0]);
    kt_build_forward_expand(g1, r[1]);
    for (int i = 0; i < g0->n_leafs; i++) fill(g0->leafs[i], 77 + (uint64_t)i);
    CHECK(kt_graph_compute_with_ctx(rc, g0, 1) == KT_STATUS_SUCCESS);
    struct kt_backend *bes[2] = {gpu, cpu};
    struct kt_sched *sch = kt_sched_new(bes, 2, 256);
    CHECK(sch && kt_sched_alloc_graph(sch, g1));
    for (int i = 0; i < g1->n_leafs; i++) fill(g1->leafs[i], 77 + (uint64_t)i);
    CHECK(kt_sched_graph_compute(sch, g1) == KT_STATUS_SUCCESS);
    CHECK(kt_sched_get_n_splits(sch) >= 2);
    float *v0 = as_floats(r[0]), *v1 = as_floats(r[1]);
    const double e = tu_nmse(v1, v0, kt_nelements(r[0]));
    CHECKF(e <= 1e-10, "mixed graph: nmse %.3g", e);
    free(v0);
    free(v1);
    kt_sched_free(sch);
    kt_free(ctx);
    kt_free(rc);
}

int main(void) {
    const char *why = kt_dev_unavailable(KT_DEVICE_TYPE_GPU);
    if (why) {
        printf("SKIP test_cuda: %s\n", why);
        return 77;
    }
    const char *env = getenv("KILN_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_cuda: seed %llu (KILN_TEST_SEED repeats it)\n", (unsigned long long)g_seed);
    struct kt_device *d = kt_dev_by_type(KT_DEVICE_TYPE_GPU);
    printf("test_cuda: %s: %s\n", kt_dev_name(d), kt_dev_description(d));
    g_cublas = strstr(kt_dev_description(d), "cuBLAS,") != NULL;
    /* cuBLAS where the toolkit has it: a silent fallback would leave its path untested */
    if (getenv("KILN_CUDA_NO_CUBLAS"))
        CHECK(!g_cublas);
    else if (access("/usr/local/cuda/lib64/libcublas.so.13", R_OK) == 0)
        CHECKF(g_cublas, "prompts: %s", kt_dev_description(d));
    struct kt_backend *gpu = kt_dev_init_backend(d), *cpu = kt_backend_cpu_init();
    CHECK(gpu && cpu);
    if (!gpu || !cpu) return tu_finish("test_cuda");
    test_device(d, gpu);
    for (int c = 0; run_case(c, gpu); c++) {
    }
    printf("test_cuda: %d op cases compared with the CPU\n", n_ops_run);
    CHECK(n_ops_run > 100);
    test_mixed(gpu, cpu);
    kt_backend_free(gpu);
    kt_backend_free(cpu);
    return tu_finish("test_cuda");
}
