/*
 * ops_cuda.cu - the CUDA backend's kernels: element-wise ops over any
 * layout, row reductions (rms_norm, norm, soft_max, argmax), rope, get_rows,
 * copies that convert (into an F16 cache), mul_mat (one warp per weight row
 * for decoding, weights read in their own block format; for prompts cuBLAS
 * over F16 copies of both operands, or kiln's own F32 shared-memory tiles
 * without cuBLAS) and fused attention (an online softmax per warp over the
 * cells in the order the op lists them, split across blocks when the batch is
 * small). Each launcher queues on a stream.
 */
#include "cuda_impl.cuh"

#include <cublas_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Byte offset of element (i0..i3) in t. */
__device__ __forceinline__ int64_t off4(const kt_cu_t &t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/* Linear element index -> (i0..i3) in t's shape. */
__device__ __forceinline__ void unravel(const kt_cu_t &t, int64_t e, int64_t *i) {
    i[0] = e % t.ne[0];
    e /= t.ne[0];
    i[1] = e % t.ne[1];
    e /= t.ne[1];
    i[2] = e % t.ne[2];
    i[3] = e / t.ne[2];
}

/* Block-wide sum or max (blockDim.x a multiple of 32, at most 1024); every thread gets it. */
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float part[32];
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();
    if (lane == 0) part[w] = v;
    __syncthreads();
    float r = lane < nw ? part[lane] : (is_max ? -INFINITY : 0.0f);
    r = is_max ? warp_max(r) : warp_sum(r);
    return r;
}

static unsigned grid_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

static int64_t nelem(const kt_cu_t &t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

/* ------------------------------------------------------------------ element-wise */

__device__ __forceinline__ float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
}

__device__ __forceinline__ float binop(int op, float x, float y) {
    switch (op) {
    case KT_OP_GEGLU: return gelu_tanh(x) * y;
    case KT_OP_ADD: return x + y;
    case KT_OP_SUB: return x - y;
    case KT_OP_MUL: return x * y;
    case KT_OP_SWIGLU: return x / (1.0f + expf(-x)) * y;
    default: return x / y;
    }
}

__global__ void k_binary(int op, kt_cu_t d, kt_cu_t a, kt_cu_t b, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4];
    unravel(d, e, i);
    const float x = *(const float *)(a.data + off4(a, i[0], i[1], i[2], i[3]));
    const float y = *(const float *)(b.data + off4(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]));
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = binop(op, x, y);
}

/* Contiguous d and a of one shape, b contiguous of that shape or one row (nb elements). */
__global__ void k_binary_c(int op, float *d, const float *a, const float *b, int n, int nb) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) d[e] = binop(op, a[e], b[nb == n ? e : e % nb]);
}

/* F32 and dense in index order. */
static bool contig(const kt_cu_t &t) {
    return t.type == KT_TYPE_F32 && t.nb[0] == 4 && t.nb[1] == 4 * t.ne[0] && t.nb[2] == t.nb[1] * t.ne[1] &&
           t.nb[3] == t.nb[2] * t.ne[2];
}
static bool same_shape(const kt_cu_t &x, const kt_cu_t &y) {
    return x.ne[0] == y.ne[0] && x.ne[1] == y.ne[1] && x.ne[2] == y.ne[2] && x.ne[3] == y.ne[3];
}
static bool is_row(const kt_cu_t &t) { return t.ne[1] == 1 && t.ne[2] == 1 && t.ne[3] == 1; }

void kt_cu_binary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, kt_cu_t b) {
    const int64_t n = nelem(dst);
    if (!n) return;
    if (n < INT32_MAX && contig(dst) && contig(a) && contig(b) && same_shape(dst, a) &&
        (same_shape(dst, b) || (is_row(b) && b.ne[0] == dst.ne[0])))
        k_binary_c<<<grid_for(n, 256), 256, 0, s>>>(op, (float *)dst.data, (const float *)a.data,
                                                    (const float *)b.data, (int)n, (int)nelem(b));
    else
        k_binary<<<grid_for(n, 256), 256, 0, s>>>(op, dst, a, b, n);
}

__global__ void k_unary(int op, kt_cu_t d, kt_cu_t a, float p0, float p1, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4];
    unravel(d, e, i);
    const float x = *(const float *)(a.data + off4(a, i[0], i[1], i[2], i[3]));
    float r;
    switch (op) {
    case KT_OP_SCALE: r = x * p0 + p1; break;
    case KT_OP_SQR: r = x * x; break;
    case KT_OP_SQRT: r = sqrtf(x); break;
    case KT_OP_SILU: r = x / (1.0f + expf(-x)); break;
    case KT_OP_RELU: r = x > 0.0f ? x : 0.0f; break;
    case KT_OP_SOFTCAP: r = p0 * tanhf(x / p0); break;
    default: r = gelu_tanh(x); break; /* GELU, tanh approximation */
    }
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = r;
}

void kt_cu_unary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, float p0, float p1) {
    const int64_t n = nelem(dst);
    if (n) k_unary<<<grid_for(n, 256), 256, 0, s>>>(op, dst, a, p0, p1, n);
}

