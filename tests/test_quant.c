/*
 * test_quant.c - the type layer: (a) the traits table walked over every id,
 * (b) conformance with ggml's own quantization of ../shared/reference/quant
 * (dequantization bit for bit, legacy quantizers byte for byte, K-quants and
 * iq4 as close and never worse), (c) round-trip error bounds that follow from
 * each format, (d) every dot product against a double-precision dot of the
 * dequantized operands. fp16/bf16 conversions are checked exhaustively.
 */
#include <float.h>

#include "kt.h"
#include "testutil.h"

/* ------------------------------------------------------------------ (a) table */

static bool is_activation_only(enum kt_type t) { return t == KT_TYPE_Q8_1 || t == KT_TYPE_Q8_K; }
/* Known layouts kt has no kernels for (grid i-quants, ternary, integer types). */
static bool is_layout_only(enum kt_type t) {
    switch (t) {
    case KT_TYPE_IQ2_XXS: case KT_TYPE_IQ2_XS: case KT_TYPE_IQ3_XXS: case KT_TYPE_IQ1_S: case KT_TYPE_IQ3_S:
    case KT_TYPE_IQ2_S: case KT_TYPE_IQ1_M: case KT_TYPE_TQ1_0: case KT_TYPE_TQ2_0: case KT_TYPE_I8:
    case KT_TYPE_I16: case KT_TYPE_I32: case KT_TYPE_I64: case KT_TYPE_F64:
        return true;
    default:
        return false;
    }
}

