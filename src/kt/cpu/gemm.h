/*
 * gemm.h - private to the CPU engine: register-blocked mul_mat kernels that
 * compute a block of up to KT_GEMM_ROWS weight rows x KT_GEMM_COLS activation
 * columns in one pass over K, reading the weights as mapped (no repacking).
 *
 * Each output element is bit-identical to the vec_dot kernel the engine uses
 * for that type (same integer block sums, same float accumulation lanes, same
 * final reduction): the block kernels only share loads between elements. So
 * batching columns never changes a result.
 */
#ifndef KT_CPU_GEMM_H
#define KT_CPU_GEMM_H

#include "kt.h"

#define KT_GEMM_ROWS 4 /* most weight rows one call computes */
#define KT_GEMM_COLS 4 /* most activation columns one call computes */

/* out[c][r] = dot(row r of w, y[c]) for r < nr, c < nc (1 <= nr <= KT_GEMM_ROWS,
 * 1 <= nc <= KT_GEMM_COLS). w: nr weight rows of K elements, ws bytes apart;
 * y[c]: a row of the weight type's dot partner; out[c]: where row 0's result goes. */
typedef void (*kt_gemm_fn)(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                           int nc);

/* The block kernel for a weight type, or NULL: only where it matches the dot
 * kernel kt_cpu_vec_dot() picks (so the two paths agree bit for bit). */
kt_gemm_fn kt_cpu_gemm(enum kt_type type);

/* gemm_avx512.c (AVX-512 F/BW/VL + VNNI; twins of vec_dot_avx512.c) */
void kt_gemm_q4_0_q8_0_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                              int nc);
void kt_gemm_q8_0_q8_0_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                              int nc);
void kt_gemm_q4_K_q8_K_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                              int nc);
void kt_gemm_q6_K_q8_K_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                              int nc);
void kt_gemm_f16_f16_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                            int nc);

#endif