/* ------------------------------------------------------------------ rows */

/* One block per row. */
__global__ void k_norm(bool rms, kt_cu_t d, kt_cu_t a, float eps) {
    const int64_t r = blockIdx.x, i1 = r % a.ne[1], i2 = r / a.ne[1] % a.ne[2], i3 = r / a.ne[1] / a.ne[2];
    const char *x = a.data + off4(a, 0, i1, i2, i3);
    char *y = d.data + off4(d, 0, i1, i2, i3);
    const int64_t n = a.ne[0];
    float mean = 0.0f;
    if (!rms) {
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += *(const float *)(x + i * a.nb[0]);
        mean = block_reduce(s, false) / (float)n;
    }
    float s2 = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = *(const float *)(x + i * a.nb[0]) - mean;
        s2 += v * v;
    }
    const float var = block_reduce(s2, false) / (float)n;
    const float sc = 1.0f / sqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        *(float *)(y + i * d.nb[0]) = (*(const float *)(x + i * a.nb[0]) - mean) * sc;
}

/* Contiguous rows of at most 1024 * PER floats, held in registers (all loads in flight at
 * once); with w, also md = the result times the row w (rms_norm x weight in one pass). */
template <int PER>
__global__ void k_norm4(bool rms, float *d, const float *a, int n4, float eps, const float *w, float *md) {
    const int64_t r = blockIdx.x;
    const float4 *x = (const float4 *)a + r * n4;
    float4 v[PER];
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        v[u] = i < n4 ? x[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    const float n = (float)(4 * n4);
    const float mean = rms ? 0.0f : block_reduce(s, false) / n;
    float s2 = 0.0f;
#pragma unroll
    for (int u = 0; u < PER; u++)
        if (threadIdx.x + u * blockDim.x < n4) {
            const float p = v[u].x - mean, q = v[u].y - mean, t = v[u].z - mean, z = v[u].w - mean;
            s2 += (p * p + q * q) + (t * t + z * z);
        }
    const float sc = 1.0f / sqrtf(block_reduce(s2, false) / n + eps);
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        if (i >= n4) break;
        const float4 y = make_float4((v[u].x - mean) * sc, (v[u].y - mean) * sc, (v[u].z - mean) * sc, (v[u].w - mean) * sc);
        ((float4 *)d)[r * n4 + i] = y;
        if (w) {
            const float4 g = ((const float4 *)w)[i];
            ((float4 *)md)[r * n4 + i] = make_float4(y.x * g.x, y.y * g.y, y.z * g.z, y.w * g.w);
        }
    }
}

static bool aligned16(const kt_cu_t &t) { return (uintptr_t)t.data % 16 == 0; }

bool kt_cu_norm(cudaStream_t s, bool rms, kt_cu_t dst, kt_cu_t a, float eps, const kt_cu_t *w, const kt_cu_t *md) {
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3], n = a.ne[0];
    if (!rows || !n) return w == NULL;
    const bool fast = n % 4 == 0 && n <= 8 * 1024 && contig(a) && contig(dst) && aligned16(a) && aligned16(dst) &&
                      rows < INT32_MAX;
    const bool fuse = w && fast && contig(*w) && is_row(*w) && w->ne[0] == n && aligned16(*w) && contig(*md) &&
                      same_shape(*md, dst) && aligned16(*md);
    if (w && !fuse) return false;
    if (fast) {
        const int n4 = (int)(n / 4), per = (n4 + 255) / 256;
        const float *wp = fuse ? (const float *)w->data : NULL;
        float *mp = fuse ? (float *)md->data : NULL;
        float *dp = (float *)dst.data;
        const float *ap = (const float *)a.data;
        if (per <= 1)
            k_norm4<1><<<(unsigned)rows, 256, 0, s>>>(rms, dp, ap, n4, eps, wp, mp);
        else if (per <= 2)
            k_norm4<2><<<(unsigned)rows, 256, 0, s>>>(rms, dp, ap, n4, eps, wp, mp);
        else if (per <= 4)
            k_norm4<4><<<(unsigned)rows, 256, 0, s>>>(rms, dp, ap, n4, eps, wp, mp);
        else
            k_norm4<8><<<(unsigned)rows, 256, 0, s>>>(rms, dp, ap, n4, eps, wp, mp);
    } else {
        k_norm<<<(unsigned)rows, 256, 0, s>>>(rms, dst, a, eps);
    }
    return true;
}

