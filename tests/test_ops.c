/*
 * test_ops.c - every CPU op but mul_mat against a naive double-precision
 * reference written here, on random shapes (1-4 dims, odd sizes), contiguous,
 * permuted, transposed and strided inputs, with broadcasting; quantized copies
 * and get_rows against the type table's reference quantizer/dequantizer; the
 * same bits for 1, 2 and 4 threads; constructors and a full arena failing with
 * a message instead of a crash.
 */
#include "kt.h"
#include "kt-cpu.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static const char *pass_name = "default ISA"; /* which kernels: the CPU's best, or KT_CPU_ISA=ref */
static struct kt_threadpool *pool;             /* 4 threads, shared by every run_check */
static int64_t rnd(int64_t n) { return (int64_t)(tu_rand_u64(&rng) % (uint64_t)n); }
static float rndf(void) { return tu_rand_f(&rng); }

/* ------------------------------------------------------------------ element access (independent of kernels) */

static char *eptr(const struct kt_tensor *t, const int64_t *i) {
    return (char *)t->data + i[0] * t->nb[0] + i[1] * t->nb[1] + i[2] * t->nb[2] + i[3] * t->nb[3];
}

static double tget(const struct kt_tensor *t, const int64_t *i) {
    const char *p = eptr(t, i);
    switch (t->type) {
    case KT_TYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case KT_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return kt_fp16_to_fp32(h); }
    case KT_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return kt_bf16_to_fp32(h); }
    case KT_TYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: return NAN;
    }
}

static void tset(struct kt_tensor *t, const int64_t *i, double v) {
    char *p = eptr(t, i);
    switch (t->type) {
    case KT_TYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case KT_TYPE_F16: { uint16_t h = kt_fp32_to_fp16((float)v); memcpy(p, &h, 2); break; }
    case KT_TYPE_BF16: { uint16_t h = kt_fp32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case KT_TYPE_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    default: break;
    }
}

/* flat row-major index k (i0 fastest) -> indices over ne */
static void unflat(const int64_t *ne, int64_t k, int64_t *i) {
    for (int d = 0; d < 4; d++) {
        i[d] = k % ne[d];
        k /= ne[d];
    }
}

static int64_t nel(const int64_t *ne) { return ne[0] * ne[1] * ne[2] * ne[3]; }

/* all elements of t in logical order */
static double *read_all(const struct kt_tensor *t) {
    int64_t n = kt_nelements(t), i[4];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) {
        unflat(t->ne, k, i);
        v[k] = tget(t, i);
    }
    return v;
}

/* ------------------------------------------------------------------ inputs in several layouts */

enum layout { L_CONT, L_PERM, L_TRANS, L_PAD, L_COUNT };
static const char *layout_name[L_COUNT] = {"contiguous", "permuted", "transposed", "strided view"};

/* A tensor of logical shape ne whose memory layout is `lay`, filled with uniform [lo, hi). */
static struct kt_tensor *mk(struct kt_context *ctx, enum kt_type type, const int64_t *ne, enum layout lay,
                            double lo, double hi) {
    struct kt_tensor *t = NULL;
    if (lay == L_PERM) {
        int ax[4] = {0, 1, 2, 3};
        for (int k = 3; k > 0; k--) {
            int j = (int)rnd(k + 1), s = ax[k];
            ax[k] = ax[j];
            ax[j] = s;
        }
        struct kt_tensor *b = kt_new_tensor_4d(ctx, type, ne[ax[0]], ne[ax[1]], ne[ax[2]], ne[ax[3]]);
        t = kt_permute(ctx, b, ax[0], ax[1], ax[2], ax[3]);
    } else if (lay == L_TRANS) {
        t = kt_transpose(ctx, kt_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]));
    } else if (lay == L_PAD) {
        struct kt_tensor *b = kt_new_tensor_4d(ctx, type, ne[0] + 3, ne[1] + 1, ne[2], ne[3]);
        if (b) t = kt_view_4d(ctx, b, ne[0], ne[1], ne[2], ne[3], b->nb[1], b->nb[2], b->nb[3], b->nb[1] + b->nb[0]);
    } else {
        t = kt_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
    if (!t) {
        fprintf(stderr, "mk: %s\n", kt_last_error());
        exit(1);
    }
    int64_t i[4];
    for (int64_t k = 0; k < nel(ne); k++) {
        unflat(ne, k, i);
        tset(t, i, lo + (hi - lo) * (rndf() + 1.0) / 2.0);
    }
    return t;
}

static void rand_shape(int64_t *ne, int max_dims, int64_t maxd) {
    int nd = 1 + (int)rnd(max_dims);
    for (int d = 0; d < 4; d++) ne[d] = d < nd ? 1 + rnd(maxd) : 1;
}

static struct kt_context *new_ctx(void) {
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 64u << 20});
    if (!ctx) {
        fprintf(stderr, "kt_init: %s\n", kt_last_error());
        exit(1);
    }
    return ctx;
}

/* ------------------------------------------------------------------ compute and compare */

static bool close_d(const char *label, const double *got, const double *want, int64_t n, double atol, double rtol) {
    for (int64_t k = 0; k < n; k++) {
        double g = got[k], w = want[k];
        bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) {
            fprintf(stderr, "%s [%s]: element %lld: got %.9g want %.9g (atol %g rtol %g)\n", label, pass_name,
                    (long long)k, g, w, atol, rtol);
            return false;
        }
    }
    return true;
}

/*
 * Computes out's graph with 1, 2 and 4 threads of one persistent pool (output
 * memory poisoned before each run), checks the three results are bit-identical, and, when want is
 * given, compares the values with it. The 4-thread result stays in out.
 */
