/*
 * quant_k.c - the K-quant super-block types Q2_K..Q6_K and their activation
 * partner Q8_K: reference quantizers (the same scale searches the GGUF tools
 * use without an importance matrix, so the bytes agree), dequantizers, and
 * scalar dot products against Q8_K.
 *
 * The searches compare float error sums, so every float operation is kept in
 * the reference order, one rounding per operation (no reassociation, no FMA).
 */
#include <math.h>
#include <stdbool.h>

#include "quant.h"

/* Groups whose largest magnitude is below this are treated as all zero. */
#define GROUP_EPS 1e-15f

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------ scale searches */

/* Symmetric quants in [-nmax, nmax-1] weighted by x^2 (Q6_K): start from the
 * scale that maps the extreme value to -nmax, then try 18 nearby scales and keep
 * the least-squares optimum. L gets q + nmax. Returns the scale. */
static float fit_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clampi(kt_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)step) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clampi(kt_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(kt_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit quants (Q3_K): start as above, then move single quants while
 * that improves the x^2-weighted least-squares fit (at most 5 sweeps). */
static float fit_symmetric_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clampi(kt_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0.0f)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            int nl = clampi(kt_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine quants q in [0, nmax] with x ~ scale*q - min (Q2_K, Q4_K, Q5_K): try
 * nstep+1 scales around nmax/(max-min), solve the weighted least-squares scale
 * and min for each quant assignment and keep the smallest weighted error
 * (absolute error if use_mad, squared otherwise). *neg_min receives -min >= 0. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                        float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_err = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(kt_nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_err += w[i] * diff;
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * (float)step + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clampi(kt_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0.0f)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0.0f) {
            this_min = 0.0f;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * (float)Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            err += w[i] * diff;
        }
        if (err < best_err) {
            memcpy(L, Laux, (size_t)n);
            best_err = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* 2-bit fields of 128 quants: byte l of a 32-byte group holds elements l, l+32, l+64, l+96. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < KT_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* ------------------------------------------------------------------ unpacking */

/* Quants of one super-block as plain bytes in element order. Written as
 * loops over 32 lanes so that compilers vectorize them; the dequantizers and
 * dot products below share them. */

/* 2-bit fields: element 128h + 32k + l is bits 2k..2k+1 of byte 32h + l. */
static void unpack_2bit(const uint8_t *qs, uint8_t *q) {
    for (int h = 0; h < 2; h++, q += 128, qs += 32)
        for (int l = 0; l < 32; l++) {
            q[l] = qs[l] & 3;
            q[l + 32] = (qs[l] >> 2) & 3;
            q[l + 64] = (qs[l] >> 4) & 3;
            q[l + 96] = qs[l] >> 6;
        }
}

/* Q3_K: 2 low bits as above, minus 4 where the element's hmask bit (byte e%32, bit e/32) is clear. */
static void unpack_q3_K(const kt_block_q3_K *b, int8_t *q) {
    uint8_t lo[KT_QK_K];
    unpack_2bit(b->qs, lo);
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++) {
            const uint8_t v = (uint8_t)(lo[32 * k + l] | (((b->hmask[l] >> k) & 1) << 2)); /* 0..7 */
            q[32 * k + l] = (int8_t)(v - 4);
        }
}

/* Q6_K: element 128h + 32k + l: low nibble from ql[64h + l + 32(k&1)] (high nibble if k >= 2),
 * 2 high bits from qh[32h + l] at bits 2k; stored +32. */
static void unpack_q6_K(const kt_block_q6_K *b, int8_t *q) {
    const uint8_t *ql = b->ql, *qh = b->qh;
    for (int h = 0; h < 2; h++, q += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) << 4)) - 32);
        }
}

