/*
 * fattn_cuda.cu - prompts' attention over an F16 cache on the tensor cores
 * (WMMA, F16 operands, F32 sums), one online softmax per query row.
 *
 * A block takes 64 tokens of one query head. The cells are visited in the
 * order the op lists them, 64 at a time: their K and V rows are gathered
 * into shared memory, S = Q K^T for the block's rows on the tensor cores,
 * then each warp turns its 16 rows of S into probabilities (scale, mask,
 * running max and sum), rescales its rows of the output and adds P V. Tiles
 * where the mask hides every cell from every row are skipped. Masked (-inf)
 * and out-of-range cells add nothing, as in the plain kernel (ops_cuda.cu).
 */
#include "cuda_impl.cuh"

#include <mma.h>

namespace wm = nvcuda::wmma;

#define FA_BQ 64 /* query rows (tokens) per block */
#define FA_BK 64 /* cells per tile */
#define FA_WARPS 4

/* Shared memory: pitches (elements) padded against bank conflicts, regions 32-byte aligned. */
template <int D> struct fa_layout {
    enum {
        dp = D + 8,       /* Q, K, V rows (half) */
        sp = FA_BK + 4,   /* S rows (float) */
        pp = FA_BK + 8,   /* P rows (half) */
        op = D + 4,       /* O rows (float) */
        q_off = 0,
        k_off = q_off + FA_BQ * dp * 2,
        v_off = k_off + FA_BK * dp * 2,
        s_off = v_off + FA_BK * dp * 2,
        p_off = s_off + FA_BQ * sp * 4,
        o_off = p_off + FA_BQ * pp * 2,
        stat_off = o_off + FA_BQ * op * 4, /* running max, sum, this tile's factor per row */
        cell_off = stat_off + 3 * FA_BQ * 4,
        bytes = cell_off + FA_BK * 4,
    };
};

