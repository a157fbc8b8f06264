/*
 * test_vec_dot.c - the CPU engine's SIMD kernels against the reference ones
 * of the type traits: each AVX2 / AVX-512 dot product on random blocks
 * (within a float summation-order tolerance: blocks sum exactly in integers;
 * bit for bit where the kernel keeps the reference's order),
 * the fast Q8_0/Q8_1/Q8_K/F16 activation quantizers byte for byte, and the dispatch.
 * Variants this CPU cannot run are skipped with a message.
 */
#include <cpuid.h>

#include "cpu/cpu.h"
#include "cpu/vec_dot_isa.h"
#include "kt-cpu.h"
#include "kt.h"
#include "testutil.h"

struct variant {
    const char *name;
    enum kt_type type;
    kt_vec_dot_fn fn;
    bool avx512;
    bool exact; /* the reference's own order: bit for bit */
};

static const struct variant variants[] = {
    {"q4_0 avx2", KT_TYPE_Q4_0, kt_vec_dot_q4_0_q8_0_avx2, false, false},
    {"q8_0 avx2", KT_TYPE_Q8_0, kt_vec_dot_q8_0_q8_0_avx2, false, false},
    {"q4_K avx2", KT_TYPE_Q4_K, kt_vec_dot_q4_K_q8_K_avx2, false, false},
    {"q6_K avx2", KT_TYPE_Q6_K, kt_vec_dot_q6_K_q8_K_avx2, false, false},
    {"f16 avx2", KT_TYPE_F16, kt_vec_dot_f16_avx2, false, false},
    {"f32 avx2", KT_TYPE_F32, kt_vec_dot_f32_avx2, false, false},
    {"q4_0 avx512", KT_TYPE_Q4_0, kt_vec_dot_q4_0_q8_0_avx512, true, true},
    {"q8_0 avx512", KT_TYPE_Q8_0, kt_vec_dot_q8_0_q8_0_avx512, true, true},
    {"q4_K avx512", KT_TYPE_Q4_K, kt_vec_dot_q4_K_q8_K_avx512, true, true},
    {"q6_K avx512", KT_TYPE_Q6_K, kt_vec_dot_q6_K_q8_K_avx512, true, true},
    {"f16 avx512", KT_TYPE_F16, kt_vec_dot_f16_avx512, true, false},
    {"f32 avx512", KT_TYPE_F32, kt_vec_dot_f32_avx512, true, false},
    {"q4_1 avx2", KT_TYPE_Q4_1, kt_vec_dot_q4_1_q8_1_avx2, false, false},
    {"q5_0 avx2", KT_TYPE_Q5_0, kt_vec_dot_q5_0_q8_0_avx2, false, false},
    {"q5_1 avx2", KT_TYPE_Q5_1, kt_vec_dot_q5_1_q8_1_avx2, false, false},
    {"iq4_nl avx2", KT_TYPE_IQ4_NL, kt_vec_dot_iq4_nl_q8_0_avx2, false, false},
    {"mxfp4 avx2", KT_TYPE_MXFP4, kt_vec_dot_mxfp4_q8_0_avx2, false, false},
    {"q2_K avx2", KT_TYPE_Q2_K, kt_vec_dot_q2_K_q8_K_avx2, false, false},
    {"q3_K avx2", KT_TYPE_Q3_K, kt_vec_dot_q3_K_q8_K_avx2, false, false},
    {"q5_K avx2", KT_TYPE_Q5_K, kt_vec_dot_q5_K_q8_K_avx2, false, false},
    {"iq4_xs avx2", KT_TYPE_IQ4_XS, kt_vec_dot_iq4_xs_q8_K_avx2, false, false},
};

static bool have_avx2(void) {
    unsigned a, b, c, d; /* F16C: CPUID leaf 1, ECX bit 29 (clang's builtin does not know it) */
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & (1u << 29));
}
static bool have_avx512(void) {
    return have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}

