/*
 * quant_iq.c - the non-linear 4-bit types IQ4_NL (32-element blocks) and
 * IQ4_XS (256-element super-blocks with 6-bit sub-block scales): quants are
 * indices into a fixed table of 16 levels. Reference quantizer (the scale
 * search the GGUF tools run without an importance matrix), dequantizers and
 * dot products (against Q8_0 and Q8_K respectively).
 */
#include <math.h>

#include "quant.h"

/* The 16 levels, denser near zero where weights are. Part of the format. */
const int8_t kt_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

#define GROUP_EPS 1e-15f
#define NTRY 7 /* scale candidates each side of the first guess */

/* Index of the level nearest to v (the upper one on a tie, as the reference). */
static int nearest_level(float v) {
    const int8_t *t = kt_iq4nl_values;
    if (v <= t[0]) return 0;
    if (v >= t[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid]) hi = mid;
        else lo = mid;
    }
    return v - (float)t[hi - 1] < (float)t[hi] - v ? hi - 1 : hi;
}

/* Best scale for one 32-element group: weighted (x^2) least squares over the
 * level assignments for 2*NTRY+1 trial scales around max/levels[0]. Returns
 * the scale (0 for an all-zero group). */
static float fit_group(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < GROUP_EPS) return 0.0f;
    float d = -max / (float)kt_iq4nl_values[0];
    float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float q = (float)kt_iq4nl_values[nearest_level(id * x[j])];
        const float w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -NTRY; t <= NTRY; t++) {
        id = (float)(t + kt_iq4nl_values[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = (float)kt_iq4nl_values[nearest_level(id * x[j])];
            const float w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 indices into 16 bytes: low nibbles elements 0..15, high nibbles 16..31. */
static void pack_group(const float *x, float id, uint8_t *qs) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest_level(id * x[j]) | (nearest_level(id * x[j + 16]) << 4));
}

/* ------------------------------------------------------------------ IQ4_NL */

void kt_quantize_row_iq4_nl_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_iq4_nl *y = vy;
    for (int64_t i = 0; i < n / KT_QK4_NL; i++, x += KT_QK4_NL) {
        const float d = fit_group(x);
        y[i].d = kt_f2h(d);
        /* indices from the unrounded scale, as the reference */
        pack_group(x, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
    }
}

void kt_dequantize_row_iq4_nl(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / KT_QK4_NL; i++, y += KT_QK4_NL) {
        const float d = kt_h2f(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)kt_iq4nl_values[x[i].qs[j] & 0xf];
            y[j + 16] = d * (float)kt_iq4nl_values[x[i].qs[j] >> 4];
        }
    }
}

void kt_vec_dot_iq4_nl_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_iq4_nl *x = vx;
    const kt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK4_NL; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += kt_iq4nl_values[x[i].qs[j] & 0xf] * y[i].qs[j];
            isum += kt_iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        sum += kt_h2f(x[i].d) * kt_h2f(y[i].d) * (float)isum;
    }
    *s = sum;
}

/* ------------------------------------------------------------------ IQ4_XS */

static int xs_scale(const kt_block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

void kt_quantize_row_iq4_xs_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_iq4_xs *y = vy;
    float scales[KT_QK_K / 32];
    for (int64_t i = 0; i < n / KT_QK_K; i++, x += KT_QK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int ib = 0; ib < KT_QK_K / 32; ib++) {
            scales[ib] = fit_group(x + 32 * ib);
            if (fabsf(scales[ib]) > amax) {
                amax = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        /* 6-bit signed sub-block scales; the extreme one maps to -32 */
        const float d = -max_scale / 32;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int ib = 0; ib < KT_QK_K / 32; ib++) {
            int l = kt_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l; /* unrounded d, as the reference */
            pack_group(x + 32 * ib, dl != 0.0f ? 1.0f / dl : 0.0f, y[i].qs + 16 * ib);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xf) << (4 * (ib % 2)));
            y[i].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    }
}

void kt_dequantize_row_iq4_xs(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const float d = kt_h2f(x[i].d);
        for (int ib = 0; ib < KT_QK_K / 32; ib++, y += 32) {
            const float dl = d * (float)xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)kt_iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * (float)kt_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

void kt_vec_dot_iq4_xs_q8_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_iq4_xs *x = vx;
    const kt_block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < KT_QK_K / 32; ib++) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            int sub = 0;
            for (int j = 0; j < 16; j++)
                sub += kt_iq4nl_values[qs[j] & 0xf] * q8[j] + kt_iq4nl_values[qs[j] >> 4] * q8[j + 16];
            isum += xs_scale(&x[i], ib) * sub;
        }
        sum += kt_h2f(x[i].d) * y[i].d * (float)isum;
    }
    *s = sum;
}
