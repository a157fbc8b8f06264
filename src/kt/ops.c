/*
 * ops.c - op constructors and views: each checks its operands' shapes and
 * types, computes the result's shape and records op, sources and parameters.
 * Nothing is computed here. Any NULL operand yields NULL (the error that made
 * it is kept), so a graph builder can check once at the end.
 */
#include "kt-impl.h"

#include <math.h>
#include <string.h>

static const char *op_names[KT_OP_COUNT] = {
    /* mixtures of experts (ops_moe.c) */
    [KT_OP_MUL_MAT_ID] = "MUL_MAT_ID", [KT_OP_TOP_K] = "TOP_K", [KT_OP_SWIGLU_OAI] = "SWIGLU_OAI",
    [KT_OP_NONE] = "NONE",         [KT_OP_DUP] = "DUP",
    [KT_OP_ADD] = "ADD",           [KT_OP_SUB] = "SUB",
    [KT_OP_MUL] = "MUL",           [KT_OP_DIV] = "DIV",
    [KT_OP_SCALE] = "SCALE",       [KT_OP_SQR] = "SQR",
    [KT_OP_SQRT] = "SQRT",         [KT_OP_SUM_ROWS] = "SUM_ROWS",
    [KT_OP_MEAN] = "MEAN",         [KT_OP_ARGMAX] = "ARGMAX",
    [KT_OP_NORM] = "NORM",         [KT_OP_RMS_NORM] = "RMS_NORM",
    [KT_OP_MUL_MAT] = "MUL_MAT",   [KT_OP_ROPE] = "ROPE",
    [KT_OP_SOFT_MAX] = "SOFT_MAX", [KT_OP_DIAG_MASK_INF] = "DIAG_MASK_INF",
    [KT_OP_SILU] = "SILU",         [KT_OP_GELU] = "GELU",
    [KT_OP_RELU] = "RELU",         [KT_OP_SWIGLU] = "SWIGLU",
    [KT_OP_CPY] = "CPY",           [KT_OP_CONCAT] = "CONCAT",
    [KT_OP_CONT] = "CONT",         [KT_OP_GET_ROWS] = "GET_ROWS", [KT_OP_ATTN] = "ATTN",
    [KT_OP_RESHAPE] = "RESHAPE",   [KT_OP_VIEW] = "VIEW",
    [KT_OP_PERMUTE] = "PERMUTE",   [KT_OP_TRANSPOSE] = "TRANSPOSE",
    [KT_OP_GEGLU] = "GEGLU",       [KT_OP_SOFTCAP] = "SOFTCAP",
};

const char *kt_op_name(enum kt_op op) {
    return (unsigned)op < KT_OP_COUNT && op_names[op] ? op_names[op] : "?";
}

#define SHAPE_FMT "[%lld, %lld, %lld, %lld]"
#define SHAPE_ARGS(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]

