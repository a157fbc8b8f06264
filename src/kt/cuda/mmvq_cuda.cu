/*
 * mmvq_cuda.cu - decoding's matrix-vector products on quantized weights
 * through int8 dot products (dp4a).
 *
 * The activation columns are quantized once per product, 32 values to a
 * block, exactly as the CPU's Q8_0 reference does (d = amax/127, quants
 * roundf(x/d), d kept as fp16), with each block's quant sum beside it. Each
 * warp then takes one weight row: the row is streamed in segments of 2048
 * weights through shared memory by 16-byte asynchronous copies (three
 * segments in flight while one is used), and each lane takes whole
 * 32-weight chunks of the segment: an exact integer sum of quant products per
 * chunk (and per 16 for Q6_K), scaled in float. Products of quantized weights
 * with these blocks are the products of their dequantized values, summed in
 * another order.
 */
#include "cuda_impl.cuh"

#include <cuda_pipeline.h>

#define MMVQ_WARPS 4
#define MMVQ_COLS 8
#define MMVQ_STAGES 4
#define SEG_ELEMS 2048

/* Block bytes and block elements of the types this file reads. */
template <int T> struct qt;
template <> struct qt<KT_TYPE_Q4_0> { enum { bb = KT_CU_Q4_0_BYTES, be = KT_QK4_0 }; };
template <> struct qt<KT_TYPE_Q4_1> { enum { bb = KT_CU_Q4_1_BYTES, be = KT_QK4_1 }; };
template <> struct qt<KT_TYPE_Q5_0> { enum { bb = KT_CU_Q5_0_BYTES, be = KT_QK5_0 }; };
template <> struct qt<KT_TYPE_Q5_1> { enum { bb = KT_CU_Q5_1_BYTES, be = KT_QK5_1 }; };
template <> struct qt<KT_TYPE_Q8_0> { enum { bb = KT_CU_Q8_0_BYTES, be = KT_QK8_0 }; };
template <> struct qt<KT_TYPE_Q4_K> { enum { bb = KT_CU_Q4_K_BYTES, be = KT_QK_K }; };
template <> struct qt<KT_TYPE_Q5_K> { enum { bb = KT_CU_Q5_K_BYTES, be = KT_QK_K }; };
template <> struct qt<KT_TYPE_Q6_K> { enum { bb = KT_CU_Q6_K_BYTES, be = KT_QK_K }; };

/* 16-byte vectors in one segment (every type's segment is a whole number of them). */
template <int T> __host__ __device__ constexpr int seg_vecs() { return SEG_ELEMS / qt<T>::be * qt<T>::bb / 16; }

/* 4 bytes at a 2-byte aligned address. */
__device__ __forceinline__ int ld2x2(const uint8_t *p) {
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | (uint32_t)h[1] << 16);
}
__device__ __forceinline__ int ld4(const uint8_t *p) { return *(const int *)p; }