static void test_table(void) {
    static const int unknown[] = {4, 5, 31, 32, 33, 36, 37, 38};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECKF(!kt_type_is_valid(unknown[i]), "id %d", unknown[i]);
        CHECKF(kt_get_type_traits((enum kt_type)unknown[i])->name == NULL, "id %d", unknown[i]);
        CHECK(strcmp(kt_type_name((enum kt_type)unknown[i]), "?") == 0);
    }
    CHECK(!kt_type_is_valid(-1) && !kt_type_is_valid(KT_TYPE_COUNT) && !kt_type_is_valid(1000));
    CHECK(kt_get_type_traits((enum kt_type)1000)->name == NULL);

    int n_known = 0;
    for (int i = 0; i < KT_TYPE_COUNT; i++) {
        const struct kt_type_traits *t = kt_get_type_traits((enum kt_type)i);
        if (!t->name) continue;
        n_known++;
        enum kt_type ty = (enum kt_type)i, back;
        CHECKF(kt_type_is_valid(i), "%s", t->name);
        CHECKF(t->blck_size >= 1 && t->type_size >= 1, "%s sizes", t->name);
        CHECKF(kt_type_from_name(t->name, &back) && back == ty, "%s by name", t->name);
        CHECKF(kt_row_size(ty, 4 * t->blck_size) == 4 * t->type_size, "%s row size", t->name);
        if (is_layout_only(ty)) continue;
        CHECKF(t->to_float && t->from_float_ref && t->from_float, "%s kernels", t->name);
        if (is_activation_only(ty)) continue;
        CHECKF(t->vec_dot != NULL, "%s vec_dot", t->name);
        const struct kt_type_traits *p = kt_get_type_traits(t->vec_dot_type);
        CHECKF(p->name && p->from_float_ref && p->to_float, "%s partner %d", t->name, (int)t->vec_dot_type);
        /* a row of whole weight blocks must be whole partner blocks too */
        CHECKF(p->blck_size > 0 && t->blck_size % p->blck_size == 0, "%s block %lld vs partner %lld", t->name,
               (long long)t->blck_size, (long long)p->blck_size);
    }
    CHECK(n_known == 32);

    /* layouts that are on disk (GGUF): block size, bytes */
    static const struct { enum kt_type t; const char *name; int64_t b; size_t s; } lay[] = {
        {KT_TYPE_F32, "f32", 1, 4},       {KT_TYPE_F16, "f16", 1, 2},        {KT_TYPE_BF16, "bf16", 1, 2},
        {KT_TYPE_Q4_0, "q4_0", 32, 18},   {KT_TYPE_Q4_1, "q4_1", 32, 20},    {KT_TYPE_Q5_0, "q5_0", 32, 22},
        {KT_TYPE_Q5_1, "q5_1", 32, 24},   {KT_TYPE_Q8_0, "q8_0", 32, 34},    {KT_TYPE_Q8_1, "q8_1", 32, 36},
        {KT_TYPE_Q2_K, "q2_K", 256, 84},  {KT_TYPE_Q3_K, "q3_K", 256, 110},  {KT_TYPE_Q4_K, "q4_K", 256, 144},
        {KT_TYPE_Q5_K, "q5_K", 256, 176}, {KT_TYPE_Q6_K, "q6_K", 256, 210},  {KT_TYPE_Q8_K, "q8_K", 256, 292},
        {KT_TYPE_IQ4_NL, "iq4_nl", 32, 18}, {KT_TYPE_IQ4_XS, "iq4_xs", 256, 136}, {KT_TYPE_I8, "i8", 1, 1},
        {KT_TYPE_I16, "i16", 1, 2},       {KT_TYPE_I32, "i32", 1, 4},        {KT_TYPE_I64, "i64", 1, 8},
        {KT_TYPE_F64, "f64", 1, 8},       {KT_TYPE_IQ2_XXS, "iq2_xxs", 256, 66}, {KT_TYPE_MXFP4, "mxfp4", 32, 17},
    };
    for (size_t i = 0; i < sizeof lay / sizeof lay[0]; i++) {
        CHECKF(strcmp(kt_type_name(lay[i].t), lay[i].name) == 0, "%s", lay[i].name);
        CHECKF(kt_blck_size(lay[i].t) == lay[i].b && kt_type_size(lay[i].t) == lay[i].s, "%s", lay[i].name);
    }
    enum kt_type t;
    CHECK(kt_type_from_name("Q4_K", &t) && t == KT_TYPE_Q4_K);
    CHECK(!kt_type_from_name("q4_2", &t) && !kt_type_from_name("", &t) && !kt_type_from_name(NULL, &t));
    CHECK(kt_is_quantized(KT_TYPE_Q4_0) && !kt_is_quantized(KT_TYPE_F16) && !kt_is_quantized(KT_TYPE_F32));

    /* quantize_chunk reports misuse as an error */
    float src[64] = {0};
    unsigned char dst[256];
    CHECK(kt_quantize_chunk(KT_TYPE_Q4_0, src, dst, 1, 33, NULL) == 0 && kt_last_error()[0]);
    CHECK(kt_quantize_chunk(KT_TYPE_I32, src, dst, 1, 32, NULL) == 0);
    CHECK(kt_quantize_chunk(KT_TYPE_Q4_0, src, dst, 2, 32, NULL) == 36);
}

/* ------------------------------------------------------------------ fp16 / bf16 */

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Independent check of round-to-nearest-even: no neighbouring half is closer,
 * and on a tie the chosen one is even. Works on magnitudes (sign handled apart). */
static bool rne_ok(double x, uint16_t h, double (*val)(uint16_t), uint16_t maxfinite) {
    double v = val(h), e = fabs(v - x);
    if (h > 0) {
        double e2 = fabs(val((uint16_t)(h - 1)) - x);
        if (e2 < e || (e2 == e && (h & 1))) return false;
    }
    if (h < maxfinite) {
        double e2 = fabs(val((uint16_t)(h + 1)) - x);
        if (e2 < e || (e2 == e && (h & 1))) return false;
    }
    return true;
}
static double half_val(uint16_t h) { return kt_fp16_to_fp32(h); }
static double bf_val(uint16_t h) { return kt_bf16_to_fp32(h); }

