/*
 * cpu.h - private interface between the CPU engine (compute.c: planner, thread
 * pool, dispatch) and the op kernels (one file per family of ops).
 *
 * Every thread of the pool enters a node's kernel with its index ith of nth
 * and does its share: split by rows unless the kernel says otherwise. A kernel
 * that needs a phase boundary inside the node (mul_mat converts activations
 * first) calls kt_cpu_barrier(); one that hands out work dynamically takes
 * chunks with kt_cpu_chunk_next().
 */
#ifndef KT_CPU_PRIV_H
#define KT_CPU_PRIV_H

#include "kt-cpu.h"

struct kt_compute_params {
    int ith, nth;
    size_t wsize;  /* shared work buffer for this node (size from the kernel's work_size) */
    void *wdata;
    struct kt_threadpool *tp;
};

void kt_cpu_barrier(const struct kt_compute_params *p);
/* Next chunk index for this node, shared by all threads; the counter starts at nth
 * (thread ith does chunk ith first without asking). */
int kt_cpu_chunk_next(const struct kt_compute_params *p);
/* Reset the chunk counter to nth: call on one thread before a barrier that precedes chunking. */
void kt_cpu_chunk_reset(const struct kt_compute_params *p);

/* Tiles 0..n-1 in shares: thread ith owns the ith contiguous nth-part and takes it
 * front to back, so that it streams one run of memory; a thread done with its own
 * takes the others' last tiles, so that the threads still finish together. Every
 * thread calls kt_cpu_share_init before a barrier that precedes its first
 * kt_cpu_share_next, which returns a tile index or -1 when none is left. */
void kt_cpu_share_init(const struct kt_compute_params *p, int64_t n);
int64_t kt_cpu_share_next(const struct kt_compute_params *p);

/* Rows [*r0, *r1) of nr for thread ith of nth. */
static inline void kt_cpu_split_rows(const struct kt_compute_params *p, int64_t nr, int64_t *r0, int64_t *r1) {
    int64_t dr = (nr + p->nth - 1) / p->nth;
    int64_t a = dr * p->ith;
    int64_t b = a + dr < nr ? a + dr : nr;
    *r0 = a < nr ? a : nr;
    *r1 = b;
}

typedef void (*kt_cpu_kernel_fn)(const struct kt_compute_params *p, struct kt_tensor *dst);

/* One row per op: kernel, how many threads it can use, work memory it needs. */
struct kt_cpu_op {
    kt_cpu_kernel_fn fn;   /* NULL: no computation (views) */
    bool single_thread;    /* the kernel only runs on thread 0 */
    size_t (*work_size)(const struct kt_tensor *dst, int n_threads); /* NULL: none */
    bool (*supports)(const struct kt_tensor *dst);                   /* NULL: all type combinations */
};
extern const struct kt_cpu_op kt_cpu_ops[KT_OP_COUNT];

/* kernels: ops_elem.c (element-wise, unary, scale), ops_norm.c (norm, rms_norm, sum_rows,
 * mean, argmax), ops_rope.c, ops_softmax.c (soft_max, diag_mask_inf), ops_copy.c (dup, cont,
 * cpy, concat, get_rows), mul_mat.c */
