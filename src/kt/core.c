/*
 * core.c - kt's context (an arena of objects carved in order), tensors and
 * their metadata helpers, and the per-thread error message.
 *
 * Op constructors live in ops.c, views in view.c, graphs in graph.c.
 */
#include "kt-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

static _Thread_local char kt_err[512];

const char *kt_last_error(void) { return kt_err; }

void kt_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kt_err, sizeof kt_err, fmt, ap);
    va_end(ap);
}

void kt_clear_error(void) { kt_err[0] = 0; }

/* ------------------------------------------------------------------ context */

struct kt_context {
    size_t mem_size;
    uint8_t *mem;
    bool mem_owned;
    bool in_buffer; /* the context lives at the start of the caller's buffer */
    bool no_alloc;
    struct kt_object *first, *last;
    size_t used; /* end of the last object */
};

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

struct kt_context *kt_init(struct kt_init_params params) {
    size_t size = align_up(params.mem_size ? params.mem_size : KT_MEM_ALIGN, KT_MEM_ALIGN);
    struct kt_context *ctx;
    if (params.mem_buffer) {
        /* a caller's buffer need not be aligned: use its aligned part, and keep the
         * context itself at its start, so that a reused buffer costs no allocation */
        uint8_t *mem = params.mem_buffer;
        size_t skew = (size_t)(-(uintptr_t)mem) & (KT_MEM_ALIGN - 1);
        size_t head = skew + align_up(sizeof *ctx, KT_MEM_ALIGN);
        if (params.mem_size <= head) {
            kt_set_error("kt_init: buffer of %zu bytes is too small", params.mem_size);
            return NULL;
        }
        ctx = (struct kt_context *)(mem + skew);
        memset(ctx, 0, sizeof *ctx);
        ctx->in_buffer = true;
        ctx->mem = mem + head;
        size = (params.mem_size - head) & ~(size_t)(KT_MEM_ALIGN - 1);
    } else {
        ctx = calloc(1, sizeof *ctx);
        if (!ctx) {
            kt_set_error("kt_init: out of memory for the context");
            return NULL;
        }
        ctx->mem = aligned_alloc(KT_MEM_ALIGN, size);
        if (!ctx->mem) {
            free(ctx);
            kt_set_error("kt_init: cannot allocate %zu bytes", size);
            return NULL;
        }
        ctx->mem_owned = true;
    }
    ctx->mem_size = size;
    ctx->no_alloc = params.no_alloc;
    return ctx;
}

void kt_free(struct kt_context *ctx) {
    if (!ctx) return;
    if (ctx->mem_owned) free(ctx->mem);
    if (!ctx->in_buffer) free(ctx);
}

size_t kt_used_mem(const struct kt_context *ctx) { return ctx->used; }
size_t kt_get_mem_size(const struct kt_context *ctx) { return ctx->mem_size; }
bool kt_get_no_alloc(const struct kt_context *ctx) { return ctx->no_alloc; }
void kt_set_no_alloc(struct kt_context *ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }

size_t kt_object_overhead(void) { return align_up(sizeof(struct kt_object), KT_MEM_ALIGN); }

size_t kt_tensor_overhead(void) { return kt_object_overhead() + align_up(sizeof(struct kt_tensor), KT_MEM_ALIGN); }

struct kt_object *kt_new_object(struct kt_context *ctx, enum kt_object_kind kind, size_t size) {
    size_t hdr = kt_object_overhead();
    size_t need = align_up(size, KT_MEM_ALIGN);
    if (size > SIZE_MAX - hdr - KT_MEM_ALIGN || ctx->used > ctx->mem_size || need + hdr > ctx->mem_size - ctx->used) {
        kt_set_error("kt context out of memory: need %zu bytes, %zu of %zu used", size + hdr, ctx->used,
                     ctx->mem_size);
        return NULL;
    }
    struct kt_object *obj = (struct kt_object *)(ctx->mem + ctx->used);
    obj->kind = kind;
    obj->size = need;
    obj->next = NULL;
    obj->data = (uint8_t *)obj + hdr;
    ctx->used += hdr + need;
    if (ctx->last) ctx->last->next = obj;
    else ctx->first = obj;
    ctx->last = obj;
    return obj;
}

void *kt_alloc_bytes(struct kt_context *ctx, size_t size) {
    struct kt_object *obj = kt_new_object(ctx, KT_OBJ_BYTES, size);
    return obj ? obj->data : NULL;
}

/* ------------------------------------------------------------------ tensors */