static bool run_check(struct kt_context *ctx, struct kt_tensor *out, const double *want, double atol, double rtol,
                      const char *label) {
    if (!out) {
        fprintf(stderr, "%s: constructor failed: %s\n", label, kt_last_error());
        tu_checks++, tu_failures++;
        return false;
    }
    struct kt_cgraph *gf = kt_new_graph(ctx);
    CHECKF(gf && kt_build_forward_expand(gf, out), "%s: graph: %s", label, kt_last_error());
    if (!gf) return false;
    const size_t nb = kt_nbytes(out);
    unsigned char *first = malloc(nb);
    const int nts[3] = {1, 2, 4};
    bool ok = true;
    for (int k = 0; k < 3 && ok; k++) {
        memset(out->data, 0xA5, nb);
        struct kt_cplan plan = kt_graph_plan(gf, nts[k], pool);
        CHECK(plan.n_threads == nts[k]);
        plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
        enum kt_status st = kt_graph_compute(gf, &plan);
        free(plan.work_data);
        CHECKF(st == KT_STATUS_SUCCESS, "%s: compute with %d threads: %s", label, nts[k], kt_last_error());
        if (st != KT_STATUS_SUCCESS) ok = false;
        else if (k == 0) memcpy(first, out->data, nb);
        else {
            bool same = memcmp(first, out->data, nb) == 0;
            CHECKF(same, "%s: %d threads differ from 1 thread", label, nts[k]);
            ok = same;
        }
    }
    free(first);
    if (ok && want) {
        double *got = read_all(out);
        ok = close_d(label, got, want, kt_nelements(out), atol, rtol);
        tu_checks++;
        if (!ok) tu_failures++;
        free(got);
    }
    return ok;
}

/* ------------------------------------------------------------------ element-wise */

static void test_binary(void) {
    const enum kt_op ops[4] = {KT_OP_ADD, KT_OP_SUB, KT_OP_MUL, KT_OP_DIV};
    for (int c = 0; c < 32; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_op op = ops[c % 4];
        int64_t ne[4], ne1[4];
        rand_shape(ne, 4, 9);
        if (c % 3 == 0) ne[0] = 1 + rnd(50); /* rows past one SIMD vector */
        for (int d = 0; d < 4; d++) {
            /* broadcast: src1's dim is the whole dim, 1, or another divisor */
            int64_t r = rnd(3);
            ne1[d] = r == 0 ? ne[d] : r == 1 ? 1 : (ne[d] % 3 == 0 ? ne[d] / 3 : ne[d]);
        }
        enum layout la = (enum layout)(c % L_COUNT), lb = (enum layout)((c / 4) % L_COUNT);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, la, -2, 2);
        struct kt_tensor *b = mk(ctx, KT_TYPE_F32, ne1, lb, op == KT_OP_DIV ? 0.5 : -2, 2);
        struct kt_tensor *out = op == KT_OP_ADD ? kt_add(ctx, a, b)
                                : op == KT_OP_SUB ? kt_sub(ctx, a, b)
                                : op == KT_OP_MUL ? kt_mul(ctx, a, b)
                                                  : kt_div(ctx, a, b);
        int64_t n = nel(ne), i[4], j[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(ne, k, i);
            for (int d = 0; d < 4; d++) j[d] = i[d] % ne1[d];
            double x = tget(a, i), y = tget(b, j);
            want[k] = op == KT_OP_ADD ? x + y : op == KT_OP_SUB ? x - y : op == KT_OP_MUL ? x * y : x / y;
        }
        char label[160];
        snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] by [%lld,%lld,%lld,%lld] (%s, %s)", kt_op_name(op),
                 (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], (long long)ne1[0],
                 (long long)ne1[1], (long long)ne1[2], (long long)ne1[3], layout_name[la], layout_name[lb]);
        run_check(ctx, out, want, 1e-6, 1e-6, label);
        free(want);
        kt_free(ctx);
    }

    /* in place: the result is written over a (one run: a changes) */
    struct kt_context *ctx = new_ctx();
    int64_t ne[4] = {7, 5, 3, 1}, ne1[4] = {7, 1, 3, 1};
    struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, L_CONT, -1, 1), *b = mk(ctx, KT_TYPE_F32, ne1, L_CONT, -1, 1);
    double *x = read_all(a), *y = read_all(b), want[105];
    int64_t i[4];
    for (int64_t k = 0; k < 105; k++) {
        unflat(ne, k, i);
        want[k] = x[k] * y[i[0] + 7 * i[2]];
    }
    struct kt_tensor *out = kt_mul_inplace(ctx, a, b);
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, out);
    CHECK(out && out->data == a->data);
    CHECK(kt_graph_compute_with_ctx(ctx, gf, 2) == KT_STATUS_SUCCESS);
    double *got = read_all(a);
    CHECK(close_d("mul_inplace", got, want, 105, 1e-6, 1e-6));
    free(x), free(y), free(got);
    kt_free(ctx);
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }
static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_unary(void) {
    const enum kt_op ops[7] = {KT_OP_SCALE, KT_OP_SQR, KT_OP_SQRT, KT_OP_SILU, KT_OP_GELU, KT_OP_RELU, KT_OP_SWIGLU};
    for (int c = 0; c < 28; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_op op = ops[c % 7];
        enum layout lay = (enum layout)((c / 7) % L_COUNT);
        int64_t ne[4];
        rand_shape(ne, 4, 11);
        if (c % 2) ne[0] = 1 + rnd(70); /* rows past one SIMD vector */
        const double range = c >= 21 ? 40 : 6; /* the last rows reach exp's overflow side */
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, op == KT_OP_SQRT ? 0 : -range, range);
        struct kt_tensor *b = op == KT_OP_SWIGLU ? mk(ctx, KT_TYPE_F32, ne, (enum layout)(c % L_COUNT), -3, 3) : NULL;
        const float s = 0.75f + (float)rnd(4), bias = -0.5f;
        struct kt_tensor *out = op == KT_OP_SCALE  ? kt_scale_bias(ctx, a, s, bias)
                                : op == KT_OP_SQR  ? kt_sqr(ctx, a)
                                : op == KT_OP_SQRT ? kt_sqrt(ctx, a)
                                : op == KT_OP_SILU ? kt_silu(ctx, a)
                                : op == KT_OP_GELU ? kt_gelu(ctx, a)
                                : op == KT_OP_RELU ? kt_relu(ctx, a)
                                                   : kt_swiglu(ctx, a, b);
        int64_t n = nel(ne), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(ne, k, i);
            double x = tget(a, i);
            want[k] = op == KT_OP_SCALE  ? x * s + bias
                      : op == KT_OP_SQR  ? x * x
                      : op == KT_OP_SQRT ? sqrt(x)
                      : op == KT_OP_SILU ? silu_d(x)
                      : op == KT_OP_GELU ? gelu_d(x)
                      : op == KT_OP_RELU ? (x > 0 ? x : 0)
                                         : silu_d(x) * tget(b, i);
        }
        char label[128];
        snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] (%s)", kt_op_name(op), (long long)ne[0],
                 (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_name[lay]);
        run_check(ctx, out, want, 1e-6, 2e-6, label);
        free(want);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ reductions */