__global__ void k_soft_max(kt_cu_t d, kt_cu_t a, kt_cu_t m, bool has_mask, float scale) {
    const int64_t r = blockIdx.x, i1 = r % a.ne[1], i2 = r / a.ne[1] % a.ne[2], i3 = r / a.ne[1] / a.ne[2];
    const char *x = a.data + off4(a, 0, i1, i2, i3);
    const char *mr = has_mask ? m.data + off4(m, 0, i1, i2 % m.ne[2], i3 % m.ne[3]) : NULL;
    char *y = d.data + off4(d, 0, i1, i2, i3);
    const int64_t n = a.ne[0];
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = *(const float *)(x + i * a.nb[0]) * scale;
        if (mr) v += kt_cu_load(m.type, mr, i);
        mx = fmaxf(mx, v);
    }
    mx = block_reduce(mx, true);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = *(const float *)(x + i * a.nb[0]) * scale;
        if (mr) v += kt_cu_load(m.type, mr, i);
        const float p = mx == -INFINITY ? 0.0f : expf(v - mx);
        *(float *)(y + i * d.nb[0]) = p;
        sum += p;
    }
    sum = block_reduce(sum, false);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) *(float *)(y + i * d.nb[0]) *= inv;
}

void kt_cu_soft_max(cudaStream_t s, kt_cu_t dst, kt_cu_t a, const kt_cu_t *mask, float scale) {
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    kt_cu_t m = mask ? *mask : a;
    if (rows) k_soft_max<<<(unsigned)rows, 256, 0, s>>>(dst, a, m, mask != NULL, scale);
}

/* First index of the row's maximum (NaN never wins), like the CPU's argmax. */
__global__ void k_argmax(kt_cu_t d, kt_cu_t a) {
    const int64_t r = blockIdx.x;
    const char *x = a.data + r * a.nb[1];
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
        const float v = *(const float *)(x + i * a.nb[0]);
        if (v > best || bi < 0) best = v, bi = i;
    }
    __shared__ float sv[256];
    __shared__ int64_t si[256];
    sv[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            const float ov = sv[threadIdx.x + o];
            const int64_t oi = si[threadIdx.x + o];
            if (oi >= 0 && (si[threadIdx.x] < 0 || ov > sv[threadIdx.x] ||
                            (ov == sv[threadIdx.x] && oi < si[threadIdx.x]))) {
                sv[threadIdx.x] = ov;
                si[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *(int32_t *)(d.data + r * d.nb[0]) = (int32_t)si[0];
}

void kt_cu_argmax(cudaStream_t s, kt_cu_t dst, kt_cu_t a) {
    if (a.ne[1] && a.ne[0]) k_argmax<<<(unsigned)a.ne[1], 256, 0, s>>>(dst, a);
}

/* ------------------------------------------------------------------ rope */

__global__ void k_rope(kt_cu_t d, kt_cu_t a, const int32_t *pos, int64_t pos_stride, const float *ff, int n_pairs,
                       bool neox, float freq_scale, float theta_scale) {
    const int64_t r = blockIdx.x, i1 = r % a.ne[1], i2 = r / a.ne[1] % a.ne[2], i3 = r / a.ne[1] / a.ne[2];
    const char *x = a.data + off4(a, 0, i1, i2, i3);
    char *y = d.data + off4(d, 0, i1, i2, i3);
    const float p = (float)*(const int32_t *)((const char *)pos + i2 * pos_stride);
    for (int i = threadIdx.x; i < n_pairs; i += blockDim.x) {
        /* the CPU's angle: a running product from pos, one factor per pair, so that
         * long positions round alike */
        float theta = p;
        for (int j = 0; j < i; j++) theta *= theta_scale;
        const float ang = freq_scale * (ff ? theta / ff[i] : theta);
        const float c = cosf(ang), sn = sinf(ang);
        const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_pairs : 2 * i + 1;
        const float x0 = *(const float *)(x + j0 * a.nb[0]), x1 = *(const float *)(x + j1 * a.nb[0]);
        *(float *)(y + j0 * d.nb[0]) = fmaf(x0, c, -(x1 * sn));
        *(float *)(y + j1 * d.nb[0]) = fmaf(x0, sn, x1 * c);
    }
    for (int64_t i = 2 * n_pairs + threadIdx.x; i < a.ne[0]; i += blockDim.x)
        *(float *)(y + i * d.nb[0]) = *(const float *)(x + i * a.nb[0]);
}

void kt_cu_rope(cudaStream_t s, kt_cu_t dst, kt_cu_t a, const int32_t *pos, int64_t pos_stride, const float *ff,
                const struct kt_rope_params *rp) {
    int64_t n_dims = rp->n_dims;
    if (n_dims > a.ne[0]) n_dims = a.ne[0];
    if (n_dims < 0) n_dims = 0;
    n_dims &= ~(int64_t)1;
    const float theta_scale = n_dims > 0 ? powf(rp->freq_base, -2.0f / (float)n_dims) : 1.0f;
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    if (rows)
        k_rope<<<(unsigned)rows, 64, 0, s>>>(dst, a, pos, pos_stride, ff, (int)(n_dims / 2), rp->mode == KT_ROPE_NEOX,
                                            rp->freq_scale, theta_scale);
}

/* ------------------------------------------------------------------ get_rows, copies */

__global__ void k_get_rows(kt_cu_t d, kt_cu_t a, kt_cu_t ids, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4];
    unravel(d, e, i);
    const int32_t row = *(const int32_t *)(ids.data + off4(ids, i[1], i[2], i[3], 0));
    const char *src = a.data + off4(a, 0, row, i[2] % a.ne[2], i[3] % a.ne[3]);
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = kt_cu_load(a.type, src, i[0]);
}

void kt_cu_get_rows(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t ids) {
    const int64_t n = nelem(dst);
    if (n) k_get_rows<<<grid_for(n, 256), 256, 0, s>>>(dst, a, ids, n);
}

/* Element e of a (in a's index order) to element e of d (in d's): F32/F16 both ways. */
__global__ void k_copy(kt_cu_t d, kt_cu_t a, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4], o[4];
    unravel(a, e, i);
    unravel(d, e, o);
    const float v = kt_cu_load(a.type, a.data + off4(a, 0, i[1], i[2], i[3]), i[0]);
    char *p = d.data + off4(d, o[0], o[1], o[2], o[3]);
    if (d.type == KT_TYPE_F16)
        *(__half *)p = __float2half_rn(v);
    else
        *(float *)p = v;
}

