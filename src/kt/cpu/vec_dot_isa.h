/*
 * vec_dot_isa.h - private to the CPU engine: the ISA variants of the dot
 * products and activation quantizers. Call one only after checking the CPU
 * (vec_dot.c does; tests check __builtin_cpu_supports themselves).
 *
 * The quantizers give the reference's bytes. The dots sum each block (or
 * K-quant super-block) exactly in integers, as the reference does; the AVX2
 * ones and the AVX-512 F16/F32 ones accumulate the scaled block sums in float
 * vectors (they differ from the reference by float summation order only), the
 * AVX-512 Q4_0, Q8_0, Q4_K and Q6_K ones keep the reference's order and equal
 * it bit for bit (gemm_lanes*_avx512.c, where their mul_mat kernels live).
 */
#ifndef KT_VEC_DOT_ISA_H
#define KT_VEC_DOT_ISA_H

#include "kt.h"

/* AVX2 + FMA + F16C */
void kt_vec_dot_q4_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q8_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q4_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q6_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_f16_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_f32_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
/* vec_dot_more_avx2.c: the other weight types */
void kt_vec_dot_q4_1_q8_1_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_0_q8_0_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_1_q8_1_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_mxfp4_q8_0_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q2_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q3_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_K_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_iq4_xs_q8_K_avx2(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_quantize_row_q8_0_avx2(const float *restrict x, void *restrict y, int64_t n);
void kt_quantize_row_q8_1_avx2(const float *restrict x, void *restrict y, int64_t n);
void kt_quantize_row_q8_K_avx2(const float *restrict x, void *restrict y, int64_t n);
void kt_fp32_to_fp16_row_avx2(const float *restrict x, void *restrict y, int64_t n);

/* AVX-512 F/BW/VL + VNNI (vpdpbusd replaces the maddubs/madd pair); the first four
 * in gemm_lanes_avx512.c / gemm_lanes_k_avx512.c */
void kt_vec_dot_q4_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q8_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q4_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q6_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_f16_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_f32_avx512(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);

#endif