static void test_rows(void) {
    const enum kt_op ops[4] = {KT_OP_NORM, KT_OP_RMS_NORM, KT_OP_SUM_ROWS, KT_OP_MEAN};
    for (int c = 0; c < 24; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_op op = ops[c % 4];
        enum layout lay = (enum layout)((c / 4) % L_COUNT);
        int64_t ne[4];
        rand_shape(ne, 4, 7);
        ne[0] = 1 + rnd(300);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -3, 5);
        const float eps = c % 3 == 0 ? 1e-5f : 1e-6f;
        struct kt_tensor *out = op == KT_OP_NORM       ? kt_norm(ctx, a, eps)
                                : op == KT_OP_RMS_NORM ? kt_rms_norm(ctx, a, eps)
                                : op == KT_OP_SUM_ROWS ? kt_sum_rows(ctx, a)
                                                       : kt_mean(ctx, a);
        const bool reduce = op == KT_OP_SUM_ROWS || op == KT_OP_MEAN;
        int64_t nr = ne[1] * ne[2] * ne[3], n = reduce ? nr : nel(ne), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t r = 0; r < nr; r++) {
            double s = 0, s2 = 0, v = 0;
            for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                unflat(ne, r * ne[0] + i0, i);
                double x = tget(a, i);
                s += x, s2 += x * x;
            }
            double mean = s / ne[0];
            for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                unflat(ne, r * ne[0] + i0, i);
                v += (tget(a, i) - mean) * (tget(a, i) - mean);
            }
            if (reduce) {
                want[r] = op == KT_OP_SUM_ROWS ? s : mean;
                continue;
            }
            for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                unflat(ne, r * ne[0] + i0, i);
                double x = tget(a, i);
                want[r * ne[0] + i0] = op == KT_OP_NORM ? (x - mean) / sqrt(v / ne[0] + eps)
                                                        : x / sqrt(s2 / ne[0] + eps);
            }
        }
        char label[128];
        snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] (%s)", kt_op_name(op), (long long)ne[0],
                 (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_name[lay]);
        /* norm divides by a small spread when a row is short: an absolute slack for that */
        run_check(ctx, out, want, op == KT_OP_NORM ? 2e-4 : 1e-5, 1e-5, label);
        free(want);
        kt_free(ctx);
    }
}

