/*
 * gemm_avx512.c - AVX-512 VNNI block kernels (R weight rows x C activation
 * columns per pass) for Q4_K and Q6_K weights against Q8_K, and F16 x F16
 * (Q4_0 and Q8_0: gemm_lanes_avx512.c).
 * Each output element repeats vec_dot_avx512.c's arithmetic exactly (same
 * int32 block sums, same float lanes and fma order, same final reduction), so
 * results are bit-identical to it; what changes is that a weight block is
 * unpacked once per C columns and an activation block loaded once per R rows.
 * Contracts: gemm.h.
 */
#include <immintrin.h>

#include "gemm.h"
#include <string.h>

#include "quant.h"

#define INLINE static inline __attribute__((always_inline))
/* Loops over the tile's rows and columns must unroll completely (-O2 does not
 * by itself) so that the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

static inline float h2f(kt_fp16_t h) { return _cvtsh_ss(h); }

/* ------------------------------------------------------------------ K-quants */

/* Both K-quant kernels sum each super-block in int32 lanes exactly as
 * vec_dot_avx512.c does (same lanes: int32 lane m covers bytes 4m..4m+3 of a
 * 64-element step), with the sub-block scale applied by vpdpwssd on the int16
 * pair sums of vpmaddubsw (no saturation: 2 * 63 * 128 < 2^15) instead of
 * vpmaddwd/vpmulld: the same integers. Each (row, column) keeps an int32 and a
 * float accumulator, so two columns per pass. */
#define KQ_ROWS 4
#define KQ_COLS 2

/* Scales of sub-blocks s0..s0+3 as int16, each over 16 elements (8 int16 pair sums). */
INLINE __m512i q6_K_scales16(const int8_t *sc) {
    int32_t s4;
    memcpy(&s4, sc, 4);
    const __m128i v = _mm_cvtsi32_si128(s4);
    const __m128i lo = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m128i hi = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    return _mm512_cvtepi8_epi16(_mm256_set_m128i(hi, lo));
}

INLINE void tile_q6_K(int64_t K, const uint8_t *w, size_t ws, const void *const *yp, float *const *out, const int R,
                      const int C) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    __m512 acc[KQ_ROWS][KQ_COLS];
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++) {
        __m512i sumi[KQ_ROWS][KQ_COLS];
        __m512 dy[KQ_COLS];
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
            const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
            dy[c] = _mm512_set1_ps(y->d);
            UNROLL
            for (int r = 0; r < R; r++) {
                const kt_block_q6_K *x = (const kt_block_q6_K *)(w + (size_t)r * ws) + i;
                /* quants are stored +32: start from -32 * scale * bsum per sub-block */
                const __m256i off = _mm256_slli_epi32(
                    _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)), bs), 5);
                sumi[r][c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(off));
            }
        }
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m512i ya[KQ_COLS], yb[KQ_COLS];
            UNROLL
            for (int c = 0; c < C; c++) {
                const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
                ya[c] = _mm512_loadu_si512((const void *)(y->qs + 128 * h));
                yb[c] = _mm512_loadu_si512((const void *)(y->qs + 128 * h + 64));
            }
            UNROLL
            for (int r = 0; r < R; r++) {
                const kt_block_q6_K *x = (const kt_block_q6_K *)(w + (size_t)r * ws) + i;
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
                const __m256i q0 =
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
                const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
                const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
                const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
                const __m512i qa = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
                const __m512i qb = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1);
                const __m512i sa = q6_K_scales16(x->scales + 8 * h), sb = q6_K_scales16(x->scales + 8 * h + 4);
                UNROLL
                for (int c = 0; c < C; c++) {
                    sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(qa, ya[c]), sa);
                    sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(qb, yb[c]), sb);
                }
            }
        }
        UNROLL
        for (int r = 0; r < R; r++) {
            const __m512 dx = _mm512_set1_ps(h2f(((const kt_block_q6_K *)(w + (size_t)r * ws) + i)->d));
            UNROLL
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(dx, dy[c]), _mm512_cvtepi32_ps(sumi[r][c]), acc[r][c]);
        }
    }
    UNROLL
    for (int c = 0; c < C; c++)
        UNROLL
        for (int r = 0; r < R; r++) out[c][r] = _mm512_reduce_add_ps(acc[r][c]);
}