void kt_cu_copy(cudaStream_t s, kt_cu_t dst, kt_cu_t a) {
    const int64_t n = nelem(dst);
    if (!n) return;
    k_copy<<<grid_for(n, 256), 256, 0, s>>>(dst, a, n);
}

/* ------------------------------------------------------------------ mul_mat */

/* Decoding (few columns): one warp per weight row and (i2, i3), over the row's
 * 32-element chunks (one legacy block, or a sub-block of a K-quant super-block);
 * each weight is dequantized once into registers and dotted with up to MV_COLS
 * columns. */
#define MV_COLS 8

/* Weights 4*sub .. 4*sub+3 of chunk ch (sub 0..7), as the CPU's to_float makes them. */
template <int T>
__device__ __forceinline__ void deq4(const char *row, int64_t ch, int sub, float *w) {
    if (T == KT_TYPE_Q4_0) {
        const uint8_t *b = (const uint8_t *)row + ch * KT_CU_Q4_0_BYTES;
        const float d = kt_cu_h(b);
        const uint16_t *q = (const uint16_t *)(b + KT_CU_Q4_0_QS + 4 * (sub & 3));
        const uint32_t v = (uint32_t)q[0] | (uint32_t)q[1] << 16;
        const int sh = sub >= 4 ? 4 : 0;
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = (float)((int)((v >> (8 * i + sh)) & 0xf) - 8) * d;
    } else if (T == KT_TYPE_Q8_0) {
        const uint8_t *b = (const uint8_t *)row + ch * KT_CU_Q8_0_BYTES;
        const float d = kt_cu_h(b);
        const uint16_t *q = (const uint16_t *)(b + KT_CU_Q8_0_QS + 4 * sub);
        const uint32_t v = (uint32_t)q[0] | (uint32_t)q[1] << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = (float)(int8_t)(v >> (8 * i)) * d;
    } else if (T == KT_TYPE_F16) {
        const __half2 *h = (const __half2 *)(row + ch * 64 + 8 * sub);
        const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
        w[0] = f0.x, w[1] = f0.y, w[2] = f1.x, w[3] = f1.y;
    } else if (T == KT_TYPE_F32) {
        const float4 v = *(const float4 *)(row + ch * 128 + 16 * sub);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = kt_cu_load(T, row, ch * 32 + 4 * sub + i);
    }
}

/* Eight lanes per chunk (lane = 8 * chunk-in-step + sub), four chunks per warp step:
 * the weights' blocks and the activations are read in whole consecutive lines. (Used
 * where mmvq_cuda.cu's int8 path does not apply: F32/F16 weights, unaligned rows.) */
template <int T>
__global__ void k_mul_mat_vec(kt_cu_t d, kt_cu_t a, kt_cu_t b) {
    const int64_t wi = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP, sub = lane % 8;
    const int64_t M = a.ne[1], n_ch = a.ne[0] / 32;
    const int64_t m = wi % M, i23 = wi / M, i2 = i23 % b.ne[2], i3 = i23 / b.ne[2];
    if (i3 >= b.ne[3]) return;
    const char *row = a.data + off4(a, 0, m, i2 / (b.ne[2] / a.ne[2]), i3 / (b.ne[3] / a.ne[3]));
    const int64_t N = b.ne[1];
    for (int64_t n0 = 0; n0 < N; n0 += MV_COLS) {
        const int nc = (int)(N - n0 < MV_COLS ? N - n0 : MV_COLS);
        float acc[MV_COLS];
#pragma unroll
        for (int c = 0; c < MV_COLS; c++) acc[c] = 0.0f;
#pragma unroll 4
        for (int64_t ch = lane / 8; ch < n_ch; ch += WARP / 8) {
            float w[4];
            deq4<T>(row, ch, sub, w);
#pragma unroll
            for (int c = 0; c < MV_COLS; c++) {
                if (c >= nc) break;
                const float4 v = *((const float4 *)(b.data + off4(b, 0, n0 + c, i2, i3)) + ch * 8 + sub);
                acc[c] += w[0] * v.x + w[1] * v.y + w[2] * v.z + w[3] * v.w;
            }
        }
#pragma unroll
        for (int c = 0; c < MV_COLS; c++) {
            const float v = warp_sum(acc[c]);
            if (lane == 0 && c < nc) *(float *)(d.data + off4(d, m, n0 + c, i2, i3)) = v;
        }
    }
}

