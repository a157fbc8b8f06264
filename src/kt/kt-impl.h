/*
 * kt-impl.h - kt's private glue: arena objects and the tensor constructor
 * that views and ops build on. Not for use outside src/kt.
 */
#ifndef KT_IMPL_H
#define KT_IMPL_H

#include "kt.h"

enum kt_object_kind { KT_OBJ_TENSOR, KT_OBJ_GRAPH, KT_OBJ_BYTES };

/* Header of every object carved from a context; the payload follows, aligned. */
struct kt_object {
    struct kt_object *next;
    void *data;
    size_t size;
    enum kt_object_kind kind;
};

size_t kt_object_overhead(void);
struct kt_object *kt_new_object(struct kt_context *ctx, enum kt_object_kind kind, size_t size);

/* New tensor; with view_src it shares view_src's data at view_offs (checked to fit). */
struct kt_tensor *kt_new_tensor_impl(struct kt_context *ctx, enum kt_type type, int n_dims, const int64_t *ne,
                                     struct kt_tensor *view_src, size_t view_offs);

static inline void kt_set_op_params(struct kt_tensor *t, const void *params, size_t size) {
    __builtin_memcpy(t->op_params, params, size);
}
static inline void kt_set_op_param_f32(struct kt_tensor *t, int i, float v) {
    __builtin_memcpy(&t->op_params[i], &v, sizeof v);
}

#endif