/* A new tensor of a's shape (or ne) holding op's result. */
static struct kt_tensor *new_result(struct kt_context *ctx, enum kt_op op, enum kt_type type, const int64_t *ne,
                                    struct kt_tensor *a, struct kt_tensor *b) {
    struct kt_tensor *t = kt_new_tensor_impl(ctx, type, KT_MAX_DIMS, ne, NULL, 0);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

/* A view of a's data (whole tensor) that an in-place op writes into. */
static struct kt_tensor *view_tensor(struct kt_context *ctx, struct kt_tensor *a) {
    struct kt_tensor *t = kt_new_tensor_impl(ctx, a->type, KT_MAX_DIMS, a->ne, a, 0);
    if (!t) return NULL;
    memcpy(t->nb, a->nb, sizeof t->nb);
    kt_format_name(t, "%.*s (view)", KT_MAX_NAME - 10, a->name);
    return t;
}

static bool need_f32(const char *op, const struct kt_tensor *a) {
    if (a->type != KT_TYPE_F32) {
        kt_set_error("kt_%s: '%s' is %s, F32 expected", op, a->name, kt_type_name(a->type));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ views */

struct kt_tensor *kt_view_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    if (!a) return NULL;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    for (int i = 0; i < 4; i++)
        if (ne[i] < 1) {
            kt_set_error("kt_view: dim %d of a view of '%s' is %lld", i, a->name, (long long)ne[i]);
            return NULL;
        }
    if (ne0 % kt_blck_size(a->type)) {
        kt_set_error("kt_view: %lld elements is not a whole number of %s blocks", (long long)ne0,
                     kt_type_name(a->type));
        return NULL;
    }
    /* the view's extent with its own strides must lie within a */
    size_t row = kt_row_size(a->type, ne0);
    size_t span = row + (size_t)(ne1 - 1) * nb1 + (size_t)(ne2 - 1) * nb2 + (size_t)(ne3 - 1) * nb3;
    size_t total = kt_nbytes(a);
    if (offset > total || span > total - offset) {
        kt_set_error("kt_view: view of %zu bytes at offset %zu exceeds '%s' (%zu bytes)", span, offset, a->name,
                     total);
        return NULL;
    }
    /* created as a contiguous view of the first bytes, then given its strides */
    struct kt_tensor *t = kt_new_tensor_impl(ctx, a->type, 1, &(int64_t){kt_blck_size(a->type)}, a, offset);
    if (!t) return NULL;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = ne3;
    t->nb[1] = nb1;
    t->nb[2] = nb2;
    t->nb[3] = nb3;
    t->op = KT_OP_VIEW;
    t->src[0] = a;
    kt_format_name(t, "%.*s (view)", KT_MAX_NAME - 10, a->name);
    return t;
}

struct kt_tensor *kt_view_1d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, size_t offset) {
    if (!a) return NULL;
    size_t row = kt_row_size(a->type, ne0);
    return kt_view_4d(ctx, a, ne0, 1, 1, 1, row, row, row, offset);
}

struct kt_tensor *kt_view_2d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                             size_t offset) {
    return kt_view_4d(ctx, a, ne0, ne1, 1, 1, nb1, nb1 * (size_t)ne1, nb1 * (size_t)ne1, offset);
}

struct kt_tensor *kt_view_3d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             size_t nb1, size_t nb2, size_t offset) {
    return kt_view_4d(ctx, a, ne0, ne1, ne2, 1, nb1, nb2, nb2 * (size_t)ne2, offset);
}

static struct kt_tensor *reshape(struct kt_context *ctx, struct kt_tensor *a, int n, const int64_t *ne) {
    if (!a) return NULL;
    if (!kt_is_contiguous(a)) {
        kt_set_error("kt_reshape: '%s' is not contiguous (use kt_cont first)", a->name);
        return NULL;
    }
    int64_t count = 1;
    for (int i = 0; i < n; i++) count *= ne[i];
    if (count != kt_nelements(a)) {
        kt_set_error("kt_reshape: %lld elements cannot become %lld ('%s' " SHAPE_FMT ")", (long long)kt_nelements(a),
                     (long long)count, a->name, SHAPE_ARGS(a));
        return NULL;
    }
    struct kt_tensor *t = kt_new_tensor_impl(ctx, a->type, n, ne, a, 0);
    if (!t) return NULL;
    t->op = KT_OP_RESHAPE;
    t->src[0] = a;
    kt_format_name(t, "%.*s (reshaped)", KT_MAX_NAME - 14, a->name);
    return t;
}

struct kt_tensor *kt_reshape_1d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0) {
    return reshape(ctx, a, 1, (int64_t[]){ne0});
}
struct kt_tensor *kt_reshape_2d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1) {
    return reshape(ctx, a, 2, (int64_t[]){ne0, ne1});
}
struct kt_tensor *kt_reshape_3d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    return reshape(ctx, a, 3, (int64_t[]){ne0, ne1, ne2});
}
struct kt_tensor *kt_reshape_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3) {
    return reshape(ctx, a, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

struct kt_tensor *kt_permute(struct kt_context *ctx, struct kt_tensor *a, int axis0, int axis1, int axis2,
                             int axis3) {
    if (!a) return NULL;
    const int axes[4] = {axis0, axis1, axis2, axis3};
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] > 3 || (seen & (1 << axes[i]))) {
            kt_set_error("kt_permute: axes (%d, %d, %d, %d) are not a permutation of 0..3", axis0, axis1, axis2,
                         axis3);
            return NULL;
        }
        seen |= 1 << axes[i];
    }
    if (kt_is_quantized(a->type) && axes[0] != 0) {
        kt_set_error("kt_permute: cannot move the block dimension of quantized '%s'", a->name);
        return NULL;
    }
    struct kt_tensor *t = view_tensor(ctx, a);
    if (!t) return NULL;
    for (int i = 0; i < 4; i++) {
        t->ne[axes[i]] = a->ne[i];
        t->nb[axes[i]] = a->nb[i];
    }
    t->op = KT_OP_PERMUTE;
    t->src[0] = a;
    memcpy(t->op_params, axes, sizeof axes);
    kt_format_name(t, "%.*s (permuted)", KT_MAX_NAME - 14, a->name);
    return t;
}