static void test_argmax(void) {
    for (int c = 0; c < 8; c++) {
        struct kt_context *ctx = new_ctx();
        int64_t ne[4] = {1 + rnd(200), 1 + rnd(9), 1, 1};
        enum layout lay = (enum layout)(c % L_COUNT);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -1, 1);
        double *want = malloc((size_t)ne[1] * sizeof *want);
        for (int64_t r = 0; r < ne[1]; r++) {
            /* a tie: the first of two equal maxima wins */
            int64_t at = rnd(ne[0]), i[4] = {at, r, 0, 0};
            tset(a, i, 3.0);
            if (at + 2 < ne[0]) i[0] = at + 2, tset(a, i, 3.0);
            want[r] = (double)at;
        }
        char label[64];
        snprintf(label, sizeof label, "ARGMAX [%lld,%lld] (%s)", (long long)ne[0], (long long)ne[1], layout_name[lay]);
        struct kt_tensor *out = kt_argmax(ctx, a);
        CHECK(!out || out->type == KT_TYPE_I32);
        run_check(ctx, out, want, 0, 0, label);
        free(want);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ rope */

static void test_rope(void) {
    for (int c = 0; c < 24; c++) {
        struct kt_context *ctx = new_ctx();
        const int64_t heads[4] = {8, 18, 64, 128};
        int64_t d = c == 16 ? 1040 : heads[c % 4]; /* one head past the kernel's angle cache */
        int64_t ne[4] = {d, 1 + rnd(5), 1 + rnd(6), 1};
        struct kt_rope_params rp = {
            .n_dims = (int32_t)((c / 4) % 3 == 2 ? d / 2 - (d / 2) % 2 : d), /* partial rotary every third */
            .mode = (c / 4) % 2 ? KT_ROPE_NEOX : KT_ROPE_NORMAL,
            .freq_base = c % 3 == 0 ? 500000.0f : 10000.0f,
            .freq_scale = c % 5 == 0 ? 0.25f : 1.0f,
        };
        if (rp.n_dims == 0) rp.n_dims = 2;
        enum layout lay = (enum layout)(c % L_COUNT);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -1, 1);
        struct kt_tensor *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, ne[2]);
        /* small positions first: tight tolerance; then long contexts where float angles drift */
        const int64_t maxpos = c < 12 ? 16 : 1024;
        int32_t *pp = pos->data;
        for (int64_t t = 0; t < ne[2]; t++) pp[t] = (int32_t)rnd(maxpos);
        struct kt_tensor *out = kt_rope(ctx, a, pos, rp);

        int64_t n = nel(ne), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        const int64_t half = rp.n_dims / 2;
        for (int64_t k = 0; k < n; k++) {
            unflat(ne, k, i);
            int64_t i0 = i[0];
            if (i0 >= rp.n_dims) {
                want[k] = tget(a, i);
                continue;
            }
            /* pair p holds elements (e0, e1); this element is its first or second */
            int64_t p, e0, e1;
            if (rp.mode == KT_ROPE_NEOX) p = i0 % half, e0 = p, e1 = p + half;
            else p = i0 / 2, e0 = 2 * p, e1 = 2 * p + 1;
            double theta = pp[i[2]] * (double)rp.freq_scale * pow(rp.freq_base, -2.0 * p / rp.n_dims);
            int64_t j0[4] = {e0, i[1], i[2], i[3]}, j1[4] = {e1, i[1], i[2], i[3]};
            double x0 = tget(a, j0), x1 = tget(a, j1);
            want[k] = i0 == e0 ? x0 * cos(theta) - x1 * sin(theta) : x0 * sin(theta) + x1 * cos(theta);
        }
        char label[160];
        snprintf(label, sizeof label, "ROPE %s d=%lld n_dims=%d base=%g scale=%g pos<%lld (%s)",
                 rp.mode == KT_ROPE_NEOX ? "neox" : "normal", (long long)d, rp.n_dims, rp.freq_base, rp.freq_scale,
                 (long long)maxpos, layout_name[lay]);
        run_check(ctx, out, want, maxpos <= 16 ? 2e-6 : 2e-3, 1e-5, label);
        free(want);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ soft_max, diag_mask_inf */

static double alibi_slope_d(double max_bias, int64_t n_head, int64_t h) {
    if (max_bias <= 0) return 1.0;
    int64_t l = 1;
    while (l * 2 <= n_head) l *= 2;
    return h < l ? pow(2.0, -max_bias / l * (h + 1)) : pow(2.0, -max_bias / 2 / l * (2 * (h - l) + 1));
}

static void test_soft_max(void) {
    for (int c = 0; c < 24; c++) {
        struct kt_context *ctx = new_ctx();
        int64_t ne[4] = {1 + rnd(70), 1 + rnd(7), 1 + rnd(7), 1 + rnd(2)};
        enum layout lay = (enum layout)(c % L_COUNT);
        const int mk_kind = c % 3; /* none, F32, F16 */
        const float scale = c % 2 ? 0.125f : 1.0f;
        const float max_bias = c % 4 == 3 ? 8.0f : 0.0f;
        /* some rows with logits far apart: exp overflows unless the true maximum is subtracted */
        const double range = c % 8 == 4 ? 300 : 4;
        if (c % 8 == 4) ne[0] = 40 + rnd(30);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -range, range);
        struct kt_tensor *mask = NULL;
        if (mk_kind) {
            int64_t mne[4] = {ne[0], ne[1] + rnd(3), 1, 1};
            mask = mk(ctx, mk_kind == 1 ? KT_TYPE_F32 : KT_TYPE_F16, mne, L_CONT, -2, 2);
            int64_t i[4] = {0, 0, 0, 0};
            for (i[1] = 0; i[1] < mne[1]; i[1]++)
                for (i[0] = 1; i[0] < mne[0]; i[0] += 3) tset(mask, i, -INFINITY); /* element 0 stays finite */
        }
        struct kt_tensor *out = kt_soft_max_ext(ctx, a, mask, scale, max_bias);
        int64_t nr = ne[1] * ne[2] * ne[3], i[4];
        double *want = malloc((size_t)nel(ne) * sizeof *want), *w = malloc((size_t)ne[0] * sizeof *w);
        for (int64_t r = 0; r < nr; r++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                unflat(ne, r * ne[0] + i0, i);
                double v = tget(a, i) * scale;
                if (mask) {
                    int64_t j[4] = {i0, i[1], 0, 0};
                    v += alibi_slope_d(max_bias, ne[2], i[2]) * tget(mask, j);
                }
                w[i0] = v;
                if (v > mx) mx = v;
            }
            for (int64_t i0 = 0; i0 < ne[0]; i0++) sum += exp(w[i0] - mx);
            for (int64_t i0 = 0; i0 < ne[0]; i0++) want[r * ne[0] + i0] = exp(w[i0] - mx) / sum;
        }
        char label[160];
        snprintf(label, sizeof label, "SOFT_MAX [%lld,%lld,%lld,%lld] mask=%s scale=%g max_bias=%g (%s)",
                 (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                 mk_kind == 0 ? "none" : mk_kind == 1 ? "f32" : "f16", scale, max_bias, layout_name[lay]);
        /* logits of a few hundred carry float rounding of |logit| * 2^-24 into the exponent */
        run_check(ctx, out, want, 1e-7, range > 4 ? 1e-4 : 1e-5, label);
        free(want), free(w);
        kt_free(ctx);
    }

    /* causal mask then softmax, one graph; a fully masked row gives zeros, not NaN */
    struct kt_context *ctx = new_ctx();
    for (int c = 0; c < 6; c++) {
        int64_t ne[4] = {1 + rnd(20), 1 + rnd(12), 1 + rnd(3), 1};
        int n_past = (int)rnd(5) - (c == 5 ? 8 : 0);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, (enum layout)(c % L_COUNT), -3, 3);
        struct kt_tensor *m = kt_diag_mask_inf(ctx, a, n_past);
        int64_t n = nel(ne), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(ne, k, i);
            want[k] = i[0] > n_past + i[1] ? -INFINITY : tget(a, i);
        }
        char label[96];
        snprintf(label, sizeof label, "DIAG_MASK_INF [%lld,%lld,%lld] n_past=%d (%s)", (long long)ne[0],
                 (long long)ne[1], (long long)ne[2], n_past, layout_name[c % L_COUNT]);
        run_check(ctx, m, want, 0, 0, label);
        for (int64_t r = 0; r < n / ne[0]; r++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t i0 = 0; i0 < ne[0]; i0++) mx = want[r * ne[0] + i0] > mx ? want[r * ne[0] + i0] : mx;
            for (int64_t i0 = 0; i0 < ne[0]; i0++) sum += mx == -INFINITY ? 0 : exp(want[r * ne[0] + i0] - mx);
            for (int64_t i0 = 0; i0 < ne[0]; i0++)
                want[r * ne[0] + i0] = mx == -INFINITY ? 0 : exp(want[r * ne[0] + i0] - mx) / sum;
        }
        snprintf(label, sizeof label, "SOFT_MAX(DIAG_MASK_INF) n_past=%d", n_past);
        run_check(ctx, kt_soft_max(ctx, m), want, 1e-7, 1e-5, label);
        free(want);
    }
    kt_free(ctx);
}

