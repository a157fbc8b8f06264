/*
 * ops_isa.h - SIMD row kernels for the exp-bound ops (soft_max, silu, swiglu,
 * gelu), compiled per ISA (ops_avx512.c) and called only after
 * kt_cpu_ops_use_avx512() says this CPU runs them. The scalar loops in
 * ops_elem.c / ops_softmax.c are the reference they are tested against.
 */
#ifndef KT_CPU_OPS_ISA_H
#define KT_CPU_OPS_ISA_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu.h"

enum kt_cpu_bin_op { KT_CPU_ADD, KT_CPU_SUB, KT_CPU_MUL, KT_CPU_DIV };

/* d[i] = a[i] op b[i] (b_scalar: op b[0] for every i); d may alias a. */
void kt_cpu_bin_row_avx512(enum kt_cpu_bin_op op, int64_t n, float *d, const float *a, const float *b,
                           bool b_scalar);
/* y[i] = x[i]*s + b, rounded after the product as the scalar loop does; y may alias x. */
void kt_cpu_scale_row_avx512(int64_t n, float *y, const float *x, float s, float b);

/* y = softmax(x*scale + slope*mask) over n elements; mask is NULL, F32 or F16 (mask_f16).
 * A row whose every logit is -inf becomes zeros. y may alias x. */
void kt_cpu_soft_max_row_avx512(int64_t n, float *y, const float *x, const void *mask, bool mask_f16,
                                float scale, float slope);
void kt_cpu_silu_row_avx512(int64_t n, float *y, const float *x);
void kt_cpu_gelu_row_avx512(int64_t n, float *y, const float *x);
void kt_cpu_swiglu_row_avx512(int64_t n, float *y, const float *x, const float *g);
/* sum[r] = the squares of x[r][0..n) added in index order into a double, each
 * float square widened (rms_norm's sum), for eight rows at once. */
void kt_cpu_sum_squares8_avx512(int64_t n, const float *const *x, double *sum);
/* One packed F32 rope row: pair i is (x[2i], x[2i+1]) or, NeoX, (x[i], x[i+n_pairs]), rotated by
 * the angle whose cos/sin are c[i], s[i]; the same fused arithmetic as the scalar loop. y may alias x. */
void kt_cpu_rope_row_avx512(int64_t n_pairs, bool neox, float *y, const float *x, const float *c,
                            const float *s);
/* One unit of fused attention (ops_attn.c) over an F16 cache, D a multiple of 16: G
 * query rows (q_stride bytes apart) against the n cells idx[] of a packed list (k/v
 * rows k_stride / v_stride bytes apart, madd[j] the mask value of entry j): scores
 * into s, their exponentials (less the row's maximum, not yet divided by their sum)
 * into p (rows s_stride floats apart), kf scratch of 16*D floats, outputs rows
 * out_stride bytes apart. */
void kt_cpu_attn_unit_avx512(int64_t D, int64_t G, int64_t n, const float *q, size_t q_stride, const uint8_t *k,
                             size_t k_stride, const uint8_t *v, size_t v_stride, const int32_t *idx, const float *madd,
                             float scale, float *s, float *p, size_t s_stride, float *kf, float *out,
                             size_t out_stride);
/* Fused attention's rows for other caches (ops_attn.c), n a multiple of 16: a dot
 * product (lanes summed by _mm512_reduce_add_ps), and o += p * v. */
float kt_cpu_dot_row_avx512(int64_t n, const float *a, const float *b);
void kt_cpu_axpy_row_avx512(int64_t n, float *o, float p, const float *v);

/* Whether the AVX-512 row kernels may run: the CPU has AVX-512F/DQ/BW/VL and the
 * environment does not cap the ISA (KT_CPU_ISA=ref|avx2, as for the dot products).
 * Decided once, in the kernel table (kernels.c). */
static inline bool kt_cpu_ops_use_avx512(void) { return kt_cpu_kernels()->rows_avx512; }

#endif