struct kt_tensor *kt_transpose(struct kt_context *ctx, struct kt_tensor *a) {
    struct kt_tensor *t = kt_permute(ctx, a, 1, 0, 2, 3);
    if (t) {
        t->op = KT_OP_TRANSPOSE;
        kt_format_name(t, "%.*s (transposed)", KT_MAX_NAME - 16, a->name);
    }
    return t;
}

/* ------------------------------------------------------------------ copies */

struct kt_tensor *kt_dup(struct kt_context *ctx, struct kt_tensor *a) {
    if (!a) return NULL;
    return new_result(ctx, KT_OP_DUP, a->type, a->ne, a, NULL);
}

struct kt_tensor *kt_cast(struct kt_context *ctx, struct kt_tensor *a, enum kt_type type) {
    if (!a) return NULL;
    if (!kt_type_is_valid((int)type)) {
        kt_set_error("kt_cast: unknown type id %d", (int)type);
        return NULL;
    }
    return new_result(ctx, KT_OP_DUP, type, a->ne, a, NULL);
}

struct kt_tensor *kt_cont_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3) {
    if (!a) return NULL;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    if (ne0 * ne1 * ne2 * ne3 != kt_nelements(a)) {
        kt_set_error("kt_cont: %lld elements of '%s' cannot fill [%lld, %lld, %lld, %lld]",
                     (long long)kt_nelements(a), a->name, (long long)ne0, (long long)ne1, (long long)ne2,
                     (long long)ne3);
        return NULL;
    }
    struct kt_tensor *t = new_result(ctx, KT_OP_CONT, a->type, ne, a, NULL);
    if (t) kt_format_name(t, "%.*s (cont)", KT_MAX_NAME - 10, a->name);
    return t;
}

struct kt_tensor *kt_cont(struct kt_context *ctx, struct kt_tensor *a) {
    if (!a) return NULL;
    return kt_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

struct kt_tensor *kt_cpy(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    if (!a || !b) return NULL;
    if (kt_nelements(a) != kt_nelements(b)) {
        kt_set_error("kt_cpy: '%s' has %lld elements, '%s' %lld", a->name, (long long)kt_nelements(a), b->name,
                     (long long)kt_nelements(b));
        return NULL;
    }
    struct kt_tensor *t = view_tensor(ctx, b);
    if (!t) return NULL;
    t->op = KT_OP_CPY;
    t->src[0] = a;
    t->src[1] = b;
    kt_format_name(t, "%.*s (copy of %.*s)", 24, b->name, 24, a->name);
    return t;
}

/* ------------------------------------------------------------------ element-wise */

static struct kt_tensor *binary(struct kt_context *ctx, enum kt_op op, struct kt_tensor *a, struct kt_tensor *b,
                                bool inplace) {
    if (!a || !b) return NULL;
    if (!need_f32(kt_op_name(op), a) || !need_f32(kt_op_name(op), b)) return NULL;
    if (!kt_can_repeat(b, a)) {
        kt_set_error("kt_%s: '%s' " SHAPE_FMT " cannot be broadcast to '%s' " SHAPE_FMT, kt_op_name(op), b->name,
                     SHAPE_ARGS(b), a->name, SHAPE_ARGS(a));
        return NULL;
    }
    struct kt_tensor *t = inplace ? view_tensor(ctx, a) : new_result(ctx, op, a->type, a->ne, a, b);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

struct kt_tensor *kt_add(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_ADD, a, b, false);
}
struct kt_tensor *kt_add_inplace(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_ADD, a, b, true);
}
struct kt_tensor *kt_sub(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_SUB, a, b, false);
}
struct kt_tensor *kt_mul(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_MUL, a, b, false);
}
struct kt_tensor *kt_mul_inplace(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_MUL, a, b, true);
}
struct kt_tensor *kt_div(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    return binary(ctx, KT_OP_DIV, a, b, false);
}

