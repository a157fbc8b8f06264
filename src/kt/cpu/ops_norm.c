/*
 * ops_norm.c - per-row reductions on the CPU: norm, rms_norm, sum_rows, mean,
 * argmax. Each row is reduced by one thread in index order with a double
 * accumulator, so a row's result never depends on the thread count.
 */
#include "ops_isa.h"
#include "ops_util.h"

/* Loads row element i0 as float: the F32 packed case without the type switch. */
static inline float row_at(const struct kt_tensor *t, const char *row, int64_t i0) {
    if (t->type == KT_TYPE_F32) {
        float v;
        memcpy(&v, row + i0 * t->nb[0], sizeof v);
        return v;
    }
    return kt_cpu_load(t->type, row + i0 * t->nb[0]);
}

static inline void row_set(const struct kt_tensor *t, char *row, int64_t i0, float v) {
    if (t->type == KT_TYPE_F32) {
        memcpy(row + i0 * t->nb[0], &v, sizeof v);
    } else {
        kt_cpu_store(t->type, row + i0 * t->nb[0], v);
    }
}

void kt_cpu_norm(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    const float eps = kt_get_op_param_f32(dst, 0);
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *y = kt_cpu_row_ptr(dst, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += row_at(a, x, i);
        /* the mean rounded to float first, then divided in float, as llama.cpp does */
        const float mean = (float)sum / (float)n;
        double var = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float v = row_at(a, x, i) - mean;
            var += (double)v * v;
        }
        const float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
        /* read all of x before writing y: dst may alias src0 (in-place use) */
        for (int64_t i = 0; i < n; i++) row_set(dst, y, i, (row_at(a, x, i) - mean) * scale);
    }
}

void kt_cpu_rms_norm(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    const float eps = kt_get_op_param_f32(dst, 0);
    const bool packed = a->type == KT_TYPE_F32 && a->nb[0] == sizeof(float);
    const bool simd =
        packed && dst->type == KT_TYPE_F32 && dst->nb[0] == sizeof(float) && kt_cpu_ops_use_avx512();
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *y = kt_cpu_row_ptr(dst, i1, i2, i3);
        /* one double sum in index order, as llama.cpp sums: results agree bit for bit */
        double sum = 0.0;
        if (packed) {
            const float *xf = (const float *)x;
            for (int64_t i = 0; i < n; i++) sum += (double)(xf[i] * xf[i]);
        } else {
            for (int64_t i = 0; i < n; i++) {
                const float v = row_at(a, x, i);
                sum += (double)(v * v);
            }
        }
        const float mean = (float)(sum / (double)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        if (simd) {
            kt_cpu_scale_row_avx512(n, (float *)y, (const float *)x, scale, 0.0f);
        } else {
            for (int64_t i = 0; i < n; i++) row_set(dst, y, i, row_at(a, x, i) * scale);
        }
    }
}

static void sum_rows_impl(const struct kt_compute_params *p, struct kt_tensor *dst, bool mean) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += row_at(a, x, i);
        if (mean && n > 0) sum /= (double)n;
        row_set(dst, kt_cpu_row_ptr(dst, i1, i2, i3), 0, (float)sum);
    }
}

void kt_cpu_sum_rows(const struct kt_compute_params *p, struct kt_tensor *dst) {
    sum_rows_impl(p, dst, false);
}
void kt_cpu_mean(const struct kt_compute_params *p, struct kt_tensor *dst) {
    sum_rows_impl(p, dst, true);
}

/* Index of the first maximum of each row of src0 (NaNs never win), written to
 * the I32 dst element whose flat index is the row index. */
void kt_cpu_argmax(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        int32_t best = 0;
        float vmax = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            const float v = row_at(a, x, i);
            if (v > vmax) {
                vmax = v;
                best = (int32_t)i;
            }
        }
        /* dst is laid out over its own shape; map the flat row index onto it */
        int64_t j = ir;
        const int64_t j0 = j % dst->ne[0];
        j /= dst->ne[0];
        const int64_t j1 = j % dst->ne[1];
        j /= dst->ne[1];
        const int64_t j2 = j % dst->ne[2];
        const int64_t j3 = j / dst->ne[2];
        char *out = (char *)dst->data + j0 * dst->nb[0] + j1 * dst->nb[1] + j2 * dst->nb[2] + j3 * dst->nb[3];
        memcpy(out, &best, sizeof best);
    }
}
