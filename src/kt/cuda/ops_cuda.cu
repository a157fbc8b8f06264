/*
 * ops_cuda.cu - the CUDA backend's kernels: element-wise ops over any
 * layout, row reductions (rms_norm, norm, soft_max, argmax), rope, get_rows,
 * copies that convert (into an F16 cache), mul_mat (one warp per
 * weight row for decoding, shared-memory tiles for prompts; weights read in
 * their own block format) and fused attention (online softmax over the
 * cells, in the order the op lists them). Each launcher queues on a stream.
 */
#include "cuda_impl.cuh"

#include <math.h>

#define WARP 32

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

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
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

__global__ void k_binary(int op, kt_cu_t d, kt_cu_t a, kt_cu_t b, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4];
    unravel(d, e, i);
    const float x = *(const float *)(a.data + off4(a, i[0], i[1], i[2], i[3]));
    const float y = *(const float *)(b.data + off4(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]));
    float r;
    switch (op) {
    case KT_OP_ADD: r = x + y; break;
    case KT_OP_SUB: r = x - y; break;
    case KT_OP_MUL: r = x * y; break;
    default: r = x / y; break;
    }
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = r;
}

void kt_cu_binary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, kt_cu_t b) {
    const int64_t n = nelem(dst);
    if (n) k_binary<<<grid_for(n, 256), 256, 0, s>>>(op, dst, a, b, n);
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
    default: /* GELU, tanh approximation */
        r = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
        break;
    }
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = r;
}

void kt_cu_unary(cudaStream_t s, int op, kt_cu_t dst, kt_cu_t a, float p0, float p1) {
    const int64_t n = nelem(dst);
    if (n) k_unary<<<grid_for(n, 256), 256, 0, s>>>(op, dst, a, p0, p1, n);
}

__global__ void k_swiglu(kt_cu_t d, kt_cu_t a, kt_cu_t b, int64_t n) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    int64_t i[4];
    unravel(d, e, i);
    const float x = *(const float *)(a.data + off4(a, i[0], i[1], i[2], i[3]));
    const float y = *(const float *)(b.data + off4(b, i[0], i[1], i[2], i[3]));
    *(float *)(d.data + off4(d, i[0], i[1], i[2], i[3])) = x / (1.0f + expf(-x)) * y;
}

void kt_cu_swiglu(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b) {
    const int64_t n = nelem(dst);
    if (n) k_swiglu<<<grid_for(n, 256), 256, 0, s>>>(dst, a, b, n);
}

/* ------------------------------------------------------------------ rows */

/* One block per row; sums in double like the CPU's reference. */
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