/* (nr, nc) up to 4 x 4 in tiles of at most KQ_ROWS x KQ_COLS. */
#define DISPATCH_KQ(TILE)                                                                                           \
    for (int c0 = 0; c0 < nc; c0 += KQ_COLS) {                                                                      \
        const int cc = nc - c0 < KQ_COLS ? nc - c0 : KQ_COLS;                                                       \
        switch ((nr - 1) * KQ_COLS + (cc - 1)) {                                                                    \
        case 0: TILE(K, w, ws, y + c0, out + c0, 1, 1); break;                                                      \
        case 1: TILE(K, w, ws, y + c0, out + c0, 1, 2); break;                                                      \
        case 2: TILE(K, w, ws, y + c0, out + c0, 2, 1); break;                                                      \
        case 3: TILE(K, w, ws, y + c0, out + c0, 2, 2); break;                                                      \
        case 4: TILE(K, w, ws, y + c0, out + c0, 3, 1); break;                                                      \
        case 5: TILE(K, w, ws, y + c0, out + c0, 3, 2); break;                                                      \
        case 6: TILE(K, w, ws, y + c0, out + c0, 4, 1); break;                                                      \
        default: TILE(K, w, ws, y + c0, out + c0, 4, 2); break;                                                     \
        }                                                                                                           \
    }

_Static_assert(KQ_ROWS == KT_GEMM_ROWS && KQ_COLS == 2, "DISPATCH_KQ lists every (R, C)");

void kt_gemm_q6_K_q8_K_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                              int nc) {
    DISPATCH_KQ(tile_q6_K)
}

/* ------------------------------------------------------------------ F16 */

/* vec_dot's four float accumulators per output (elements 16k..16k+15 of each
 * 64), its 16-element steps into the first, its reduction and scalar tail, per
 * (row, column): 4 x 2 x 3 accumulators fill 24 of the 32 registers. */
#define F16_ROWS 2
#define F16_COLS 3

INLINE void tile_f16(int64_t K, const uint8_t *w, size_t ws, const void *const *yp, float *const *out, const int R,
                     const int C) {
    __m512 acc[F16_ROWS][F16_COLS][4];
    const kt_fp16_t *x[F16_ROWS], *y[F16_COLS];
    UNROLL
    for (int r = 0; r < R; r++) x[r] = (const kt_fp16_t *)(w + (size_t)r * ws);
    UNROLL
    for (int c = 0; c < C; c++) y[c] = yp[c];
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int c = 0; c < C; c++)
            UNROLL
            for (int k = 0; k < 4; k++) acc[r][c][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= K; i += 64) {
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m512 xv[F16_ROWS];
            UNROLL
            for (int r = 0; r < R; r++) xv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x[r] + i + 16 * k)));
            UNROLL
            for (int c = 0; c < C; c++) {
                const __m512 yv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y[c] + i + 16 * k)));
                UNROLL
                for (int r = 0; r < R; r++) acc[r][c][k] = _mm512_fmadd_ps(xv[r], yv, acc[r][c][k]);
            }
        }
    }
    for (; i + 16 <= K; i += 16)
        UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 yv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y[c] + i)));
            UNROLL
            for (int r = 0; r < R; r++)
                acc[r][c][0] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x[r] + i))), yv,
                                               acc[r][c][0]);
        }
    UNROLL
    for (int c = 0; c < C; c++)
        UNROLL
        for (int r = 0; r < R; r++) {
            float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][c][0], acc[r][c][1]),
                                                           _mm512_add_ps(acc[r][c][2], acc[r][c][3])));
            for (int64_t t = i; t < K; t++) sum += h2f(x[r][t]) * h2f(y[c][t]);
            out[c][r] = sum;
        }
}

void kt_gemm_f16_f16_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                            int nc) {
    for (int r0 = 0; r0 < nr; r0 += F16_ROWS) {
        const int rr = nr - r0 < F16_ROWS ? nr - r0 : F16_ROWS;
        float *o[KT_GEMM_COLS];
        for (int c = 0; c < nc; c++) o[c] = out[c] + r0;
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * ws;
        for (int c0 = 0; c0 < nc; c0 += F16_COLS) {
            const int cc = nc - c0 < F16_COLS ? nc - c0 : F16_COLS;
            switch ((rr - 1) * F16_COLS + (cc - 1)) {
            case 0: tile_f16(K, wr, ws, y + c0, o + c0, 1, 1); break;
            case 1: tile_f16(K, wr, ws, y + c0, o + c0, 1, 2); break;
            case 2: tile_f16(K, wr, ws, y + c0, o + c0, 1, 3); break;
            case 3: tile_f16(K, wr, ws, y + c0, o + c0, 2, 1); break;
            case 4: tile_f16(K, wr, ws, y + c0, o + c0, 2, 2); break;
            default: tile_f16(K, wr, ws, y + c0, o + c0, 2, 3); break;
            }
        }
    }
}