static int dot_u8_i8(const uint8_t *a, const int8_t *b, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static int dot_i8_i8(const int8_t *a, const int8_t *b, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------------ Q2_K */

void kt_quantize_row_q2_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q2_K *y = vy;
    uint8_t L[KT_QK_K], Laux[16];
    float w[16], mins[KT_QK_K / 16], scales[KT_QK_K / 16];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < KT_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit sub-block scales and mins relative to the largest of each */
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale > 0.0f) {
            const float is = 15.0f / max_scale;
            for (int j = 0; j < KT_QK_K / 16; j++) y[i].scales[j] = (uint8_t)kt_nearest_int(is * scales[j]);
            y[i].d = kt_f2h(max_scale / 15.0f);
        } else {
            y[i].d = kt_f2h(0.0f);
        }
        if (max_min > 0.0f) {
            const float im = 15.0f / max_min;
            for (int j = 0; j < KT_QK_K / 16; j++) y[i].scales[j] |= (uint8_t)(kt_nearest_int(im * mins[j]) << 4);
            y[i].dmin = kt_f2h(max_min / 15.0f);
        } else {
            y[i].dmin = kt_f2h(0.0f);
        }
        /* requantize against the scales as stored */
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const float d = kt_h2f(y[i].d) * (float)(y[i].scales[j] & 0xf);
            if (d == 0.0f) continue;
            const float dm = kt_h2f(y[i].dmin) * (float)(y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                float v = x[16 * j + l] + dm;
                L[16 * j + l] = (uint8_t)clampi(kt_nearest_int(v / d), 0, 3);
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void kt_dequantize_row_q2_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q2_K *x = vx;
    uint8_t q[KT_QK_K];
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d), dmin = kt_h2f(x[i].dmin);
        unpack_2bit(x[i].qs, q);
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const uint8_t sc = x[i].scales[j];
            const float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
            for (int l = 0; l < 16; l++) {
                const float v = dl * (float)q[16 * j + l];
                *y++ = v - ml;
            }
        }
    }
}

/* ------------------------------------------------------------------ Q3_K */

void kt_quantize_row_q3_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q3_K *y = vy;
    int8_t L[KT_QK_K];
    float scales[KT_QK_K / 16];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < KT_QK_K / 16; j++) {
            scales[j] = fit_symmetric_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < KT_QK_K / 16; j++) {
                int l = clampi((int8_t)kt_nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xf);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
                y[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = kt_f2h(1.0f / iscale);
        } else {
            y[i].d = kt_f2h(0.0f);
        }
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const float d = kt_h2f(y[i].d) * (float)kt_q3k_scale(j, y[i].scales);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clampi(kt_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        /* bit 2 of element e goes to hmask[e%32] bit e/32; the low 2 bits are packed like Q2_K */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t low[KT_QK_K];
        for (int e = 0; e < KT_QK_K; e++) {
            int l = L[e];
            if (l > 3) {
                y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                l -= 4;
            }
            low[e] = (uint8_t)l;
        }
        pack_2bit(low, y[i].qs);
    }
}

void kt_dequantize_row_q3_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q3_K *x = vx;
    int8_t q[KT_QK_K];
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d);
        unpack_q3_K(&x[i], q);
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const float dl = d * (float)kt_q3k_scale(j, x[i].scales);
            for (int l = 0; l < 16; l++) *y++ = dl * (float)q[16 * j + l];
        }
    }
}

/* ------------------------------------------------------------------ Q4_K / Q5_K */

/* Shared by Q4_K and Q5_K: per 32-element sub-block, an affine fit weighted by
 * rms + |x|; then 6-bit scales/mins relative to the largest, packed in 12 bytes;
 * then L requantized against the stored scales. */
