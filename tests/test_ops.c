/*
 * test_ops.c - the arithmetic CPU ops (element-wise, reductions, norms, rope,
 * soft_max, diag_mask_inf) against a naive double-precision reference written
 * here, on random shapes (1-4 dims, odd sizes) with contiguous, permuted,
 * transposed and strided inputs and broadcasting; every result bit-identical
 * for 1, 2 and 4 threads; the SIMD kernels and the scalar ones (KT_CPU_ISA=ref)
 * both; constructors and a full arena failing with a message, not a crash.
 * Copies, concat and get_rows: test_ops_copy.c.
 */
#include "optest.h"

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
        struct kt_tensor *out = op == KT_OP_ADD   ? kt_add(ctx, a, b)
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
        snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] by [%lld,%lld,%lld,%lld] (%s, %s)",
                 kt_op_name(op), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                 (long long)ne1[0], (long long)ne1[1], (long long)ne1[2], (long long)ne1[3], layout_name[la],
                 layout_name[lb]);
        run_check(ctx, out, want, 1e-6, 1e-6, label);
        free(want);
        kt_free(ctx);
    }

    /* in place: the result is written over a (one run: a changes) */
    struct kt_context *ctx = new_ctx();
    int64_t ne[4] = {7, 5, 3, 1}, ne1[4] = {7, 1, 3, 1};
    struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, L_CONT, -1, 1),
                     *b = mk(ctx, KT_TYPE_F32, ne1, L_CONT, -1, 1);
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

static double silu_d(double x) {
    return x / (1.0 + exp(-x));
}
static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_unary(void) {
    const enum kt_op ops[7] = {KT_OP_SCALE, KT_OP_SQR,  KT_OP_SQRT,  KT_OP_SILU,
                               KT_OP_GELU,  KT_OP_RELU, KT_OP_SWIGLU};
    for (int c = 0; c < 28; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_op op = ops[c % 7];
        enum layout lay = (enum layout)((c / 7) % L_COUNT);
        int64_t ne[4];
        rand_shape(ne, 4, 11);
        if (c % 2) ne[0] = 1 + rnd(70);        /* rows past one SIMD vector */
        const double range = c >= 21 ? 40 : 6; /* the last rows reach exp's overflow side */
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, op == KT_OP_SQRT ? 0 : -range, range);
        struct kt_tensor *b =
            op == KT_OP_SWIGLU ? mk(ctx, KT_TYPE_F32, ne, (enum layout)(c % L_COUNT), -3, 3) : NULL;
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
                want[r * ne[0] + i0] =
                    op == KT_OP_NORM ? (x - mean) / sqrt(v / ne[0] + eps) : x / sqrt(s2 / ne[0] + eps);
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

/* rms_norm's sum of a row: its float squares widened and added in index order into
 * one double, as llama.cpp sums (forward) or backwards (the check that a crafted row
 * tells the orders apart). */
static double sum_squares_d(const float *x, int64_t n, bool forward) {
    double sum = 0.0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = forward ? k : n - 1 - k;
        const float sq = x[i] * x[i];
        sum += (double)sq;
    }
    return sum;
}

/* rms_norm as llama.cpp computes it, bit for bit: the row's sum (sum_squares_d), the
 * mean rounded to float, 1/sqrtf(mean + eps), each element times that. Random rows
 * spanning 2^-24..2^8, and crafted rows of 16 where the order of the additions shows:
 * two 16s, then 2^-20 twice, then twelve 2^-50 (squares) sum to 32 + 2^-19 in index
 * order, each 2^-50 lost against 32, and the mean 2 + 2^-23 is a tie that rounds to 2;
 * any order that adds some 2^-50 together first (backwards, a tree, a register of
 * lanes across the columns) keeps them, and the mean rounds up. Row counts and lengths
 * leave the kernel's groups of eight rows and eight columns partial. */