/* Bit i (0..3) of b moved to bit 4 of byte i. */
__device__ __forceinline__ int spread4(uint32_t b) {
    return (int)(((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25));
}

/* The 32 activation quants of a chunk as 8 ints. */
__device__ __forceinline__ void load_x(const int8_t *q, int *x) {
    const int4 a = *(const int4 *)q, b = *((const int4 *)q + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

/* Chunk ch (32 weights) of a segment in shared memory w, dotted with activation chunk
 * (x, d = scale, s = quant sum); acc gets the result. */
template <int T>
__device__ __forceinline__ float chunk_dot(const uint8_t *w, int ch, const int *x, float dx, float sx, float acc) {
    if (T == KT_TYPE_Q4_0 || T == KT_TYPE_Q4_1) {
        const uint8_t *b = w + ch * qt<T>::bb, *qs = b + (T == KT_TYPE_Q4_0 ? KT_CU_Q4_0_QS : KT_CU_Q4_1_QS);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int v = T == KT_TYPE_Q4_1 ? ld4(qs + 4 * i) : ld2x2(qs + 4 * i);
            s = __dp4a(v & 0x0F0F0F0F, x[i], s);
            s = __dp4a((v >> 4) & 0x0F0F0F0F, x[i + 4], s);
        }
        if (T == KT_TYPE_Q4_0) return fmaf((float)(s - 8 * (int)sx), kt_cu_h(b) * dx, acc);
        return acc + (float)s * (kt_cu_h(b) * dx) + kt_cu_h(b + KT_CU_Q4_1_M) * (dx * sx);
    } else if (T == KT_TYPE_Q5_0 || T == KT_TYPE_Q5_1) {
        const uint8_t *b = w + ch * qt<T>::bb, *qs = b + (T == KT_TYPE_Q5_0 ? KT_CU_Q5_0_QS : KT_CU_Q5_1_QS);
        const uint32_t qh = (uint32_t)ld2x2(b + (T == KT_TYPE_Q5_0 ? KT_CU_Q5_0_QH : KT_CU_Q5_1_QH));
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int v = T == KT_TYPE_Q5_1 ? ld4(qs + 4 * i) : ld2x2(qs + 4 * i);
            s = __dp4a((v & 0x0F0F0F0F) | spread4(qh >> (4 * i)), x[i], s);
            s = __dp4a(((v >> 4) & 0x0F0F0F0F) | spread4(qh >> (16 + 4 * i)), x[i + 4], s);
        }
        if (T == KT_TYPE_Q5_0) return acc + (float)(s - 16 * (int)sx) * (kt_cu_h(b) * dx);
        return acc + (float)s * (kt_cu_h(b) * dx) + kt_cu_h(b + KT_CU_Q5_1_M) * (dx * sx);
    } else if (T == KT_TYPE_Q8_0) {
        const uint8_t *b = w + ch * KT_CU_Q8_0_BYTES;
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a(ld2x2(b + KT_CU_Q8_0_QS + 4 * i), x[i], s);
        return fmaf((float)s, kt_cu_h(b) * dx, acc);
    } else if (T == KT_TYPE_Q4_K || T == KT_TYPE_Q5_K) {
        const bool five = T == KT_TYPE_Q5_K;
        const int j = ch % 8;
        const uint8_t *b = w + (ch / 8) * qt<T>::bb, *qs = b + (five ? KT_CU_Q5_K_QS : KT_CU_Q4_K_QS) + (j / 2) * 32;
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int v = (ld4(qs + 4 * i) >> (4 * (j & 1))) & 0x0F0F0F0F;
            if (five) v |= (int)(((uint32_t)ld4(b + KT_CU_Q5_K_QH + 4 * i) >> j) & 0x01010101u) << 4;
            s = __dp4a(v, x[i], s);
        }
        int sc, mn;
        kt_cu_k4_scale_min(j, b + KT_CU_Q4_K_SCALES, &sc, &mn); /* (the same offsets in Q5_K) */
        return acc + dx * (kt_cu_h(b) * (float)sc * (float)s - kt_cu_h(b + KT_CU_Q4_K_DMIN) * (float)mn * sx);
    } else { /* Q6_K */
        const int j = ch % 8, h = j / 4, kk = j % 4;
        const uint8_t *b = w + (ch / 8) * KT_CU_Q6_K_BYTES;
        const uint8_t *ql = b + KT_CU_Q6_K_QL + 64 * h + 32 * (kk & 1), *qh = b + KT_CU_Q6_K_QH + 32 * h;
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (ld2x2(ql + 4 * i) >> (4 * (kk >> 1))) & 0x0F0F0F0F;
            const int hi = ((ld2x2(qh + 4 * i) >> (2 * kk)) & 0x03030303) << 4;
            const int q = (int)__vsub4((unsigned)(lo | hi), 0x20202020u);
            if (i < 4)
                s0 = __dp4a(q, x[i], s0);
            else
                s1 = __dp4a(q, x[i], s1);
        }
        const int8_t *sc = (const int8_t *)(b + KT_CU_Q6_K_SCALES + 2 * j);
        return acc + (kt_cu_h(b + KT_CU_Q6_K_D) * dx) * (float)(sc[0] * s0 + sc[1] * s1);
    }
}

