/*
 * vec_dot_more_avx2.c - AVX2 dot products for the weight types that are not
 * in the shipped models but that `kiln quantize` and other GGUF files use:
 * Q4_1, Q5_0, Q5_1 (vs Q8_0/Q8_1), Q2_K, Q3_K, Q5_K, IQ4_XS (vs Q8_K) and
 * IQ4_NL and MXFP4 (vs Q8_0). Same rules as vec_dot_avx2.c: exact integer sums per
 * block, float accumulation across blocks (summation order is the only
 * difference from the reference). Called only after vec_dot.c checked the CPU.
 */
#include <immintrin.h>

#include "quant.h"
#include "vec_dot_avx2.h"
#include "vec_dot_isa.h"

/* 32 bits -> 32 bytes, byte j = 0x10 where bit j is set (the fifth bit of Q5 quants). */
static inline __m256i bits_to_0x10(uint32_t bits) {
    /* byte j takes source byte j/8, then tests bit j%8 */
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                         3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), idx), sel);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10));
}

static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* unsigned x (0..31) . signed y per 32 bytes, as 8 int32 lanes */
static inline __m256i dot_u8(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* ------------------------------------------------------------------ legacy */

void kt_vec_dot_q4_1_q8_1_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_1 *x = vx;
    const kt_block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f; /* m * s terms: the Q8_1 block carries s = d * sum(q) */
    for (int64_t i = 0; i < n / KT_QK8_1; i++) {
        const __m256i p = dot_u8(unpack_nibbles(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc);
        accm += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = hsum_ps(acc) + accm;
}

void kt_vec_dot_q5_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        __m256i q = _mm256_or_si256(unpack_nibbles(x[i].qs), bits_to_0x10(load_u32(x[i].qh)));
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc);
    }
    *s = hsum_ps(acc);
}

void kt_vec_dot_q5_1_q8_1_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_1 *x = vx;
    const kt_block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_1; i++) {
        const __m256i q = _mm256_or_si256(unpack_nibbles(x[i].qs), bits_to_0x10(load_u32(x[i].qh)));
        const __m256i p = dot_u8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc);
        accm += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = hsum_ps(acc) + accm;
}

void kt_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_iq4_nl *x = vx;
    const kt_block_q8_0 *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kt_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK4_NL; i++) {
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs)); /* levels, -127..113 */
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc);
    }
    *s = hsum_ps(acc);
}

/* MXFP4: IQ4_NL's table lookup with the doubled E2M1 levels and a power-of-two scale. */
void kt_vec_dot_mxfp4_q8_0_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_mxfp4 *x = vx;
    const kt_block_q8_0 *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kt_mxfp4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_MXFP4; i++) {
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs)); /* levels, -12..12 */
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(y[i].d) * kt_e8m0_half(x[i].e)), acc);
    }
    *s = hsum_ps(acc);
}

/* ------------------------------------------------------------------ K-quants */

/* 2-bit fields k (0..3) of 32 bytes: elements 32k..32k+31 of a 128-element half */
static inline __m256i field2(__m256i q, int k) {
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), _mm256_set1_epi8(3));
}

/* Shuffle mask for a register of 8 int16 scales (both lanes alike): scale 2k
 * in every int16 of the low lane, 2k+1 in the high lane. The 32 bytes of 2-bit
 * field k of a 128-element half cover sub-blocks of 16: 2k low, 2k+1 high. */
static inline __m256i pair_sel(int k) {
    return _mm256_set_m128i(_mm_set1_epi16((short)(((4 * k + 3) << 8) | (4 * k + 2))),
                            _mm_set1_epi16((short)(((4 * k + 1) << 8) | (4 * k))));
}

void kt_vec_dot_q2_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q2_K *x = vx;
    const kt_block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m256 accm = _mm256_setzero_ps(); /* min terms */
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const __m128i sc = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* mins: sum of (sc >> 4) * bsums */
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0f)));
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0f)));
        /* scales 8h..8h+7 as int16 in both 128-bit lanes, for in-lane shuffles */
        const __m256i half[2] = {_mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc16)),
                                 _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc16, 1))};
        const __m256i mprod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        accm = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].dmin)), _mm256_cvtepi32_ps(mprod), accm);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                const __m256i p16 = _mm256_maddubs_epi16(field2(q, k), yv);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_shuffle_epi8(half[h], pair_sel(k))));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) - hsum_ps(accm);
}

void kt_vec_dot_q3_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q3_K *x = vx;
    const kt_block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        uint32_t o[4];
        kt_q3k_scale_words(x[i].scales, o);
        const __m128i sc8 = _mm_sub_epi8(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]), _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        /* quants u = low | hbit << 2 are 0..7, value u - 4: subtract 4 * scale * bsum per sub-block */
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[i].bsums)), 2);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
        /* scales 8h..8h+7 as int16 in both 128-bit lanes, for in-lane shuffles */
        const __m256i half[2] = {_mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc16)),
                                 _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc16, 1))};
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const int b = 4 * h + k; /* hmask bit of these 32 elements */
                const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, b), _mm256_set1_epi8(1)), 2);
                const __m256i u = _mm256_or_si256(field2(q, k), hb);
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(u, yv), _mm256_shuffle_epi8(half[h], pair_sel(k))));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

void kt_vec_dot_q5_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    __m256 accm = _mm256_setzero_ps(); /* min terms */
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        uint8_t sc[8], mn[8];
        kt_k4_unpack(x[i].scales, sc, mn);
        const __m128i m = _mm_loadl_epi64((const __m128i *)mn);
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)); /* each min for two bsums */
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), m16);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].dmin) * y[i].d), _mm256_cvtepi32_ps(mprod), accm);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            /* sub-block 2j: low nibbles + bit 2j of qh; 2j+1: high nibbles + bit 2j+1 */
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32));
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) - hsum_ps(accm);
}

void kt_vec_dot_iq4_xs_q8_K_avx2(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_iq4_xs *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kt_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((x[i].scales_h >> (2 * ib)) & 3) << 4)) - 32;
            const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs + 16 * ib));
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}
