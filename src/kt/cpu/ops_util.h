/*
 * ops_util.h - what the non-matmul CPU kernels share: element load/store for
 * the float-like types (F32, F16, BF16, I32) through byte pointers, so one
 * generic loop serves any strides and types, and the row index -> (i1,i2,i3)
 * split. The F32 fast paths in each kernel bypass these.
 */
#ifndef KT_CPU_OPS_UTIL_H
#define KT_CPU_OPS_UTIL_H

#include <math.h>
#include <string.h>

#include "cpu.h"
#include "quant.h" /* inline fp16/bf16 conversions: these sit in inner loops */

/* One element of type t at p as float (NaN for types without a scalar element). */
static inline float kt_cpu_load(enum kt_type t, const char *p) {
    switch (t) {
    case KT_TYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case KT_TYPE_F16: {
        kt_fp16_t h;
        memcpy(&h, p, sizeof h);
        return kt_h2f(h);
    }
    case KT_TYPE_BF16: {
        kt_bf16_t h;
        memcpy(&h, p, sizeof h);
        return kt_bf2f(h);
    }
    case KT_TYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return (float)v;
    }
    default:
        return NAN;
    }
}

static inline void kt_cpu_store(enum kt_type t, char *p, float v) {
    switch (t) {
    case KT_TYPE_F32:
        memcpy(p, &v, sizeof v);
        break;
    case KT_TYPE_F16: {
        kt_fp16_t h = kt_f2h(v);
        memcpy(p, &h, sizeof h);
        break;
    }
    case KT_TYPE_BF16: {
        kt_bf16_t h = kt_f2bf(v);
        memcpy(p, &h, sizeof h);
        break;
    }
    case KT_TYPE_I32: {
        /* only reached for I32 copies through float; saturate instead of UB */
        int32_t i = v != v                ? 0
                    : v >= 2147483647.0f  ? INT32_MAX
                    : v <= -2147483648.0f ? INT32_MIN
                                          : (int32_t)v;
        memcpy(p, &i, sizeof i);
        break;
    }
    default:
        break;
    }
}

/* Row ir of a tensor with ne[1..3] as indices (i1, i2, i3). */
static inline void kt_cpu_row_index(const int64_t *ne, int64_t ir, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = ir % ne[1];
    *i2 = (ir / ne[1]) % ne[2];
    *i3 = ir / (ne[1] * ne[2]);
}

static inline char *kt_cpu_row_ptr(const struct kt_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

#endif