struct kt_tensor *kt_new_tensor_impl(struct kt_context *ctx, enum kt_type type, int n_dims, const int64_t *ne,
                                     struct kt_tensor *view_src, size_t view_offs) {
    if (!ctx) {
        kt_set_error("kt_new_tensor: no context");
        return NULL;
    }
    if (!kt_type_is_valid((int)type)) {
        kt_set_error("kt_new_tensor: unknown type id %d", (int)type);
        return NULL;
    }
    if (n_dims < 1 || n_dims > KT_MAX_DIMS) {
        kt_set_error("kt_new_tensor: %d dims (1..%d allowed)", n_dims, KT_MAX_DIMS);
        return NULL;
    }
    int64_t shape[KT_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) {
            kt_set_error("kt_new_tensor: dim %d is negative (%lld)", i, (long long)ne[i]);
            return NULL;
        }
        shape[i] = ne[i];
    }
    int64_t blck = kt_blck_size(type);
    if (shape[0] % blck != 0) {
        kt_set_error("kt_new_tensor: %s rows of %lld elements are not a multiple of its block size %lld",
                     kt_type_name(type), (long long)shape[0], (long long)blck);
        return NULL;
    }
    /* bytes of the whole tensor, checked for overflow */
    size_t nb[KT_MAX_DIMS];
    nb[0] = kt_type_size(type);
    nb[1] = nb[0] * (size_t)(shape[0] / blck);
    if (shape[0] / blck != 0 && nb[1] / (size_t)(shape[0] / blck) != nb[0]) goto overflow;
    for (int i = 2; i < KT_MAX_DIMS; i++) {
        nb[i] = nb[i - 1] * (size_t)shape[i - 1];
        if (shape[i - 1] != 0 && nb[i] / (size_t)shape[i - 1] != nb[i - 1]) goto overflow;
    }
    size_t data_size = nb[3] * (size_t)shape[3];
    if (shape[3] != 0 && data_size / (size_t)shape[3] != nb[3]) goto overflow;

    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    if (view_src) {
        size_t src_bytes = kt_nbytes(view_src);
        if (view_offs > src_bytes || data_size > src_bytes - view_offs) {
            kt_set_error("kt view: %zu bytes at offset %zu exceed the %zu bytes of '%s'", data_size, view_offs,
                         src_bytes, view_src->name);
            return NULL;
        }
    }

    bool alloc_data = !view_src && !ctx->no_alloc;
    size_t tsize = align_up(sizeof(struct kt_tensor), KT_MEM_ALIGN);
    if (alloc_data && data_size > SIZE_MAX - tsize) goto overflow;
    struct kt_object *obj = kt_new_object(ctx, KT_OBJ_TENSOR, tsize + (alloc_data ? data_size : 0));
    if (!obj) return NULL;
    struct kt_tensor *t = obj->data;
    memset(t, 0, sizeof *t);
    t->type = type;
    for (int i = 0; i < KT_MAX_DIMS; i++) {
        t->ne[i] = shape[i];
        t->nb[i] = nb[i];
    }
    t->view_src = view_src;
    t->view_offs = view_offs;
    if (view_src) {
        t->buffer = view_src->buffer;
        t->data = view_src->data ? (uint8_t *)view_src->data + view_offs : NULL;
    } else if (alloc_data) {
        t->data = (uint8_t *)t + tsize;
    }
    return t;

overflow:
    kt_set_error("kt_new_tensor: shape [%lld, %lld, %lld, %lld] of %s overflows the address space",
                 (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3],
                 kt_type_name(type));
    return NULL;
}

struct kt_tensor *kt_new_tensor(struct kt_context *ctx, enum kt_type type, int n_dims, const int64_t *ne) {
    return kt_new_tensor_impl(ctx, type, n_dims, ne, NULL, 0);
}

struct kt_tensor *kt_new_tensor_1d(struct kt_context *ctx, enum kt_type type, int64_t ne0) {
    return kt_new_tensor(ctx, type, 1, &ne0);
}

struct kt_tensor *kt_new_tensor_2d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return kt_new_tensor(ctx, type, 2, ne);
}

struct kt_tensor *kt_new_tensor_3d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return kt_new_tensor(ctx, type, 3, ne);
}

struct kt_tensor *kt_new_tensor_4d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return kt_new_tensor(ctx, type, 4, ne);
}

struct kt_tensor *kt_dup_tensor(struct kt_context *ctx, const struct kt_tensor *src) {
    if (!src) return NULL;
    return kt_new_tensor(ctx, src->type, KT_MAX_DIMS, src->ne);
}