/* Any shape: each lane takes single elements (rows not a whole number of chunks, or
 * activations that are not 16-byte aligned rows). */
template <int T>
__global__ void k_mul_mat_vec_any(kt_cu_t d, kt_cu_t a, kt_cu_t b) {
    const int64_t wi = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    const int64_t M = a.ne[1], K = a.ne[0];
    const int64_t m = wi % M, i23 = wi / M, i2 = i23 % b.ne[2], i3 = i23 / b.ne[2];
    if (i3 >= b.ne[3]) return;
    const char *row = a.data + off4(a, 0, m, i2 / (b.ne[2] / a.ne[2]), i3 / (b.ne[3] / a.ne[3]));
    for (int64_t n = 0; n < b.ne[1]; n++) {
        float acc = 0.0f;
        for (int64_t k = lane; k < K; k += WARP)
            acc += kt_cu_load(T, row, k) * *(const float *)(b.data + off4(b, k, n, i2, i3));
        acc = warp_sum(acc);
        if (lane == 0) *(float *)(d.data + off4(d, m, n, i2, i3)) = acc;
    }
}

/* Prompts: 64x64 output tiles, 256 threads of 4x4 each, K in steps of 32 through
 * shared memory; weights dequantized into the tile as they are loaded. */
#define TM 64
#define TN 64
#define TK 32

template <int T>
__global__ void k_mul_mat_tile(kt_cu_t d, kt_cu_t a, kt_cu_t b) {
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    const int64_t M = a.ne[1], N = b.ne[1], K = a.ne[0];
    const int64_t m0 = (int64_t)blockIdx.x * TM, n0 = (int64_t)blockIdx.y * TN;
    const int64_t i2 = blockIdx.z % b.ne[2], i3 = blockIdx.z / b.ne[2];
    const int64_t a2 = i2 / (b.ne[2] / a.ne[2]), a3 = i3 / (b.ne[3] / a.ne[3]);
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        /* A: row tid/4, 8 elements from (tid%4)*8 */
        {
            const int r = tid / 4, c0 = (tid % 4) * 8;
            const int64_t m = m0 + r;
            const char *row = m < M ? a.data + off4(a, 0, m, a2, a3) : NULL;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int64_t k = k0 + c0 + j;
                As[c0 + j][r] = row && k < K ? kt_cu_load(T, row, k) : 0.0f;
            }
        }
        /* B: column tid/4, 8 elements */
        {
            const int cidx = tid / 4, c0 = (tid % 4) * 8;
            const int64_t n = n0 + cidx;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int64_t k = k0 + c0 + j;
                Bs[c0 + j][cidx] = n < N && k < K ? *(const float *)(b.data + off4(b, k, n, i2, i3)) : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TK; k++) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) av[i] = As[k][ty * 4 + i], bv[i] = Bs[k][tx * 4 + i];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < M && n < N) *(float *)(d.data + off4(d, m, n, i2, i3)) = acc[i][j];
        }
}

/* Prompts through cuBLAS's tensor cores when libcublas can be opened: the weights
 * dequantized to F16 and the activations rounded to F16 in scratch memory, products
 * summed in F32. (dlopen: a CUDA build needs no cuBLAS where no GPU is used.) */
typedef cublasStatus_t (*cublas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*cublas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*cublas_gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                         int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                         cublasGemmAlgo_t);
static struct {
    bool tried;
    cublasHandle_t h;
    cublas_stream_fn set_stream;
    cublas_gemm_fn gemm;
} g_blas;

