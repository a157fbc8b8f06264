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

/* ------------------------------------------------------------------ F16 */

/* vec_dot's four float accumulators per output (elements 16k..16k+15 of each
 * 64), its 16-element steps into the first, its reduction and scalar tail, per
 * (row, column): 4 x 2 x 3 accumulators fill 24 of the 32 registers. */
#define F16_ROWS 2
#define F16_COLS 3
#define F16_DECODE_ROWS 4 /* one column: 4 rows per pass (16 accumulators), fewer passes over y */

INLINE void tile_f16(int64_t K, const uint8_t *w, size_t ws, const void *const *yp, float *const *out, const int R,
                     const int C) {
    __m512 acc[F16_DECODE_ROWS][F16_COLS][4];
    const kt_fp16_t *x[F16_DECODE_ROWS], *y[F16_COLS];
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
            __m512 xv[F16_DECODE_ROWS];
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
    if (nc == 1 && nr == F16_DECODE_ROWS) {
        tile_f16(K, w, ws, y, out, F16_DECODE_ROWS, 1);
        return;
    }
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
