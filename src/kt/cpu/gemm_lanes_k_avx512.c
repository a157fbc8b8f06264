/*
 * gemm_lanes_k_avx512.c - rows-in-lanes mul_mat kernel for Q4_K weights (x
 * Q8_K activations), as mapped: 16 weight rows (one per float lane) x up to 2
 * columns per pass, for decode and prompts alike (gemm_lanes_avx512.c has the
 * legacy types and the shape). Arithmetic per element, the reference's
 * (kt_vec_dot_q4_K_q8_K): per super-block the exact int32 sums isum (scaled
 * sub-block dots) and msum (mins x activation sums), then
 * acc = acc + ((d*dy)*isum - (dmin*dy)*msum) in float. Also the AVX-512 dot
 * with the same arithmetic. Contracts: gemm.h.
 */
#include "gemm.h"
#include "lanes_avx512.h"
#include "quant.h"
#include "vec_dot_isa.h"

#define KQ_COLS 2 /* columns per pass: 4 int32 accumulators each, plus 4 activation registers */

/* Per 128-bit lane (one row): the block's 8 scales then 8 mins as bytes, from the
 * 12 packed bytes at the lane's start (kt_k4_unpack_words, on every lane at once). */
INLINE __m512i q4_K_scales(__m512i v) {
    const __m512i p = _mm512_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* words u0 u2 u1 u2 */
    const __m512i q = _mm512_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* words u0 u0 u1 u1 */
    const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(p, _mm512_set4_epi32(4, 0, 0, 0)),
                                        _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(q, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm512_or_si512(lo, hi);
}

/* Byte j of every lane as int16 in all 8 of the lane's int16 slots (vpshufb pattern). */
INLINE __m512i bcast16_pattern(int j) { return _mm512_set1_epi16((short)(0x8000 | j)); }

/* The 8 activation pair sums bsums[2j] + bsums[2j+1] as int16, in every lane. */
INLINE __m512i q8_K_pairs(const kt_block_q8_K *y) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
}

INLINE __m512i bcast128(const int8_t *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

INLINE void tile_q4_K(int64_t K, const uint8_t *w, size_t ws, int nr, const void *const *yp, float *const *out,
                      const int C) {
    const uint8_t *row[16];
    lanes_rows(w, ws, nr, row);
    const __m512i didx = lanes_gather_index(w, row);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i minpat = _mm512_broadcast_i32x4(
        _mm_setr_epi8(8, -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14, -128, 15, -128));
    __m512 acc[KQ_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++) {
        const size_t boff = (size_t)i * sizeof(kt_block_q4_K);
        __m512i scm[4], isum[KQ_COLS][4];
        UNROLL
        for (int g = 0; g < 4; g++) scm[g] = q4_K_scales(load4x128(row + 4 * g, boff + 4));
        UNROLL
        for (int c = 0; c < C; c++)
            UNROLL
            for (int g = 0; g < 4; g++) isum[c][g] = _mm512_setzero_si512();
        UNROLL
        for (int ch = 0; ch < 4; ch++) { /* 32 bytes of quants: sub-blocks 2ch (low nibbles), 2ch+1 (high) */
            __m512i ya[KQ_COLS][4];
            UNROLL
            for (int c = 0; c < C; c++) {
                const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
                UNROLL
                for (int k = 0; k < 4; k++) ya[c][k] = bcast128(y->qs + 64 * ch + 16 * k);
            }
            UNROLL
            for (int g = 0; g < 4; g++) {
                const __m512i v1 = load4x128(row + 4 * g, boff + 16 + 32 * ch);
                const __m512i v2 = load4x128(row + 4 * g, boff + 16 + 32 * ch + 16);
                const __m512i q[4] = {_mm512_and_si512(v1, m4), _mm512_and_si512(v2, m4),
                                      _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4),
                                      _mm512_and_si512(_mm512_srli_epi16(v2, 4), m4)};
                const __m512i se = _mm512_shuffle_epi8(scm[g], bcast16_pattern(2 * ch));
                const __m512i so = _mm512_shuffle_epi8(scm[g], bcast16_pattern(2 * ch + 1));
                UNROLL
                for (int c = 0; c < C; c++) {
                    __m512i s = isum[c][g];
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[0], ya[c][0]), se);
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[1], ya[c][1]), se);
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[2], ya[c][2]), so);
                    isum[c][g] = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[3], ya[c][3]), so);
                }
            }
        }
        /* d (low half) and dmin (high half) of the 16 rows, in reduce16's lane order */
        const __m512i dd = _mm512_i32gather_epi32(didx, w + boff, 1);
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        const __m512 dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
            const __m512i pairs = q8_K_pairs(y);
            __m512i mp[4];
            UNROLL
            for (int g = 0; g < 4; g++) mp[g] = _mm512_madd_epi16(_mm512_shuffle_epi8(scm[g], minpat), pairs);
            const __m512 is = _mm512_cvtepi32_ps(reduce16(isum[c][0], isum[c][1], isum[c][2], isum[c][3]));
            const __m512 ms = _mm512_cvtepi32_ps(reduce16(mp[0], mp[1], mp[2], mp[3]));
            const __m512 dy = _mm512_set1_ps(y->d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, dy), is);
            const __m512 b = _mm512_mul_ps(_mm512_mul_ps(dm, dy), ms);
            acc[c] = _mm512_add_ps(acc[c], _mm512_sub_ps(a, b));
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, _mm512_permutexvar_ps(lane_rows(), acc[c]));
}

void kt_lanes_q4_K_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *yp,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc) {
    (void)aux;
    for (int c0 = 0; c0 < nc; c0 += KQ_COLS) {
        if (nc - c0 >= 2)
            tile_q4_K(K, w, ws, nr, yp + c0, out + c0, 2);
        else
            tile_q4_K(K, w, ws, nr, yp + c0, out + c0, 1);
    }
}

/* One row at a time, the same arithmetic: the super-block's integer sums reduced at
 * once, then the scalar float terms in the reference's order. */
void kt_vec_dot_q4_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        uint32_t o[4];
        kt_k4_unpack_words(x[i].scales, o);
        /* int16 lanes: 8 scales, then 8 mins */
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]));
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), pair);
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
        const int32_t isum = _mm512_reduce_add_epi32(sumi), msum = _mm512_reduce_add_epi32(_mm512_zextsi128_si512(mprod));
        sum += _cvtsh_ss(x[i].d) * y[i].d * (float)isum - _cvtsh_ss(x[i].dmin) * y[i].d * (float)msum;
    }
    *s = sum;
}
