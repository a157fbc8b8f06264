/*
 * ops_copy.c - CPU kernels that move and convert data: dup/cont/cpy (any layout
 * and shape of the same element count, into F32/F16/BF16 or a quantized type
 * through the type table), concat along any dim, and get_rows (embedding
 * lookup: rows of any type dequantized to F32).
 */
#include "ops_util.h"

/* Floats converted per step on the quantized paths: a multiple of every block size
 * (32, 256), small enough for the stack. */
#define COPY_CHUNK 2048

/* Floats into type t: the kernel table's pick for this CPU (for F16, F16C's rounding:
 * the same bytes as the scalar loop; the type's own from_float where there is no
 * pick), else the reference. Writing the KV cache through the scalar loop took 4.4-5.8
 * ms of a graph (KT_CPU_PROFILE=1 kiln bench -p 128, 1.1B Q4_0), 0.6-0.7 ms through F16C. */
static kt_from_float_fn quantizer(enum kt_type t) {
    const kt_from_float_fn f = kt_cpu_from_float(t);
    return f ? f : kt_get_type_traits(t)->from_float_ref;
}

static bool is_scalar_float(enum kt_type t) {
    return t == KT_TYPE_F32 || t == KT_TYPE_F16 || t == KT_TYPE_BF16;
}

/* Position in a tensor walked in row-major order of its logical indices. */
struct walk {
    const struct kt_tensor *t;
    int64_t i[4];
};

static void walk_seek(struct walk *w, const struct kt_tensor *t, int64_t flat) {
    w->t = t;
    for (int d = 0; d < 4; d++) {
        w->i[d] = flat % t->ne[d];
        flat /= t->ne[d];
    }
}

static inline const char *walk_ptr(const struct walk *w) {
    const struct kt_tensor *t = w->t;
    return (const char *)t->data + w->i[0] * t->nb[0] + w->i[1] * t->nb[1] + w->i[2] * t->nb[2] +
           w->i[3] * t->nb[3];
}

static inline void walk_next(struct walk *w) {
    for (int d = 0; d < 4; d++) {
        if (++w->i[d] < w->t->ne[d]) return;
        w->i[d] = 0;
    }
}

bool kt_cpu_cpy_supports(const struct kt_tensor *dst) {
    const struct kt_tensor *src = dst->src[0];
    if (!src || kt_nelements(src) != kt_nelements(dst)) return false;
    const struct kt_type_traits *ts = kt_get_type_traits(src->type), *td = kt_get_type_traits(dst->type);
    if (!ts->name || !td->name) return false;
    if (src->type == dst->type && !ts->is_quantized) return true; /* raw element copy, any layout */
    if (ts->is_quantized) {
        /* dequantized a row at a time: rows must line up and hold whole packed blocks */
        if (!ts->to_float || src->nb[0] != ts->type_size || src->ne[0] != dst->ne[0]) return false;
    } else if (!is_scalar_float(src->type)) {
        return false;
    }
    if (td->is_quantized) {
        if (!quantizer(dst->type) || dst->nb[0] != td->type_size || dst->ne[0] % td->blck_size != 0)
            return false;
        if (src->type == dst->type) return true;
    } else if (!is_scalar_float(dst->type)) {
        return false;
    }
    return true;
}

/* Scalar source and destination: element by element in logical order. */
static void dup_elements(const struct kt_tensor *src, struct kt_tensor *dst, int64_t r0, int64_t r1) {
    const int64_t ne0 = dst->ne[0];
    const bool same = src->type == dst->type;
    const size_t esz = kt_type_size(dst->type), ssz = kt_type_size(src->type);
    const bool packed = src->nb[0] == ssz && dst->nb[0] == esz;
    /* packed runs between F32 and F16/BF16: the type table's row converters */
    kt_to_float_fn to_f32 = NULL;
    kt_from_float_fn from_f32 = NULL;
    if (packed && !same && dst->type == KT_TYPE_F32) to_f32 = kt_get_type_traits(src->type)->to_float;
    if (packed && !same && src->type == KT_TYPE_F32) from_f32 = quantizer(dst->type);
    const bool runs = packed && (same || to_f32 || from_f32);
    struct walk w;
    walk_seek(&w, src, r0 * ne0);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        if (runs) {
            /* the longest stretch packed on both sides: to the end of a src or a dst row */
            for (int64_t i0 = 0; i0 < ne0;) {
                const int64_t left = src->ne[0] - w.i[0], len = left < ne0 - i0 ? left : ne0 - i0;
                const char *sp = walk_ptr(&w);
                if (same)
                    memcpy(d + i0 * esz, sp, (size_t)len * esz);
                else if (to_f32)
                    to_f32(sp, (float *)(d + i0 * esz), len);
                else
                    from_f32((const float *)sp, d + i0 * esz, len);
                i0 += len;
                w.i[0] += len - 1;
                walk_next(&w);
            }
            continue;
        }
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            const char *sp = walk_ptr(&w);
            if (same) {
                memcpy(d + i0 * dst->nb[0], sp, esz);
            } else {
                kt_cpu_store(dst->type, d + i0 * dst->nb[0], kt_cpu_load(src->type, sp));
            }
            walk_next(&w);
        }
    }
}

