/*
 * cuda_impl.cuh - what the CUDA backend's files share: a tensor as the
 * kernels see it (pointer, sizes, byte strides, type), the launchers that
 * backend_cuda.cu calls per op, and device-side element access for every
 * weight type the kernels read (the block layouts of src/kt/quant.h).
 */
#ifndef KT_CUDA_IMPL_CUH
#define KT_CUDA_IMPL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <stddef.h>

#define restrict __restrict__
#define _Static_assert static_assert /* quant.h is C11; its layout checks hold in C++ too */
extern "C" {
#include "backend-impl.h"
#include "quant.h"
}
#undef _Static_assert
#undef restrict

/* ---- block layouts: the structs of quant.h as byte counts and offsets, for kernels
 * that read a block's bytes directly (fp16 scales at any 2-byte boundary, quants as
 * words). Each is checked against quant.h below, so a layout that changes there
 * stops this file compiling instead of being read wrong on the GPU. */
enum {
    KT_CU_Q4_0_BYTES = 18, KT_CU_Q4_0_QS = 2,
    KT_CU_Q4_1_BYTES = 20, KT_CU_Q4_1_M = 2, KT_CU_Q4_1_QS = 4,
    KT_CU_Q5_0_BYTES = 22, KT_CU_Q5_0_QH = 2, KT_CU_Q5_0_QS = 6,
    KT_CU_Q5_1_BYTES = 24, KT_CU_Q5_1_M = 2, KT_CU_Q5_1_QH = 4, KT_CU_Q5_1_QS = 8,
    KT_CU_Q8_0_BYTES = 34, KT_CU_Q8_0_QS = 2,
    KT_CU_Q4_K_BYTES = 144, KT_CU_Q4_K_DMIN = 2, KT_CU_Q4_K_SCALES = 4, KT_CU_Q4_K_QS = 16,
    KT_CU_Q5_K_BYTES = 176, KT_CU_Q5_K_DMIN = 2, KT_CU_Q5_K_SCALES = 4, KT_CU_Q5_K_QH = 16, KT_CU_Q5_K_QS = 48,
    KT_CU_Q6_K_BYTES = 210, KT_CU_Q6_K_QL = 0, KT_CU_Q6_K_QH = 128, KT_CU_Q6_K_SCALES = 192, KT_CU_Q6_K_D = 208,
};
#define KT_CU_LAYOUT(block, bytes) static_assert(sizeof(block) == (bytes), #block " size")
#define KT_CU_FIELD(block, field, off) static_assert(offsetof(block, field) == (off), #block "." #field " offset")
KT_CU_LAYOUT(kt_block_q4_0, KT_CU_Q4_0_BYTES);
KT_CU_FIELD(kt_block_q4_0, qs, KT_CU_Q4_0_QS);
KT_CU_LAYOUT(kt_block_q4_1, KT_CU_Q4_1_BYTES);
KT_CU_FIELD(kt_block_q4_1, m, KT_CU_Q4_1_M);
KT_CU_FIELD(kt_block_q4_1, qs, KT_CU_Q4_1_QS);
KT_CU_LAYOUT(kt_block_q5_0, KT_CU_Q5_0_BYTES);
KT_CU_FIELD(kt_block_q5_0, qh, KT_CU_Q5_0_QH);
KT_CU_FIELD(kt_block_q5_0, qs, KT_CU_Q5_0_QS);
KT_CU_LAYOUT(kt_block_q5_1, KT_CU_Q5_1_BYTES);
KT_CU_FIELD(kt_block_q5_1, m, KT_CU_Q5_1_M);
KT_CU_FIELD(kt_block_q5_1, qh, KT_CU_Q5_1_QH);
KT_CU_FIELD(kt_block_q5_1, qs, KT_CU_Q5_1_QS);
KT_CU_LAYOUT(kt_block_q8_0, KT_CU_Q8_0_BYTES);
KT_CU_FIELD(kt_block_q8_0, qs, KT_CU_Q8_0_QS);
KT_CU_LAYOUT(kt_block_q4_K, KT_CU_Q4_K_BYTES);
KT_CU_FIELD(kt_block_q4_K, dmin, KT_CU_Q4_K_DMIN);
KT_CU_FIELD(kt_block_q4_K, scales, KT_CU_Q4_K_SCALES);
KT_CU_FIELD(kt_block_q4_K, qs, KT_CU_Q4_K_QS);
KT_CU_LAYOUT(kt_block_q5_K, KT_CU_Q5_K_BYTES);
KT_CU_FIELD(kt_block_q5_K, dmin, KT_CU_Q5_K_DMIN);
KT_CU_FIELD(kt_block_q5_K, scales, KT_CU_Q5_K_SCALES);
KT_CU_FIELD(kt_block_q5_K, qh, KT_CU_Q5_K_QH);
KT_CU_FIELD(kt_block_q5_K, qs, KT_CU_Q5_K_QS);
KT_CU_LAYOUT(kt_block_q6_K, KT_CU_Q6_K_BYTES);
KT_CU_FIELD(kt_block_q6_K, ql, KT_CU_Q6_K_QL);
KT_CU_FIELD(kt_block_q6_K, qh, KT_CU_Q6_K_QH);
KT_CU_FIELD(kt_block_q6_K, scales, KT_CU_Q6_K_SCALES);
KT_CU_FIELD(kt_block_q6_K, d, KT_CU_Q6_K_D);
#undef KT_CU_LAYOUT
#undef KT_CU_FIELD

