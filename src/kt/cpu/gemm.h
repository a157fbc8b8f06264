/*
 * gemm.h - private to the CPU engine: the mul_mat kernels that compute many
 * output elements per pass over K. Block kernels (F16): up to KT_GEMM_ROWS
 * weight rows x KT_GEMM_COLS columns, on the weights as mapped. Rows-in-lanes
 * kernels (Q4_0, Q8_0, Q4_K, Q6_K): 16 weight rows, one per lane, on the
 * weights as mapped (decode), or through a per-thread transposed copy of 16
 * rows (packers, for prompts).
 *
 * Each output element is bit-identical to the vec_dot kernel the engine uses
 * for that type (same integer block sums, same float operations in the same
 * order): the kernels only share loads between elements. So batching columns
 * or the thread count never changes a result.
 */
#ifndef KT_CPU_GEMM_H
#define KT_CPU_GEMM_H

#include "kt.h"

#define KT_GEMM_ROWS 4 /* most weight rows one call computes */
#define KT_GEMM_COLS 6 /* most activation columns one call computes */

/* out[c][r] = dot(row r of w, y[c]) for r < nr, c < nc (1 <= nr <= KT_GEMM_ROWS,
 * 1 <= nc <= KT_GEMM_COLS). w: nr weight rows of K elements, ws bytes apart;
 * y[c]: a row of the weight type's dot partner as floats (F16 for F16 weights:
 * K floats that F16 holds exactly, what the partner row converts to; mul_mat
 * writes them so, act_floats in mul_mat.c); out[c]: where row 0's result goes. */
typedef void (*kt_gemm_fn)(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                           int nc);

/* The block kernel for a weight type and a node of ncols activation columns, or
 * NULL (type, CPU, KT_CPU_GEMM=off; one column where the kernel is not the faster):
 * from the kernel table (kernels.c). */
kt_gemm_fn kt_cpu_gemm(enum kt_type type, int64_t ncols);
/* The block kernel that matches the dot kernel dot bit for bit, or NULL; *decode:
 * whether it also serves one column. For kernels.c. */
kt_gemm_fn kt_cpu_pick_gemm(enum kt_type type, kt_vec_dot_fn dot, bool *decode);

/* gemm_avx512.c (AVX-512 F/BW/VL + VNNI; twins of vec_dot_avx512.c) */
void kt_gemm_f16_f16_avx512(int64_t K, const void *w, size_t ws, const void *const *y, float *const *out, int nr,
                            int nc);

/* ---- rows in lanes (gemm_lanes_avx512.c): Q4_0 and Q8_0 weights x Q8_0 activations,
 * up to KT_LANES_ROWS weight rows (one per float lane) x KT_LANES_COLS columns per
 * call, for every batch size including one column (decode). Each element is the
 * reference kernel's arithmetic (kt_vec_dot_q4_0_q8_0): per block the exact int32
 * dot, then acc = fma((float)isum, dx * dy, acc); so results equal the scalar
 * reference bit for bit and never depend on batching or threads. The kernels read
 * each column's per-block aux (kt_lanes_aux) besides its quants. */
#define KT_LANES_ROWS 16
#define KT_LANES_COLS 8
struct kt_lanes_aux {
    int32_t off; /* -bias * sum of the block's activation quants */
    float d;     /* the block's activation scale */
};
/* out[c][r] for r < nr (1..16) rows of w (ws bytes apart; (nr-1)*ws < 2^31) and
 * c < nc (>= 1) columns y[c] with aux[c]. */
typedef void (*kt_lanes_fn)(int64_t K, const void *w, size_t ws, int nr, const void *const *y,
                            const struct kt_lanes_aux *const *aux, float *const *out, int nc);
/* The kernel for a weight type and the bias its aux wants, or NULL (type, CPU, or
 * KT_CPU_GEMM=off: then mul_mat runs the matching vec_dot per element): from the
 * kernel table. kt_cpu_pick_lanes: the one matching dot, for kernels.c. */
kt_lanes_fn kt_cpu_lanes(enum kt_type type, int *bias);
kt_lanes_fn kt_cpu_pick_lanes(enum kt_type type, kt_vec_dot_fn dot, int *bias);
void kt_lanes_aux(int64_t K, const void *y, int bias, struct kt_lanes_aux *aux);
void kt_lanes_q4_0_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *y,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc);
void kt_lanes_q8_0_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *y,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc);
/* Packed 16-row groups, compact (size(K) within 16 rows' own bytes and a few
 * percent), so that a whole model can be kept that way (the CPU_REPACK buffer type,
 * repack.c): pack writes up to 16 rows into a 64-byte aligned group; run computes
 * any number of columns from one (decode). Prompts (many columns) may run faster
 * another way: where wide is set, it computes them from a group as run does; where
 * xsize is set, from an expanded form: expand writes it (xsize(K) bytes, 64-byte
 * aligned) from a group, once per thread and tile, and xrun computes from it. Every
 * path gives the lanes kernel's results bit for bit. */
struct kt_lanes_packer {
    size_t (*size)(int64_t K);
    void (*pack)(int64_t K, const void *w, size_t ws, int nr, void *group);
    void (*run)(int64_t K, const void *group, int nr, const void *const *y, const struct kt_lanes_aux *const *aux,
                float *const *out, int nc);
    void (*wide)(int64_t K, const void *group, int nr, const void *const *y, const struct kt_lanes_aux *const *aux,
                 float *const *out, int nc);
    size_t (*xsize)(int64_t K);
    void (*expand)(int64_t K, const void *group, void *scratch);
    void (*xrun)(int64_t K, const void *scratch, int nr, const void *const *y, const struct kt_lanes_aux *const *aux,
                 float *const *out, int nc);
};
/* Fewest columns of one group for which mul_mat takes wide, or expand and xrun, over
 * run (fewer: run): `kiln bench -p 8,16 -n 0` on the 1.1B Q4_K_M, 110 -> 174 and 160
 * -> 194 t/s going from 8 to 32. */
#define KT_LANES_XPAND_MIN 32
const struct kt_lanes_packer *kt_cpu_lanes_packer(enum kt_type type); /* from the kernel table, or NULL */
const struct kt_lanes_packer *kt_cpu_pick_lanes_packer(kt_lanes_fn lanes);
/* The packed groups of a mul_mat weight (a CPU_REPACK buffer, repack.c): the packer that reads it and the
 * first 16-row group of a's rows (groups gsize bytes apart), or NULL where a is not
 * repacked (or is a view that does not start at a group) or this process's kernel
 * table has no compact packer for its type. */
const struct kt_lanes_packer *kt_cpu_repacked(const struct kt_tensor *a, const uint8_t **group0, size_t *gsize);
extern const struct kt_lanes_packer kt_lanes_packer_q4_0, kt_lanes_packer_q8_0, kt_lanes_packer_q4_K,
    kt_lanes_packer_q6_K;
/* gemm_lanes_k_avx512.c: Q4_K and Q6_K x Q8_K (aux unused: NULL will do) */
void kt_lanes_q4_K_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *y,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc);
void kt_lanes_q6_K_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *y,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc);

#endif