/* Q4_0 and Q8_0 blocks two at a time, from the 9 (17) words of the pair: bytes 2..17
 * (2..33) of the first block straddle words, the second block's quants are whole words. */
#define QT_PAIR_WORDS(T) ((T) == KT_TYPE_Q4_0 ? 9 : 17)

__device__ __forceinline__ float h_lo(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u & 0xffffu))); }
__device__ __forceinline__ float h_hi(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)(u >> 16))); }

template <int T>
__device__ __forceinline__ float pair_dot(const uint32_t *u, const int *x, float4 dsx, float acc) {
    if (T == KT_TYPE_Q4_0) {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int v0 = (int)__byte_perm(u[i], u[i + 1], 0x5432), v1 = (int)u[5 + i];
            s0 = __dp4a(v0 & 0x0F0F0F0F, x[i], s0);
            s0 = __dp4a((v0 >> 4) & 0x0F0F0F0F, x[i + 4], s0);
            s1 = __dp4a(v1 & 0x0F0F0F0F, x[8 + i], s1);
            s1 = __dp4a((v1 >> 4) & 0x0F0F0F0F, x[12 + i], s1);
        }
        acc = fmaf((float)(s0 - 8 * (int)dsx.y), h_lo(u[0]) * dsx.x, acc);
        return fmaf((float)(s1 - 8 * (int)dsx.w), h_hi(u[4]) * dsx.z, acc);
    } else {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            s0 = __dp4a((int)__byte_perm(u[i], u[i + 1], 0x5432), x[i], s0);
            s1 = __dp4a((int)u[9 + i], x[8 + i], s1);
        }
        acc = fmaf((float)s0, h_lo(u[0]) * dsx.x, acc);
        return fmaf((float)s1, h_hi(u[8]) * dsx.z, acc);
    }
}

/* Activations: one warp per 32-value block of a column (columns in (n, i2, i3) order). */
__global__ void k_quant_q8(kt_cu_t b, int8_t *q, float2 *ds, int64_t n_blocks) {
    const int64_t wi = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    if (wi >= n_blocks) return;
    const int64_t K = b.ne[0], nb = K / 32, col = wi / nb, blk = wi % nb;
    const int64_t n = col % b.ne[1], i2 = col / b.ne[1] % b.ne[2], i3 = col / b.ne[1] / b.ne[2];
    const float x = *(const float *)(b.data + (blk * 32 + lane) * b.nb[0] + n * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3]);
    const float amax = warp_max(fabsf(x));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int qi = (int)roundf(x * id);
    q[col * K + blk * 32 + lane] = (int8_t)qi;
    const int s = warp_sum(qi);
    if (lane == 0) ds[wi] = make_float2(__half2float(__float2half_rn(d)), (float)s);
}

/* Segment sg of a row (row_vecs 16-byte vectors) into buf by asynchronous copies of this
 * lane's vectors, as one commit group (empty past the row's end, so that every lane
 * counts the same groups). */
template <int NV>
__device__ __forceinline__ void issue_seg(uint4 *buf, const uint4 *row, int64_t sg, int64_t row_vecs, int lane) {
    const int64_t v0 = sg * NV;
    for (int i = lane; i < NV && v0 + i < row_vecs; i += WARP) __pipeline_memcpy_async(buf + i, row + v0 + i, 16);
    __pipeline_commit();
}

/* One warp per (weight row, i2, i3); up to NC columns per pass over the row. The
 * row's segments go through MMVQ_STAGES buffers, the next MMVQ_STAGES - 1 in flight
 * while one is used. */