static struct kt_tensor *unary(struct kt_context *ctx, enum kt_op op, struct kt_tensor *a) {
    if (!a) return NULL;
    if (!need_f32(kt_op_name(op), a)) return NULL;
    return new_result(ctx, op, KT_TYPE_F32, a->ne, a, NULL);
}

struct kt_tensor *kt_scale_bias(struct kt_context *ctx, struct kt_tensor *a, float s, float b) {
    struct kt_tensor *t = unary(ctx, KT_OP_SCALE, a);
    if (t) {
        kt_set_op_param_f32(t, 0, s);
        kt_set_op_param_f32(t, 1, b);
    }
    return t;
}
struct kt_tensor *kt_scale(struct kt_context *ctx, struct kt_tensor *a, float s) {
    return kt_scale_bias(ctx, a, s, 0.0f);
}
struct kt_tensor *kt_sqr(struct kt_context *ctx, struct kt_tensor *a) { return unary(ctx, KT_OP_SQR, a); }
struct kt_tensor *kt_sqrt(struct kt_context *ctx, struct kt_tensor *a) { return unary(ctx, KT_OP_SQRT, a); }
struct kt_tensor *kt_silu(struct kt_context *ctx, struct kt_tensor *a) { return unary(ctx, KT_OP_SILU, a); }
struct kt_tensor *kt_gelu(struct kt_context *ctx, struct kt_tensor *a) { return unary(ctx, KT_OP_GELU, a); }
struct kt_tensor *kt_relu(struct kt_context *ctx, struct kt_tensor *a) { return unary(ctx, KT_OP_RELU, a); }

struct kt_tensor *kt_swiglu(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    if (!a || !b) return NULL;
    if (!need_f32("swiglu", a) || !need_f32("swiglu", b)) return NULL;
    if (!kt_are_same_shape(a, b)) {
        kt_set_error("kt_swiglu: shapes differ: " SHAPE_FMT " vs " SHAPE_FMT, SHAPE_ARGS(a), SHAPE_ARGS(b));
        return NULL;
    }
    return new_result(ctx, KT_OP_SWIGLU, KT_TYPE_F32, a->ne, a, b);
}

/* ------------------------------------------------------------------ reductions, norms */

static struct kt_tensor *row_reduce(struct kt_context *ctx, enum kt_op op, struct kt_tensor *a) {
    if (!a) return NULL;
    if (!need_f32(kt_op_name(op), a)) return NULL;
    const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    return new_result(ctx, op, KT_TYPE_F32, ne, a, NULL);
}

struct kt_tensor *kt_sum_rows(struct kt_context *ctx, struct kt_tensor *a) { return row_reduce(ctx, KT_OP_SUM_ROWS, a); }
struct kt_tensor *kt_mean(struct kt_context *ctx, struct kt_tensor *a) { return row_reduce(ctx, KT_OP_MEAN, a); }

struct kt_tensor *kt_argmax(struct kt_context *ctx, struct kt_tensor *a) {
    if (!a) return NULL;
    if (!need_f32("argmax", a)) return NULL;
    if (a->ne[2] != 1 || a->ne[3] != 1) {
        kt_set_error("kt_argmax: '%s' must be 2-D, is " SHAPE_FMT, a->name, SHAPE_ARGS(a));
        return NULL;
    }
    const int64_t ne[4] = {a->ne[1], 1, 1, 1};
    return new_result(ctx, KT_OP_ARGMAX, KT_TYPE_I32, ne, a, NULL);
}

static struct kt_tensor *norm(struct kt_context *ctx, enum kt_op op, struct kt_tensor *a, float eps) {
    if (!a) return NULL;
    if (!(eps >= 0.0f)) {
        kt_set_error("kt_%s: eps must be >= 0", kt_op_name(op));
        return NULL;
    }
    struct kt_tensor *t = unary(ctx, op, a);
    if (t) kt_set_op_param_f32(t, 0, eps);
    return t;
}

struct kt_tensor *kt_norm(struct kt_context *ctx, struct kt_tensor *a, float eps) {
    return norm(ctx, KT_OP_NORM, a, eps);
}
struct kt_tensor *kt_rms_norm(struct kt_context *ctx, struct kt_tensor *a, float eps) {
    return norm(ctx, KT_OP_RMS_NORM, a, eps);
}

/* ------------------------------------------------------------------ matrix ops */

