/*
 * gemm_avx512.c - the AVX-512 block kernel (R weight rows x C activation
 * columns per pass) for F16 weights (the quantized types go through the
 * rows-in-lanes kernels, gemm_lanes*_avx512.c).
 * Each output element repeats vec_dot_avx512.c's arithmetic exactly (same
 * float lanes and fma order, same final reduction), so results are
 * bit-identical to it; what changes is that a weight vector is converted once
 * per C columns and an activation vector loaded once per R rows. The
 * activations arrive as floats, so they are converted once per matrix rather
 * than once per R rows: `bench_gemm 5 2048 2048 64 f16 1` 55 -> 93 GFLOP/s,
 * `kiln bench -p 64` on the 1.1B F16 56 -> 89 t/s (the old 2 x 3 tile spent 5
 * conversions on 6 multiply-adds; this CPU issues one 512-bit FMA a cycle).
 * Decode (one column) prefetches the next R rows one pass ahead: `bench_gemm 3
 * 16384 8192 1 f16 1` 19.3 -> 22.2 GFLOP/s; `kiln bench -n 16` on the 1.1B F16,
 * 1 thread 6.6-8.2 -> 10.1-10.3 t/s, 2 threads 13.1-13.8 -> 15.0-15.2 (the bound
 * `kiln bench` prints: 9.7 and 15.7).
 * Contracts: gemm.h.
 */
#include <immintrin.h>

#include "gemm.h"
#include "quant.h"

#define INLINE static inline __attribute__((always_inline))
/* Loops over the tile's rows and columns must unroll completely (-O2 does not
 * by itself) so that the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

static inline float h2f(kt_fp16_t h) { return _cvtsh_ss(h); }

/* ------------------------------------------------------------------ F16 */

/* vec_dot's arithmetic per (row, column): one float accumulator, a fused
 * multiply-add per 16 elements in order, its reduction, the scalar tail. The
 * activation rows come as floats (F16 values, converted once by mul_mat), so a
 * step costs R conversions and R x C multiply-adds: 4 x 6 accumulators, 4 weight
 * registers and one activation register use 29 of the 32. */
#define F16_ROWS KT_GEMM_ROWS
#define F16_COLS KT_GEMM_COLS

INLINE void tile_f16(int64_t K, const uint8_t *w, size_t ws, const void *const *yp, float *const *out, const int R,
                     const int C) {
    __m512 acc[F16_ROWS][F16_COLS];
    const kt_fp16_t *x[F16_ROWS];
    const float *y[F16_COLS];
    UNROLL
    for (int r = 0; r < R; r++) x[r] = (const kt_fp16_t *)(w + (size_t)r * ws);
    UNROLL
    for (int c = 0; c < C; c++) y[c] = yp[c];
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    /* Decode (one column) streams the matrix from memory: ask for the next R rows'
     * line at the same position, one pass ahead, into L2 (the hardware prefetcher
     * alone left a core well short of the bandwidth; see the file comment). */
    const size_t ahead = (size_t)R * ws;
    int64_t i = 0;
    for (; i + 16 <= K; i += 16) {
        if (C == 1 && !(i & 31)) {
            UNROLL
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(x[r] + i) + ahead, _MM_HINT_T1);
        }
        __m512 xv[F16_ROWS];
        UNROLL
        for (int r = 0; r < R; r++) xv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x[r] + i)));
        UNROLL
        for (int c = 0; c < C; c++) {
            const __m512 yv = _mm512_loadu_ps(y[c] + i);
            UNROLL
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(xv[r], yv, acc[r][c]);
        }
    }
    UNROLL
    for (int c = 0; c < C; c++)
        UNROLL
        for (int r = 0; r < R; r++) {
            float sum = _mm512_reduce_add_ps(acc[r][c]);
            for (int64_t t = i; t < K; t++) sum += h2f(x[r][t]) * y[c][t];
            out[c][r] = sum;
        }
}

#define F16_CASE(R, C)                                                                                                 \
    case ((R) - 1) * F16_COLS + (C) - 1: tile_f16(K, w, ws, y, out, R, C); break;
#define F16_ROW(R) F16_CASE(R, 1) F16_CASE(R, 2) F16_CASE(R, 3) F16_CASE(R, 4) F16_CASE(R, 5) F16_CASE(R, 6)
_Static_assert(F16_ROWS == 4 && F16_COLS == 6, "the cases below list every tile shape");

void kt_gemm_f16_f16_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                            int nc) {
    switch ((nr - 1) * F16_COLS + (nc - 1)) {
        F16_ROW(1) F16_ROW(2) F16_ROW(3) F16_ROW(4)
    default: break;
    }
}