static void test_half(void) {
    /* every half: decode independently, and f16 -> f32 -> f16 is the identity (NaN -> quiet) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int e = (h >> 10) & 31, m = h & 1023;
        double want = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        if (h & 0x8000) want = -want;
        float got = kt_fp16_to_fp32((kt_fp16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want) bad++;
        uint16_t back = kt_fp32_to_fp16(got);
        if (isnan(want) ? back != ((h & 0x8000) | 0x7e00) : back != h) bad++;
    }
    CHECKF(bad == 0, "%d halves decode or round-trip wrongly", bad);

    uint64_t s = 7;
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        /* magnitudes from 2^-26 to 2^17: subnormals, normals, overflow */
        float f = (float)ldexp(1.0 + (double)(tu_rand_u64(&s) >> 11) * 0x1p-53, (int)(tu_rand_u64(&s) % 44) - 26);
        if (i % 4 == 1) f = from_bits((bits(f) & ~0x1fffu) | 0x1000u); /* exact fp16 ties */
        if (i % 4 == 3) f = from_bits((bits(f) & ~0xffffu) | 0x8000u); /* exact bf16 ties */
        uint16_t h = kt_fp32_to_fp16(f);
        if (f >= 65520.0f) {
            if (h != 0x7c00) bad++;
        } else if (!rne_ok(f, h, half_val, 0x7bff)) {
            bad++;
        }
        if (kt_fp32_to_fp16(-f) != (h | 0x8000)) bad++;
        uint16_t b = kt_fp32_to_bf16(f);
        if (!rne_ok(f, b, bf_val, 0x7f7f)) bad++;
    }
    CHECKF(bad == 0, "%d fp32 -> fp16/bf16 roundings wrong", bad);
    CHECK(kt_fp32_to_fp16(NAN) == 0x7e00 || kt_fp32_to_fp16(NAN) == 0xfe00);
    CHECK(kt_fp32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0); /* signalling NaN made quiet */
    CHECK(kt_fp32_to_bf16(INFINITY) == 0x7f80 && kt_fp32_to_bf16(from_bits(1)) == 0); /* subnormal rounds */
    CHECK(kt_fp32_to_bf16(from_bits(0x00018000u)) == 0x0002); /* subnormal tie to even, not flushed */
}

/* ------------------------------------------------------------------ (b) reference/quant */

static void *read_exact(const char *dir, const char *name, size_t want) {
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/quant/%s", dir, name);
    size_t len = 0;
    void *p = tu_read_file(path, &len);
    CHECKF(p && len == want, "%s: %zu bytes, want %zu", path, p ? len : 0, want);
    if (p && len != want) { free(p); p = NULL; }
    return p;
}

static double rmse(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n);
}

static void test_reference(const char *shared) {
    enum { ROWS = 32, NPR = 256, N = ROWS * NPR };
    static const struct { const char *file; enum kt_type t; bool exact; } types[] = {
        {"f16", KT_TYPE_F16, true},     {"bf16", KT_TYPE_BF16, true},   {"q4_0", KT_TYPE_Q4_0, true},
        {"q4_1", KT_TYPE_Q4_1, true},   {"q5_0", KT_TYPE_Q5_0, true},   {"q5_1", KT_TYPE_Q5_1, true},
        {"q8_0", KT_TYPE_Q8_0, true},   {"q8_1", KT_TYPE_Q8_1, true},   {"q2_k", KT_TYPE_Q2_K, false},
        {"q3_k", KT_TYPE_Q3_K, false},  {"q4_k", KT_TYPE_Q4_K, false},  {"q5_k", KT_TYPE_Q5_K, false},
        {"q6_k", KT_TYPE_Q6_K, false},  {"iq4_nl", KT_TYPE_IQ4_NL, false}, {"iq4_xs", KT_TYPE_IQ4_XS, false},
    };
    float *input = read_exact(shared, "input.f32", N * sizeof(float));
    if (!input) return;
    float *deq = malloc(N * sizeof(float));
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const enum kt_type t = types[k].t;
        const size_t bytes = ROWS * kt_row_size(t, NPR);
        char name[64];
        snprintf(name, sizeof name, "%s.q", types[k].file);
        unsigned char *ref_q = read_exact(shared, name, bytes);
        if (!ref_q) continue;
        float *ref_deq = NULL;
        if (t != KT_TYPE_Q8_1) { /* q8_1 is an activation type: bytes only */
            snprintf(name, sizeof name, "%s.deq.f32", types[k].file);
            ref_deq = read_exact(shared, name, N * sizeof(float));
        }
        /* dequantization of ggml's bytes: bit for bit */
        if (ref_deq) {
            kt_get_type_traits(t)->to_float(ref_q, deq, N);
            int64_t first = -1;
            for (int64_t i = 0; i < N && first < 0; i++)
                if (bits(deq[i]) != bits(ref_deq[i])) first = i;
            CHECKF(first < 0, "%s dequant differs at %lld: %.9g vs %.9g", types[k].file, (long long)first,
                   first >= 0 ? deq[first] : 0, first >= 0 ? ref_deq[first] : 0);
        }
        /* quantization of the same input */
        unsigned char *q = malloc(bytes);
        CHECK(kt_quantize_chunk(t, input, q, ROWS, NPR, NULL) == bytes);
        const size_t bsz = kt_type_size(t);
        const int64_t nblk = (int64_t)(bytes / bsz);
        int64_t same = 0;
        for (int64_t b = 0; b < nblk; b++) same += memcmp(q + b * bsz, ref_q + b * bsz, bsz) == 0;
        if (types[k].exact) {
            CHECKF(same == nblk, "%s: %lld of %lld blocks identical to ggml", types[k].file, (long long)same,
                   (long long)nblk);
        } else {
            kt_get_type_traits(t)->to_float(q, deq, N);
            double mine = rmse(deq, input, N), theirs = rmse(ref_deq, input, N);
            printf("  %-7s %4lld / %4lld blocks identical to ggml; rmse %.6g (ggml %.6g)\n", types[k].file,
                   (long long)same, (long long)nblk, mine, theirs);
            CHECKF(mine <= 1.0001 * theirs, "%s rmse %.9g worse than ggml's %.9g", types[k].file, mine, theirs);
        }
        free(q);
        free(ref_q);
        free(ref_deq);
    }
    free(deq);
    free(input);
}

