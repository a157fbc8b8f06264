/*
 * ops_attn_avx512.c - one unit of the fused attention (ops_attn.c) with
 * AVX-512 and an F16 cache: G query rows against the n cells of a packed list.
 * Each score is the row's dot with the cell's k row, D/16 fused multiply-adds
 * into one register then its 16 lanes summed by a fixed tree (done for 16
 * cells at once, the tree the same for each), times scale, plus the cell's
 * mask value; each row's maximum is kept as its scores are made. Then per row
 * e_j = exp(score_j - max), summed (float lanes, added into a double every 1024
 * cells); the v rows are added in list order weighted by e_j, and the sums
 * times 1/sum are the outputs (the softmax's division done once per output
 * rather than once per cell). No arithmetic depends on where a cell sits in
 * the cache or in the list's groups of 16, so the result is the same for a
 * sequence wherever its cells are and whichever tokens share the batch.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops_isa.h"
#include "ops_avx512_inl.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* Sixteen registers' lanes summed: lane i of the result is the sum of r[i]'s lanes
 * (pairs of 32-bit lanes, then of 64-bit halves, then the four 128-bit quarters). */
INLINE __m512 sum16(__m512 r[16]) {
    __m512 b[8], c[4];
    UNROLL
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]), _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]));
    UNROLL
    for (int i = 0; i < 4; i++) {
        const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
        c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    /* c[i], quarter L: cells 4i..4i+3 over quarter L of the inputs */
    const __m512 f01 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x44), _mm512_shuffle_f32x4(c[0], c[1], 0xee));
    const __m512 f23 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x44), _mm512_shuffle_f32x4(c[2], c[3], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(f01, f23, 0x88), _mm512_shuffle_f32x4(f01, f23, 0xdd));
}

/* The dots of one query row (nc registers of 16) with 16 k rows (kf, nc * 16 floats
 * each): per row nc fused multiply-adds in order, then sum16. Instanced for common
 * head sizes so that the query stays in registers. */
INLINE __m512 scores16(const float *qr, const float *kf, const int64_t nc) {
    __m512 qv[16], r[16];
    qv[0] = _mm512_loadu_ps(qr); /* (nc >= 1: D is a multiple of 16) */
    UNROLL
    for (int64_t i = 1; i < 16; i++) qv[i] = i < nc ? _mm512_loadu_ps(qr + 16 * i) : qv[0];
    UNROLL
    for (int c = 0; c < 16; c++) {
        __m512 a = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kf + c * 16 * nc));
        for (int64_t i = 1; i < nc; i++)
            a = _mm512_fmadd_ps(i < 16 ? qv[i] : _mm512_loadu_ps(qr + 16 * i), _mm512_loadu_ps(kf + c * 16 * nc + 16 * i), a);
        r[c] = a;
    }
    return sum16(r);
}

INLINE __m512 f16x16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