struct kt_tensor *kt_mul_mat(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    if (!a || !b) return NULL;
    if (!need_f32("mul_mat", b)) return NULL;
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        kt_set_error("kt_mul_mat: '%s' " SHAPE_FMT " cannot multiply '%s' " SHAPE_FMT, a->name, SHAPE_ARGS(a),
                     b->name, SHAPE_ARGS(b));
        return NULL;
    }
    if (!kt_is_contiguous_rows(a) || kt_is_transposed(a)) {
        kt_set_error("kt_mul_mat: rows of '%s' are not contiguous", a->name);
        return NULL;
    }
    if (kt_get_type_traits(a->type)->vec_dot == NULL) {
        kt_set_error("kt_mul_mat: no dot product for %s weights ('%s')", kt_type_name(a->type), a->name);
        return NULL;
    }
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    return new_result(ctx, KT_OP_MUL_MAT, KT_TYPE_F32, ne, a, b);
}

struct kt_tensor *kt_get_rows(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *ids) {
    if (!a || !ids) return NULL;
    if (ids->type != KT_TYPE_I32) {
        kt_set_error("kt_get_rows: ids '%s' must be I32, is %s", ids->name, kt_type_name(ids->type));
        return NULL;
    }
    if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3] || ids->ne[3] != 1) {
        kt_set_error("kt_get_rows: ids " SHAPE_FMT " do not match rows of '%s' " SHAPE_FMT, SHAPE_ARGS(ids), a->name,
                     SHAPE_ARGS(a));
        return NULL;
    }
    if (!kt_get_type_traits(a->type)->to_float) {
        kt_set_error("kt_get_rows: cannot convert %s to f32", kt_type_name(a->type));
        return NULL;
    }
    const int64_t ne[4] = {a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2]};
    return new_result(ctx, KT_OP_GET_ROWS, KT_TYPE_F32, ne, a, ids);
}

struct kt_tensor *kt_rope(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *pos,
                          struct kt_rope_params params) {
    return kt_rope_ext(ctx, a, pos, NULL, params);
}

struct kt_tensor *kt_rope_ext(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *pos,
                              struct kt_tensor *freq_factors, struct kt_rope_params params) {
    if (!a || !pos) return NULL;
    if (!need_f32("rope", a)) return NULL;
    if (pos->type != KT_TYPE_I32 || kt_n_dims(pos) != 1 || pos->ne[0] != a->ne[2]) {
        kt_set_error("kt_rope: positions must be I32 [%lld], are %s " SHAPE_FMT, (long long)a->ne[2],
                     kt_type_name(pos->type), SHAPE_ARGS(pos));
        return NULL;
    }
    if (params.n_dims <= 0 || params.n_dims % 2 || params.n_dims > a->ne[0]) {
        kt_set_error("kt_rope: n_dims %d must be even and within the head size %lld", params.n_dims,
                     (long long)a->ne[0]);
        return NULL;
    }
    if (params.mode != KT_ROPE_NORMAL && params.mode != KT_ROPE_NEOX) {
        kt_set_error("kt_rope: unknown mode %d", params.mode);
        return NULL;
    }
    if (!(params.freq_base > 0.0f) || !(params.freq_scale > 0.0f)) {
        kt_set_error("kt_rope: freq_base and freq_scale must be > 0");
        return NULL;
    }
    if (!(params.ext_factor >= 0.0f) || !(params.attn_factor >= 0.0f) || !isfinite(params.ext_factor) ||
        !isfinite(params.attn_factor) ||
        (params.ext_factor > 0.0f &&
         (params.n_ctx_orig <= 0 || !isfinite(params.beta_fast) || !isfinite(params.beta_slow)))) {
        kt_set_error("kt_rope: YaRN needs ext_factor and attn_factor finite and >= 0, and with ext_factor > 0 "
                     "n_ctx_orig > 0 (is %d) and finite betas", params.n_ctx_orig);
        return NULL;
    }
    if (freq_factors && (freq_factors->type != KT_TYPE_F32 || kt_n_dims(freq_factors) != 1 ||
                         freq_factors->ne[0] != params.n_dims / 2 || !kt_is_contiguous(freq_factors))) {
        kt_set_error("kt_rope: frequency factors '%s' must be contiguous F32 [%d], are %s " SHAPE_FMT,
                     freq_factors->name, params.n_dims / 2, kt_type_name(freq_factors->type),
                     SHAPE_ARGS(freq_factors));
        return NULL;
    }
    struct kt_tensor *t = new_result(ctx, KT_OP_ROPE, KT_TYPE_F32, a->ne, a, pos);
    if (t) {
        kt_set_op_params(t, &params, sizeof params);
        t->src[2] = freq_factors;
    }
    return t;
}