/* ------------------------------------------------------------------ copies */

/* Expected contents (as floats, in dst's logical order) of src converted to a scalar type. */
static double round_to(enum kt_type t, double x) {
    if (t == KT_TYPE_F16) return kt_fp16_to_fp32(kt_fp32_to_fp16((float)x));
    if (t == KT_TYPE_BF16) return kt_bf16_to_fp32(kt_fp32_to_bf16((float)x));
    return (float)x;
}

static void test_cpy(void) {
    const enum kt_type srcs[3] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_BF16};
    const enum kt_type dsts[5] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_BF16, KT_TYPE_Q8_0, KT_TYPE_Q4_0};
    for (int c = 0; c < 45; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_type ts = srcs[c % 3], td = dsts[(c / 3) % 5];
        enum layout lay = (enum layout)(c % L_COUNT);
        const bool q = kt_is_quantized(td);
        /* src shape; dst holds the same count in another shape (a KV-cache slot) */
        int64_t ne[4];
        rand_shape(ne, 4, 7);
        if (q) ne[0] = 32 * (1 + rnd(3)), ne[1] = 1 + rnd(5);
        const int64_t n = nel(ne);
        struct kt_tensor *a = mk(ctx, ts, ne, lay, -3, 3);
        struct kt_tensor *b;
        if (q) {
            /* rows of whole blocks, in a bigger tensor (a slot of a cache) */
            int64_t rows = n / 64 >= 1 && n % 64 == 0 && c % 2 ? n / 64 : n / 32, k0 = n / rows;
            struct kt_tensor *big = kt_new_tensor_2d(ctx, td, k0, rows + 3);
            b = kt_view_2d(ctx, big, k0, rows, big->nb[1], big->nb[1] * 2);
        } else if (c % 2) {
            struct kt_tensor *big = kt_new_tensor_2d(ctx, td, n + 5, 2);
            b = kt_view_2d(ctx, big, n, 1, big->nb[1], big->nb[1] + 2 * big->nb[0]);
        } else {
            b = kt_new_tensor_4d(ctx, td, ne[3], ne[2], ne[1], ne[0]); /* reversed shape */
        }
        double *x = read_all(a);
        char label[128];
        snprintf(label, sizeof label, "CPY %s -> %s %lld elements (%s)", kt_type_name(ts), kt_type_name(td),
                 (long long)n, layout_name[lay]);
        struct kt_tensor *out = kt_cpy(ctx, a, b);
        if (!q) {
            double *want = malloc((size_t)n * sizeof *want);
            for (int64_t k = 0; k < n; k++) want[k] = round_to(td, x[k]);
            run_check(ctx, out, want, 0, 0, label);
            free(want);
        } else if (run_check(ctx, out, NULL, 0, 0, label)) {
            const struct kt_type_traits *tr = kt_get_type_traits(td);
            const int64_t k0 = b->ne[0], rows = b->ne[1];
            float *xf = malloc((size_t)n * sizeof *xf), *got = malloc((size_t)n * sizeof *got),
                  *ref = malloc((size_t)n * sizeof *ref);
            void *qb = malloc(kt_row_size(td, k0));
            for (int64_t k = 0; k < n; k++) xf[k] = (float)x[k];
            for (int64_t r = 0; r < rows; r++) {
                tr->from_float_ref(xf + r * k0, qb, k0);
                tr->to_float(qb, ref + r * k0, k0);
                tr->to_float((char *)b->data + r * b->nb[1], got + r * k0, k0);
            }
            CHECKF(tu_close(label, got, ref, n, 0, 0), "vs dequant(quant_ref(x))");
            CHECKF(tu_nmse(got, xf, n) < (td == KT_TYPE_Q8_0 ? 1e-4 : 1e-2), "%s: nmse %g", label,
                   tu_nmse(got, xf, n));
            free(xf), free(got), free(ref), free(qb);
        }
        free(x);
        kt_free(ctx);
    }

    /* dup / cont / cont_4d / cast of permuted sources, and dequantizing casts */
    struct kt_context *ctx = new_ctx();
    int64_t ne[4] = {5, 7, 3, 2};
    struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, L_PERM, -1, 1);
    double *x = read_all(a), *h = malloc(210 * sizeof *h);
    for (int k = 0; k < 210; k++) h[k] = round_to(KT_TYPE_F16, x[k]);
    run_check(ctx, kt_dup(ctx, a), x, 0, 0, "DUP permuted f32");
    run_check(ctx, kt_cont(ctx, a), x, 0, 0, "CONT permuted f32");
    struct kt_tensor *c4 = kt_cont_4d(ctx, a, 35, 6, 1, 1);
    run_check(ctx, c4, x, 0, 0, "CONT_4D permuted f32 -> [35,6]");
    CHECK(c4 && c4->ne[0] == 35 && c4->ne[1] == 6 && kt_is_contiguous(c4));
    run_check(ctx, kt_cast(ctx, a, KT_TYPE_F16), h, 0, 0, "CAST permuted f32 -> f16");
    run_check(ctx, kt_cont(ctx, kt_transpose(ctx, kt_cast(ctx, a, KT_TYPE_F16))), NULL, 0, 0, "CONT f16 chain");

    /* reshaping copies of packed rows: runs end at src and dst row ends that do not line up */
    for (int k = 0; k < 4; k++) {
        const enum layout lay = k % 2 ? L_PAD : L_CONT;
        const enum kt_type to = k < 2 ? KT_TYPE_F32 : KT_TYPE_F16;
        struct kt_tensor *s = mk(ctx, KT_TYPE_F32, (int64_t[]){13, 6, 5, 1}, lay, -1, 1);
        double *xs = read_all(s);
        for (int j = 0; j < 390; j++) xs[j] = round_to(to, xs[j]);
        char label[64];
        snprintf(label, sizeof label, "CPY f32 [13,6,5] (%s) -> %s [10,39]", layout_name[lay], kt_type_name(to));
        run_check(ctx, kt_cpy(ctx, s, kt_new_tensor_2d(ctx, to, 10, 39)), xs, 0, 0, label);
        snprintf(label, sizeof label, "CPY f32 [13,6,5] (%s) -> %s [30,13]", layout_name[lay], kt_type_name(to));
        run_check(ctx, kt_cpy(ctx, s, kt_new_tensor_2d(ctx, to, 30, 13)), xs, 0, 0, label);
        free(xs);
    }

    /* packed rows between F32 and F16/BF16 (the row-converter path), both ways */
    struct kt_tensor *ac = mk(ctx, KT_TYPE_F32, ne, L_CONT, -70000, 70000); /* beyond f16's range too */
    double *xc = read_all(ac), *r16 = malloc(210 * sizeof *r16), *rbf = malloc(210 * sizeof *rbf);
    for (int k = 0; k < 210; k++) r16[k] = round_to(KT_TYPE_F16, xc[k]), rbf[k] = round_to(KT_TYPE_BF16, xc[k]);
    struct kt_tensor *c16 = kt_cast(ctx, ac, KT_TYPE_F16), *cbf = kt_cast(ctx, ac, KT_TYPE_BF16);
    run_check(ctx, c16, r16, 0, 0, "CAST contiguous f32 -> f16");
    run_check(ctx, cbf, rbf, 0, 0, "CAST contiguous f32 -> bf16");
    run_check(ctx, kt_cast(ctx, c16, KT_TYPE_F32), r16, 0, 0, "CAST contiguous f16 -> f32");
    run_check(ctx, kt_cast(ctx, cbf, KT_TYPE_F32), rbf, 0, 0, "CAST contiguous bf16 -> f32");
    run_check(ctx, kt_cpy(ctx, c16, kt_new_tensor_4d(ctx, KT_TYPE_BF16, 5, 7, 3, 2)), NULL, 0, 0, "CPY f16 -> bf16");
    free(xc), free(r16), free(rbf);

    const enum kt_type qt[2] = {KT_TYPE_Q8_0, KT_TYPE_Q4_0};
    for (int k = 0; k < 2; k++) {
        const struct kt_type_traits *tr = kt_get_type_traits(qt[k]);
        struct kt_tensor *w = kt_new_tensor_2d(ctx, qt[k], 64, 3);
        float src[192], want_f[192];
        for (int j = 0; j < 192; j++) src[j] = rndf();
        kt_quantize_chunk(qt[k], src, w->data, 3, 64, NULL);
        tr->to_float(w->data, want_f, 192);
        double want[192];
        for (int j = 0; j < 192; j++) want[j] = want_f[j];
        char label[64];
        snprintf(label, sizeof label, "CAST %s -> f32", kt_type_name(qt[k]));
        run_check(ctx, kt_cast(ctx, w, KT_TYPE_F32), want, 0, 0, label);
        struct kt_tensor *wc = kt_cont(ctx, w);
        snprintf(label, sizeof label, "CONT %s", kt_type_name(qt[k]));
        if (run_check(ctx, wc, NULL, 0, 0, label)) CHECK(memcmp(wc->data, w->data, kt_nbytes(w)) == 0);
    }
    free(x), free(h);
    kt_free(ctx);
}