/* ------------------------------------------------------------------ (c) round-trip bounds */

static float gauss(uint64_t *s) {
    double u1 = ((tu_rand_u64(s) >> 11) + 1) * 0x1p-53, u2 = (tu_rand_u64(s) >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Largest error the format allows for element x of a block whose absmax is
 * amax and min/max are lo/hi. fp16 scales add a relative 2^-11 of the scale
 * per quant step (q * |d - fp16(d)|). */
static double legacy_bound(enum kt_type t, double amax, double lo, double hi) {
    const double u = 0x1p-11;
    switch (t) {
    case KT_TYPE_Q8_0: { double d = amax / 127; return 0.5 * d + 127 * d * u; }
    /* the extreme maps to -8 (-16); the opposite end may reach +8 (+16) and clamp one step */
    case KT_TYPE_Q4_0: { double d = amax / 8; return d + 8 * d * u; }
    case KT_TYPE_Q5_0: { double d = amax / 16; return d + 16 * d * u; }
    /* affine: half a step, plus the rounding of d and of the min */
    case KT_TYPE_Q4_1: { double d = (hi - lo) / 15; return 0.5 * d + 15 * d * u + fabs(lo) * u; }
    case KT_TYPE_Q5_1: { double d = (hi - lo) / 31; return 0.5 * d + 31 * d * u + fabs(lo) * u; }
    default: return -1;
    }
}

static void test_roundtrip(void) {
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    unsigned char *q = malloc(N * 4);
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) x[i] = gauss(&s) * (i % 512 < 256 ? 1.0f : 0.01f);
    /* legacy: per-element bounds */
    static const enum kt_type legacy[] = {KT_TYPE_Q4_0, KT_TYPE_Q4_1, KT_TYPE_Q5_0, KT_TYPE_Q5_1, KT_TYPE_Q8_0};
    for (size_t k = 0; k < sizeof legacy / sizeof legacy[0]; k++) {
        enum kt_type t = legacy[k];
        kt_quantize_chunk(t, x, q, 1, N, NULL);
        kt_get_type_traits(t)->to_float(q, y, N);
        int bad = 0;
        for (int b = 0; b < N / 32; b++) {
            double amax = 0, lo = x[32 * b], hi = x[32 * b];
            for (int j = 0; j < 32; j++) {
                amax = fmax(amax, fabs(x[32 * b + j]));
                lo = fmin(lo, x[32 * b + j]);
                hi = fmax(hi, x[32 * b + j]);
            }
            double bound = legacy_bound(t, amax, lo, hi) * (1 + 1e-6) + 1e-30;
            for (int j = 0; j < 32; j++)
                if (fabs((double)y[32 * b + j] - x[32 * b + j]) > bound) bad++;
        }
        CHECKF(bad == 0, "%s: %d elements beyond the format's bound", kt_type_name(t), bad);
    }
    /* f16/bf16: half an ulp of the result, relative 2^-11 and 2^-8 for normal values */
    for (int pass = 0; pass < 2; pass++) {
        enum kt_type t = pass ? KT_TYPE_BF16 : KT_TYPE_F16;
        double rel = pass ? 0x1p-9 : 0x1p-12; /* half ulp relative to the value, 2^-(p+1) */
        kt_quantize_chunk(t, x, q, 1, N, NULL);
        kt_get_type_traits(t)->to_float(q, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++)
            if (fabs(x[i]) > 1e-4 && fabs((double)y[i] - x[i]) > rel * 2 * fabs(x[i])) bad++;
        CHECKF(bad == 0, "%s: %d elements beyond half an ulp", kt_type_name(t), bad);
    }
    /* super-block types on gaussian data: a b-bit uniform quantizer spanning
     * +-3 sigma has NMSE 3/4^b; every type here adapts its scale per 16 or 32
     * elements and must do at least that well. */
    static const struct { enum kt_type t; int b; } ks[] = {
        {KT_TYPE_Q2_K, 2}, {KT_TYPE_Q3_K, 3}, {KT_TYPE_Q4_K, 4}, {KT_TYPE_Q5_K, 5},
        {KT_TYPE_Q6_K, 6}, {KT_TYPE_IQ4_NL, 4}, {KT_TYPE_IQ4_XS, 4},
    };
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
        kt_get_type_traits(ks[k].t)->from_float_ref(x, q, N);
        kt_get_type_traits(ks[k].t)->to_float(q, y, N);
        /* per 256-element super-block, so the 0.01-scaled halves count alike */
        double worst = 0;
        for (int b = 0; b < N / 256; b++) worst = fmax(worst, tu_nmse(y + 256 * b, x + 256 * b, 256));
        double bound = 3.0 / pow(4, ks[k].b);
        CHECKF(worst <= bound, "%s: nmse %.3g > %.3g", kt_type_name(ks[k].t), worst, bound);
    }
    /* MXFP4: the scale is 2^(E-2) for the block's largest magnitude in [2^E, 2^(E+1)), the
     * levels 0, .5, 1, 1.5, 2, 3, 4, 6 times it: within the levels an element is at most
     * half the widest gap (2^(E-2)) off; beyond 6 * 2^(E-2) it clips to that. */
    {
        kt_quantize_chunk(KT_TYPE_MXFP4, x, q, 1, N, NULL);
        kt_get_type_traits(KT_TYPE_MXFP4)->to_float(q, y, N);
        int bad = 0;
        for (int b = 0; b < N / 32; b++) {
            double amax = 0;
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[32 * b + j]));
            const double p2 = ldexp(1.0, (int)floor(log2(amax)));
            const double bound = fmax(p2 / 4, amax - 1.5 * p2);
            for (int j = 0; j < 32; j++) {
                const double xv = x[32 * b + j], yv = y[32 * b + j];
                if (fabs(yv - xv) > bound || (yv != 0 && (yv < 0) != (xv < 0))) bad++;
            }
        }
        CHECKF(bad == 0, "mxfp4: %d elements beyond the format's bound", bad);
    }
    /* Q8_K keeps its scale as a float: |err| <= d/2 with d = amax/127, plus float rounding */
    {
        kt_get_type_traits(KT_TYPE_Q8_K)->from_float_ref(x, q, N);
        kt_get_type_traits(KT_TYPE_Q8_K)->to_float(q, y, N);
        int bad = 0;
        for (int b = 0; b < N / 256; b++) {
            double amax = 0;
            for (int j = 0; j < 256; j++) amax = fmax(amax, fabs(x[256 * b + j]));
            for (int j = 0; j < 256; j++)
                if (fabs((double)y[256 * b + j] - x[256 * b + j]) > amax / 127 * (0.5 + 1e-5)) bad++;
        }
        CHECKF(bad == 0, "q8_K: %d elements beyond d/2", bad);
    }
    /* all-zero input stays zero for every type */
    memset(x, 0, N * sizeof(float));
    for (int i = 0; i < KT_TYPE_COUNT; i++) {
        const struct kt_type_traits *tr = kt_get_type_traits((enum kt_type)i);
        if (!tr->from_float_ref || !tr->to_float) continue;
        tr->from_float_ref(x, q, 512);
        tr->to_float(q, y, 512);
        int nz = 0;
        for (int j = 0; j < 512; j++) nz += y[j] != 0.0f;
        CHECKF(nz == 0, "%s: zeros come back as %d non-zeros", tr->name, nz);
    }
    free(x);
    free(y);
    free(q);
}

