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

/* Row sums of squares for up to SQ_ROWS packed F32 rows at once, each row's in index
 * order with a double accumulator (the float product widened, as llama.cpp sums). The
 * rows' chains are independent, so interleaving them hides the add latency a lone row
 * waits on, while every row's sum is the same sequence of roundings as before (test_ops
 * has a row where another order shows). KT_CPU_PROFILE=1 kiln bench -p 128 on the 1.1B
 * Q4_0, rms_norm per graph: 6.1-6.5 ms one row at a time, 3.1 ms eight interleaved in C,
 * 2.0 ms with the AVX-512 kernel (eight columns turned into registers of rows). */
#define SQ_ROWS 8
static void sum_squares(int64_t n, const float *const *x, int nr, double *sum) {
    double s[SQ_ROWS] = {0};
    if (nr == SQ_ROWS && kt_cpu_ops_use_avx512()) {
        kt_cpu_sum_squares8_avx512(n, x, sum);
        return;
    }
    if (nr == SQ_ROWS) {
        const float *xr[SQ_ROWS];
        _Pragma("GCC unroll 8") for (int r = 0; r < SQ_ROWS; r++) xr[r] = x[r];
        for (int64_t i = 0; i < n; i++)
            _Pragma("GCC unroll 8") for (int r = 0; r < SQ_ROWS; r++) s[r] += (double)(xr[r][i] * xr[r][i]);
    } else {
        for (int r = 0; r < nr; r++)
            for (int64_t i = 0; i < n; i++) s[r] += (double)(x[r][i] * x[r][i]);
    }
    for (int r = 0; r < nr; r++) sum[r] = s[r];
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
    for (int64_t ib = r0; ib < r1; ib += SQ_ROWS) {
        const int nr = r1 - ib < SQ_ROWS ? (int)(r1 - ib) : SQ_ROWS;
        const char *x[SQ_ROWS];
        char *y[SQ_ROWS];
        for (int r = 0; r < nr; r++) {
            int64_t i1, i2, i3;
            kt_cpu_row_index(a->ne, ib + r, &i1, &i2, &i3);
            x[r] = kt_cpu_row_ptr(a, i1, i2, i3);
            y[r] = kt_cpu_row_ptr(dst, i1, i2, i3);
        }
        /* one double sum per row in index order, as llama.cpp sums: results agree bit for bit */
        double sum[SQ_ROWS];
        if (packed) {
            sum_squares(n, (const float *const *)x, nr, sum);
        } else {
            for (int r = 0; r < nr; r++) {
                sum[r] = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    const float v = row_at(a, x[r], i);
                    sum[r] += (double)(v * v);
                }
            }
        }
        for (int r = 0; r < nr; r++) {
            const float mean = (float)(sum[r] / (double)n);
            const float scale = 1.0f / sqrtf(mean + eps);
            if (simd) {
                kt_cpu_scale_row_avx512(n, (float *)y[r], (const float *)x[r], scale, 0.0f);
            } else {
                for (int64_t i = 0; i < n; i++) row_set(dst, y[r], i, row_at(a, x[r], i) * scale);
            }
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
