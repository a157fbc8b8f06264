/*
 * types.c - the one type-traits table (block size, bytes per block, row
 * kernels, dot partner per GGUF type id), the queries built on it, the
 * fp16/bf16 conversions, and kt_quantize_chunk.
 */
#include <ctype.h>
#include <string.h>

#include "quant.h"

/* ------------------------------------------------------------------ plain float types */

static void f32_to_float(const void *restrict x, float *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void f32_from_float(const float *restrict x, void *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void f16_to_float(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_fp16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = kt_h2f(x[i]);
}
static void f16_from_float(const float *restrict x, void *restrict vy, int64_t n) {
    kt_fp16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = kt_f2h(x[i]);
}
static void bf16_to_float(const void *restrict vx, float *restrict y, int64_t n) {
    const kt_bf16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = kt_bf2f(x[i]);
}
static void bf16_from_float(const float *restrict x, void *restrict vy, int64_t n) {
    kt_bf16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = kt_f2bf(x[i]);
}

/* Reference float dots accumulate in double so that they serve as the yardstick
 * for the SIMD variants (which sum in float, in another order). */
static void vec_dot_f32(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)y[i];
    *s = (float)sum;
}
static void vec_dot_f16(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_fp16_t *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)kt_h2f(x[i]) * (double)kt_h2f(y[i]);
    *s = (float)sum;
}
static void vec_dot_bf16(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_bf16_t *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)kt_bf2f(x[i]) * (double)kt_bf2f(y[i]);
    *s = (float)sum;
}

/* ------------------------------------------------------------------ the table */

#define QTYPE(t, blck, tsz, dot, partner)                                                           \
    {                                                                                              \
        .name = #t, .blck_size = (blck), .type_size = (tsz), .is_quantized = true,                \
        .to_float = kt_dequantize_row_##t, .from_float_ref = kt_quantize_row_##t##_ref,           \
        .from_float = kt_quantize_row_##t##_ref, .vec_dot = (dot), .vec_dot_type = (partner),     \
    }
/* Known layout, no kernels in kt (grid-based i-quants, ternary types). */
#define LAYOUT_ONLY(nm, blck, tsz) \
    { .name = (nm), .blck_size = (blck), .type_size = (tsz), .is_quantized = true }

static const struct kt_type_traits type_traits[KT_TYPE_COUNT] = {
    [KT_TYPE_F32] = {.name = "f32", .blck_size = 1, .type_size = 4, .to_float = f32_to_float,
                     .from_float_ref = f32_from_float, .from_float = f32_from_float, .vec_dot = vec_dot_f32,
                     .vec_dot_type = KT_TYPE_F32},
    [KT_TYPE_F16] = {.name = "f16", .blck_size = 1, .type_size = 2, .to_float = f16_to_float,
                     .from_float_ref = f16_from_float, .from_float = f16_from_float, .vec_dot = vec_dot_f16,
                     .vec_dot_type = KT_TYPE_F16},
    [KT_TYPE_BF16] = {.name = "bf16", .blck_size = 1, .type_size = 2, .to_float = bf16_to_float,
                      .from_float_ref = bf16_from_float, .from_float = bf16_from_float, .vec_dot = vec_dot_bf16,
                      .vec_dot_type = KT_TYPE_BF16},
    [KT_TYPE_Q4_0] = QTYPE(q4_0, 32, sizeof(kt_block_q4_0), kt_vec_dot_q4_0_q8_0, KT_TYPE_Q8_0),
    [KT_TYPE_Q4_1] = QTYPE(q4_1, 32, sizeof(kt_block_q4_1), kt_vec_dot_q4_1_q8_1, KT_TYPE_Q8_1),
    [KT_TYPE_Q5_0] = QTYPE(q5_0, 32, sizeof(kt_block_q5_0), kt_vec_dot_q5_0_q8_0, KT_TYPE_Q8_0),
    [KT_TYPE_Q5_1] = QTYPE(q5_1, 32, sizeof(kt_block_q5_1), kt_vec_dot_q5_1_q8_1, KT_TYPE_Q8_1),
    [KT_TYPE_Q8_0] = QTYPE(q8_0, 32, sizeof(kt_block_q8_0), kt_vec_dot_q8_0_q8_0, KT_TYPE_Q8_0),
    /* activation-only types: no dot of their own */
    [KT_TYPE_Q8_1] = QTYPE(q8_1, 32, sizeof(kt_block_q8_1), NULL, KT_TYPE_Q8_1),
    [KT_TYPE_Q2_K] = QTYPE(q2_K, 256, sizeof(kt_block_q2_K), kt_vec_dot_q2_K_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_Q3_K] = QTYPE(q3_K, 256, sizeof(kt_block_q3_K), kt_vec_dot_q3_K_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_Q4_K] = QTYPE(q4_K, 256, sizeof(kt_block_q4_K), kt_vec_dot_q4_K_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_Q5_K] = QTYPE(q5_K, 256, sizeof(kt_block_q5_K), kt_vec_dot_q5_K_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_Q6_K] = QTYPE(q6_K, 256, sizeof(kt_block_q6_K), kt_vec_dot_q6_K_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_Q8_K] = QTYPE(q8_K, 256, sizeof(kt_block_q8_K), NULL, KT_TYPE_Q8_K),
    [KT_TYPE_IQ4_NL] = QTYPE(iq4_nl, 32, sizeof(kt_block_iq4_nl), kt_vec_dot_iq4_nl_q8_0, KT_TYPE_Q8_0),
    [KT_TYPE_IQ4_XS] = QTYPE(iq4_xs, 256, sizeof(kt_block_iq4_xs), kt_vec_dot_iq4_xs_q8_K, KT_TYPE_Q8_K),
    [KT_TYPE_MXFP4] = QTYPE(mxfp4, 32, sizeof(kt_block_mxfp4), kt_vec_dot_mxfp4_q8_0, KT_TYPE_Q8_0),
    [KT_TYPE_IQ2_XXS] = LAYOUT_ONLY("iq2_xxs", 256, 66),
    [KT_TYPE_IQ2_XS] = LAYOUT_ONLY("iq2_xs", 256, 74),
    [KT_TYPE_IQ3_XXS] = LAYOUT_ONLY("iq3_xxs", 256, 98),
    [KT_TYPE_IQ1_S] = LAYOUT_ONLY("iq1_s", 256, 50),
    [KT_TYPE_IQ3_S] = LAYOUT_ONLY("iq3_s", 256, 110),
    [KT_TYPE_IQ2_S] = LAYOUT_ONLY("iq2_s", 256, 82),
    [KT_TYPE_IQ1_M] = LAYOUT_ONLY("iq1_m", 256, 56),
    [KT_TYPE_TQ1_0] = LAYOUT_ONLY("tq1_0", 256, 54),
    [KT_TYPE_TQ2_0] = LAYOUT_ONLY("tq2_0", 256, 66),
    [KT_TYPE_I8] = {.name = "i8", .blck_size = 1, .type_size = 1},
    [KT_TYPE_I16] = {.name = "i16", .blck_size = 1, .type_size = 2},
    [KT_TYPE_I32] = {.name = "i32", .blck_size = 1, .type_size = 4},
    [KT_TYPE_I64] = {.name = "i64", .blck_size = 1, .type_size = 8},
    [KT_TYPE_F64] = {.name = "f64", .blck_size = 1, .type_size = 8},
};

