/*
 * vec_dot_avx2.c - AVX2/FMA/F16C variants of the dot products of the types
 * in the model files (Q4_0, Q8_0, Q4_K, Q6_K, F16, F32) and of the activation
 * quantizers (Q8_0, Q8_1, Q8_K, F16). Compiled with those ISA flags; called only after
 * vec_dot.c has checked the CPU. Contracts: vec_dot_isa.h.
 */
#include <immintrin.h>
#include <math.h>

#include "quant.h"
#include "vec_dot_isa.h"
#include "vec_dot_avx2.h"

/* ------------------------------------------------------------------ legacy dots */

void kt_vec_dot_q8_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q8_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        const __m256i p = dot_i8(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc);
    }
    *s = hsum_ps(acc);
}

void kt_vec_dot_q4_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        const __m256i qx = _mm256_sub_epi8(unpack_nibbles(x[i].qs), _mm256_set1_epi8(8));
        const __m256i p = dot_i8(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc);
    }
    *s = hsum_ps(acc);
}

/* ------------------------------------------------------------------ K-quant dots */

/* The K-quant dots keep each super-block's integer sums exact in int32 lanes
 * and accumulate d * lanes in float vectors across super-blocks (one
 * horizontal sum per call), like the other fast dots: they differ from the
 * reference by float summation order only. */

/* 8 scales (int16 lanes 0..7) and 8 mins (lanes 8..15) of a Q4_K block. */
static inline __m256i k4_scales_mins(const uint8_t *packed) {
    uint32_t o[4];
    kt_k4_unpack_words(packed, o);
    return _mm256_cvtepu8_epi16(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]));
}

/* int16 lane j of v (0..7, both 128-bit halves equal) in every lane */
static inline __m256i bcast16(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * j + 1) << 8) | (2 * j))));
}

void kt_vec_dot_q4_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const __m256i sm = k4_scales_mins(x[i].scales);
        /* mins: sum of mn[j] * (bsums[2j] + bsums[2j+1]) */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), pair);
        accm = _mm_fmadd_ps(_mm_set1_ps(h2f(x[i].dmin) * y[i].d), _mm_cvtepi32_ps(mprod), accm);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32));
            /* quants are 0..15: no sign trick needed, and pairs stay far below int16 limits */
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), bcast16(scales, 2 * j));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), bcast16(scales, 2 * j + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    *s = hsum_ps(acc) - _mm_cvtss_f32(accm);
}

void kt_vec_dot_q6_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q6_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const int8_t *sc = x[i].scales;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        /* quants are stored +32: dot the unsigned values, subtract 32 * scale * bsum per sub-block */
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[i].bsums)), 5);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                const int sb = 8 * h + 2 * k; /* sub-blocks of 16: this register holds sb and sb+1 */
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[sb + 1]), _mm_set1_epi16(sc[sb]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], yv), scv));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ------------------------------------------------------------------ F16 */

void kt_vec_dot_f16_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_fp16_t *x = vx, *y = vy;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * k)));
            const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8 * k)));
            acc[k] = _mm256_fmadd_ps(a, b, acc[k]);
        }
    }
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += h2f(x[i]) * h2f(y[i]);
    *s = sum;
}

/* ------------------------------------------------------------------ F32 */

void kt_vec_dot_f32_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *x = vx, *y = vy;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

/* ------------------------------------------------------------------ activation quantizers */

/* F16C rounds to nearest even like kt_fp32_to_fp16; only NaN payloads differ,
 * so groups holding a NaN take the scalar path. */
void kt_fp32_to_fp16_row_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    kt_fp16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++) y[i + k] = kt_f2h(x[i + k]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) y[i] = kt_f2h(x[i]);
}


static inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* roundf: to nearest, halfway cases away from zero. v - trunc(v) is exact. */
static inline __m256 round_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 half = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_add_ps(t, _mm256_and_ps(half, one));
}

/* 4 x 8 int32 (each in int8 range) -> 32 int8 in order. */
static inline __m256i pack_i32_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i p = _mm256_packs_epi16(ab, cd); /* 4-byte groups in order a0 b0 c0 d0 a1 b1 c1 d1 */
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element block as the Q8_0/Q8_1 reference does it: d = amax/127,
 * quants roundf(x * (1/d)). Returns d; *sum gets the sum of the quants. */
static inline float quantize_block_q8(const float *x, kt_fp16_t *dh, int8_t *qs, int *sum) {
    __m256 v[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    const __m256 mx = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])), _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
    /* scalar, as the reference: d = amax/127, id = 1/d */
    const float d = hmax_ps(mx) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    *dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT); /* d is finite: same bits as kt_f2h */
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) q[k] = _mm256_cvttps_epi32(round_away(_mm256_mul_ps(v[k], vid)));
    _mm256_storeu_si256((__m256i *)qs, pack_i32_i8(q[0], q[1], q[2], q[3]));
    if (sum) *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    return d;
}

void kt_quantize_row_q8_0_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / KT_QK8_0; i++, x += KT_QK8_0) quantize_block_q8(x, &y[i].d, y[i].qs, NULL);
}

void kt_quantize_row_q8_1_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / KT_QK8_1; i++, x += KT_QK8_1) {
        int sum;
        const float d = quantize_block_q8(x, &y[i].d, y[i].qs, &sum);
        y[i].s = kt_f2h((float)sum * d); /* from the unrounded d, as the reference */
    }
}

void kt_quantize_row_q8_K_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < KT_QK_K; j += 8) mx = _mm256_max_ps(mx, abs_ps(_mm256_loadu_ps(x + j)));
        const float amax = hmax_ps(mx);
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        /* the sign of the first element of largest magnitude decides, as in the reference */
        float max = 0.0f;
        for (int j = 0; j < KT_QK_K; j++) {
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int j = 0; j < KT_QK_K; j += 32) {
            __m256i q[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                /* round half to even, like the reference's nearest_int */
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vis),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(r), lim);
            }
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), pack_i32_i8(q[0], q[1], q[2], q[3]));
        }
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y[i].qs + 16 * j)));
            y[i].bsums[j] = (int16_t)hsum_epi32(_mm256_madd_epi16(w, _mm256_set1_epi16(1)));
        }
        y[i].d = 1.0f / iscale;
    }
}