/* A tensor by value: what a kernel needs to address any element. */
struct kt_cu_t {
    char *data;
    int64_t ne[4];
    int64_t nb[4];
    int type;
};

static inline kt_cu_t kt_cu_desc(const struct kt_tensor *t) {
    kt_cu_t d;
    d.data = (char *)t->data;
    for (int i = 0; i < 4; i++) {
        d.ne[i] = t->ne[i];
        d.nb[i] = (int64_t)t->nb[i];
    }
    d.type = (int)t->type;
    return d;
}

/* Weight and cache types the kernels dequantize (get_rows, mul_mat, attention). */
static inline bool kt_cu_type_readable(enum kt_type t) {
    switch (t) {
    case KT_TYPE_F32: case KT_TYPE_F16: case KT_TYPE_Q4_0: case KT_TYPE_Q4_1: case KT_TYPE_Q5_0:
    case KT_TYPE_Q5_1: case KT_TYPE_Q8_0: case KT_TYPE_Q4_K: case KT_TYPE_Q5_K: case KT_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

#define WARP 32

/* Sum or max over a warp; every lane gets it. */
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float kt_cu_h(const uint8_t *p) {
    __half h;
    memcpy(&h, p, 2);
    return __half2float(h);
}

/* Q4_K/Q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes (quant.h's layout). */
__device__ __forceinline__ void kt_cu_k4_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Element k of a row of type `type` starting at row, computed the way the CPU's
 * to_float computes it (same products in the same order). */
__device__ __forceinline__ float kt_cu_load(int type, const char *row, int64_t k) {
    const uint8_t *r = (const uint8_t *)row;
    switch (type) {
    case KT_TYPE_F32:
        return ((const float *)row)[k];
    case KT_TYPE_F16:
        return __half2float(((const __half *)row)[k]);
    case KT_TYPE_Q4_0: {
        const uint8_t *b = r + (k / 32) * KT_CU_Q4_0_BYTES, *qs = b + KT_CU_Q4_0_QS;
        const int j = (int)(k % 32);
        const int q = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
        return (float)(q - 8) * kt_cu_h(b);
    }
    case KT_TYPE_Q4_1: {
        const uint8_t *b = r + (k / 32) * KT_CU_Q4_1_BYTES, *qs = b + KT_CU_Q4_1_QS;
        const int j = (int)(k % 32);
        const int q = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
        return (float)q * kt_cu_h(b) + kt_cu_h(b + KT_CU_Q4_1_M);
    }
    case KT_TYPE_Q5_0: {
        const uint8_t *b = r + (k / 32) * KT_CU_Q5_0_BYTES, *qs = b + KT_CU_Q5_0_QS;
        const int j = (int)(k % 32);
        uint32_t qh;
        memcpy(&qh, b + KT_CU_Q5_0_QH, 4);
        const int lo = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
        return (float)((lo | (int)(((qh >> j) & 1) << 4)) - 16) * kt_cu_h(b);
    }
    case KT_TYPE_Q5_1: {
        const uint8_t *b = r + (k / 32) * KT_CU_Q5_1_BYTES, *qs = b + KT_CU_Q5_1_QS;
        const int j = (int)(k % 32);
        uint32_t qh;
        memcpy(&qh, b + KT_CU_Q5_1_QH, 4);
        const int lo = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
        return (float)(lo | (int)(((qh >> j) & 1) << 4)) * kt_cu_h(b) + kt_cu_h(b + KT_CU_Q5_1_M);
    }
    case KT_TYPE_Q8_0: {
        const uint8_t *b = r + (k / 32) * KT_CU_Q8_0_BYTES;
        return (float)(int8_t)b[KT_CU_Q8_0_QS + k % 32] * kt_cu_h(b);
    }
    case KT_TYPE_Q4_K:
    case KT_TYPE_Q5_K: {
        const bool five = type == KT_TYPE_Q5_K;
        const uint8_t *b = r + (k / 256) * (five ? KT_CU_Q5_K_BYTES : KT_CU_Q4_K_BYTES);
        const int e = (int)(k % 256), j = e / 32, l = e % 32;
        int sc, mn;
        kt_cu_k4_scale_min(j, b + KT_CU_Q4_K_SCALES, &sc, &mn); /* (the same offset in Q5_K) */
        const uint8_t *qs = b + (five ? KT_CU_Q5_K_QS : KT_CU_Q4_K_QS);
        int q = (qs[(j / 2) * 32 + l] >> ((j & 1) * 4)) & 0xf;
        if (five) q += ((b[KT_CU_Q5_K_QH + l] >> j) & 1) * 16;
        const float dl = kt_cu_h(b) * (float)sc, ml = kt_cu_h(b + KT_CU_Q4_K_DMIN) * (float)mn;
        return dl * (float)q - ml;
    }
    case KT_TYPE_Q6_K: {
        const uint8_t *b = r + (k / 256) * KT_CU_Q6_K_BYTES;
        const int e = (int)(k % 256), h = e / 128, kk = (e / 32) % 4, l = e % 32;
        const int lo = (b[KT_CU_Q6_K_QL + 64 * h + l + 32 * (kk & 1)] >> (4 * (kk >> 1))) & 0xf;
        const int hi = (b[KT_CU_Q6_K_QH + 32 * h + l] >> (2 * kk)) & 3;
        const float ds = kt_cu_h(b + KT_CU_Q6_K_D) * (float)(int8_t)b[KT_CU_Q6_K_SCALES + e / 16];
        return ds * (float)((lo | (hi << 4)) - 32);
    }
    default:
        return 0.0f;
    }
}

/* ---- launchers (ops_cuda.cu); each returns after queuing on stream s */
void kt_cu_binary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, kt_cu_t b); /* add sub mul div swiglu */
void kt_cu_unary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, float p0, float p1);
/* norm or rms_norm of a's rows; with w (one row), also md = dst times w, in the same pass:
 * false, nothing queued, where that fused form does not apply */
