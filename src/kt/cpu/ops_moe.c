/*
 * ops_moe.c - the small mixture-of-experts kernels on the CPU: top-k selection
 * of a router's experts (KT_OP_TOP_K) and gpt-oss's clamped SwiGLU
 * (KT_OP_SWIGLU_OAI). Rows split across threads; any strides. (The expert
 * product itself is mul_mat_id.c.)
 */
#include "ops_util.h"

/* a ranks above b: larger, NaN below every number (equal values: neither) */
static inline bool above(float a, float b) { return !isnan(a) && (isnan(b) || a > b); }

void kt_cpu_top_k(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const int64_t n = a->ne[0], k = dst->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        /* the row's best so far, best first: an element goes in before the first one it
         * ranks above, so equal values keep index order */
        int64_t have = 0;
        for (int64_t i = 0; i < n; i++) {
            const float v = kt_cpu_load(KT_TYPE_F32, x + i * a->nb[0]);
            int64_t pos = have;
            while (pos > 0) {
                int32_t prev;
                memcpy(&prev, d + (pos - 1) * dst->nb[0], sizeof prev);
                if (!above(v, kt_cpu_load(KT_TYPE_F32, x + prev * a->nb[0]))) break;
                pos--;
            }
            if (pos >= k) continue;
            const int64_t last = have < k ? have : k - 1; /* shift [pos, last) down by one */
            for (int64_t q = last; q > pos; q--) memmove(d + q * dst->nb[0], d + (q - 1) * dst->nb[0], sizeof(int32_t));
            const int32_t iv = (int32_t)i;
            memcpy(d + pos * dst->nb[0], &iv, sizeof iv);
            if (have < k) have++;
        }
    }
}

void kt_cpu_swiglu_oai(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *g = dst->src[0], *u = dst->src[1];
    const float alpha = kt_get_op_param_f32(dst, 0), limit = kt_get_op_param_f32(dst, 1);
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *x = kt_cpu_row_ptr(g, i1, i2, i3), *y = kt_cpu_row_ptr(u, i1, i2, i3);
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            float gv = kt_cpu_load(KT_TYPE_F32, x + i0 * g->nb[0]), uv = kt_cpu_load(KT_TYPE_F32, y + i0 * u->nb[0]);
            /* the clamps as comparisons, so that a NaN passes through as llama.cpp's does */
            gv = limit < gv ? limit : gv;
            uv = uv < -limit ? -limit : limit < uv ? limit : uv;
            const float glu = gv / (1.0f + expf(alpha * -gv));
            kt_cpu_store(KT_TYPE_F32, d + i0 * dst->nb[0], glu * (uv + 1.0f));
        }
    }
}