static bool blas_ready(void) {
    if (g_blas.tried) return g_blas.gemm != NULL;
    g_blas.tried = true;
    if (getenv("KILN_CUDA_NO_CUBLAS")) return false;
    /* the loader's path, then the toolkit's own folder */
    static const char *const names[] = {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"};
    void *lib = NULL;
    for (size_t i = 0; !lib && i < sizeof names / sizeof names[0]; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    const char *home = getenv("CUDA_HOME");
    if (!lib && home) {
        char path[512];
        snprintf(path, sizeof path, "%s/lib64/libcublas.so.13", home);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) return false;
    cublas_create_fn create = (cublas_create_fn)dlsym(lib, "cublasCreate_v2");
    g_blas.set_stream = (cublas_stream_fn)dlsym(lib, "cublasSetStream_v2");
    cublas_gemm_fn gemm = (cublas_gemm_fn)dlsym(lib, "cublasGemmEx");
    if (!create || !g_blas.set_stream || !gemm || create(&g_blas.h) != CUBLAS_STATUS_SUCCESS) return false;
    g_blas.gemm = gemm;
    return true;
}

bool kt_cu_cublas(void) { return blas_ready(); }

/* Rows of a (any readable type) to F16, row after row: out[m * K + k]. Rows a whole
 * number of chunks (as quantized rows are): eight lanes per chunk, four weights each,
 * so that a warp writes 256 consecutive bytes; else a thread per element. */
template <int T>
__global__ void k_to_f16(__half *out, kt_cu_t a, int64_t n_ch) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (t >= n_ch * 8) return;
    float w[4];
    deq4<T>(a.data + m * a.nb[1], t / 8, (int)(t % 8), w);
    __half2 h[2] = {__floats2half2_rn(w[0], w[1]), __floats2half2_rn(w[2], w[3])};
    *(uint2 *)(out + m * a.ne[0] + 4 * t) = *(const uint2 *)h;
}

template <int T>
__global__ void k_to_f16_any(__half *out, kt_cu_t a, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const int64_t k = e % a.ne[0], m = e / a.ne[0];
    out[e] = __float2half_rn(kt_cu_load(T, a.data + m * a.nb[1], k));
}

/* deq4's loads need: F32 rows 16-byte aligned, F16 4-byte, Q4_0/Q8_0 2-byte. */
template <int T>
static bool chunk_aligned(const kt_cu_t &a) {
    const int64_t al = T == KT_TYPE_F32 ? 16 : T == KT_TYPE_F16 ? 4 : (T == KT_TYPE_Q4_0 || T == KT_TYPE_Q8_0) ? 2 : 1;
    return a.ne[0] % 32 == 0 && a.nb[1] % al == 0 && (uintptr_t)a.data % al == 0;
}

template <int T>
static void to_f16(cudaStream_t s, __half *out, const kt_cu_t &a, int64_t rows) {
    if (chunk_aligned<T>(a) && rows < 65536)
        k_to_f16<T><<<dim3(grid_for(a.ne[0] / 4, 256), (unsigned)rows), 256, 0, s>>>(out, a, a.ne[0] / 32);
    else
        k_to_f16_any<T><<<grid_for(a.ne[0] * rows, 256), 256, 0, s>>>(out, a, a.ne[0] * rows);
}

static bool use_blas(const kt_cu_t &dst, const kt_cu_t &a, const kt_cu_t &b) {
    return b.ne[1] > 2 * MV_COLS && a.ne[2] * a.ne[3] == 1 && b.ne[2] * b.ne[3] == 1 &&
           b.nb[0] == 4 && dst.nb[0] == 4 && dst.nb[1] == 4 * dst.ne[0] && a.ne[0] < INT32_MAX &&
           a.ne[1] < INT32_MAX && b.ne[1] < INT32_MAX && blas_ready();
}

size_t kt_cu_mul_mat_scratch(const kt_cu_t &dst, const kt_cu_t &a, const kt_cu_t &b) {
    if (b.ne[1] <= 2 * MV_COLS) return kt_cu_mmvq_scratch(a, b);
    if (!use_blas(dst, a, b)) return 0;
    return ((size_t)a.ne[0] * (size_t)a.ne[1] + (size_t)b.ne[0] * (size_t)b.ne[1]) * sizeof(__half) + 256;
}

template <int T>
static bool mul_mat_t(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, void *scratch, bool quantized) {
    const int64_t M = a.ne[1], N = b.ne[1], K = a.ne[0], B23 = b.ne[2] * b.ne[3];
    if (N <= 2 * MV_COLS) {
        if (kt_cu_mmvq(s, dst, a, b, scratch, quantized)) return true;
        const int64_t warps = M * B23;
        const bool chunks = chunk_aligned<T>(a) && a.nb[2] % 16 == 0 && a.nb[3] % 16 == 0 && b.nb[0] == 4 &&
                            b.nb[1] % 16 == 0 && b.nb[2] % 16 == 0 && b.nb[3] % 16 == 0 && (uintptr_t)b.data % 16 == 0;
        if (chunks)
            k_mul_mat_vec<T><<<grid_for(warps * WARP, 128), 128, 0, s>>>(dst, a, b);
        else
            k_mul_mat_vec_any<T><<<grid_for(warps * WARP, 128), 128, 0, s>>>(dst, a, b);
    } else if (scratch) {
        __half *wa = (__half *)scratch, *xb = wa + ((K * M + 127) & ~(int64_t)127);
        to_f16<T>(s, wa, a, M);
        to_f16<KT_TYPE_F32>(s, xb, b, N);
        const float one = 1.0f, zero = 0.0f;
        g_blas.set_stream(g_blas.h, s);
        g_blas.gemm(g_blas.h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &one, wa, CUDA_R_16F, (int)K, xb,
                    CUDA_R_16F, (int)K, &zero, dst.data, CUDA_R_32F, (int)M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        dim3 grid((unsigned)((M + TM - 1) / TM), (unsigned)((N + TN - 1) / TN), (unsigned)B23);
        k_mul_mat_tile<T><<<grid, 256, 0, s>>>(dst, a, b);
    }
    return false;
}

bool kt_cu_mul_mat(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b, void *scratch, bool quantized) {
    if (!nelem(dst)) return false;
    switch (a.type) {
    case KT_TYPE_F32: return mul_mat_t<KT_TYPE_F32>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_F16: return mul_mat_t<KT_TYPE_F16>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q4_0: return mul_mat_t<KT_TYPE_Q4_0>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q4_1: return mul_mat_t<KT_TYPE_Q4_1>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q5_0: return mul_mat_t<KT_TYPE_Q5_0>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q5_1: return mul_mat_t<KT_TYPE_Q5_1>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q8_0: return mul_mat_t<KT_TYPE_Q8_0>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q4_K: return mul_mat_t<KT_TYPE_Q4_K>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q5_K: return mul_mat_t<KT_TYPE_Q5_K>(s, dst, a, b, scratch, quantized);
    case KT_TYPE_Q6_K: return mul_mat_t<KT_TYPE_Q6_K>(s, dst, a, b, scratch, quantized);
    default: return false; /* supports_op refuses the rest */
    }
}

/* ------------------------------------------------------------------ attention */

/* Grid (query head x token, split): a block takes list positions [s*L, (s+1)*L) of
 * its split; each of its warps takes every ATT_WARPS-th of those cells with its own
 * online softmax (running max, sum and output, lanes across D): a score is one
 * warp dot product, and the k and v rows are read by the whole warp at once. The
 * warps' states are merged in shared memory; with one split the block writes the
 * output, else its merged state goes to scratch and k_attn_merge combines the
 * splits. Masked (-inf) and out-of-range cells add nothing. */
#define ATT_WARPS 8
#define ATT_DMAX 256
#define ATT_PER_LANE (ATT_DMAX / WARP)

/* PER > 0: F16 K and V with D = 32 * PER, each lane holding PER consecutive elements
 * (one 4- or 8-byte load per row); PER = 0: any readable type, element lane + 32 u. */
template <int PER>
__device__ __forceinline__ void row_part(int type, const char *row, int lane, int64_t D, float *x) {
    if (PER == 2) {
        const float2 f = __half22float2(*(const __half2 *)(row + 4 * lane));
        x[0] = f.x, x[1] = f.y;
    } else if (PER == 4) {
        const uint2 raw = *(const uint2 *)(row + 8 * lane);
        const float2 f0 = __half22float2(*(const __half2 *)&raw.x), f1 = __half22float2(*(const __half2 *)&raw.y);
        x[0] = f0.x, x[1] = f0.y, x[2] = f1.x, x[3] = f1.y;
    } else {
#pragma unroll
        for (int u = 0; u < ATT_PER_LANE; u++) x[u] = lane + u * WARP < D ? kt_cu_load(type, row, lane + u * WARP) : 0.0f;
    }
}

template <int PER>
__global__ void __launch_bounds__(ATT_WARPS * WARP)
    k_attn(kt_cu_t d, kt_cu_t q, kt_cu_t k, kt_cu_t v, kt_cu_t m, bool has_mask, const int32_t *order, float scale,
           int64_t L, float *part) {
    __shared__ float qs[ATT_DMAX];
    __shared__ float wm[ATT_WARPS], wl[ATT_WARPS];
    __shared__ float wo[ATT_WARPS][ATT_DMAX];
    const int64_t D = q.ne[0], H = q.ne[1], n_kv = k.ne[1], G = H / k.ne[2];
    const int64_t h = blockIdx.x % H, t = blockIdx.x / H, kh = h / G;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) qs[i] = *(const float *)(q.data + off4(q, i, h, t, 0));
    __syncthreads();
    const char *mrow = has_mask ? m.data + t * m.nb[1] : NULL;
    const char *kb = k.data + kh * k.nb[2], *vb = v.data + kh * v.nb[2];
    constexpr int NU = PER ? PER : ATT_PER_LANE;
#define ATT_E(u) (PER ? lane * PER + (u) : lane + (u) * WARP) /* element of this lane's u-th value */
    float qr[NU], o[NU], kx[NU];
#pragma unroll
    for (int u = 0; u < NU; u++) {
        qr[u] = ATT_E(u) < D ? qs[ATT_E(u)] : 0.0f;
        o[u] = 0.0f;
    }
    float run_max = -INFINITY, run_sum = 0.0f;
    const int64_t j1 = (blockIdx.y + 1) * L < n_kv ? (blockIdx.y + 1) * L : n_kv;
    for (int64_t j = blockIdx.y * L + w; j < j1; j += ATT_WARPS) {
        const int64_t i = order ? order[j] : j;
        if (i < 0 || i >= n_kv) continue;
        const float madd = mrow ? *(const float *)(mrow + i * m.nb[0]) : 0.0f;
        if (madd == -INFINITY) continue;
        const char *kr = kb + i * k.nb[1], *vr = vb + i * v.nb[1];
        float dot = 0.0f;
        row_part<PER>(k.type, kr, lane, D, kx);
#pragma unroll
        for (int u = 0; u < NU; u++) dot += qr[u] * kx[u];
        const float sc = warp_sum(dot) * scale + madd;
        const float nm = fmaxf(run_max, sc);
        const float r = expf(run_max - nm), p = expf(sc - nm);
        run_sum = run_sum * r + p;
        row_part<PER>(v.type, vr, lane, D, kx);
#pragma unroll
        for (int u = 0; u < NU; u++) o[u] = o[u] * r + p * kx[u];
        run_max = nm;
    }
    if (lane == 0) wm[w] = run_max, wl[w] = run_sum;
#pragma unroll
    for (int u = 0; u < NU; u++)
        if (ATT_E(u) < D) wo[w][ATT_E(u)] = o[u];
#undef ATT_E
    __syncthreads();
    float M = -INFINITY;
    for (int x = 0; x < ATT_WARPS; x++) M = fmaxf(M, wm[x]);
    float l = 0.0f;
    for (int x = 0; x < ATT_WARPS; x++) l += wm[x] == -INFINITY ? 0.0f : wl[x] * expf(wm[x] - M);
    const bool split = gridDim.y > 1;
    float *pp = split ? part + ((int64_t)blockIdx.x * gridDim.y + blockIdx.y) * (D + 2) : NULL;
    for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
        float acc = 0.0f;
        for (int x = 0; x < ATT_WARPS; x++)
            if (wm[x] != -INFINITY) acc += wo[x][e] * expf(wm[x] - M);
        if (split)
            pp[2 + e] = acc;
        else
            *(float *)(d.data + off4(d, e, h, t, 0)) = l > 0.0f ? acc / l : 0.0f;
    }
    if (split && threadIdx.x == 0) pp[0] = M, pp[1] = l;
}

