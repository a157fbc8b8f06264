/*
 * quant_legacy.c - the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q8_1: reference quantizers (their rounding rules are fixed by the format's
 * reference tools, so these produce the same bytes), dequantizers, and scalar
 * dot products against the Q8_0/Q8_1 activation blocks.
 *
 * The float operations are written one per statement, in the order the
 * reference tools use: results must be bit-identical, so neither reordering
 * nor fused multiply-add is allowed here.
 */
#include <float.h>
#include <math.h>

#include "quant.h"

/* ------------------------------------------------------------------ helpers */

/* The value of largest magnitude (sign kept); the first one on ties. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    /* Start from +-FLT_MAX as the reference does (matters only for all-infinite blocks). */
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

/* ------------------------------------------------------------------ Q4_0 */

/* d = -max/8 maps the extreme value to -8 exactly; values become round-half-up(x/d) + 8. */
void kt_quantize_row_q4_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / KT_QK4_0; i++, x += KT_QK4_0) {
        const float d = signed_absmax(x, KT_QK4_0) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        for (int j = 0; j < KT_QK4_0 / 2; j++) {
            float a = x[j] * id, b = x[j + KT_QK4_0 / 2] * id;
            a = a + 8.5f;
            b = b + 8.5f;
            int qa = (int)a, qb = (int)b; /* truncation, as the reference */
            if (qa > 15) qa = 15;
            if (qb > 15) qb = 15;
            y[i].qs[j] = (uint8_t)(qa | (qb << 4));
        }
    }
}

void kt_dequantize_row_q4_0(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / KT_QK4_0; i++, y += KT_QK4_0) {
        const float d = kt_h2f(x[i].d);
        for (int j = 0; j < KT_QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0xf) - 8) * d;
            y[j + KT_QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ------------------------------------------------------------------ Q4_1 */

void kt_quantize_row_q4_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / KT_QK4_1; i++, x += KT_QK4_1) {
        float mn, mx;
        min_max(x, KT_QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        y[i].m = kt_f2h(mn);
        for (int j = 0; j < KT_QK4_1 / 2; j++) {
            float a = x[j] - mn, b = x[j + KT_QK4_1 / 2] - mn;
            a = a * id;
            b = b * id;
            a = a + 0.5f;
            b = b + 0.5f;
            int qa = (int)a, qb = (int)b;
            if (qa > 15) qa = 15;
            if (qb > 15) qb = 15;
            y[i].qs[j] = (uint8_t)(qa | (qb << 4));
        }
    }
}

void kt_dequantize_row_q4_1(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / KT_QK4_1; i++, y += KT_QK4_1) {
        const float d = kt_h2f(x[i].d), m = kt_h2f(x[i].m);
        for (int j = 0; j < KT_QK4_1 / 2; j++) {
            float a = (float)(x[i].qs[j] & 0xf) * d;
            float b = (float)(x[i].qs[j] >> 4) * d;
            y[j] = a + m;
            y[j + KT_QK4_1 / 2] = b + m;
        }
    }
}

/* ------------------------------------------------------------------ Q5_0 / Q5_1 */

/* The fifth bit of element j lives in bit j of the little-endian 32-bit qh. */
static uint32_t load_qh(const uint8_t *qh) {
    return (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) | ((uint32_t)qh[3] << 24);
}
static void store_qh(uint8_t *qh, uint32_t v) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(v >> (8 * k));
}