/* ------------------------------------------------------------------ (d) dot products */

static void test_vec_dot(void) {
    enum { N = 1024 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    float *xd = malloc(N * sizeof(float)), *yd = malloc(N * sizeof(float));
    unsigned char *qx = malloc(N * 4), *qy = malloc(N * 4 + 64);
    uint64_t s = 99;
    for (int i = 0; i < KT_TYPE_COUNT; i++) {
        const struct kt_type_traits *t = kt_get_type_traits((enum kt_type)i);
        if (!t->vec_dot) continue;
        const struct kt_type_traits *p = kt_get_type_traits(t->vec_dot_type);
        for (int rep = 0; rep < 20; rep++) {
            float bias = rep % 2 ? 0.3f : 0.0f; /* offsets exercise the min terms */
            for (int j = 0; j < N; j++) {
                x[j] = gauss(&s) + bias;
                y[j] = gauss(&s) * (rep % 3 ? 1.0f : 100.0f);
            }
            t->from_float_ref(x, qx, N);
            p->from_float_ref(y, qy, N);
            t->to_float(qx, xd, N);
            p->to_float(qy, yd, N);
            double want = 0, mag = 0;
            for (int j = 0; j < N; j++) {
                want += (double)xd[j] * yd[j];
                mag += fabs((double)xd[j] * yd[j]);
            }
            /* Q8_1 carries s = fp16(d * sum q), rounded apart from the fp16 d the
             * dequantized values use: the offset term m*s of Q4_1/Q5_1 may differ
             * from m * sum(y) by up to 2^-10 relative (two fp16 roundings). */
            double s_term = 0;
            if (t->vec_dot_type == KT_TYPE_Q8_1) {
                for (int b = 0; b < N / 32; b++) {
                    uint16_t m, sy;
                    memcpy(&m, qx + b * t->type_size + 2, 2); /* Q4_1/Q5_1: d, m, ... */
                    memcpy(&sy, qy + b * p->type_size + 2, 2); /* Q8_1: d, s, ... */
                    s_term += fabs((double)kt_fp16_to_fp32(m) * kt_fp16_to_fp32(sy)) * 0x1p-10;
                }
            }
            float got = NAN;
            t->vec_dot(N, &got, qx, qy);
            /* Blocks sum exactly in integers; what remains is float rounding of
             * scales and of one addition per block, far below 1e-5 of sum|x*y|. */
            CHECKF(fabs(got - want) <= 1e-5 * mag + s_term, "%s . %s: %.9g vs %.9g (sum|xy| %.3g)", t->name, p->name, got,
                   want, mag);
        }
    }
    free(x), free(y), free(xd), free(yd), free(qx), free(qy);
}

int main(void) {
    test_table();
    test_half();
    test_roundtrip();
    test_vec_dot();
    const char *shared = tu_shared();
    if (shared) {
        test_reference(shared);
    } else {
        tu_skip_part("reference/quant part: ../shared is absent (set KILN_SHARED)");
        return tu_finish("test_quant");
    }
    return tu_finish("test_quant");
}