static void test_rms_norm_exact(void) {
    const int64_t lens[4] = {2048, 67, 9, 16}, rows[3] = {1, 8, 21};
    for (int c = 0; c < 12; c++) {
        struct kt_context *ctx = new_ctx();
        const int64_t ne[4] = {lens[c % 4], rows[c / 4], 1, 1};
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, L_CONT, -1, 1);
        float *x = a->data;
        for (int64_t k = 0; k < ne[0] * ne[1]; k++) x[k] = ldexpf(rndf() * 2.0f - 1.0f, (int)rnd(33) - 24);
        if (ne[0] == 16)
            for (int64_t r = 0; r < ne[1]; r += 2)
                for (int i = 0; i < 16; i++) x[r * 16 + i] = i < 2 ? 4.0f : i < 4 ? 0x1p-10f : 0x1p-25f;
        const float eps = 1e-6f;
        double *want = malloc((size_t)(ne[0] * ne[1]) * sizeof *want);
        for (int64_t r = 0; r < ne[1]; r++) {
            const float *xr = x + r * ne[0];
            const float scale = 1.0f / sqrtf((float)(sum_squares_d(xr, ne[0], true) / (double)ne[0]) + eps);
            for (int64_t i = 0; i < ne[0]; i++) want[r * ne[0] + i] = (double)(xr[i] * scale);
            if (ne[0] == 16 && r % 2 == 0) {
                const float other = 1.0f / sqrtf((float)(sum_squares_d(xr, 16, false) / 16.0) + eps);
                CHECKF(xr[0] * other != xr[0] * scale, "crafted rms_norm row: the orders agree");
            }
        }
        char label[96];
        snprintf(label, sizeof label, "RMS_NORM bit for bit [%lld,%lld]", (long long)ne[0], (long long)ne[1]);
        run_check(ctx, kt_rms_norm(ctx, a, eps), want, 0, 0, label);
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
        snprintf(label, sizeof label, "ARGMAX [%lld,%lld] (%s)", (long long)ne[0], (long long)ne[1],
                 layout_name[lay]);
        struct kt_tensor *out = kt_argmax(ctx, a);
        CHECK(!out || out->type == KT_TYPE_I32);
        run_check(ctx, out, want, 0, 0, label);
        free(want);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ rope */

/* YaRN's ramp ends (pairs) as the format defines them: floor/ceil of a float expression */
static void yarn_dims(const struct kt_rope_params *rp, float *lo, float *hi) {
    const float k = (float)rp->n_dims / (2.0f * logf(rp->freq_base)), tp = 2.0f * (float)M_PI;
    *lo = fmaxf(0.0f, floorf(k * logf((float)rp->n_ctx_orig / (rp->beta_fast * tp))));
    *hi = fminf((float)(rp->n_dims - 1), ceilf(k * logf((float)rp->n_ctx_orig / (rp->beta_slow * tp))));
}

static void test_rope(void) {
    for (int c = 0; c < 30; c++) {
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
        /* the last six: YaRN as gpt-oss runs it (scale 1/32, betas 32 and 1), ramp ends inside the head */
        const bool yarn = c >= 24;
        if (yarn) {
            rp.freq_scale = 1.0f / 32, rp.n_ctx_orig = c % 2 ? 64 : 4096, rp.beta_fast = 32.0f, rp.beta_slow = 1.0f;
            rp.ext_factor = c == 26 ? 0.5f : 1.0f, rp.attn_factor = c % 3 ? 1.0f : c == 27 ? 0.75f : 0.0f;
        }
        float ylo = 0, yhi = 0;
        if (yarn) yarn_dims(&rp, &ylo, &yhi);
        enum layout lay = (enum layout)(c % L_COUNT);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -1, 1);
        struct kt_tensor *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, ne[2]);
        /* small positions first: tight tolerance; then long contexts where float angles drift */
        const int64_t maxpos = c < 12 ? 16 : 1024;
        int32_t *pp = pos->data;
        for (int64_t t = 0; t < ne[2]; t++) pp[t] = (int32_t)rnd(maxpos);
        /* every other case (and the uncached long head) divides each pair's frequency by a
         * factor (Llama 3's rope_freqs) */
        struct kt_tensor *ff = NULL;
        if (c % 2 || c == 16) {
            ff = kt_new_tensor_1d(ctx, KT_TYPE_F32, rp.n_dims / 2);
            for (int64_t p = 0; p < rp.n_dims / 2; p++) ((float *)ff->data)[p] = 0.25f + (float)rnd(48) * 0.25f;
        }
        struct kt_tensor *out = kt_rope_ext(ctx, a, pos, ff, rp);

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
            if (rp.mode == KT_ROPE_NEOX)
                p = i0 % half, e0 = p, e1 = p + half;
            else
                p = i0 / 2, e0 = 2 * p, e1 = 2 * p + 1;
            double extrap = pp[i[2]] * pow(rp.freq_base, -2.0 * p / rp.n_dims);
            if (ff) extrap /= ((const float *)ff->data)[p];
            double theta = extrap * rp.freq_scale, m = 1;
            if (yarn) { /* a ramp from the unscaled angle (low pairs) to the scaled one (high pairs) */
                const double r = fmin(1, fmax(0, (p - ylo) / fmax(0.001, yhi - ylo))), mix = (1 - r) * rp.ext_factor;
                theta = theta * (1 - mix) + extrap * mix;
                m = (rp.attn_factor != 0 ? rp.attn_factor : 1) * (1 + 0.1 * log(1 / (double)rp.freq_scale));
            }
            int64_t j0[4] = {e0, i[1], i[2], i[3]}, j1[4] = {e1, i[1], i[2], i[3]};
            double x0 = tget(a, j0), x1 = tget(a, j1);
            want[k] = m * (i0 == e0 ? x0 * cos(theta) - x1 * sin(theta) : x0 * sin(theta) + x1 * cos(theta));
        }
        char label[160];
        snprintf(label, sizeof label, "ROPE %s d=%lld n_dims=%d base=%g scale=%g%s%s pos<%lld (%s)",
                 rp.mode == KT_ROPE_NEOX ? "neox" : "normal", (long long)d, rp.n_dims, rp.freq_base,
                 rp.freq_scale, ff ? " freq factors" : "", yarn ? " yarn" : "", (long long)maxpos, layout_name[lay]);
        /* a factor of 0.25 makes angles 4x larger, and float's error in them with it */
        run_check(ctx, out, want, (maxpos <= 16 ? 2e-6 : 2e-3) * (ff ? 4 : 1), 1e-5, label);
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
                for (i[0] = 1; i[0] < mne[0]; i[0] += 3)
                    tset(mask, i, -INFINITY); /* element 0 stays finite */
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
                 mk_kind == 0   ? "none"
                 : mk_kind == 1 ? "f32"
                                : "f16",
                 scale, max_bias, layout_name[lay]);
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
            for (int64_t i0 = 0; i0 < ne[0]; i0++)
                sum += mx == -INFINITY ? 0 : exp(want[r * ne[0] + i0] - mx);
            for (int64_t i0 = 0; i0 < ne[0]; i0++)
                want[r * ne[0] + i0] = mx == -INFINITY ? 0 : exp(want[r * ne[0] + i0] - mx) / sum;
        }
        snprintf(label, sizeof label, "SOFT_MAX(DIAG_MASK_INF) n_past=%d", n_past);
        run_check(ctx, kt_soft_max(ctx, m), want, 1e-7, 1e-5, label);
        free(want);
    }
    kt_free(ctx);
}