template <int T, int NC>
__global__ void __launch_bounds__(MMVQ_WARPS *WARP, 8) k_mmvq(kt_cu_t d, kt_cu_t a, kt_cu_t b, const int8_t *qx,
                                                             const float2 *ds) {
    constexpr int NV = seg_vecs<T>();
    __shared__ uint4 sm[MMVQ_WARPS][MMVQ_STAGES][NV];
    const int lane = threadIdx.x % WARP, wl = threadIdx.x / WARP;
    /* 32-bit index arithmetic: mmvq_applies() keeps rows x batches under 2^31 */
    const int wi = blockIdx.x * MMVQ_WARPS + wl, M = (int)a.ne[1], B2 = (int)b.ne[2];
    const int64_t K = a.ne[0], N = b.ne[1];
    const int m = wi % M, i23 = wi / M, i2 = i23 % B2, i3 = i23 / B2;
    if (i3 >= b.ne[3]) return;
    const uint4 *row = (const uint4 *)(a.data + m * a.nb[1] + i2 / (int)(b.ne[2] / a.ne[2]) * a.nb[2] +
                                       i3 / (int)(b.ne[3] / a.ne[3]) * a.nb[3]);
    const int64_t row_vecs = K / qt<T>::be * qt<T>::bb / 16, n_seg = (K + SEG_ELEMS - 1) / SEG_ELEMS;
    for (int64_t n0 = 0; n0 < N; n0 += NC) {
        const int nc = (int)(N - n0 < NC ? N - n0 : NC);
        float acc[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) acc[c] = 0.0f;
        __syncwarp(); /* the last pass's buffers are no longer read */
#pragma unroll
        for (int st = 0; st < MMVQ_STAGES - 1; st++) issue_seg<NV>(sm[wl][st], row, st, row_vecs, lane);
        for (int64_t sg = 0; sg < n_seg; sg++) {
            issue_seg<NV>(sm[wl][(sg + MMVQ_STAGES - 1) % MMVQ_STAGES], row, sg + MMVQ_STAGES - 1, row_vecs, lane);
            __pipeline_wait_prior(MMVQ_STAGES - 1);
            __syncwarp();
            const uint8_t *w = (const uint8_t *)sm[wl][sg % MMVQ_STAGES];
            const int64_t k0 = sg * SEG_ELEMS;
            const int n_ch = (int)((K - k0 < SEG_ELEMS ? K - k0 : SEG_ELEMS) / 32);
            if (T == KT_TYPE_Q4_0 || T == KT_TYPE_Q8_0) {
                /* two chunks per lane: a pair of blocks starts at a 4-byte boundary */
                for (int p = lane; p < n_ch / 2; p += WARP) {
                    uint32_t u[QT_PAIR_WORDS(T)];
#pragma unroll
                    for (int i = 0; i < QT_PAIR_WORDS(T); i++) u[i] = ((const uint32_t *)w)[QT_PAIR_WORDS(T) * p + i];
                    const int64_t blk = (k0 >> 5) + 2 * p;
#pragma unroll
                    for (int c = 0; c < NC; c++) {
                        if (c >= nc) break;
                        const int64_t col = (n0 + c) + N * i23;
                        int x[16];
                        load_x(qx + col * K + blk * 32, x);
                        load_x(qx + col * K + blk * 32 + 32, x + 8);
                        const float4 dsx = *(const float4 *)(ds + col * (K / 32) + blk);
                        acc[c] = pair_dot<T>(u, x, dsx, acc[c]);
                    }
                }
            } else {
                for (int ch = lane; ch < n_ch; ch += WARP) {
                    const int64_t blk = (k0 >> 5) + ch;
#pragma unroll
                    for (int c = 0; c < NC; c++) {
                        if (c >= nc) break;
                        const int64_t col = (n0 + c) + N * i23;
                        int x[8];
                        load_x(qx + col * K + blk * 32, x);
                        const float2 dsx = ds[col * (K / 32) + blk];
                        acc[c] = chunk_dot<T>(w, ch, x, dsx.x, dsx.y, acc[c]);
                    }
                }
            }
            __syncwarp(); /* before this buffer is filled again */
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c >= nc) break;
            const float v = warp_sum(acc[c]);
            if (lane == 0) *(float *)(d.data + m * d.nb[0] + (n0 + c) * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = v;
        }
    }
}