void kt_cpu_dup(const struct kt_compute_params *p, struct kt_tensor *dst);   /* DUP, CONT, CPY */
void kt_cpu_add(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_sub(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_mul(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_div(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_scale(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_sqr(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_sqrt(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_sum_rows(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_mean(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_argmax(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_norm(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_rms_norm(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_mul_mat(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_rope(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_soft_max(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_diag_mask_inf(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_silu(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_gelu(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_relu(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_swiglu(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_concat(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_get_rows(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_attn(const struct kt_compute_params *p, struct kt_tensor *dst); /* ops_attn.c */
size_t kt_cpu_attn_work_size(const struct kt_tensor *dst, int n_threads);
void kt_cpu_geglu(const struct kt_compute_params *p, struct kt_tensor *dst);   /* ops_tanh.c */
void kt_cpu_softcap(const struct kt_compute_params *p, struct kt_tensor *dst); /* ops_tanh.c */

/* mixtures of experts: mul_mat_id.c (the expert product), ops_moe.c (top_k, swiglu_oai) */
void kt_cpu_mul_mat_id(const struct kt_compute_params *p, struct kt_tensor *dst);
size_t kt_cpu_mul_mat_id_work_size(const struct kt_tensor *dst, int n_threads);
bool kt_cpu_mul_mat_id_supports(const struct kt_tensor *dst);
void kt_cpu_top_k(const struct kt_compute_params *p, struct kt_tensor *dst);
void kt_cpu_swiglu_oai(const struct kt_compute_params *p, struct kt_tensor *dst);

size_t kt_cpu_mul_mat_work_size(const struct kt_tensor *dst, int n_threads);
bool kt_cpu_cpy_supports(const struct kt_tensor *dst);
bool kt_cpu_mul_mat_supports(const struct kt_tensor *dst);

enum kt_cpu_isa { KT_CPU_ISA_REF, KT_CPU_ISA_AVX2, KT_CPU_ISA_AVX512 };

/* The environment knobs (env.c), read once per process; docs/cli.md lists them. */
struct kt_cpu_env {
    enum kt_cpu_isa isa_cap; /* KT_CPU_ISA=ref|avx2: the highest ISA the kernels may use */
    bool gemm_off;           /* KT_CPU_GEMM=off: mul_mat through vec_dot only, no block kernels */
    bool repack_off;         /* KT_CPU_REPACK=off: the CPU offers no repacking buffer type */
    bool profile;            /* KT_CPU_PROFILE (not 0): time per op, printed when a pool is freed */
    size_t prefetch;         /* KT_CPU_PREFETCH: bytes the K-quant group kernels prefetch ahead */
    size_t prefetch_q4;      /* KT_CPU_PREFETCH_Q4: the same for Q4_0/Q8_0 prompts */
    size_t prefetch_dec;     /* KT_CPU_PREFETCH_DEC: the same for decoding (0: none) */
};
const struct kt_cpu_env *kt_cpu_env(void);
/* Read them again (kt_cpu_kernels_reinit does; not while a graph computes). */
void kt_cpu_env_reread(void);

/* The kernel table (kernels.c): every kernel choice made once per process, at
 * backend init or first use, from the CPU and the environment (kt_cpu_env: the ISA
 * cap, the block mul_mat kernels on or off). */
struct kt_cpu_kernels {
    enum kt_cpu_isa isa;
    bool rows_avx512; /* the row kernels of ops_isa.h may run */
    kt_vec_dot_fn vec_dot[KT_TYPE_COUNT];
    kt_from_float_fn from_float[KT_TYPE_COUNT];
};
const struct kt_cpu_kernels *kt_cpu_kernels(void);
/* Read the environment again and choose again (tests that switch KT_CPU_ISA between
 * passes; not while a graph computes). */
void kt_cpu_kernels_reinit(void);

/* Vector dot for a weight type on this CPU: the fastest variant the CPU can run
 * (ISA files *_avx2.c, *_avx512.c), else the reference from the type traits. */
static inline kt_vec_dot_fn kt_cpu_vec_dot(enum kt_type type) { return kt_cpu_kernels()->vec_dot[type]; }
/* Quantizer for activations into a dot partner type (same bytes as the reference). */
static inline kt_from_float_fn kt_cpu_from_float(enum kt_type type) { return kt_cpu_kernels()->from_float[type]; }

/* vec_dot.c: the ISA level this CPU runs, capped by kt_cpu_env (*rows_avx512: the
 * ops_isa.h row kernels may run), and the kernels for a level. */
enum kt_cpu_isa kt_cpu_isa_level(bool *rows_avx512);
kt_vec_dot_fn kt_cpu_pick_vec_dot(enum kt_type type, enum kt_cpu_isa isa);
kt_from_float_fn kt_cpu_pick_from_float(enum kt_type type, enum kt_cpu_isa isa);

/* repack.c: the CPU device's extra buffer type "CPU_REPACK" (kt-cpu.h says what it keeps). */
struct kt_buffer_type *kt_cpu_repack_buffer_type(void);

/* repack.c: hands back the whole pages inside [p, p + n) (MADV_DONTNEED: private
 * anonymous memory then reads as zeros and takes no memory until written, a read-only
 * file mapping is read from the file again if touched). *lo and *hi (either may be
 * NULL) get where they start and end. False where there is no whole page or madvise
 * refused (nothing handed back). */
bool kt_cpu_drop_pages(const void *p, size_t n, uint8_t **lo, uint8_t **hi);

#endif