__global__ void k_attn_merge(kt_cu_t d, const float *part, int n_split) {
    const int64_t D = d.ne[0], H = d.ne[1], h = blockIdx.x % H, t = blockIdx.x / H;
    const float *p = part + (int64_t)blockIdx.x * n_split * (D + 2);
    float M = -INFINITY;
    for (int x = 0; x < n_split; x++) M = fmaxf(M, p[x * (D + 2)]);
    float l = 0.0f;
    for (int x = 0; x < n_split; x++)
        if (p[x * (D + 2)] != -INFINITY) l += p[x * (D + 2) + 1] * expf(p[x * (D + 2)] - M);
    for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
        float acc = 0.0f;
        for (int x = 0; x < n_split; x++)
            if (p[x * (D + 2)] != -INFINITY) acc += p[x * (D + 2) + 2 + e] * expf(p[x * (D + 2)] - M);
        *(float *)(d.data + off4(d, e, h, t, 0)) = l > 0.0f ? acc / l : 0.0f;
    }
}

/* Splits: enough blocks to fill the GPU (about 4 per SM of 132) but at least 64 cells each. */
static int attn_splits(const kt_cu_t &q, const kt_cu_t &k) {
    const int64_t units = q.ne[1] * q.ne[2], n_kv = k.ne[1];
    int64_t sp = (528 + units - 1) / units;
    const int64_t most = (n_kv + 63) / 64;
    if (sp > most) sp = most;
    return sp < 1 ? 1 : (int)sp;
}

