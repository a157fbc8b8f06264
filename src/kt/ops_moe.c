/*
 * ops_moe.c - constructors of the mixture-of-experts ops (kt.h's op list says
 * what each computes): the expert product mul_mat_id, top-k selection of the
 * router's choices, and gpt-oss's clamped SwiGLU. Shapes and types are checked
 * here; nothing is computed.
 */
#include "kt-impl.h"

#include <string.h>

#define SHAPE_FMT "[%lld, %lld, %lld, %lld]"
#define SHAPE_ARGS(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]

static struct kt_tensor *result(struct kt_context *ctx, enum kt_op op, enum kt_type type, const int64_t *ne,
                                struct kt_tensor *a, struct kt_tensor *b) {
    struct kt_tensor *t = kt_new_tensor_impl(ctx, type, KT_MAX_DIMS, ne, NULL, 0);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

struct kt_tensor *kt_mul_mat_id(struct kt_context *ctx, struct kt_tensor *as, struct kt_tensor *b,
                                struct kt_tensor *ids) {
    if (!as || !b || !ids) return NULL;
    if (b->type != KT_TYPE_F32 || ids->type != KT_TYPE_I32) {
        kt_set_error("kt_mul_mat_id: activations '%s' must be F32 (are %s), ids '%s' I32 (are %s)", b->name,
                     kt_type_name(b->type), ids->name, kt_type_name(ids->type));
        return NULL;
    }
    if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1 || as->ne[0] != b->ne[0] ||
        ids->ne[1] != b->ne[2] || ids->ne[0] % b->ne[1] != 0) {
        kt_set_error("kt_mul_mat_id: experts '%s' " SHAPE_FMT ", activations '%s' " SHAPE_FMT ", ids '%s' " SHAPE_FMT
                     " do not fit ([K,M,n_expert], [K,n_b,T], [n_used,T] with n_used a multiple of n_b)",
                     as->name, SHAPE_ARGS(as), b->name, SHAPE_ARGS(b), ids->name, SHAPE_ARGS(ids));
        return NULL;
    }
    if (!kt_is_contiguous_rows(as) || kt_is_transposed(as)) {
        kt_set_error("kt_mul_mat_id: rows of '%s' are not contiguous", as->name);
        return NULL;
    }
    if (kt_get_type_traits(as->type)->vec_dot == NULL) {
        kt_set_error("kt_mul_mat_id: no dot product for %s weights ('%s')", kt_type_name(as->type), as->name);
        return NULL;
    }
    if (ids->ne[0] > INT32_MAX || b->ne[2] > INT32_MAX / (ids->ne[0] > 0 ? ids->ne[0] : 1)) {
        kt_set_error("kt_mul_mat_id: %lld x %lld columns are too many", (long long)ids->ne[0], (long long)b->ne[2]);
        return NULL;
    }
    const int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    struct kt_tensor *t = result(ctx, KT_OP_MUL_MAT_ID, KT_TYPE_F32, ne, as, b);
    if (t) t->src[2] = ids;
    return t;
}

struct kt_tensor *kt_top_k(struct kt_context *ctx, struct kt_tensor *a, int k) {
    if (!a) return NULL;
    if (a->type != KT_TYPE_F32) {
        kt_set_error("kt_top_k: '%s' is %s, F32 expected", a->name, kt_type_name(a->type));
        return NULL;
    }
    if (k < 1 || k > a->ne[0]) {
        kt_set_error("kt_top_k: k = %d outside 1..%lld (the rows of '%s')", k, (long long)a->ne[0], a->name);
        return NULL;
    }
    const int64_t ne[4] = {k, a->ne[1], a->ne[2], a->ne[3]};
    struct kt_tensor *t = result(ctx, KT_OP_TOP_K, KT_TYPE_I32, ne, a, NULL);
    if (t) t->op_params[0] = k;
    return t;
}

struct kt_tensor *kt_swiglu_oai(struct kt_context *ctx, struct kt_tensor *gate, struct kt_tensor *up, float alpha,
                                float limit) {
    if (!gate || !up) return NULL;
    if (gate->type != KT_TYPE_F32 || up->type != KT_TYPE_F32 || !kt_are_same_shape(gate, up)) {
        kt_set_error("kt_swiglu_oai: '%s' %s " SHAPE_FMT " and '%s' %s " SHAPE_FMT " must be F32 of one shape",
                     gate->name, kt_type_name(gate->type), SHAPE_ARGS(gate), up->name, kt_type_name(up->type),
                     SHAPE_ARGS(up));
        return NULL;
    }
    if (!(alpha > 0.0f) || !(limit > 0.0f)) {
        kt_set_error("kt_swiglu_oai: alpha %g and limit %g must be > 0", (double)alpha, (double)limit);
        return NULL;
    }
    struct kt_tensor *t = result(ctx, KT_OP_SWIGLU_OAI, KT_TYPE_F32, gate->ne, gate, up);
    if (t) {
        kt_set_op_param_f32(t, 0, alpha);
        kt_set_op_param_f32(t, 1, limit);
    }
    return t;
}
