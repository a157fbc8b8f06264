/*
 * vec_dot_avx512.c - AVX-512 (F/BW/VL/DQ + VNNI) variants of the dot
 * products of F16 and F32 (Q4_0, Q8_0, Q4_K, Q6_K: gemm_lanes*_avx512.c): vpdpbusd
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

/* ------------------------------------------------------------------ F16 */

void kt_vec_dot_f16_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_fp16_t *x = vx, *y = vy;
    /* one accumulator, as gemm_avx512.c's tiles have (their many outputs give the
     * parallelism a lone dot lacks) */
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))),
                              _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + i))), acc);
    float sum = _mm512_reduce_add_ps(acc);
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