size_t kt_cu_attn_scratch(const kt_cu_t &q, const kt_cu_t &k) {
    const int sp = attn_splits(q, k);
    return sp > 1 ? (size_t)q.ne[1] * (size_t)q.ne[2] * (size_t)sp * (size_t)(q.ne[0] + 2) * sizeof(float) : 0;
}

void kt_cu_attn(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                const int32_t *order, float scale, void *scratch) {
    const int64_t units = q.ne[1] * q.ne[2];
    if (!units || kt_cu_attn_tc(s, dst, q, k, v, mask, order, scale)) return;
    const int sp = scratch ? attn_splits(q, k) : 1;
    const int64_t L = (k.ne[1] + sp - 1) / sp;
    kt_cu_t m = mask ? *mask : q;
    const int64_t D = q.ne[0];
    const bool h16 = k.type == KT_TYPE_F16 && v.type == KT_TYPE_F16 && (D == 64 || D == 128) &&
                     (uintptr_t)k.data % 8 == 0 && (uintptr_t)v.data % 8 == 0 && k.nb[1] % 8 == 0 &&
                     v.nb[1] % 8 == 0 && k.nb[2] % 8 == 0 && v.nb[2] % 8 == 0;
    const dim3 grid((unsigned)units, (unsigned)sp);
    const int64_t Lp = L > 0 ? L : 1;
    if (h16 && D == 64)
        k_attn<2><<<grid, ATT_WARPS * WARP, 0, s>>>(dst, q, k, v, m, mask != NULL, order, scale, Lp, (float *)scratch);
    else if (h16)
        k_attn<4><<<grid, ATT_WARPS * WARP, 0, s>>>(dst, q, k, v, m, mask != NULL, order, scale, Lp, (float *)scratch);
    else
        k_attn<0><<<grid, ATT_WARPS * WARP, 0, s>>>(dst, q, k, v, m, mask != NULL, order, scale, Lp, (float *)scratch);
    if (sp > 1) k_attn_merge<<<(unsigned)units, 128, 0, s>>>(dst, (const float *)scratch, sp);
}
