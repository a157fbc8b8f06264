/*
 * vec_dot_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) variants of the dot
 * products of Q4_0, Q8_0, Q4_K, Q6_K and F16: vpdpbusd does the int8 multiply
 * and 4-way add in one instruction, and 512-bit registers take two legacy
 * blocks or 64 K-quant elements at a time. Called only after vec_dot.c has
 * checked the CPU. Contracts: vec_dot_isa.h.
 */
#include <immintrin.h>

#include "quant.h"
#include "vec_dot_isa.h"

static inline float h2f(kt_fp16_t h) { return _cvtsh_ss(h); }

static inline __m512i load2x256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* Two blocks' scales: lanes 0..7 get a, lanes 8..15 get b. */
static inline __m512 scales2(float a, float b) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

/* x (signed, never -128 in y) . y per 4 bytes: vpdpbusd wants the left operand
 * unsigned, so |x| against y with x's sign moved over. */
static inline __m512i dot_i8_512(__m512i x, __m512i y) {
    const __mmask64 neg = _mm512_movepi8_mask(x);
    const __m512i ys = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), ys);
}
static inline __m256i dot_i8_256(__m256i x, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

static inline __m256i unpack_nibbles(const uint8_t *q) {
    const __m128i b = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}

/* ------------------------------------------------------------------ legacy dots */

void kt_vec_dot_q8_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q8_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    const int64_t nb = n / KT_QK8_0;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i p = dot_i8_512(load2x256(x[i].qs, x[i + 1].qs), load2x256(y[i].qs, y[i + 1].qs));
        const __m512 d = scales2(h2f(x[i].d) * h2f(y[i].d), h2f(x[i + 1].d) * h2f(y[i + 1].d));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), d, acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (i < nb) {
        const __m256i p = dot_i8_256(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                     _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m512i p0 = _mm512_castsi256_si512(p);
        sum += (float)_mm512_mask_reduce_add_epi32(0x00ff, p0) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

/* Unsigned nibbles q against y, minus 8*sum(y): two vpdpbusd and no sign trick. */
void kt_vec_dot_q4_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    const int64_t nb = n / KT_QK8_0;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(unpack_nibbles(x[i].qs)),
                                             unpack_nibbles(x[i + 1].qs), 1);
        const __m512i yv = load2x256(y[i].qs, y[i + 1].qs);
        const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, yv));
        const __m512 d = scales2(h2f(x[i].d) * h2f(y[i].d), h2f(x[i + 1].d) * h2f(y[i + 1].d));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), d, acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (i < nb) {
        const __m256i q = unpack_nibbles(x[i].qs);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, yv),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), yv));
        sum += (float)_mm512_mask_reduce_add_epi32(0x00ff, _mm512_castsi256_si512(p)) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

/* ------------------------------------------------------------------ K-quant dots */

/* K-quants: each super-block's integer sums stay exact in int32 lanes; d *
 * lanes accumulate in float vectors across super-blocks (summation order is
 * the only difference from the reference). */

void kt_vec_dot_q4_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m512 acc = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        uint32_t o[4];
        kt_k4_unpack_words(x[i].scales, o);
        /* int16 lanes: 8 scales, then 8 mins */
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]));
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), pair);
        accm = _mm_fmadd_ps(_mm_set1_ps(h2f(x[i].dmin) * y[i].d), _mm_cvtepi32_ps(mprod), accm);
        /* per 64 elements: scale 2j on the low 32 bytes, 2j+1 on the high 32 */
        const __m512i scales = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm));
        __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(qb, m4)),
                                                 _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), 1);
            const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 64 * j));
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi16((short)(((4 * j + 1) << 8) | (4 * j))),
                                                   _mm256_set1_epi16((short)(((4 * j + 3) << 8) | (4 * j + 2))), 1);
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), _mm512_shuffle_epi8(scales, sel)));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(x[i].d) * y[i].d), _mm512_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    *s = _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(accm);
}

void kt_vec_dot_q6_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q6_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    /* int32 lane m of a 64-element register covers elements 4m..4m+3: sub-block m/4 */
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const int8_t *sc = x[i].scales;
        /* quants are stored +32: dot the unsigned values, subtract 32 * scale * bsum per sub-block */
        const __m256i off = _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)),
                              _mm256_loadu_si256((const __m256i *)y[i].bsums)), 5);
        __m512i sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(off));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            const __m512i qa = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1); /* elements 128h + 0..63 */
            const __m512i qb = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1); /* 128h + 64..127 */
            const __m512i ya = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h));
            const __m512i yb = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 64));
            int32_t s4a, s4b;
            memcpy(&s4a, sc + 8 * h, 4);
            memcpy(&s4b, sc + 8 * h + 4, 4);
            const __m512i sca = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(s4a), spread));
            const __m512i scb = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(s4b), spread));
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, ya), sca));
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, yb), scb));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(x[i].d) * y[i].d), _mm512_cvtepi32_ps(sumi), acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}

/* ------------------------------------------------------------------ F16 */

void kt_vec_dot_f16_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_fp16_t *x = vx, *y = vy;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i + 16 * k))),
                                     _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + i + 16 * k))), acc[k]);
    }
    for (; i + 16 <= n; i += 16)
        acc[0] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))),
                                 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + i))), acc[0]);
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += h2f(x[i]) * h2f(y[i]);
    *s = sum;
}

/* ------------------------------------------------------------------ F32 */

void kt_vec_dot_f32_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *x = vx, *y = vy;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}
