/*
 * vec_dot_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) variants of the dot
 * products of Q6_K and F16 (Q4_0, Q8_0, Q4_K: gemm_lanes*_avx512.c): vpdpbusd
 * does the int8 multiply and 4-way add in one instruction, and 512-bit
 * registers take 64 K-quant elements at a time. Called only after vec_dot.c has
 * checked the CPU. Contracts: vec_dot_isa.h.
 */
#include <immintrin.h>

#include "quant.h"
#include "vec_dot_isa.h"

static inline float h2f(kt_fp16_t h) { return _cvtsh_ss(h); }

/* ------------------------------------------------------------------ K-quant dots */

/* K-quants: each super-block's integer sums stay exact in int32 lanes; d *
 * lanes accumulate in float vectors across super-blocks (summation order is
 * the only difference from the reference). */

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