void kt_cpu_attn_unit_avx512(int64_t D, int64_t G, int64_t n, const float *q, size_t q_stride, const uint8_t *k,
                             size_t k_stride, const uint8_t *v, size_t v_stride, const int32_t *idx, const float *madd,
                             float scale, float *s, float *p, size_t s_stride, float *kf, float *out,
                             size_t out_stride) {
    const int64_t nc = D / 16;
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 vmax[G];
    for (int64_t g = 0; g < G; g++) vmax[g] = _mm512_set1_ps(-INFINITY);
    /* scores, 16 cells at a time: their k rows as floats once, then each query row */
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t m = n - j0 < 16 ? n - j0 : 16;
        for (int64_t c = 0; c < 16; c++)
            for (int64_t i = 0; i < nc; i++)
                _mm512_storeu_ps(kf + c * D + 16 * i, c < m ? f16x16(k + (size_t)idx[j0 + c] * k_stride + 32 * i)
                                                            : _mm512_setzero_ps());
        const __mmask16 keep = tail_mask(m);
        const __m512 add = _mm512_maskz_loadu_ps(keep, madd + j0);
        for (int64_t g = 0; g < G; g++) {
            const float *qr = (const float *)((const uint8_t *)q + (size_t)g * q_stride);
            const __m512 sc = nc == 4   ? scores16(qr, kf, 4)
                              : nc == 8 ? scores16(qr, kf, 8)
                                        : scores16(qr, kf, nc);
            const __m512 x = _mm512_add_ps(_mm512_mul_ps(sc, vscale), add);
            _mm512_mask_storeu_ps(s + g * s_stride + j0, keep, x);
            vmax[g] = _mm512_mask_max_ps(vmax[g], keep, vmax[g], x);
        }
    }
    /* e_j = exp(score_j - max) and their sum, per row */
    float inv[G];
    for (int64_t g = 0; g < G; g++) {
        const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax[g]));
        const float *sr = s + g * s_stride;
        float *pr = p + g * s_stride;
        double sum = 0.0;
        for (int64_t c0 = 0; c0 < n; c0 += 1024) {
            const int64_t c1 = n - c0 < 1024 ? n : c0 + 1024;
            __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
            int64_t j = c0;
            for (; j + 32 <= c1; j += 32) {
                const __m512 e0 = vexp(_mm512_sub_ps(_mm512_loadu_ps(sr + j), mx));
                const __m512 e1 = vexp(_mm512_sub_ps(_mm512_loadu_ps(sr + j + 16), mx));
                _mm512_storeu_ps(pr + j, e0);
                _mm512_storeu_ps(pr + j + 16, e1);
                a0 = _mm512_add_ps(a0, e0);
                a1 = _mm512_add_ps(a1, e1);
            }
            for (; j < c1; j += 16) {
                const __mmask16 kt = tail_mask(c1 - j);
                const __m512 e = _mm512_maskz_mov_ps(kt, vexp(_mm512_sub_ps(_mm512_maskz_loadu_ps(kt, sr + j), mx)));
                _mm512_mask_storeu_ps(pr + j, kt, e);
                a0 = _mm512_add_ps(a0, e);
            }
            sum += (double)_mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        }
        inv[g] = (float)(1.0 / sum);
    }
    /* outputs: the v rows in list order, four query rows (and D/16 registers each) at a time */
    for (int64_t g0 = 0; g0 < G; g0 += 4) {
        const int64_t gn = G - g0 < 4 ? G - g0 : 4;
        for (int64_t i0 = 0; i0 < nc; i0 += 4) {
            const int64_t in = nc - i0 < 4 ? nc - i0 : 4;
            __m512 acc[4][4];
            UNROLL
            for (int g = 0; g < 4; g++)
                UNROLL
                for (int i = 0; i < 4; i++) acc[g][i] = _mm512_setzero_ps();
            for (int64_t j = 0; j < n; j++) {
                const uint8_t *vr = v + (size_t)idx[j] * v_stride + 32 * i0;
                __m512 vv[4];
                UNROLL
                for (int i = 0; i < 4; i++) vv[i] = i < in ? f16x16(vr + 32 * i) : _mm512_setzero_ps();
                UNROLL
                for (int g = 0; g < 4; g++) {
                    const __m512 pj = _mm512_set1_ps(g < gn ? p[(g0 + g) * s_stride + j] : 0.0f);
                    UNROLL
                    for (int i = 0; i < 4; i++) acc[g][i] = _mm512_fmadd_ps(pj, vv[i], acc[g][i]);
                }
            }
            for (int g = 0; g < gn; g++)
                for (int i = 0; i < in; i++)
                    _mm512_storeu_ps((float *)((uint8_t *)out + (size_t)(g0 + g) * out_stride) + 16 * (i0 + i),
                                     _mm512_mul_ps(acc[g][i], _mm512_set1_ps(inv[g0 + g])));
        }
    }
}
