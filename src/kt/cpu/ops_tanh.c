/*
 * ops_tanh.c - the element-wise CPU kernels built on tanh that Gemma needs:
 * GEGLU = gelu(src0) * src1 (GELU's tanh form on a feed-forward's gate) and
 * SOFTCAP = cap * tanh(x / cap) (logit soft-capping). Each output element depends
 * only on its inputs, so results are the same for any thread count.
 */
#include "ops_isa.h"
#include "ops_util.h"

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the constants KT_OP_GELU uses */
static inline float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
}

void kt_cpu_geglu(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    const bool f32 = dst->type == KT_TYPE_F32 && a->type == KT_TYPE_F32 && b->type == KT_TYPE_F32 &&
                     dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float);
    const bool simd = f32 && kt_cpu_ops_use_avx512();
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3), *y = kt_cpu_row_ptr(b, i1, i2, i3);
        if (f32) {
            float *df = (float *)d;
            const float *xf = (const float *)x, *yf = (const float *)y;
            /* d may alias x: the gate is read before its element is written */
            if (simd) {
                kt_cpu_gelu_row_avx512(ne0, df, xf);
                for (int64_t i = 0; i < ne0; i++) df[i] *= yf[i];
            } else {
                for (int64_t i = 0; i < ne0; i++) df[i] = gelu_f(xf[i]) * yf[i];
            }
        } else {
            for (int64_t i = 0; i < ne0; i++) {
                const float va = kt_cpu_load(a->type, x + i * a->nb[0]), vb = kt_cpu_load(b->type, y + i * b->nb[0]);
                kt_cpu_store(dst->type, d + i * dst->nb[0], gelu_f(va) * vb);
            }
        }
    }
}

void kt_cpu_softcap(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    const float cap = kt_get_op_param_f32(dst, 0), inv = 1.0f / cap;
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        for (int64_t i = 0; i < ne0; i++)
            kt_cpu_store(dst->type, d + i * dst->nb[0], cap * tanhf(kt_cpu_load(a->type, x + i * a->nb[0]) * inv));
    }
}