struct kt_tensor *kt_soft_max_ext(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *mask, float scale,
                                  float max_bias) {
    if (!a) return NULL;
    if (!need_f32("soft_max", a)) return NULL;
    if (mask) {
        if (mask->type != KT_TYPE_F32 && mask->type != KT_TYPE_F16) {
            kt_set_error("kt_soft_max: mask must be F32 or F16, is %s", kt_type_name(mask->type));
            return NULL;
        }
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || mask->ne[2] != 1 || mask->ne[3] != 1 ||
            !kt_is_contiguous_rows(mask)) {
            kt_set_error("kt_soft_max: mask " SHAPE_FMT " does not cover " SHAPE_FMT, SHAPE_ARGS(mask),
                         SHAPE_ARGS(a));
            return NULL;
        }
    }
    if (max_bias < 0.0f) {
        kt_set_error("kt_soft_max: max_bias must be >= 0");
        return NULL;
    }
    struct kt_tensor *t = new_result(ctx, KT_OP_SOFT_MAX, KT_TYPE_F32, a->ne, a, mask);
    if (t) {
        kt_set_op_param_f32(t, 0, scale);
        kt_set_op_param_f32(t, 1, max_bias);
    }
    return t;
}

static bool attn_kv(const char *what, const struct kt_tensor *x) {
    if (!kt_get_type_traits(x->type)->to_float || x->ne[0] % kt_blck_size(x->type) != 0) {
        kt_set_error("kt_attn_ext: %s of type %s cannot be read in rows of %lld", what, kt_type_name(x->type),
                     (long long)x->ne[0]);
        return false;
    }
    if (x->nb[0] != kt_type_size(x->type) || x->ne[3] != 1) {
        kt_set_error("kt_attn_ext: %s " SHAPE_FMT " needs packed rows and 3 dims", what, SHAPE_ARGS(x));
        return false;
    }
    return true;
}

struct kt_tensor *kt_attn_ext(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k, struct kt_tensor *v,
                              struct kt_tensor *mask, struct kt_tensor *order, float scale) {
    if (!q || !k || !v) return NULL;
    if (!need_f32("attn_ext", q) || !attn_kv("k", k) || !attn_kv("v", v)) return NULL;
    if (q->nb[0] != sizeof(float) || q->ne[3] != 1 || k->ne[0] != q->ne[0] || v->ne[0] != q->ne[0] ||
        v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || k->ne[2] < 1 || q->ne[1] % k->ne[2] != 0) {
        kt_set_error("kt_attn_ext: q " SHAPE_FMT ", k " SHAPE_FMT ", v " SHAPE_FMT " do not fit", SHAPE_ARGS(q),
                     SHAPE_ARGS(k), SHAPE_ARGS(v));
        return NULL;
    }
    if (mask && (mask->type != KT_TYPE_F32 || mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[2] ||
                 mask->ne[2] != 1 || mask->ne[3] != 1 || mask->nb[0] != sizeof(float))) {
        kt_set_error("kt_attn_ext: mask " SHAPE_FMT " (F32, [n_kv, >= T]) does not cover k " SHAPE_FMT ", q " SHAPE_FMT,
                     SHAPE_ARGS(mask), SHAPE_ARGS(k), SHAPE_ARGS(q));
        return NULL;
    }
    if (order && (order->type != KT_TYPE_I32 || order->ne[0] != k->ne[1] || kt_nrows(order) != 1 ||
                  order->nb[0] != sizeof(int32_t))) {
        kt_set_error("kt_attn_ext: order %s " SHAPE_FMT " is not one packed I32 row of k's " SHAPE_FMT " cells",
                     kt_type_name(order->type), SHAPE_ARGS(order), SHAPE_ARGS(k));
        return NULL;
    }
    const int64_t ne[KT_MAX_DIMS] = {q->ne[0], q->ne[1], q->ne[2], 1};
    struct kt_tensor *t = new_result(ctx, KT_OP_ATTN, KT_TYPE_F32, ne, q, k);
    if (t) {
        t->src[2] = v;
        t->src[3] = mask;
        t->src[4] = order;
        kt_set_op_param_f32(t, 0, scale);
    }
    return t;
}