static void test_concat(void) {
    for (int c = 0; c < 16; c++) {
        struct kt_context *ctx = new_ctx();
        int dim = c % 4;
        int64_t ne[4], ne1[4];
        rand_shape(ne, 4, 6);
        memcpy(ne1, ne, sizeof ne);
        ne1[dim] = 1 + rnd(5);
        enum kt_type t = c % 5 == 4 ? KT_TYPE_F16 : KT_TYPE_F32;
        struct kt_tensor *a = mk(ctx, t, ne, (enum layout)(c % L_COUNT), -1, 1);
        struct kt_tensor *b = mk(ctx, t, ne1, (enum layout)((c + 1) % L_COUNT), -1, 1);
        int64_t neo[4];
        memcpy(neo, ne, sizeof ne);
        neo[dim] += ne1[dim];
        int64_t n = nel(neo), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(neo, k, i);
            if (i[dim] < ne[dim]) want[k] = tget(a, i);
            else i[dim] -= ne[dim], want[k] = tget(b, i);
        }
        char label[96];
        snprintf(label, sizeof label, "CONCAT %s dim %d [%lld,%lld,%lld,%lld]", kt_type_name(t), dim,
                 (long long)neo[0], (long long)neo[1], (long long)neo[2], (long long)neo[3]);
        run_check(ctx, kt_concat(ctx, a, b, dim), want, 0, 0, label);
        free(want);
        kt_free(ctx);
    }
}

