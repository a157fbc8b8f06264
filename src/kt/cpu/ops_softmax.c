/*
 * ops_softmax.c - attention-score kernels on the CPU: soft_max with scale,
 * optional additive mask (F32/F16, broadcast over dims 2 and 3) and ALiBi
 * slopes per head, and diag_mask_inf (causal masking by -inf).
 */
#include "ops_isa.h"
#include "ops_util.h"

/*
 * ALiBi slope of head h as ggml defines it: with n_head_log2 the largest power
 * of two <= n_head, heads below it get m0^(h+1) and the rest m1^(2(h-n_head_log2)+1),
 * where m0 = 2^(-max_bias/n_head_log2) and m1 = 2^(-max_bias/2/n_head_log2).
 */
static float alibi_slope(float max_bias, int64_t n_head, int64_t h) {
    if (max_bias <= 0.0f) return 1.0f;
    uint32_t n_head_log2 = 1;
    while ((int64_t)n_head_log2 * 2 <= n_head) n_head_log2 *= 2;
    const float m0 = powf(2.0f, -max_bias / (float)n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return h < (int64_t)n_head_log2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n_head_log2) + 1));
}

void kt_cpu_soft_max(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const struct kt_tensor *mask = dst->src[1];
    const float scale = kt_get_op_param_f32(dst, 0);
    const float max_bias = kt_get_op_param_f32(dst, 1);
    const int64_t n = a->ne[0];
    /* packed F32 rows (and a packed mask) take the SIMD row kernel when the CPU has it */
    const bool simd = a->type == KT_TYPE_F32 && a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) &&
                      (!mask || mask->nb[0] == kt_type_size(mask->type)) && kt_cpu_ops_use_avx512();

    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *y = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *m = mask ? kt_cpu_row_ptr(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : NULL;
        const float slope = alibi_slope(max_bias, a->ne[2], i2);
        if (simd) {
            kt_cpu_soft_max_row_avx512(n, (float *)y, (const float *)x, m, mask && mask->type == KT_TYPE_F16,
                                       scale, slope);
            continue;
        }

        /* pass 1: logits (kept in dst, which is F32) and their maximum */
        float vmax = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float v = kt_cpu_load(a->type, x + i * a->nb[0]) * scale;
            if (m) v += slope * kt_cpu_load(mask->type, m + i * mask->nb[0]);
            memcpy(y + i * dst->nb[0], &v, sizeof v);
            if (v > vmax) vmax = v;
        }
        /* a row masked out entirely has no distribution; give it zeros, not NaN */
        if (vmax == -INFINITY) {
            for (int64_t i = 0; i < n; i++) {
                const float z = 0.0f;
                memcpy(y + i * dst->nb[0], &z, sizeof z);
            }
            continue;
        }
        /* pass 2: exponentials, summed in double in index order */
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, y + i * dst->nb[0], sizeof v);
            v = expf(v - vmax);
            memcpy(y + i * dst->nb[0], &v, sizeof v);
            sum += v;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, y + i * dst->nb[0], sizeof v);
            v *= inv;
            memcpy(y + i * dst->nb[0], &v, sizeof v);
        }
    }
}

void kt_cpu_diag_mask_inf(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n_past = kt_get_op_param_i32(dst, 0);
    const int64_t n = a->ne[0];
    const bool same = a->type == dst->type && a->type == KT_TYPE_F32;
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *y = kt_cpu_row_ptr(dst, i1, i2, i3);
        for (int64_t i = 0; i < n; i++) {
            float v;
            if (i > n_past + i1) {
                v = -INFINITY;
            } else if (same) {
                memcpy(&v, x + i * a->nb[0], sizeof v);
            } else {
                v = kt_cpu_load(a->type, x + i * a->nb[0]);
            }
            kt_cpu_store(dst->type, y + i * dst->nb[0], v);
        }
    }
}