static bool mmvq_type(int t) {
    switch (t) {
    case KT_TYPE_Q4_0: case KT_TYPE_Q4_1: case KT_TYPE_Q5_0: case KT_TYPE_Q5_1: case KT_TYPE_Q8_0:
    case KT_TYPE_Q4_K: case KT_TYPE_Q5_K: case KT_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

/* Rows whole 16-byte vectors at 16-byte aligned addresses (whole blocks, so whole 32-value
 * activation blocks too). */
static bool mmvq_applies(const kt_cu_t &a, const kt_cu_t &b) {
    const enum kt_type t = (enum kt_type)a.type;
    if (!mmvq_type(t) || a.ne[0] % kt_blck_size(t) || b.ne[1] > 2 * MMVQ_COLS) return false;
    return kt_row_size(t, a.ne[0]) % 16 == 0 && a.ne[1] * b.ne[2] * b.ne[3] < INT32_MAX / 2 &&
           (uintptr_t)a.data % 16 == 0 && a.nb[1] % 16 == 0 && a.nb[2] % 16 == 0 && a.nb[3] % 16 == 0;
}

size_t kt_cu_mmvq_scratch(const kt_cu_t &a, const kt_cu_t &b) {
    if (!mmvq_applies(a, b)) return 0;
    const size_t cols = (size_t)(b.ne[1] * b.ne[2] * b.ne[3]), K = (size_t)b.ne[0];
    return cols * K + cols * (K / 32) * sizeof(float2) + 256;
}

template <int T>
static void mmvq_t(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, const int8_t *q, const float2 *ds) {
    const int64_t warps = a.ne[1] * b.ne[2] * b.ne[3];
    const unsigned blocks = (unsigned)((warps + MMVQ_WARPS - 1) / MMVQ_WARPS);
    if (b.ne[1] == 1) /* decoding one sequence: registers for one column */
        k_mmvq<T, 1><<<blocks, MMVQ_WARPS * WARP, 0, s>>>(dst, a, b, q, ds);
    else
        k_mmvq<T, MMVQ_COLS><<<blocks, MMVQ_WARPS * WARP, 0, s>>>(dst, a, b, q, ds);
}

bool kt_cu_mmvq(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, void *scratch, bool quantized) {
    if (!scratch || !mmvq_applies(a, b)) return false;
    const int64_t cols = b.ne[1] * b.ne[2] * b.ne[3], K = b.ne[0], n_blocks = cols * (K / 32);
    int8_t *q = (int8_t *)scratch;
    float2 *ds = (float2 *)(q + ((cols * K + 255) & ~(int64_t)255));
    if (!quantized) k_quant_q8<<<(unsigned)((n_blocks * WARP + 255) / 256), 256, 0, s>>>(b, q, ds, n_blocks);
    switch (a.type) {
    case KT_TYPE_Q4_0: mmvq_t<KT_TYPE_Q4_0>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q4_1: mmvq_t<KT_TYPE_Q4_1>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q5_0: mmvq_t<KT_TYPE_Q5_0>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q5_1: mmvq_t<KT_TYPE_Q5_1>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q8_0: mmvq_t<KT_TYPE_Q8_0>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q4_K: mmvq_t<KT_TYPE_Q4_K>(s, dst, a, b, q, ds); break;
    case KT_TYPE_Q5_K: mmvq_t<KT_TYPE_Q5_K>(s, dst, a, b, q, ds); break;
    default: mmvq_t<KT_TYPE_Q6_K>(s, dst, a, b, q, ds); break;
    }
    return true;
}