struct kt_tensor *kt_set_name(struct kt_tensor *t, const char *name) {
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

struct kt_tensor *kt_format_name(struct kt_tensor *t, const char *fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

const char *kt_get_name(const struct kt_tensor *t) { return t->name; }
void kt_set_input(struct kt_tensor *t) { t->flags |= KT_FLAG_INPUT; }
void kt_set_output(struct kt_tensor *t) { t->flags |= KT_FLAG_OUTPUT; }
void kt_set_param(struct kt_tensor *t) { t->flags |= KT_FLAG_PARAM; }

struct kt_tensor *kt_get_first_tensor(const struct kt_context *ctx) {
    for (struct kt_object *o = ctx->first; o; o = o->next)
        if (o->kind == KT_OBJ_TENSOR) return o->data;
    return NULL;
}

struct kt_tensor *kt_get_next_tensor(const struct kt_context *ctx, const struct kt_tensor *t) {
    (void)ctx;
    struct kt_object *o = (struct kt_object *)((uint8_t *)t - kt_object_overhead());
    for (o = o->next; o; o = o->next)
        if (o->kind == KT_OBJ_TENSOR) return o->data;
    return NULL;
}

struct kt_tensor *kt_get_tensor(const struct kt_context *ctx, const char *name) {
    for (struct kt_tensor *t = kt_get_first_tensor(ctx); t; t = kt_get_next_tensor(ctx, t))
        if (!strcmp(t->name, name)) return t;
    return NULL;
}

/* ------------------------------------------------------------------ metadata helpers */

int64_t kt_nelements(const struct kt_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

int64_t kt_nrows(const struct kt_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t kt_nbytes(const struct kt_tensor *t) {
    for (int i = 0; i < KT_MAX_DIMS; i++)
        if (t->ne[i] <= 0) return 0;
    int64_t blck = kt_blck_size(t->type);
    size_t n;
    if (blck == 1) {
        n = kt_type_size(t->type);
        for (int i = 0; i < KT_MAX_DIMS; i++) n += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        n = (size_t)(t->ne[0] / blck) * t->nb[0];
        for (int i = 1; i < KT_MAX_DIMS; i++) n += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return n;
}

int kt_n_dims(const struct kt_tensor *t) {
    for (int i = KT_MAX_DIMS - 1; i >= 1; i--)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

bool kt_is_contiguous_rows(const struct kt_tensor *t) { return t->nb[0] == kt_type_size(t->type); }

bool kt_is_contiguous(const struct kt_tensor *t) {
    if (t->nb[0] != kt_type_size(t->type)) return false;
    size_t next = kt_type_size(t->type) * (size_t)(t->ne[0] / kt_blck_size(t->type));
    for (int i = 1; i < KT_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != next) return false;
        next *= (size_t)t->ne[i];
    }
    return true;
}

bool kt_is_transposed(const struct kt_tensor *t) { return t->nb[0] > t->nb[1]; }

bool kt_is_permuted(const struct kt_tensor *t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool kt_is_view_op(enum kt_op op) {
    return op == KT_OP_VIEW || op == KT_OP_RESHAPE || op == KT_OP_PERMUTE || op == KT_OP_TRANSPOSE;
}

bool kt_are_same_shape(const struct kt_tensor *a, const struct kt_tensor *b) {
    for (int i = 0; i < KT_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

bool kt_can_repeat(const struct kt_tensor *b, const struct kt_tensor *a) {
    for (int i = 0; i < KT_MAX_DIMS; i++) {
        if (b->ne[i] == 0) {
            if (a->ne[i] != 0) return false;
        } else if (a->ne[i] % b->ne[i] != 0) {
            return false;
        }
    }
    return true;
}

static void *elem_ptr(const struct kt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (uint8_t *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

float kt_get_f32_nd(const struct kt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    void *p = elem_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case KT_TYPE_F32: return *(float *)p;
    case KT_TYPE_F16: return kt_fp16_to_fp32(*(kt_fp16_t *)p);
    case KT_TYPE_BF16: return kt_bf16_to_fp32(*(kt_bf16_t *)p);
    case KT_TYPE_I8: return *(int8_t *)p;
    case KT_TYPE_I16: return *(int16_t *)p;
    case KT_TYPE_I32: return (float)*(int32_t *)p;
    default: return 0.0f; /* quantized elements are not addressable one by one */
    }
}

void kt_set_f32_nd(struct kt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    void *p = elem_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case KT_TYPE_F32: *(float *)p = v; break;
    case KT_TYPE_F16: *(kt_fp16_t *)p = kt_fp32_to_fp16(v); break;
    case KT_TYPE_BF16: *(kt_bf16_t *)p = kt_fp32_to_bf16(v); break;
    case KT_TYPE_I8: *(int8_t *)p = (int8_t)v; break;
    case KT_TYPE_I16: *(int16_t *)p = (int16_t)v; break;
    case KT_TYPE_I32: *(int32_t *)p = (int32_t)v; break;
    default: break;
    }
}