void kt_cu_norm(cudaStream_t s, bool rms, kt_cu_t dst, kt_cu_t a, float eps) {
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    if (rows && a.ne[0]) k_norm<<<(unsigned)rows, 256, 0, s>>>(rms, dst, a, eps);
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

/* Decoding (few columns): one warp per weight row and (i2, i3); each lane takes
 * 32-element chunks of the row (one legacy block, or one sub-block of a K-quant
 * super-block) and dots them with up to NC columns at once. */
#define MV_COLS 8

template <int T>
__global__ void k_mul_mat_vec(kt_cu_t d, kt_cu_t a, kt_cu_t b) {
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    const int64_t M = a.ne[1], K = a.ne[0];
    const int64_t m = w % M, i23 = w / M, i2 = i23 % b.ne[2], i3 = i23 / b.ne[2];
    if (i3 >= b.ne[3]) return;
    const char *row = a.data + off4(a, 0, m, i2 / (b.ne[2] / a.ne[2]), i3 / (b.ne[3] / a.ne[3]));
    const int64_t N = b.ne[1];
    for (int64_t n0 = 0; n0 < N; n0 += MV_COLS) {
        const int nc = (int)(N - n0 < MV_COLS ? N - n0 : MV_COLS);
        float acc[MV_COLS];
#pragma unroll
        for (int c = 0; c < MV_COLS; c++) acc[c] = 0.0f;
        for (int64_t k0 = (int64_t)lane * 32; k0 < K; k0 += 32 * WARP) {
            const int kn = (int)(K - k0 < 32 ? K - k0 : 32);
            for (int j = 0; j < kn; j++) {
                const float wv = kt_cu_load(T, row, k0 + j);
#pragma unroll
                for (int c = 0; c < MV_COLS; c++)
                    if (c < nc) acc[c] += wv * *(const float *)(b.data + off4(b, k0 + j, n0 + c, i2, i3));
            }
        }
#pragma unroll
        for (int c = 0; c < MV_COLS; c++) {
            const float v = warp_sum(acc[c]);
            if (lane == 0 && c < nc) *(float *)(d.data + off4(d, m, n0 + c, i2, i3)) = v;
        }
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

template <int T>
static void mul_mat_t(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b) {
    const int64_t M = a.ne[1], N = b.ne[1], B23 = b.ne[2] * b.ne[3];
    if (N <= 2 * MV_COLS) {
        const int64_t warps = M * B23;
        k_mul_mat_vec<T><<<grid_for(warps * WARP, 256), 256, 0, s>>>(dst, a, b);
    } else {
        dim3 grid((unsigned)((M + TM - 1) / TM), (unsigned)((N + TN - 1) / TN), (unsigned)B23);
        k_mul_mat_tile<T><<<grid, 256, 0, s>>>(dst, a, b);
    }
}

void kt_cu_mul_mat(cudaStream_t s, kt_cu_t dst, kt_cu_t a, kt_cu_t b) {
    if (!nelem(dst)) return;
    switch (a.type) {
    case KT_TYPE_F32: mul_mat_t<KT_TYPE_F32>(s, dst, a, b); break;
    case KT_TYPE_F16: mul_mat_t<KT_TYPE_F16>(s, dst, a, b); break;
    case KT_TYPE_Q4_0: mul_mat_t<KT_TYPE_Q4_0>(s, dst, a, b); break;
    case KT_TYPE_Q4_1: mul_mat_t<KT_TYPE_Q4_1>(s, dst, a, b); break;
    case KT_TYPE_Q5_0: mul_mat_t<KT_TYPE_Q5_0>(s, dst, a, b); break;
    case KT_TYPE_Q5_1: mul_mat_t<KT_TYPE_Q5_1>(s, dst, a, b); break;
    case KT_TYPE_Q8_0: mul_mat_t<KT_TYPE_Q8_0>(s, dst, a, b); break;
    case KT_TYPE_Q4_K: mul_mat_t<KT_TYPE_Q4_K>(s, dst, a, b); break;
    case KT_TYPE_Q5_K: mul_mat_t<KT_TYPE_Q5_K>(s, dst, a, b); break;
    case KT_TYPE_Q6_K: mul_mat_t<KT_TYPE_Q6_K>(s, dst, a, b); break;
    default: break; /* supports_op refuses the rest */
    }
}

/* ------------------------------------------------------------------ attention */

/* One block per (query head, token), ATT_THREADS threads: the listed cells in
 * chunks of ATT_CHUNK; a warp per cell makes its score (lanes across D), then
 * the chunk's maximum rescales the running sum and output (online softmax), and
 * the threads, one per output element, add the chunk's v rows in list order. */
#define ATT_THREADS 128
#define ATT_CHUNK 64
#define ATT_DMAX 256

__global__ void k_attn(kt_cu_t d, kt_cu_t q, kt_cu_t k, kt_cu_t v, kt_cu_t m, bool has_mask, const int32_t *order,
                       float scale) {
    __shared__ float qs[ATT_DMAX];
    __shared__ float sc[ATT_CHUNK];
    __shared__ int idx[ATT_CHUNK];
    const int64_t D = q.ne[0], H = q.ne[1], n_kv = k.ne[1], G = H / k.ne[2];
    const int64_t h = blockIdx.x % H, t = blockIdx.x / H, kh = h / G;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = ATT_THREADS / WARP;
    for (int64_t i = threadIdx.x; i < D; i += ATT_THREADS) qs[i] = *(const float *)(q.data + off4(q, i, h, t, 0));
    const char *mrow = has_mask ? m.data + t * m.nb[1] : NULL;
    const char *kb = k.data + kh * k.nb[2], *vb = v.data + kh * v.nb[2];
    float o[ATT_DMAX / ATT_THREADS] = {};
    float run_max = -INFINITY, run_sum = 0.0f;
    __syncthreads();
    for (int64_t j0 = 0; j0 < n_kv; j0 += ATT_CHUNK) {
        const int nch = (int)(n_kv - j0 < ATT_CHUNK ? n_kv - j0 : ATT_CHUNK);
        for (int c = w; c < nch; c += nw) {
            const int64_t i = order ? order[j0 + c] : j0 + c;
            float madd = 0.0f;
            bool live = i >= 0 && i < n_kv;
            if (live && mrow) {
                madd = *(const float *)(mrow + i * m.nb[0]);
                live = madd != -INFINITY;
            }
            float s = -INFINITY;
            if (live) {
                const char *kr = kb + i * k.nb[1];
                float dot = 0.0f;
                for (int64_t e = lane; e < D; e += WARP) dot += qs[e] * kt_cu_load(k.type, kr, e);
                s = warp_sum(dot) * scale + madd;
            }
            if (lane == 0) {
                sc[c] = s;
                idx[c] = live ? (int)i : -1;
            }
        }
        __syncthreads();
        float cmax = -INFINITY;
        for (int c = 0; c < nch; c++) cmax = fmaxf(cmax, sc[c]);
        const float new_max = fmaxf(run_max, cmax);
        if (new_max != -INFINITY) {
            const float r = run_max == -INFINITY ? 0.0f : expf(run_max - new_max);
            run_sum *= r;
#pragma unroll
            for (int u = 0; u < ATT_DMAX / ATT_THREADS; u++) o[u] *= r;
            for (int c = 0; c < nch; c++) {
                if (idx[c] < 0) continue;
                const float p = expf(sc[c] - new_max);
                run_sum += p;
                const char *vr = vb + (int64_t)idx[c] * v.nb[1];
#pragma unroll
                for (int u = 0; u < ATT_DMAX / ATT_THREADS; u++) {
                    const int64_t e = threadIdx.x + u * ATT_THREADS;
                    if (e < D) o[u] += p * kt_cu_load(v.type, vr, e);
                }
            }
            run_max = new_max;
        }
        __syncthreads();
    }
    const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
#pragma unroll
    for (int u = 0; u < ATT_DMAX / ATT_THREADS; u++) {
        const int64_t e = threadIdx.x + u * ATT_THREADS;
        if (e < D) *(float *)(d.data + off4(d, e, h, t, 0)) = o[u] * inv;
    }
}

void kt_cu_attn(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                const int32_t *order, float scale) {
    const int64_t blocks = q.ne[1] * q.ne[2];
    kt_cu_t m = mask ? *mask : q;
    if (blocks) k_attn<<<(unsigned)blocks, ATT_THREADS, 0, s>>>(dst, q, k, v, m, mask != NULL, order, scale);
}
