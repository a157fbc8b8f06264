/*
 * quant_fp4.c - MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): 32
 * E2M1 values sharing one E8M0 power-of-two scale per block. Reference
 * quantizer (the scale from the block's largest magnitude, each value to its
 * nearest level: GGUF tools' bytes), dequantizer, and the dot product against
 * Q8_0 activations.
 */
#include <math.h>

#include "quant.h"

/* The 16 E2M1 codes doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times
 * two, so that the levels are integers an int8 dot can take). Part of the format. */
const int8_t kt_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* The scale's exponent: the largest magnitude's power of two, less 2 (the largest
 * level, 6 = 1.5 * 2^2), biased by 127. As the GGUF tools compute it: in float, then
 * truncated through a 32-bit integer to its low byte, so a block below 2^-125 wraps to
 * a large exponent rather than stopping at 0. */
static uint8_t block_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    const float e = floorf(log2f(amax)) - 2.0f + 127.0f;
    const int32_t i = isfinite(e) ? (int32_t)e : INT32_MIN; /* (inf: what the x86 conversion gives) */
    return (uint8_t)((uint32_t)i & 0xff);
}

/* Code of the level nearest to x at half-scale d: the first of the 16 in table order
 * whose error is strictly smallest. A negative x can only be nearest to a negative
 * level (or zero, which the positive 0 takes first), and negation is exact, so the
 * magnitude's search over the first 8 gives the same code. */
static uint8_t nearest_code(float x, float d) {
    const float m = fabsf(x);
    int best = 0;
    float best_err = fabsf(0.0f * d - m);
    for (int i = 1; i < 8; i++) {
        const float err = fabsf((float)kt_mxfp4_values[i] * d - m);
        if (err < best_err) best = i, best_err = err;
    }
    return (uint8_t)(x < 0.0f && best != 0 ? best + 8 : best);
}

void kt_quantize_row_mxfp4_ref(const float *restrict x, void *restrict vy, int64_t n) {
    kt_block_mxfp4 *y = vy;
    for (int64_t i = 0; i < n / KT_QK_MXFP4; i++, x += KT_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < KT_QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]); /* (a NaN never raises it) */
        y[i].e = block_exponent(amax);
        const float d = kt_e8m0_half(y[i].e);
        for (int j = 0; j < KT_QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(nearest_code(x[j], d) | nearest_code(x[j + KT_QK_MXFP4 / 2], d) << 4);
    }
}

void kt_dequantize_row_mxfp4(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / KT_QK_MXFP4; i++, y += KT_QK_MXFP4) {
        const float d = kt_e8m0_half(x[i].e);
        for (int j = 0; j < KT_QK_MXFP4 / 2; j++) {
            y[j] = (float)kt_mxfp4_values[x[i].qs[j] & 0xf] * d;
            y[j + KT_QK_MXFP4 / 2] = (float)kt_mxfp4_values[x[i].qs[j] >> 4] * d;
        }
    }
}

void kt_vec_dot_mxfp4_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_mxfp4 *x = vx;
    const kt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_MXFP4; i++) {
        int isum = 0;
        for (int j = 0; j < KT_QK_MXFP4 / 2; j++) {
            isum += kt_mxfp4_values[x[i].qs[j] & 0xf] * y[i].qs[j];
            isum += kt_mxfp4_values[x[i].qs[j] >> 4] * y[i].qs[j + KT_QK_MXFP4 / 2];
        }
        sum += kt_h2f(y[i].d) * kt_e8m0_half(x[i].e) * (float)isum;
    }
    *s = sum;
}
