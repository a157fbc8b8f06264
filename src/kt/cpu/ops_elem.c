/*
 * ops_elem.c - element-wise CPU kernels: add/sub/mul/div with src1 broadcast
 * over src0, scale (s*x + b), sqr, sqrt, silu, gelu, relu, and the fused
 * swiglu = silu(src0) * src1. Every output element depends only on its inputs,
 * so results are the same for any thread count.
 */
#include "ops_isa.h"
#include "ops_util.h"

/* GELU (tanh approximation): constants of the published formula,
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#define KT_GELU_COEF_A 0.044715f
#define KT_SQRT_2_OVER_PI 0.79788456080286535587989211986876f

static inline float silu_f(float x) {
    return x / (1.0f + expf(-x));
}
static inline float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(KT_SQRT_2_OVER_PI * x * (1.0f + KT_GELU_COEF_A * x * x)));
}

/* ------------------------------------------------------------------ binary */

static inline float bin_apply(enum kt_cpu_bin_op k, float a, float b) {
    switch (k) {
    case KT_CPU_ADD:
        return a + b;
    case KT_CPU_SUB:
        return a - b;
    case KT_CPU_MUL:
        return a * b;
    default:
        return a / b;
    }
}

/* d[i] = a[i] op b[i]; d may alias a. The switch sits outside the loop so each
 * loop vectorizes. */
static void bin_row_f32(enum kt_cpu_bin_op k, int64_t n, float *d, const float *a, const float *b) {
    switch (k) {
    case KT_CPU_ADD:
        for (int64_t i = 0; i < n; i++) d[i] = a[i] + b[i];
        break;
    case KT_CPU_SUB:
        for (int64_t i = 0; i < n; i++) d[i] = a[i] - b[i];
        break;
    case KT_CPU_MUL:
        for (int64_t i = 0; i < n; i++) d[i] = a[i] * b[i];
        break;
    case KT_CPU_DIV:
        for (int64_t i = 0; i < n; i++) d[i] = a[i] / b[i];
        break;
    }
}

static void binary(const struct kt_compute_params *p, struct kt_tensor *dst, enum kt_cpu_bin_op k) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    const int64_t ne10 = b->ne[0];
    if (ne10 <= 0) return; /* empty src1: the constructor only lets it through for an empty dst */
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);

    const bool f32 = dst->type == KT_TYPE_F32 && a->type == KT_TYPE_F32 && b->type == KT_TYPE_F32 &&
                     dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float);
    const bool simd = f32 && (ne10 == 1 || ne10 == ne0) && kt_cpu_ops_use_avx512();

    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        const char *y = kt_cpu_row_ptr(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        if (simd) {
            kt_cpu_bin_row_avx512(k, ne0, (float *)d, (const float *)x, (const float *)y, ne10 == 1);
        } else if (f32) {
            if (ne10 == 1) {
                /* one value per row (a per-row scale or bias) */
                float *df = (float *)d;
                const float *xf = (const float *)x, yv = *(const float *)y;
                for (int64_t i0 = 0; i0 < ne0; i0++) df[i0] = bin_apply(k, xf[i0], yv);
            } else {
                /* src1's row repeats ne0/ne10 times along the row */
                for (int64_t j = 0; j < ne0; j += ne10) {
                    bin_row_f32(k, ne10, (float *)d + j, (const float *)x + j, (const float *)y);
                }
            }
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0++) {
                float va = kt_cpu_load(a->type, x + i0 * a->nb[0]);
                float vb = kt_cpu_load(b->type, y + (i0 % ne10) * b->nb[0]);
                kt_cpu_store(dst->type, d + i0 * dst->nb[0], bin_apply(k, va, vb));
            }
        }
    }
}

void kt_cpu_add(const struct kt_compute_params *p, struct kt_tensor *dst) {
    binary(p, dst, KT_CPU_ADD);
}
void kt_cpu_sub(const struct kt_compute_params *p, struct kt_tensor *dst) {
    binary(p, dst, KT_CPU_SUB);
}
void kt_cpu_mul(const struct kt_compute_params *p, struct kt_tensor *dst) {
    binary(p, dst, KT_CPU_MUL);
}
void kt_cpu_div(const struct kt_compute_params *p, struct kt_tensor *dst) {
    binary(p, dst, KT_CPU_DIV);
}

