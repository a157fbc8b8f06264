/*
 * mul_mat.h - private to the CPU engine: what the matrix product (mul_mat.c) and
 * the expert product (mul_mat_id.c) share: the activation rows converted into the
 * weights' dot partner, and the tile walk that runs the block, rows-in-lanes or
 * dot kernels over (weight rows) x (columns that share one weight matrix).
 * Every output element is one vec_dot's arithmetic whatever the path.
 */
#ifndef KT_CPU_MUL_MAT_H
#define KT_CPU_MUL_MAT_H

#include "cpu.h"
#include "gemm.h"

#define KT_MM_PACK_COLS 64 /* most columns per packed tile (rows in lanes) */
#define KT_MM_PACK_MIN 8   /* fewest columns of one weight matrix worth a packed 16-row block */

/* One column of a listed walk: where its output row starts (bytes into dst's data)
 * and which converted activation row it multiplies. */
struct kt_mm_entry {
    int64_t out;
    int64_t act;
};

/* The columns a tile walks. Dense (list NULL): mul_mat's, column c being src1's row
 * (c % N, c / N % B2, c / (N * B2)), the weight matrix chosen by broadcast (r2, r3).
 * Listed: entries of one weight matrix w (an expert's), in list order. */
struct kt_mm_cols {
    int64_t N, B2, r2, r3;
    const struct kt_mm_entry *list;
    const uint8_t *w;
};

/* One node's kernels and memory, the same on every thread except scratch. */
struct kt_mm {
    const struct kt_tensor *a;
    struct kt_tensor *dst;
    int64_t K;
    enum kt_type vdt;
    kt_vec_dot_fn dot;
    kt_from_float_fn quant; /* into vdt; NULL for an F32 partner */
    kt_gemm_fn gemm;        /* block kernel, or NULL */
    kt_lanes_fn lanes;      /* rows-in-lanes kernel, or NULL */
    int lanes_bias;
    const struct kt_lanes_packer *pack; /* with lanes: its packer, or NULL */
    size_t brow, auxs;      /* bytes of one activation row, of its aux array (0: none) */
    uint8_t *acts, *auxd;   /* the converted rows, their aux arrays */
    const uint8_t *rp_g0;   /* dense walks: the repacked copy's first group, or NULL */
    size_t rp_gsize;
    uint8_t *scratch;       /* this thread's packing scratch, or NULL */
};

/* Bytes of n_act converted activation rows (and aux arrays) for weights a, and of one
 * thread's packing scratch (0 where no packer serves a). */
size_t kt_mm_act_bytes(const struct kt_tensor *a, int64_t n_act);
size_t kt_mm_scratch_bytes(const struct kt_tensor *a);

/* Fills m for weights a and n_act activation rows at wdata (wsize bytes of work memory);
 * the thread's scratch lies at scratch_off, one per thread, if the plan made room and
 * some matrix may get pack_cols >= KT_MM_PACK_MIN columns. */
void kt_mm_init(struct kt_mm *m, const struct kt_compute_params *p, struct kt_tensor *dst, const struct kt_tensor *a,
                int64_t n_act, size_t scratch_off, int64_t pack_cols);

/* Activation row `row` from K floats nb0 bytes apart at src. */
void kt_mm_convert(const struct kt_mm *m, const float *src, size_t nb0, int64_t row);

/* Rows [ir0, ir1) of the weights x columns [ic0, ic1) of cols. */
void kt_mm_tile(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t ir0, int64_t ir1, int64_t ic0,
                int64_t ic1);

/* The prompt tile: rows, and columns (a packer's K-quants take 4x as many). */
int64_t kt_mm_tile_rows(const struct kt_mm *m);
int64_t kt_mm_tile_cols(const struct kt_mm *m);

#endif