static float gauss(uint64_t *s) {
    double u1 = ((tu_rand_u64(s) >> 11) + 1) * 0x1p-53, u2 = (tu_rand_u64(s) >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Random weights: quantized from data, or (raw) random bytes with sane fp16
 * scales so every bit pattern of the quants is exercised. */
static void make_weights(enum kt_type t, float *x, void *q, int64_t n, bool raw, uint64_t *s) {
    const struct kt_type_traits *tr = kt_get_type_traits(t);
    for (int64_t j = 0; j < n; j++) x[j] = gauss(s) * (j % 64 < 32 ? 1.0f : 0.05f) + (j % 3 ? 0.1f : 0.0f);
    tr->from_float_ref(x, q, n);
    if (!raw || !tr->is_quantized) return;
    unsigned char *b = q;
    const size_t bytes = kt_row_size(t, n);
    for (size_t k = 0; k < bytes; k++) b[k] = (unsigned char)tu_rand_u64(s);
    /* put small finite fp16 scales back where the layout keeps them: byte
     * offsets of d and of the min/dmin (-1: none), negative from the block end */
    static const struct { enum kt_type t; int d, m; } where[] = {
        {KT_TYPE_Q4_0, 0, -1}, {KT_TYPE_Q8_0, 0, -1}, {KT_TYPE_Q4_1, 0, 2}, {KT_TYPE_Q5_0, 0, -1},
        {KT_TYPE_Q5_1, 0, 2},  {KT_TYPE_IQ4_NL, 0, -1}, {KT_TYPE_IQ4_XS, 0, -1}, {KT_TYPE_Q4_K, 0, 2},
        {KT_TYPE_Q5_K, 0, 2},  {KT_TYPE_Q6_K, -2, -1}, {KT_TYPE_Q3_K, -2, -1}, {KT_TYPE_Q2_K, -4, -2},
    };
    const size_t bs = tr->type_size;
    if (t == KT_TYPE_MXFP4) { /* an E8M0 exponent in byte 0: scales 2^-8 .. 2^6 */
        for (size_t off = 0; off < bytes; off += bs) b[off] = (unsigned char)(120 + tu_rand_u64(s) % 15);
        return;
    }
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        if (where[w].t != t) continue;
        for (size_t off = 0; off < bytes; off += bs) {
            kt_fp16_t d = kt_fp32_to_fp16(0.01f * (1 + (float)(tu_rand_u64(s) % 100)));
            kt_fp16_t m = kt_fp32_to_fp16(0.005f * (float)(tu_rand_u64(s) % 100));
            memcpy(b + off + (where[w].d < 0 ? bs + where[w].d : (size_t)where[w].d), &d, 2);
            if (where[w].m != -1) memcpy(b + off + (where[w].m < 0 ? bs + where[w].m : (size_t)where[w].m), &m, 2);
        }
        return;
    }
    CHECKF(false, "%s: no scale layout for raw blocks", tr->name);
}

static void test_dots(void) {
    enum { NMAX = 4096 };
    float *x = malloc(NMAX * sizeof(float)), *y = malloc(NMAX * sizeof(float));
    float *xd = malloc(NMAX * sizeof(float)), *yd = malloc(NMAX * sizeof(float));
    unsigned char *qx = malloc(NMAX * 4), *qy = malloc(NMAX * 4);
    uint64_t s = 2024;
    const bool a2 = have_avx2(), a512 = have_avx512();
    if (!a2) printf("SKIP avx2 variants: this CPU lacks AVX2/FMA/F16C\n");
    if (!a512) printf("SKIP avx512 variants: this CPU lacks AVX-512 VNNI\n");
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const struct variant *var = &variants[v];
        if (var->avx512 ? !a512 : !a2) continue;
        const struct kt_type_traits *tr = kt_get_type_traits(var->type);
        const struct kt_type_traits *pt = kt_get_type_traits(tr->vec_dot_type);
        int bad = 0, cases = 0;
        for (int rep = 0; rep < 200; rep++) {
            /* lengths: 1..16 blocks of the weight type (odd counts reach the tails) */
            const int64_t n = tr->blck_size == 1 ? 1 + (int64_t)(tu_rand_u64(&s) % NMAX)
                                                 : tr->blck_size * (1 + (int64_t)(tu_rand_u64(&s) % (NMAX / tr->blck_size)));
            make_weights(var->type, x, qx, n, rep % 2 == 1, &s);
            const float ys = rep % 5 == 0 ? 1e-3f : rep % 5 == 1 ? 1e3f : 1.0f;
            for (int64_t j = 0; j < n; j++) y[j] = gauss(&s) * ys;
            pt->from_float_ref(y, qy, n);
            float want = NAN, got = NAN;
            tr->vec_dot(n, &want, qx, qy);
            var->fn(n, &got, qx, qy);
            cases++;
            /* Only the float summation order differs: at most about one rounding
             * (2^-24) per accumulated term, terms = blocks (or elements for f16),
             * relative to sum |x_i y_i|. Stated bound: (terms + 16) * 2^-23 of it. */
            tr->to_float(qx, xd, n);
            pt->to_float(qy, yd, n);
            double mag = 0;
            for (int64_t j = 0; j < n; j++) mag += fabs((double)xd[j] * yd[j]);
            const double terms = (double)(n / tr->blck_size);
            const double tol = (terms + 16) * 0x1p-23 * mag + 1e-30;
            if (var->exact ? memcmp(&got, &want, sizeof got) != 0 : !(fabs((double)got - want) <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s n=%lld: %.9g, reference %.9g (tol %.3g)\n", var->name, (long long)n, got, want, tol);
            }
        }
        CHECKF(bad == 0, "%s: %d of %d cases off", var->name, bad, cases);
        printf("  %-12s %d cases %s\n", var->name, cases, var->exact ? "bit for bit" : "within tolerance");
    }
    free(x), free(y), free(xd), free(yd), free(qx), free(qy);
}

static void test_quantizers(void) {
    if (!have_avx2()) return;
    static const struct { enum kt_type t; kt_from_float_fn fn; const char *name; } qs[] = {
        {KT_TYPE_Q8_0, kt_quantize_row_q8_0_avx2, "q8_0 avx2"},
        {KT_TYPE_Q8_1, kt_quantize_row_q8_1_avx2, "q8_1 avx2"},
        {KT_TYPE_Q8_K, kt_quantize_row_q8_K_avx2, "q8_K avx2"},
        {KT_TYPE_F16, kt_fp32_to_fp16_row_avx2, "f16 avx2"},
    };
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    unsigned char *a = malloc(N * 2), *b = malloc(N * 2);
    uint64_t s = 77;
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        int bad = 0;
        for (int rep = 0; rep < 300; rep++) {
            for (int j = 0; j < N; j++) {
                switch (rep % 7) {
                case 0: x[j] = gauss(&s); break;
                case 1: x[j] = (float)((int)(tu_rand_u64(&s) % 255) - 127) * 0.5f; break; /* exact halves: ties */
                case 2: x[j] = (j % 7 == 0) ? 0.0f : gauss(&s) * 1e-30f; break;
                case 3: x[j] = (j / 32) % 2 ? 0.0f : gauss(&s) * 1e20f; break; /* zero blocks too */
                case 4: x[j] = (j % 2 ? -1.0f : 1.0f) * (float)(j % 13); break; /* +-max ties in a block */
                case 5: x[j] = gauss(&s) * (float)(1 + j % 5); break;
                default: { /* any bit pattern: NaN, inf, subnormals, fp16 overflow and ties */
                    uint32_t u = (uint32_t)tu_rand_u64(&s);
                    if (j % 3 == 0) u = (u & 0x807fffffu) | ((uint32_t)(96 + u % 48) << 23); /* near fp16 range */
                    memcpy(&x[j], &u, 4);
                    /* quantizers with a block scale need finite input */
                    if (qs[k].t != KT_TYPE_F16 && !isfinite(x[j])) x[j] = 1.0f;
                }
                }
            }
            const size_t bytes = kt_row_size(qs[k].t, N);
            memset(a, 0xa5, bytes);
            memset(b, 0x5a, bytes);
            kt_get_type_traits(qs[k].t)->from_float_ref(x, a, N);
            qs[k].fn(x, b, N);
            if (memcmp(a, b, bytes) != 0) bad++;
        }
        CHECKF(bad == 0, "%s: %d of 300 rows differ from the reference bytes", qs[k].name, bad);
    }
    free(x), free(a), free(b);
}