template <int D>
__global__ void __launch_bounds__(FA_WARPS *WARP)
    k_attn_tc(kt_cu_t d, kt_cu_t q, kt_cu_t k, kt_cu_t v, kt_cu_t m, bool has_mask, const int32_t *order,
              float scale, bool vec16) {
    typedef fa_layout<D> L;
    extern __shared__ __align__(128) unsigned char sm[];
    __half *Qs = (__half *)(sm + L::q_off), *Ks = (__half *)(sm + L::k_off), *Vs = (__half *)(sm + L::v_off);
    float *Ss = (float *)(sm + L::s_off), *Os = (float *)(sm + L::o_off);
    __half *Ps = (__half *)(sm + L::p_off);
    float *rmax = (float *)(sm + L::stat_off), *rsum = rmax + FA_BQ, *rfac = rsum + FA_BQ;
    int *cells = (int *)(sm + L::cell_off);

    const int64_t T = q.ne[2], H = q.ne[1], n_kv = k.ne[1], G = H / k.ne[2];
    const int64_t h = blockIdx.y, kh = h / G, t0 = (int64_t)blockIdx.x * FA_BQ;
    const int tid = threadIdx.x, lane = tid % WARP, w = tid / WARP;
    const int nt = (int)(T - t0 < FA_BQ ? T - t0 : FA_BQ);

    for (int i = tid; i < FA_BQ * D; i += blockDim.x) {
        const int r = i / D, e = i % D;
        const float x = r < nt ? *(const float *)(q.data + e * q.nb[0] + h * q.nb[1] + (t0 + r) * q.nb[2]) : 0.0f;
        Qs[r * L::dp + e] = __float2half_rn(x);
    }
    for (int i = tid; i < FA_BQ * L::op; i += blockDim.x) Os[i] = 0.0f;
    for (int i = tid; i < FA_BQ; i += blockDim.x) rmax[i] = -INFINITY, rsum[i] = 0.0f;

    const char *kb = k.data + kh * k.nb[2], *vb = v.data + kh * v.nb[2];
    for (int64_t j0 = 0; j0 < n_kv; j0 += FA_BK) {
        __syncthreads(); /* the last tile's K, V and cells are no longer read */
        for (int c = tid; c < FA_BK; c += blockDim.x) {
            const int64_t j = j0 + c;
            int64_t i = j < n_kv ? (order ? order[j] : j) : -1;
            cells[c] = i >= 0 && i < n_kv ? (int)i : -1;
        }
        __syncthreads();
        /* does any row see any cell of this tile? */
        bool any = false;
        for (int x = tid; x < FA_BQ * FA_BK; x += blockDim.x) {
            const int r = x / FA_BK, c = x % FA_BK;
            if (r < nt && cells[c] >= 0)
                any |= !has_mask || *(const float *)(m.data + (t0 + r) * m.nb[1] + cells[c] * m.nb[0]) != -INFINITY;
        }
        if (!__syncthreads_or(any)) continue;
        if (vec16) {
            constexpr int per_row = D / 8;
            for (int x = tid; x < FA_BK * per_row; x += blockDim.x) {
                const int c = x / per_row, u = x % per_row, cell = cells[c];
                uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
                if (cell >= 0) {
                    kv = *(const uint4 *)(kb + cell * k.nb[1] + 16 * u);
                    vv = *(const uint4 *)(vb + cell * v.nb[1] + 16 * u);
                }
                *(uint4 *)(Ks + c * L::dp + 8 * u) = kv;
                *(uint4 *)(Vs + c * L::dp + 8 * u) = vv;
            }
        } else {
            for (int x = tid; x < FA_BK * D; x += blockDim.x) {
                const int c = x / D, e = x % D, cell = cells[c];
                const __half z = __float2half_rn(0.0f);
                Ks[c * L::dp + e] = cell >= 0 ? *(const __half *)(kb + cell * k.nb[1] + 2 * e) : z;
                Vs[c * L::dp + e] = cell >= 0 ? *(const __half *)(vb + cell * v.nb[1] + 2 * e) : z;
            }
        }
        __syncthreads();

        /* S = Q K^T for this warp's 16 rows */
        {
            wm::fragment<wm::accumulator, 16, 16, 16, float> acc[FA_BK / 16];
#pragma unroll
            for (int cb = 0; cb < FA_BK / 16; cb++) wm::fill_fragment(acc[cb], 0.0f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                wm::fragment<wm::matrix_a, 16, 16, 16, __half, wm::row_major> fa;
                wm::load_matrix_sync(fa, Qs + 16 * w * L::dp + 16 * kk, L::dp);
#pragma unroll
                for (int cb = 0; cb < FA_BK / 16; cb++) {
                    wm::fragment<wm::matrix_b, 16, 16, 16, __half, wm::col_major> fb;
                    wm::load_matrix_sync(fb, Ks + 16 * cb * L::dp + 16 * kk, L::dp);
                    wm::mma_sync(acc[cb], fa, fb, acc[cb]);
                }
            }
#pragma unroll
            for (int cb = 0; cb < FA_BK / 16; cb++)
                wm::store_matrix_sync(Ss + 16 * w * L::sp + 16 * cb, acc[cb], L::sp, wm::mem_row_major);
        }
        __syncwarp();

        /* this warp's rows: probabilities into P, running max and sum, the factor for O */
        for (int rr = 0; rr < 16; rr++) {
            const int r = 16 * w + rr;
            float s[FA_BK / WARP];
#pragma unroll
            for (int u = 0; u < FA_BK / WARP; u++) {
                const int c = lane + u * WARP, cell = cells[c];
                float x = -INFINITY;
                if (r < nt && cell >= 0) {
                    const float madd = has_mask ? *(const float *)(m.data + (t0 + r) * m.nb[1] + cell * m.nb[0]) : 0.0f;
                    if (madd != -INFINITY) x = Ss[r * L::sp + c] * scale + madd;
                }
                s[u] = x;
            }
            float mx = s[0];
#pragma unroll
            for (int u = 1; u < FA_BK / WARP; u++) mx = fmaxf(mx, s[u]);
            mx = warp_max(mx);
            const float old = rmax[r], nm = fmaxf(old, mx);
            float sum = 0.0f;
#pragma unroll
            for (int u = 0; u < FA_BK / WARP; u++) {
                const float p = s[u] == -INFINITY ? 0.0f : expf(s[u] - nm);
                Ps[r * L::pp + lane + u * WARP] = __float2half_rn(p);
                sum += p;
            }
            sum = warp_sum(sum);
            const float f = old == -INFINITY ? 0.0f : expf(old - nm);
            __syncwarp();
            if (lane == 0) rmax[r] = nm, rsum[r] = rsum[r] * f + sum, rfac[r] = f;
        }
        __syncwarp();
        for (int x = lane; x < 16 * D; x += WARP) {
            const int r = 16 * w + x / D;
            Os[r * L::op + x % D] *= rfac[r];
        }
        __syncwarp();

        /* O += P V for this warp's rows */
#pragma unroll
        for (int db = 0; db < D / 16; db++) {
            wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
            wm::load_matrix_sync(acc, Os + 16 * w * L::op + 16 * db, L::op, wm::mem_row_major);
#pragma unroll
            for (int kc = 0; kc < FA_BK / 16; kc++) {
                wm::fragment<wm::matrix_a, 16, 16, 16, __half, wm::row_major> fa;
                wm::fragment<wm::matrix_b, 16, 16, 16, __half, wm::row_major> fb;
                wm::load_matrix_sync(fa, Ps + 16 * w * L::pp + 16 * kc, L::pp);
                wm::load_matrix_sync(fb, Vs + 16 * kc * L::dp + 16 * db, L::dp);
                wm::mma_sync(acc, fa, fb, acc);
            }
            wm::store_matrix_sync(Os + 16 * w * L::op + 16 * db, acc, L::op, wm::mem_row_major);
        }
    }
    __syncthreads();
    for (int i = tid; i < nt * D; i += blockDim.x) {
        const int r = i / D, e = i % D;
        const float l = rsum[r];
        *(float *)(d.data + e * d.nb[0] + h * d.nb[1] + (t0 + r) * d.nb[2]) = l > 0.0f ? Os[r * L::op + e] / l : 0.0f;
    }
}

