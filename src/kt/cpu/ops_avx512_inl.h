/*
 * ops_avx512_inl.h - inline helpers of the AVX-512 row kernels (ops_avx512.c) and
 * of the fused attention (ops_attn_avx512.c), for files compiled for AVX-512: the
 * vector exp and the mask of a row's last, partial vector.
 */
#ifndef KT_CPU_OPS_AVX512_INL_H
#define KT_CPU_OPS_AVX512_INL_H

#include <immintrin.h>
#include <stdint.h>

/*
 * e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in a
 * high part exact in float and a low correction, so r keeps its accuracy), and
 * e^r by its Taylor series to r^7 (|r| <= ln2/2: truncation below 1e-8).
 * Inputs are clamped so -inf (masked logits) gives 0 and huge ones give +inf.
 */
static inline __m512 vexp(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* The lanes of a vector with `left` elements still to go: all 16, the first left, or none. */
static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

#endif