/* Row returned for ids outside the table: all zero, name NULL. */
static const struct kt_type_traits unknown_traits;

const struct kt_type_traits *kt_get_type_traits(enum kt_type type) {
    if ((int)type < 0 || (int)type >= KT_TYPE_COUNT) return &unknown_traits;
    return &type_traits[type];
}

bool kt_type_is_valid(int type) {
    return type >= 0 && type < KT_TYPE_COUNT && type_traits[type].name != NULL;
}

const char *kt_type_name(enum kt_type type) {
    const char *name = kt_get_type_traits(type)->name;
    return name ? name : "?";
}

int64_t kt_blck_size(enum kt_type type) { return kt_get_type_traits(type)->blck_size; }
size_t kt_type_size(enum kt_type type) { return kt_get_type_traits(type)->type_size; }
bool kt_is_quantized(enum kt_type type) { return kt_get_type_traits(type)->is_quantized; }

size_t kt_row_size(enum kt_type type, int64_t ne) {
    const struct kt_type_traits *t = kt_get_type_traits(type);
    if (t->blck_size <= 0 || ne < 0) return 0;
    return t->type_size * (size_t)(ne / t->blck_size);
}

bool kt_type_from_name(const char *name, enum kt_type *out) {
    if (!name) return false;
    for (int i = 0; i < KT_TYPE_COUNT; i++) {
        const char *n = type_traits[i].name;
        if (!n) continue;
        size_t k = 0;
        while (n[k] && name[k] && tolower((unsigned char)n[k]) == tolower((unsigned char)name[k])) k++;
        if (n[k] == 0 && name[k] == 0) {
            if (out) *out = (enum kt_type)i;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ conversions */

float kt_fp16_to_fp32(kt_fp16_t h) { return kt_h2f(h); }
kt_fp16_t kt_fp32_to_fp16(float f) { return kt_f2h(f); }
float kt_bf16_to_fp32(kt_bf16_t h) { return kt_bf2f(h); }
kt_bf16_t kt_fp32_to_bf16(float f) { return kt_f2bf(f); }

/* ------------------------------------------------------------------ quantize */

size_t kt_quantize_chunk(enum kt_type type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                         const float *imatrix) {
    (void)imatrix; /* no kernel here uses an importance matrix yet */
    const struct kt_type_traits *t = kt_get_type_traits(type);
    if (!t->name || !t->from_float_ref) {
        kt_set_error("kt_quantize_chunk: no quantizer for type %s (%d)", kt_type_name(type), (int)type);
        return 0;
    }
    if (nrows < 0 || n_per_row < 0 || n_per_row % t->blck_size != 0) {
        kt_set_error("kt_quantize_chunk: %lld rows of %lld are not whole %s blocks of %lld", (long long)nrows,
                     (long long)n_per_row, t->name, (long long)t->blck_size);
        return 0;
    }
    if (!src || !dst) {
        kt_set_error("kt_quantize_chunk: NULL buffer");
        return 0;
    }
    const size_t row = kt_row_size(type, n_per_row);
    for (int64_t r = 0; r < nrows; r++) t->from_float_ref(src + r * n_per_row, (char *)dst + (size_t)r * row, n_per_row);
    return (size_t)nrows * row;
}