/* ------------------------------------------------------------------ unary */

enum un_kind { UN_SCALE, UN_SQR, UN_SQRT, UN_SILU, UN_GELU, UN_RELU };

static inline float un_apply(enum un_kind k, float x, float s, float b) {
    switch (k) {
    case UN_SCALE:
        return x * s + b;
    case UN_SQR:
        return x * x;
    case UN_SQRT:
        return sqrtf(x);
    case UN_SILU:
        return silu_f(x);
    case UN_GELU:
        return gelu_f(x);
    default:
        return x > 0.0f ? x : 0.0f;
    }
}

static void un_row_f32(enum un_kind k, int64_t n, float *d, const float *x, float s, float b) {
    switch (k) {
    case UN_SCALE:
        for (int64_t i = 0; i < n; i++) d[i] = x[i] * s + b;
        break;
    case UN_SQR:
        for (int64_t i = 0; i < n; i++) d[i] = x[i] * x[i];
        break;
    case UN_SQRT:
        for (int64_t i = 0; i < n; i++) d[i] = sqrtf(x[i]);
        break;
    case UN_SILU:
        for (int64_t i = 0; i < n; i++) d[i] = silu_f(x[i]);
        break;
    case UN_GELU:
        for (int64_t i = 0; i < n; i++) d[i] = gelu_f(x[i]);
        break;
    case UN_RELU:
        for (int64_t i = 0; i < n; i++) d[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    }
}

static void unary(const struct kt_compute_params *p, struct kt_tensor *dst, enum un_kind k) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    float s = 1.0f, b = 0.0f;
    if (k == UN_SCALE) {
        s = kt_get_op_param_f32(dst, 0);
        b = kt_get_op_param_f32(dst, 1);
    }
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    const bool f32 = dst->type == KT_TYPE_F32 && a->type == KT_TYPE_F32 && dst->nb[0] == sizeof(float) &&
                     a->nb[0] == sizeof(float);
    /* exp-bound rows go to the SIMD kernels when the CPU has them */
    void (*simd)(int64_t, float *, const float *) = NULL;
    const bool isa = f32 && kt_cpu_ops_use_avx512();
    if (isa && (k == UN_SILU || k == UN_GELU))
        simd = k == UN_SILU ? kt_cpu_silu_row_avx512 : kt_cpu_gelu_row_avx512;

    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        if (simd) {
            simd(ne0, (float *)d, (const float *)x);
        } else if (isa && k == UN_SCALE) {
            kt_cpu_scale_row_avx512(ne0, (float *)d, (const float *)x, s, b);
        } else if (f32) {
            un_row_f32(k, ne0, (float *)d, (const float *)x, s, b);
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0++) {
                float v = kt_cpu_load(a->type, x + i0 * a->nb[0]);
                kt_cpu_store(dst->type, d + i0 * dst->nb[0], un_apply(k, v, s, b));
            }
        }
    }
}

void kt_cpu_scale(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_SCALE);
}
void kt_cpu_sqr(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_SQR);
}
void kt_cpu_sqrt(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_SQRT);
}
void kt_cpu_silu(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_SILU);
}
void kt_cpu_gelu(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_GELU);
}
void kt_cpu_relu(const struct kt_compute_params *p, struct kt_tensor *dst) {
    unary(p, dst, UN_RELU);
}

/* ------------------------------------------------------------------ swiglu */

void kt_cpu_swiglu(const struct kt_compute_params *p, struct kt_tensor *dst) {
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
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        const char *y = kt_cpu_row_ptr(b, i1, i2, i3);
        if (simd) {
            kt_cpu_swiglu_row_avx512(ne0, (float *)d, (const float *)x, (const float *)y);
        } else if (f32) {
            float *df = (float *)d;
            const float *xf = (const float *)x, *yf = (const float *)y;
            for (int64_t i0 = 0; i0 < ne0; i0++) df[i0] = silu_f(xf[i0]) * yf[i0];
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0++) {
                float va = kt_cpu_load(a->type, x + i0 * a->nb[0]);
                float vb = kt_cpu_load(b->type, y + i0 * b->nb[0]);
                kt_cpu_store(dst->type, d + i0 * dst->nb[0], silu_f(va) * vb);
            }
        }
    }
}