static void quantize_k_affine(const float *x, int nmax, float rmin, int nstep, kt_fp16_t *d_out, kt_fp16_t *dmin_out,
                              uint8_t *packed, uint8_t *L) {
    uint8_t Laux[32];
    float w[32], mins[KT_QK_K / 32], scales[KT_QK_K / 32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < KT_QK_K / 32; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_affine(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < KT_QK_K / 32; j++) {
        uint8_t ls = (uint8_t)kt_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)kt_nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = kt_f2h(max_scale / 63.0f);
    *dmin_out = kt_f2h(max_min / 63.0f);
    for (int j = 0; j < KT_QK_K / 32; j++) {
        uint8_t sc, mn;
        kt_k4_scale_min(j, packed, &sc, &mn);
        const float d = kt_h2f(*d_out) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = kt_h2f(*dmin_out) * (float)mn;
        for (int l = 0; l < 32; l++) {
            float v = x[32 * j + l] + dm;
            L[32 * j + l] = (uint8_t)clampi(kt_nearest_int(v / d), 0, nmax);
        }
    }
}

void kt_quantize_row_q4_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q4_K *y = vy;
    uint8_t L[KT_QK_K];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        quantize_k_affine(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        /* 64 elements per 32 bytes: low nibbles the first 32, high nibbles the next */
        for (int j = 0; j < KT_QK_K; j += 64)
            for (int l = 0; l < 32; l++) y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void kt_dequantize_row_q4_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d), dmin = kt_h2f(x[i].dmin);
        for (int j = 0; j < KT_QK_K / 32; j++) {
            uint8_t sc, mn;
            kt_k4_scale_min(j, x[i].scales, &sc, &mn);
            const float dl = d * (float)sc, ml = dmin * (float)mn;
            const uint8_t *q = x[i].qs + (j / 2) * 32;
            const int shift = (j & 1) * 4;
            for (int l = 0; l < 32; l++) {
                const float v = dl * (float)((q[l] >> shift) & 0xf);
                *y++ = v - ml;
            }
        }
    }
}

void kt_quantize_row_q5_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q5_K *y = vy;
    uint8_t L[KT_QK_K];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        quantize_k_affine(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        /* low 4 bits as Q4_K; bit 4 of element e in qh[e%32] bit e/32 */
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < KT_QK_K; e++)
            if (L[e] > 15) y[i].qh[e % 32] |= (uint8_t)(1u << (e / 32));
        for (int j = 0; j < KT_QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 2 + l] = (uint8_t)((L[j + l] & 0xf) | ((L[j + l + 32] & 0xf) << 4));
    }
}

void kt_dequantize_row_q5_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q5_K *x = vx;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d), dmin = kt_h2f(x[i].dmin);
        for (int j = 0; j < KT_QK_K / 32; j++) {
            uint8_t sc, mn;
            kt_k4_scale_min(j, x[i].scales, &sc, &mn);
            const float dl = d * (float)sc, ml = dmin * (float)mn;
            const uint8_t *q = x[i].qs + (j / 2) * 32;
            const int shift = (j & 1) * 4;
            for (int l = 0; l < 32; l++) {
                int qv = ((q[l] >> shift) & 0xf) + ((x[i].qh[l] >> j) & 1) * 16;
                const float v = dl * (float)qv;
                *y++ = v - ml;
            }
        }
    }
}

/* ------------------------------------------------------------------ Q6_K */

void kt_quantize_row_q6_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q6_K *y = vy;
    int8_t L[KT_QK_K];
    float scales[KT_QK_K / 16];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        float max_scale = 0.0f, max_abs = 0.0f;
        for (int j = 0; j < KT_QK_K / 16; j++) {
            scales[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs < GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[i].d = kt_f2h(1.0f / iscale);
        for (int j = 0; j < KT_QK_K / 16; j++) {
            int l = kt_nearest_int(iscale * scales[j]);
            y[i].scales[j] = (int8_t)(l < 127 ? l : 127);
        }
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const float d = kt_h2f(y[i].d) * (float)y[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clampi(kt_nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        /* element e = 128h + 32k + l: low nibble in ql[64h + l + 32(k&1)] (high half if k>=2),
         * high 2 bits in qh[32h + l] at bit pair k */
        memset(y[i].ql, 0, sizeof y[i].ql);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < KT_QK_K; e++) {
            const int h = e / 128, k = (e / 32) % 4, l = e % 32;
            const int q = L[e];
            y[i].ql[64 * h + l + 32 * (k & 1)] |= (uint8_t)((q & 0xf) << (4 * (k >> 1)));
            y[i].qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
        }
    }
}

void kt_dequantize_row_q6_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q6_K *x = vx;
    int8_t q[KT_QK_K];
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d);
        unpack_q6_K(&x[i], q);
        for (int j = 0; j < KT_QK_K / 16; j++) {
            const float ds = d * (float)x[i].scales[j]; /* (d*scale)*q: the reference's order */
            for (int l = 0; l < 16; l++) *y++ = ds * (float)q[16 * j + l];
        }
    }
}