static void test_get_rows(void) {
    const enum kt_type types[5] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_Q8_0, KT_TYPE_Q4_0, KT_TYPE_Q6_K};
    for (int c = 0; c < 15; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_type t = types[c % 5];
        const struct kt_type_traits *tr = kt_get_type_traits(t);
        int64_t n0 = t == KT_TYPE_Q6_K ? 256 * (1 + rnd(2)) : kt_is_quantized(t) ? 32 * (1 + rnd(4)) : 1 + rnd(40);
        int64_t rows = 1 + rnd(20), a2 = c < 10 ? 1 : 2, a3 = c < 10 ? 1 : 1 + rnd(2), nid = 1 + rnd(9);
        struct kt_tensor *a = kt_new_tensor_4d(ctx, t, n0, rows, a2, a3);
        const int64_t nrows = rows * a2 * a3;
        float *src = malloc((size_t)(n0 * nrows) * sizeof *src);
        for (int64_t k = 0; k < n0 * nrows; k++) src[k] = 2 * rndf();
        if (t == KT_TYPE_F32) memcpy(a->data, src, (size_t)(n0 * nrows) * sizeof *src);
        else kt_quantize_chunk(t, src, a->data, nrows, n0, NULL);
        struct kt_tensor *ids = kt_new_tensor_3d(ctx, KT_TYPE_I32, nid, a2, a3);
        int32_t *id = ids->data;
        for (int64_t k = 0; k < nid * a2 * a3; k++) id[k] = (int32_t)rnd(rows);
        struct kt_tensor *out = kt_get_rows(ctx, a, ids);
        double *want = malloc((size_t)(n0 * nid * a2 * a3) * sizeof *want);
        float *row = malloc((size_t)n0 * sizeof *row);
        for (int64_t k = 0; k < nid * a2 * a3; k++) {
            int64_t j2 = (k / nid) % a2, j3 = k / (nid * a2);
            const char *r = (const char *)a->data + id[k] * a->nb[1] + j2 * a->nb[2] + j3 * a->nb[3];
            if (t == KT_TYPE_F32) memcpy(row, r, (size_t)n0 * sizeof *row);
            else tr->to_float(r, row, n0);
            for (int64_t i0 = 0; i0 < n0; i0++) want[k * n0 + i0] = row[i0];
        }
        char label[96];
        snprintf(label, sizeof label, "GET_ROWS %s [%lld,%lld,%lld,%lld] %lld ids", kt_type_name(t), (long long)n0,
                 (long long)rows, (long long)a2, (long long)a3, (long long)nid);
        run_check(ctx, out, want, 0, 0, label);
        free(src), free(want), free(row);
        kt_free(ctx);
    }

    /* ids are data (token ids): one out of range must not read outside src0 (ASan
     * watches) and gives a row of zeros; the rows around it are unaffected */
    struct kt_context *ctx = new_ctx();
    /* src0 is the first 4 rows of 8: rows 4..7 are readable memory, so reading them shows */
    struct kt_tensor *base = mk(ctx, KT_TYPE_F32, (int64_t[]){6, 8, 1, 1}, L_CONT, 1, 2);
    struct kt_tensor *a = kt_view_2d(ctx, base, 6, 4, base->nb[1], 0);
    struct kt_tensor *ids = kt_new_tensor_1d(ctx, KT_TYPE_I32, 4);
    const int32_t bad[4] = {1, -1, 4, 3};
    memcpy(ids->data, bad, sizeof bad);
    double want[24], *x = read_all(a);
    for (int r = 0; r < 4; r++)
        for (int i0 = 0; i0 < 6; i0++) want[r * 6 + i0] = bad[r] >= 0 && bad[r] < 4 ? x[bad[r] * 6 + i0] : 0.0;
    run_check(ctx, kt_get_rows(ctx, a, ids), want, 0, 0, "GET_ROWS with ids -1 and 4 of 4 rows");
    free(x);
    kt_free(ctx);
}

/* ------------------------------------------------------------------ errors */