template <int D>
static void attn_tc(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                    const int32_t *order, float scale) {
    static bool raised;
    if (!raised) {
        cudaFuncSetAttribute(k_attn_tc<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, fa_layout<D>::bytes);
        raised = true;
    }
    const bool vec16 = (uintptr_t)k.data % 16 == 0 && (uintptr_t)v.data % 16 == 0 && k.nb[1] % 16 == 0 &&
                       v.nb[1] % 16 == 0 && k.nb[2] % 16 == 0 && v.nb[2] % 16 == 0;
    kt_cu_t m = mask ? *mask : q;
    dim3 grid((unsigned)((q.ne[2] + FA_BQ - 1) / FA_BQ), (unsigned)q.ne[1]);
    k_attn_tc<D><<<grid, FA_WARPS * WARP, fa_layout<D>::bytes, s>>>(dst, q, k, v, m, mask != NULL, order, scale,
                                                                    vec16);
}

bool kt_cu_attn_tc(cudaStream_t s, kt_cu_t dst, kt_cu_t q, kt_cu_t k, kt_cu_t v, const kt_cu_t *mask,
                   const int32_t *order, float scale) {
    const int64_t D = q.ne[0];
    if (q.ne[2] < 32 || q.ne[3] != 1 || k.type != KT_TYPE_F16 || v.type != KT_TYPE_F16 || q.ne[1] > 65535 ||
        k.ne[0] != D || v.ne[0] != D || q.ne[1] % k.ne[2] != 0)
        return false;
    if (D == 64)
        attn_tc<64>(s, dst, q, k, v, mask, order, scale);
    else if (D == 128)
        attn_tc<128>(s, dst, q, k, v, mask, order, scale);
    else
        return false;
    return true;
}
