/*
 * vec_dot_avx2.h - AVX2 helpers shared by the *_avx2.c kernel files (include
 * only from files compiled with AVX2/FMA/F16C): horizontal sums, the signed
 * int8 dot, nibble unpacking.
 */
#ifndef KT_VEC_DOT_AVX2_H
#define KT_VEC_DOT_AVX2_H

#include <immintrin.h>

#include "quant.h"

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float h2f(kt_fp16_t h) { return _cvtsh_ss(h); }

/* Sum of x*y over 32 int8 pairs as 8 int32 lanes. maddubs wants an unsigned
 * left operand: |x| and y carrying x's sign. y must not hold -128 (the Q8
 * quantizers stop at -127). */
static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first (elements 0..15), then high. */
static inline __m256i unpack_nibbles(const uint8_t *q) {
    const __m128i b = _mm_loadu_si128((const __m128i *)q);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

#endif