/* ------------------------------------------------------------------ errors */

#define EXPECT_NULL(expr)                                                                                    \
    do {                                                                                                     \
        kt_clear_error();                                                                                    \
        const void *r_ = (expr);                                                                             \
        CHECKF(r_ == NULL && kt_last_error()[0] != 0, "%s should fail with a message", #expr);               \
    } while (0)

static void test_errors(void) {
    struct kt_context *ctx = new_ctx();
    struct kt_tensor *a = kt_new_tensor_2d(ctx, KT_TYPE_F32, 4, 3),
                     *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, 3, 3);
    struct kt_tensor *v = kt_new_tensor_1d(ctx, KT_TYPE_F32, 5),
                     *ids_f = kt_new_tensor_1d(ctx, KT_TYPE_F32, 2);
    struct kt_tensor *h = kt_new_tensor_3d(ctx, KT_TYPE_F32, 8, 2, 3),
                     *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, 2);
    struct kt_rope_params rp = {.n_dims = 8, .mode = KT_ROPE_NORMAL, .freq_base = 10000, .freq_scale = 1};
    EXPECT_NULL(kt_add(ctx, a, b)); /* 4 is not a multiple of 3 */
    EXPECT_NULL(kt_mul(ctx, b, a));
    EXPECT_NULL(kt_div(ctx, v, a));
    EXPECT_NULL(kt_swiglu(ctx, a, b));
    EXPECT_NULL(kt_mul_mat(ctx, a, b));   /* K 4 vs 3 */
    EXPECT_NULL(kt_concat(ctx, a, b, 1)); /* dim 0 differs */
    EXPECT_NULL(kt_concat(ctx, a, a, 4));
    EXPECT_NULL(kt_get_rows(ctx, a, ids_f)); /* ids not I32 */
    EXPECT_NULL(kt_rope(ctx, h, pos, rp));   /* 3 tokens, 2 positions */
    rp.n_dims = 7;
    EXPECT_NULL(kt_rope(ctx, h, kt_new_tensor_1d(ctx, KT_TYPE_I32, 3), rp));
    rp.n_dims = 10;
    EXPECT_NULL(kt_rope(ctx, h, kt_new_tensor_1d(ctx, KT_TYPE_I32, 3), rp));
    rp.n_dims = 8; /* frequency factors: one per pair (4), F32 */
    struct kt_tensor *pos3 = kt_new_tensor_1d(ctx, KT_TYPE_I32, 3);
    CHECK(kt_rope_ext(ctx, h, pos3, kt_new_tensor_1d(ctx, KT_TYPE_F32, 4), rp) != NULL);
    EXPECT_NULL(kt_rope_ext(ctx, h, pos3, kt_new_tensor_1d(ctx, KT_TYPE_F32, 3), rp));
    EXPECT_NULL(kt_rope_ext(ctx, h, pos3, kt_new_tensor_1d(ctx, KT_TYPE_F16, 4), rp));
    rp.ext_factor = 1.0f; /* YaRN without the original context it ramps over */
    EXPECT_NULL(kt_rope(ctx, h, pos3, rp));
    rp.n_ctx_orig = 4096, rp.beta_fast = 32, rp.beta_slow = 1;
    CHECK(kt_rope(ctx, h, pos3, rp) != NULL);
    rp.attn_factor = -1.0f;
    EXPECT_NULL(kt_rope(ctx, h, pos3, rp));
    rp.attn_factor = 1.0f, rp.ext_factor = NAN;
    EXPECT_NULL(kt_rope(ctx, h, pos3, rp));
    rp.ext_factor = 0.0f;
    EXPECT_NULL(
        kt_soft_max_ext(ctx, a, kt_new_tensor_2d(ctx, KT_TYPE_F32, 4, 2), 1, 0)); /* mask rows 2 < 3 */
    EXPECT_NULL(kt_soft_max_ext(ctx, a, b, 1, 0));                                /* mask width */
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
    test_rms_norm_exact();
    test_argmax();
    test_rope();
    test_soft_max();
    test_errors();
    /* again with the scalar kernels where SIMD ones exist: both must meet the reference */
    setenv("KT_CPU_ISA", "ref", 1);
    kt_cpu_kernels_reinit();
    CHECK(!kt_cpu_kernels()->rows_avx512 && kt_cpu_kernels()->isa == KT_CPU_ISA_REF);
    pass_name = "KT_CPU_ISA=ref";
    test_binary();
    test_unary();
    test_rows();
    test_rms_norm_exact();
    test_rope();
    test_soft_max();
    kt_threadpool_free(pool);
    return tu_finish("test_ops");
}