/* ------------------------------------------------------------------ Q8_K */

void kt_quantize_row_q8_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < KT_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        /* -127 (not -128) keeps every quant in [-127, 127] */
        const float iscale = -127.0f / max;
        for (int j = 0; j < KT_QK_K; j++) {
            int v = kt_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < KT_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

void kt_dequantize_row_q8_K(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q8_K *x = vx;
    for (int64_t i = 0; i < n / KT_QK_K; i++)
        for (int j = 0; j < KT_QK_K; j++) *y++ = x[i].d * (float)x[i].qs[j];
}

/* ------------------------------------------------------------------ dot products vs Q8_K */

/* Each super-block: integer sums per sub-block times the integer sub-block
 * scale, accumulated exactly in int32, then scaled once by d_x * d_y. The
 * min terms use the Q8_K bsums. */

void kt_vec_dot_q2_K_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q2_K *x = vx;
    const kt_block_q8_K *y = vy;
    uint8_t q[KT_QK_K];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        unpack_2bit(x[i].qs, q);
        int isum = 0, msum = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t sc = x[i].scales[j];
            isum += (sc & 0xf) * dot_u8_i8(q + 16 * j, y[i].qs + 16 * j, 16);
            msum += (sc >> 4) * y[i].bsums[j];
        }
        sum += y[i].d * kt_h2f(x[i].d) * (float)isum - y[i].d * kt_h2f(x[i].dmin) * (float)msum;
    }
    *s = sum;
}

void kt_vec_dot_q3_K_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q3_K *x = vx;
    const kt_block_q8_K *y = vy;
    int8_t q[KT_QK_K];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        unpack_q3_K(&x[i], q);
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += kt_q3k_scale(j, x[i].scales) * dot_i8_i8(q + 16 * j, y[i].qs + 16 * j, 16);
        sum += kt_h2f(x[i].d) * y[i].d * (float)isum;
    }
    *s = sum;
}

void kt_vec_dot_q4_K_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_K *x = vx;
    const kt_block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            kt_k4_scale_min(j, x[i].scales, &sc, &mn);
            const uint8_t *q = x[i].qs + (j / 2) * 32;
            const int shift = (j & 1) * 4;
            int sub = 0;
            for (int l = 0; l < 32; l++) sub += ((q[l] >> shift) & 0xf) * y[i].qs[32 * j + l];
            isum += sc * sub;
            msum += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += kt_h2f(x[i].d) * y[i].d * (float)isum - kt_h2f(x[i].dmin) * y[i].d * (float)msum;
    }
    *s = sum;
}

void kt_vec_dot_q5_K_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_K *x = vx;
    const kt_block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            kt_k4_scale_min(j, x[i].scales, &sc, &mn);
            const uint8_t *q = x[i].qs + (j / 2) * 32;
            const int shift = (j & 1) * 4;
            int sub = 0;
            for (int l = 0; l < 32; l++) {
                int qv = ((q[l] >> shift) & 0xf) + ((x[i].qh[l] >> j) & 1) * 16;
                sub += qv * y[i].qs[32 * j + l];
            }
            isum += sc * sub;
            msum += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += kt_h2f(x[i].d) * y[i].d * (float)isum - kt_h2f(x[i].dmin) * y[i].d * (float)msum;
    }
    *s = sum;
}

void kt_vec_dot_q6_K_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q6_K *x = vx;
    const kt_block_q8_K *y = vy;
    int8_t q[KT_QK_K];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        unpack_q6_K(&x[i], q);
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += x[i].scales[j] * dot_i8_i8(q + 16 * j, y[i].qs + 16 * j, 16);
        sum += kt_h2f(x[i].d) * y[i].d * (float)isum;
    }
    *s = sum;
}