static void test_dispatch(void) {
    /* whatever is picked must be a kernel for that type (or the reference) */
    static const enum kt_type types[] = {KT_TYPE_Q4_0, KT_TYPE_Q8_0, KT_TYPE_Q4_K, KT_TYPE_Q6_K, KT_TYPE_F16,
                                         KT_TYPE_Q5_K, KT_TYPE_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        kt_vec_dot_fn f = kt_cpu_vec_dot(types[i]);
        CHECKF(f != NULL, "%s has no dot", kt_type_name(types[i]));
        bool ok = f == kt_get_type_traits(types[i])->vec_dot;
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
            ok |= variants[v].type == types[i] && variants[v].fn == f;
        CHECKF(ok, "%s: dispatch returned another type's kernel", kt_type_name(types[i]));
    }
    CHECK(kt_cpu_from_float(KT_TYPE_Q8_0) != NULL && kt_cpu_from_float(KT_TYPE_Q8_K) != NULL);
    if (have_avx512() && !getenv("KT_CPU_ISA")) CHECK(kt_cpu_vec_dot(KT_TYPE_Q4_K) == kt_vec_dot_q4_K_q8_K_avx512);
    const char *f = kt_cpu_features();
    printf("  cpu features: %s\n", f);
    CHECK(f && f[0] && (strstr(f, "avx2") != NULL) == (bool)__builtin_cpu_supports("avx2"));
    CHECK((strstr(f, "avx512vnni") != NULL) == (bool)__builtin_cpu_supports("avx512vnni"));
}

int main(void) {
    __builtin_cpu_init();
    test_dots();
    test_quantizers();
    test_dispatch();
    return tu_finish("test_vec_dot");
}