/* Either side quantized: convert through a float buffer a chunk at a time. */
static void dup_blocks(const struct kt_tensor *src, struct kt_tensor *dst, int64_t r0, int64_t r1) {
    const struct kt_type_traits *ts = kt_get_type_traits(src->type), *td = kt_get_type_traits(dst->type);
    const int64_t ne0 = dst->ne[0];
    kt_from_float_fn qf = td->is_quantized ? quantizer(dst->type) : NULL;
    float buf[COPY_CHUNK];
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        char *d = kt_cpu_row_ptr(dst, i1, i2, i3);
        const char *srow = NULL;
        if (ts->is_quantized) {
            /* supports() guarantees src->ne[0] == ne0: dst row ir is src row ir */
            int64_t k1, k2, k3;
            kt_cpu_row_index(src->ne, ir, &k1, &k2, &k3);
            srow = kt_cpu_row_ptr(src, k1, k2, k3);
            if (src->type == dst->type) {
                memcpy(d, srow, kt_row_size(src->type, ne0));
                continue;
            }
        }
        struct walk w;
        walk_seek(&w, src, srow ? 0 : ir * ne0);
        for (int64_t c = 0; c < ne0; c += COPY_CHUNK) {
            const int64_t len = ne0 - c < COPY_CHUNK ? ne0 - c : COPY_CHUNK;
            if (srow) {
                ts->to_float(srow + (size_t)(c / ts->blck_size) * ts->type_size, buf, len);
            } else {
                for (int64_t k = 0; k < len; k++) {
                    buf[k] = kt_cpu_load(src->type, walk_ptr(&w));
                    walk_next(&w);
                }
            }
            if (qf) {
                qf(buf, d + (size_t)(c / td->blck_size) * td->type_size, len);
            } else {
                for (int64_t k = 0; k < len; k++) kt_cpu_store(dst->type, d + (c + k) * dst->nb[0], buf[k]);
            }
        }
    }
}

void kt_cpu_dup(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *src = dst->src[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    if (r0 >= r1 || dst->ne[0] == 0) return;
    if (kt_is_quantized(src->type) || kt_is_quantized(dst->type)) {
        dup_blocks(src, dst, r0, r1);
    } else {
        dup_elements(src, dst, r0, r1);
    }
}

/* ------------------------------------------------------------------ concat */

void kt_cpu_concat(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    const int dim = kt_get_op_param_i32(dst, 0);
    if (dim < 0 || dim >= KT_MAX_DIMS) return; /* the constructor rejects these */
    const int64_t ne0 = dst->ne[0];
    const size_t esz = kt_type_size(dst->type);
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t idx[4] = {0, 0, 0, 0};
        kt_cpu_row_index(dst->ne, ir, &idx[1], &idx[2], &idx[3]);
        char *d = kt_cpu_row_ptr(dst, idx[1], idx[2], idx[3]);
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            idx[0] = i0;
            const struct kt_tensor *s = a;
            int64_t k[4] = {idx[0], idx[1], idx[2], idx[3]};
            if (idx[dim] >= a->ne[dim]) {
                s = b;
                k[dim] -= a->ne[dim];
            }
            const char *sp =
                (const char *)s->data + k[0] * s->nb[0] + k[1] * s->nb[1] + k[2] * s->nb[2] + k[3] * s->nb[3];
            if (s->type == dst->type) {
                memcpy(d + i0 * dst->nb[0], sp, esz);
            } else {
                kt_cpu_store(dst->type, d + i0 * dst->nb[0], kt_cpu_load(s->type, sp));
            }
        }
    }
}

/* ------------------------------------------------------------------ get_rows */

void kt_cpu_get_rows(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *ids = dst->src[1];
    const struct kt_type_traits *ta = kt_get_type_traits(a->type);
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(dst), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(dst->ne, ir, &i1, &i2, &i3);
        float *d = (float *)kt_cpu_row_ptr(dst, i1, i2, i3);
        int32_t id;
        memcpy(&id, (const char *)ids->data + i1 * ids->nb[0] + i2 * ids->nb[1] + i3 * ids->nb[2], sizeof id);
        if (id < 0 || id >= a->ne[1]) {
            /* ids are data (token ids): callers validate them; a bad one must not read
             * outside src0, so its row is zeros */
            for (int64_t i0 = 0; i0 < ne0; i0++) d[i0] = 0.0f;
            continue;
        }
        const char *s = kt_cpu_row_ptr(a, id, i2 % a->ne[2], i3 % a->ne[3]);
        if (a->type == KT_TYPE_F32 && a->nb[0] == sizeof(float)) {
            memcpy(d, s, (size_t)ne0 * sizeof(float));
        } else if (ta->is_quantized || !is_scalar_float(a->type)) {
            if (ta->to_float) {
                ta->to_float(s, d, ne0);
            } else {
                for (int64_t i0 = 0; i0 < ne0; i0++) d[i0] = NAN;
            }
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0++) d[i0] = kt_cpu_load(a->type, s + i0 * a->nb[0]);
        }
    }
}