#define EXPECT_NULL(expr)                                                                        \
    do {                                                                                         \
        kt_clear_error();                                                                        \
        const void *r_ = (expr);                                                                 \
        CHECKF(r_ == NULL && kt_last_error()[0] != 0, "%s should fail with a message", #expr); \
    } while (0)

static void test_errors(void) {
    struct kt_context *ctx = new_ctx();
    struct kt_tensor *a = kt_new_tensor_2d(ctx, KT_TYPE_F32, 4, 3), *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, 3, 3);
    struct kt_tensor *v = kt_new_tensor_1d(ctx, KT_TYPE_F32, 5), *ids_f = kt_new_tensor_1d(ctx, KT_TYPE_F32, 2);
    struct kt_tensor *h = kt_new_tensor_3d(ctx, KT_TYPE_F32, 8, 2, 3), *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, 2);
    struct kt_rope_params rp = {.n_dims = 8, .mode = KT_ROPE_NORMAL, .freq_base = 10000, .freq_scale = 1};
    EXPECT_NULL(kt_add(ctx, a, b));         /* 4 is not a multiple of 3 */
    EXPECT_NULL(kt_mul(ctx, b, a));
    EXPECT_NULL(kt_div(ctx, v, a));
    EXPECT_NULL(kt_swiglu(ctx, a, b));
    EXPECT_NULL(kt_mul_mat(ctx, a, b));     /* K 4 vs 3 */
    EXPECT_NULL(kt_concat(ctx, a, b, 1));   /* dim 0 differs */
    EXPECT_NULL(kt_concat(ctx, a, a, 4));
    EXPECT_NULL(kt_get_rows(ctx, a, ids_f)); /* ids not I32 */
    EXPECT_NULL(kt_rope(ctx, h, pos, rp));   /* 3 tokens, 2 positions */
    rp.n_dims = 7;
    EXPECT_NULL(kt_rope(ctx, h, kt_new_tensor_1d(ctx, KT_TYPE_I32, 3), rp));
    rp.n_dims = 10;
    EXPECT_NULL(kt_rope(ctx, h, kt_new_tensor_1d(ctx, KT_TYPE_I32, 3), rp));
    EXPECT_NULL(kt_soft_max_ext(ctx, a, kt_new_tensor_2d(ctx, KT_TYPE_F32, 4, 2), 1, 0)); /* mask rows 2 < 3 */
    EXPECT_NULL(kt_soft_max_ext(ctx, a, b, 1, 0));                                        /* mask width */
    EXPECT_NULL(kt_cpy(ctx, a, b));
    EXPECT_NULL(kt_reshape_2d(ctx, a, 5, 2));
    EXPECT_NULL(kt_reshape_1d(ctx, kt_transpose(ctx, a), 12));
    EXPECT_NULL(kt_view_2d(ctx, a, 4, 4, a->nb[1], 0));
    EXPECT_NULL(kt_permute(ctx, a, 0, 0, 1, 2));
    EXPECT_NULL(kt_argmax(ctx, h));
    EXPECT_NULL(kt_cont_4d(ctx, a, 5, 2, 1, 1));
    EXPECT_NULL(kt_new_tensor_1d(ctx, KT_TYPE_Q4_0, 33)); /* not whole blocks */
    /* a NULL operand (an earlier failure) propagates */
    CHECK(kt_add(ctx, NULL, a) == NULL && kt_silu(ctx, NULL) == NULL && kt_cpy(ctx, a, NULL) == NULL);
    kt_free(ctx);

    /* a cpy the CPU cannot do is refused at compute time with a message */
    ctx = new_ctx();
    struct kt_tensor *q = kt_new_tensor_2d(ctx, KT_TYPE_Q8_0, 32, 2);
    struct kt_tensor *f = kt_new_tensor_2d(ctx, KT_TYPE_F32, 16, 4);
    struct kt_tensor *bad = kt_cpy(ctx, q, f); /* quantized rows do not line up with 16-wide rows */
    if (bad) {
        CHECK(!kt_cpu_supports_op(bad));
        struct kt_cgraph *gf = kt_new_graph(ctx);
        kt_build_forward_expand(gf, bad);
        kt_clear_error();
        CHECK(kt_graph_compute_with_ctx(ctx, gf, 2) != KT_STATUS_SUCCESS && kt_last_error()[0]);
    }
    kt_free(ctx);

    /* arena exhaustion: NULL and a message, never a crash */
    struct kt_context *small = kt_init((struct kt_init_params){.mem_size = 4096});
    CHECK(small != NULL);
    if (!small) return;
    struct kt_tensor *x = kt_new_tensor_1d(small, KT_TYPE_F32, 8);
    CHECK(x != NULL);
    EXPECT_NULL(kt_new_tensor_1d(small, KT_TYPE_F32, 100000));
    int made = 0;
    while (made < 10000 && kt_add(small, x, x)) made++;
    CHECKF(made < 10000, "a 4 KiB arena took %d tensors", made);
    EXPECT_NULL(kt_add(small, x, x));
    EXPECT_NULL(kt_new_graph(small));
    EXPECT_NULL(kt_alloc_bytes(small, 1 << 20));
    kt_free(small);

    /* a graph too small for what is expanded into it */
    ctx = new_ctx();
    struct kt_tensor *y = kt_new_tensor_1d(ctx, KT_TYPE_F32, 4);
    for (int k = 0; k < 10; k++) y = kt_sqr(ctx, y);
    struct kt_cgraph *g4 = kt_new_graph_custom(ctx, 4);
    kt_clear_error();
    CHECK(g4 && !kt_build_forward_expand(g4, y) && kt_last_error()[0]);
    kt_free(ctx);
}

int main(void) {
    pool = kt_threadpool_new(4);
    if (!pool) {
        fprintf(stderr, "kt_threadpool_new: %s\n", kt_last_error());
        return 1;
    }
    test_binary();
    test_unary();
    test_rows();
    test_argmax();
    test_rope();
    test_soft_max();
    test_cpy();
    test_concat();
    test_get_rows();
    test_errors();
    /* again with the scalar kernels where SIMD ones exist: both must meet the reference */
    setenv("KT_CPU_ISA", "ref", 1);
    pass_name = "KT_CPU_ISA=ref";
    test_binary();
    test_unary();
    test_rows();
    test_rope();
    test_soft_max();
    kt_threadpool_free(pool);
    return tu_finish("test_ops");
}