void kt_quantize_row_q5_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / KT_QK5_0; i++, x += KT_QK5_0) {
        const float d = signed_absmax(x, KT_QK5_0) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < KT_QK5_0 / 2; j++) {
            float a = x[j] * id, b = x[j + KT_QK5_0 / 2] * id;
            a = a + 16.5f;
            b = b + 16.5f;
            int qa = (int)a, qb = (int)b;
            if (qa > 31) qa = 31;
            if (qb > 31) qb = 31;
            y[i].qs[j] = (uint8_t)((qa & 0xf) | ((qb & 0xf) << 4));
            qh |= (uint32_t)(qa >> 4) << j;
            qh |= (uint32_t)(qb >> 4) << (j + KT_QK5_0 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

void kt_dequantize_row_q5_0(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / KT_QK5_0; i++, y += KT_QK5_0) {
        const float d = kt_h2f(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < KT_QK5_0 / 2; j++) {
            int a = (x[i].qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
            int b = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)(a - 16) * d;
            y[j + KT_QK5_0 / 2] = (float)(b - 16) * d;
        }
    }
}

void kt_quantize_row_q5_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / KT_QK5_1; i++, x += KT_QK5_1) {
        float mn, mx;
        min_max(x, KT_QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        y[i].m = kt_f2h(mn);
        uint32_t qh = 0;
        for (int j = 0; j < KT_QK5_1 / 2; j++) {
            float a = x[j] - mn, b = x[j + KT_QK5_1 / 2] - mn;
            a = a * id;
            b = b * id;
            a = a + 0.5f;
            b = b + 0.5f;
            /* no clamp: the reference relies on (max-min)*id rounding to <= 31.5 */
            int qa = (uint8_t)a, qb = (uint8_t)b;
            y[i].qs[j] = (uint8_t)((qa & 0xf) | ((qb & 0xf) << 4));
            qh |= (uint32_t)((qa >> 4) & 1) << j;
            qh |= (uint32_t)((qb >> 4) & 1) << (j + KT_QK5_1 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

void kt_dequantize_row_q5_1(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / KT_QK5_1; i++, y += KT_QK5_1) {
        const float d = kt_h2f(x[i].d), m = kt_h2f(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < KT_QK5_1 / 2; j++) {
            int a = (x[i].qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
            int b = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            float fa = (float)a * d, fb = (float)b * d;
            y[j] = fa + m;
            y[j + KT_QK5_1 / 2] = fb + m;
        }
    }
}

/* ------------------------------------------------------------------ Q8_0 / Q8_1 */

/* d = amax/127; quants are round-half-away-from-zero(x/d) (roundf, as the reference). */
void kt_quantize_row_q8_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / KT_QK8_0; i++, x += KT_QK8_0) {
        const float d = absmax(x, KT_QK8_0) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kt_f2h(d);
        for (int j = 0; j < KT_QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void kt_dequantize_row_q8_0(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / KT_QK8_0; i++, y += KT_QK8_0) {
        const float d = kt_h2f(x[i].d);
        for (int j = 0; j < KT_QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void kt_quantize_row_q8_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / KT_QK8_1; i++, x += KT_QK8_1) {
        const float d = absmax(x, KT_QK8_1) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        y[i].d = kt_f2h(d);
        for (int j = 0; j < KT_QK8_1; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = kt_f2h((float)sum * d); /* from the unrounded d, as the reference */
    }
}

void kt_dequantize_row_q8_1(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / KT_QK8_1; i++, y += KT_QK8_1) {
        const float d = kt_h2f(x[i].d);
        for (int j = 0; j < KT_QK8_1; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

/* ------------------------------------------------------------------ dot products */

/* Per block: an exact integer sum of quant products, scaled once by d_x*d_y. Q4_0 and
 * Q8_0 add that product into the sum with one rounding (fmaf): their AVX-512 kernels
 * (cpu/gemm_lanes_avx512.c) keep this arithmetic, and a fused multiply-add costs them
 * one operation where a multiply and an add cost two. */

void kt_vec_dot_q4_0_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < KT_QK8_0 / 2; j++) {
            isum += ((x[i].qs[j] & 0xf) - 8) * y[i].qs[j];
            isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + KT_QK8_0 / 2];
        }
        sum = fmaf((float)isum, kt_h2f(x[i].d) * kt_h2f(y[i].d), sum);
    }
    *s = sum;
}

/* sum((q*d + m) * y) = d*dy*sum(q*qy) + m*s, s being d_y*sum(qy) from the Q8_1 block. */
void kt_vec_dot_q4_1_q8_1(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_1 *x = vx;
    const kt_block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_1; i++) {
        int isum = 0;
        for (int j = 0; j < KT_QK8_1 / 2; j++) {
            isum += (x[i].qs[j] & 0xf) * y[i].qs[j];
            isum += (x[i].qs[j] >> 4) * y[i].qs[j + KT_QK8_1 / 2];
        }
        sum += (float)isum * (kt_h2f(x[i].d) * kt_h2f(y[i].d)) + kt_h2f(x[i].m) * kt_h2f(y[i].s);
    }
    *s = sum;
}

void kt_vec_dot_q5_0_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        const uint32_t qh = load_qh(x[i].qh);
        int isum = 0;
        for (int j = 0; j < KT_QK8_0 / 2; j++) {
            int a = ((x[i].qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4)) - 16;
            int b = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            isum += a * y[i].qs[j] + b * y[i].qs[j + KT_QK8_0 / 2];
        }
        sum += (float)isum * (kt_h2f(x[i].d) * kt_h2f(y[i].d));
    }
    *s = sum;
}

void kt_vec_dot_q5_1_q8_1(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q5_1 *x = vx;
    const kt_block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_1; i++) {
        const uint32_t qh = load_qh(x[i].qh);
        int isum = 0;
        for (int j = 0; j < KT_QK8_1 / 2; j++) {
            int a = (x[i].qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
            int b = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += a * y[i].qs[j] + b * y[i].qs[j + KT_QK8_1 / 2];
        }
        sum += (float)isum * (kt_h2f(x[i].d) * kt_h2f(y[i].d)) + kt_h2f(x[i].m) * kt_h2f(y[i].s);
    }
    *s = sum;
}

void kt_vec_dot_q8_0_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q8_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < KT_QK8_0; j++) isum += x[i].qs[j] * y[i].qs[j];
        sum = fmaf((float)isum, kt_h2f(x[i].d) * kt_h2f(y[i].d), sum);
    }
    *s = sum;
}