struct kt_tensor *kt_soft_max(struct kt_context *ctx, struct kt_tensor *a) {
    return kt_soft_max_ext(ctx, a, NULL, 1.0f, 0.0f);
}

struct kt_tensor *kt_diag_mask_inf(struct kt_context *ctx, struct kt_tensor *a, int n_past) {
    struct kt_tensor *t = unary(ctx, KT_OP_DIAG_MASK_INF, a);
    if (t) t->op_params[0] = n_past;
    return t;
}

struct kt_tensor *kt_concat(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b, int dim) {
    if (!a || !b) return NULL;
    if (dim < 0 || dim >= KT_MAX_DIMS) {
        kt_set_error("kt_concat: dim %d out of range", dim);
        return NULL;
    }
    if (a->type != b->type || kt_is_quantized(a->type)) {
        kt_set_error("kt_concat: types %s and %s (same non-quantized type needed)", kt_type_name(a->type),
                     kt_type_name(b->type));
        return NULL;
    }
    int64_t ne[4];
    for (int i = 0; i < 4; i++) {
        if (i != dim && a->ne[i] != b->ne[i]) {
            kt_set_error("kt_concat: " SHAPE_FMT " and " SHAPE_FMT " differ outside dim %d", SHAPE_ARGS(a),
                         SHAPE_ARGS(b), dim);
            return NULL;
        }
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    struct kt_tensor *t = new_result(ctx, KT_OP_CONCAT, a->type, ne, a, b);
    if (t) t->op_params[0] = dim;
    return t;
}

/* ------------------------------------------------------------------ soft-capping and gated GELU (Gemma) */

struct kt_tensor *kt_geglu(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b) {
    if (!a || !b) return NULL;
    if (!need_f32("geglu", a) || !need_f32("geglu", b)) return NULL;
    if (!kt_are_same_shape(a, b)) {
        kt_set_error("kt_geglu: shapes differ: " SHAPE_FMT " vs " SHAPE_FMT, SHAPE_ARGS(a), SHAPE_ARGS(b));
        return NULL;
    }
    return new_result(ctx, KT_OP_GEGLU, KT_TYPE_F32, a->ne, a, b);
}

struct kt_tensor *kt_softcap(struct kt_context *ctx, struct kt_tensor *a, float cap) {
    if (!(cap > 0.0f) || cap == INFINITY) {
        kt_set_error("kt_softcap: cap %g must be finite and > 0", (double)cap);
        return NULL;
    }
    struct kt_tensor *t = unary(ctx, KT_OP_SOFTCAP, a);
    if (t) kt_set_op_param_f32(t, 0, cap);
    return t;
}

struct kt_tensor *kt_attn_ext_sinks(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k,
                                    struct kt_tensor *v, struct kt_tensor *mask, struct kt_tensor *order, float scale,
                                    struct kt_tensor *sinks) {
    if (!sinks) return NULL;
    if (sinks->type != KT_TYPE_F32 || !kt_is_contiguous(sinks) || kt_nelements(sinks) != (q ? q->ne[1] : -1)) {
        kt_set_error("kt_attn_ext_sinks: sinks '%s' %s " SHAPE_FMT " must be one F32 value per head of q " SHAPE_FMT,
                     sinks->name, kt_type_name(sinks->type), SHAPE_ARGS(sinks), SHAPE_ARGS(q));
        return NULL;
    }
    struct kt_tensor *t = kt_attn_ext(ctx, q, k, v, mask, order, scale);
    if (t) t->src[5] = sinks;
    return t;
}

struct kt_tensor *kt_attn_ext_softcap(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k,
                                      struct kt_tensor *v, struct kt_tensor *mask, struct kt_tensor *order, float scale,
                                      float softcap) {
    if (!(softcap > 0.0f) || softcap == INFINITY) {
        kt_set_error("kt_attn_ext_softcap: softcap %g must be finite and > 0", (double)softcap);
        return NULL;
    }
    struct kt_tensor *t = kt_attn_ext(ctx, q, k, v, mask, order, scale);
    if (t) kt_set_op_param_f32(t, 1, softcap);
    return t;
}