bool kt_cu_norm(cudaStream_t s, bool rms, kt_cu_t dst, kt_cu_t a, float eps, const kt_cu_t *w, const kt_cu_t *md);
void kt_cu_rope(cudaStream_t s, kt_cu_t dst, kt_cu_t a, const int32_t *pos, int64_t pos_stride, const float *ff,
                const struct kt_rope_params *rp);
void kt_cu_soft_max(cudaStream_t s, kt_cu_t dst, kt_cu_t a, const kt_cu_t *mask, float scale);
void kt_cu_get_rows(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t ids);
void kt_cu_copy(cudaStream_t s, kt_cu_t dst, kt_cu_t a); /* any layout; F32/F16 both ways */
/* whether prompts' products go through cuBLAS (libcublas opened, KILN_CUDA_NO_CUBLAS unset) */
bool kt_cu_cublas(void);
/* scratch: device memory of at least kt_cu_*_scratch() bytes (NULL when that is 0) */
size_t kt_cu_mul_mat_scratch(const kt_cu_t &dst, const kt_cu_t &a, const kt_cu_t &b);
/* true when it went through int8 quants of b, which scratch then holds; with quantized,
 * scratch already holds them (from the last product on the same b) */
bool kt_cu_mul_mat(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, void *scratch, bool quantized);
/* decoding on quantized weights through int8 dot products (mmvq_cuda.cu): the scratch it
 * needs (0 where it does not apply), and the product (false, nothing queued, where not) */
size_t kt_cu_mmvq_scratch(const kt_cu_t &a, const kt_cu_t &b);
bool kt_cu_mmvq(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, void *scratch, bool quantized);
size_t kt_cu_attn_scratch(const kt_cu_t &q, const kt_cu_t &k);
void kt_cu_attn(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                const int32_t *order, float scale, void *scratch);
/* prompts' attention on tensor cores (fattn_cuda.cu): false, nothing queued, where it does not apply */
bool kt_cu_attn_tc(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                   const int32_t *order, float scale);
void kt_cu_argmax(cudaStream_t s, kt_cu_t dst, kt_cu_t a);

#endif
