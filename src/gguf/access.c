/*
 * access.c - what callers read from an opened GGUF file: header facts, keys and
 * their typed values, array elements, tensor infos. Everything was validated at
 * open, so accessors only check the caller's request (index, type, bounds) and
 * decode little-endian bytes from the mapping.
 */
#include "gguf_impl.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} value_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"u8", 1},    [GGUF_TYPE_INT8] = {"i8", 1},    [GGUF_TYPE_UINT16] = {"u16", 2},
    [GGUF_TYPE_INT16] = {"i16", 2},   [GGUF_TYPE_UINT32] = {"u32", 4}, [GGUF_TYPE_INT32] = {"i32", 4},
    [GGUF_TYPE_FLOAT32] = {"f32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},  [GGUF_TYPE_STRING] = {"str", 0},
    [GGUF_TYPE_ARRAY] = {"arr", 0},   [GGUF_TYPE_UINT64] = {"u64", 8}, [GGUF_TYPE_INT64] = {"i64", 8},
    [GGUF_TYPE_FLOAT64] = {"f64", 8},
};

const char *gguf_type_name(enum gguf_type t) {
    return (unsigned)t < GGUF_TYPE_COUNT ? value_types[t].name : "?";
}

size_t gguf_scalar_size(enum gguf_type t) {
    return (unsigned)t < GGUF_TYPE_COUNT ? value_types[t].size : 0;
}

struct gguf_str gguf_kv_name_of(const void *ctx, int64_t i) {
    return ((const struct gguf_kv *)ctx)[i].key;
}
struct gguf_str gguf_tensor_name_of(const void *ctx, int64_t i) {
    return ((const struct gguf_tensor_info *)ctx)[i].name;
}

static bool set_err(const struct gguf_file *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool set_err(const struct gguf_file *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gguf_vfmt(g->err, GGUF_ERRLEN, fmt, ap);
    va_end(ap);
    return false;
}

uint32_t gguf_version(const struct gguf_file *g) {
    return g->version;
}
size_t gguf_alignment(const struct gguf_file *g) {
    return g->alignment;
}
size_t gguf_data_offset(const struct gguf_file *g) {
    return g->data_offset;
}
const void *gguf_base(const struct gguf_file *g) {
    return g->base;
}
size_t gguf_size(const struct gguf_file *g) {
    return g->size;
}
bool gguf_in_mapping(const struct gguf_file *g, const void *p, size_t n) {
    const uint8_t *a = g->map, *q = p;
    return a && q >= a && n <= g->map_size && (size_t)(q - a) <= g->map_size - n;
}
bool gguf_release_pages(const struct gguf_file *g, const void *p, size_t n) {
    if (!gguf_in_mapping(g, p, n)) return false;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    /* a private read-only file mapping: dropped pages are read from the file again if touched */
    return b > a && madvise((void *)a, b - a, MADV_DONTNEED) == 0;
}
const char *gguf_error(const struct gguf_file *g) {
    return g->err;
}

/* ---- keys */

int64_t gguf_n_kv(const struct gguf_file *g) {
    return g->n_kv;
}

int64_t gguf_find_key(const struct gguf_file *g, const char *key) {
    if (!key) return -1;
    return gguf_index_find(&g->kv_index, key, strlen(key), gguf_kv_name_of, g->kv);
}

static const struct gguf_kv *kv_at(const struct gguf_file *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

struct gguf_str gguf_key(const struct gguf_file *g, int64_t i) {
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : (struct gguf_str){"", 0};
}

enum gguf_type gguf_kv_type(const struct gguf_file *g, int64_t i) {
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->type : GGUF_TYPE_COUNT;
}

enum gguf_type gguf_arr_type(const struct gguf_file *g, int64_t i) {
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : GGUF_TYPE_COUNT;
}

uint64_t gguf_arr_n(const struct gguf_file *g, int64_t i) {
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_n : 0;
}

const void *gguf_kv_data(const struct gguf_file *g, int64_t i, size_t *size) {
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv) return NULL;
    if (size) *size = kv->val_size;
    return kv->val;
}

/* ---- scalar decoding (little-endian, unaligned) */

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Integer element of type t at p as int64; false if t is not an integer type or a u64 is too large. */
static bool decode_int(enum gguf_type t, const uint8_t *p, int64_t *out) {
    uint64_t u = load_le(p, gguf_scalar_size(t));
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
        *out = (int64_t)u;
        return true;
    case GGUF_TYPE_INT8:
        *out = (int8_t)(uint8_t)u;
        return true;
    case GGUF_TYPE_INT16:
        *out = (int16_t)(uint16_t)u;
        return true;
    case GGUF_TYPE_INT32:
        *out = (int32_t)(uint32_t)u;
        return true;
    case GGUF_TYPE_INT64:
        *out = (int64_t)u;
        return true;
    case GGUF_TYPE_UINT64:
        if (u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    default:
        return false;
    }
}

static bool decode_float(enum gguf_type t, const uint8_t *p, double *out) {
    if (t == GGUF_TYPE_FLOAT32) {
        uint32_t u = (uint32_t)load_le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return true;
    }
    if (t == GGUF_TYPE_FLOAT64) {
        uint64_t u = load_le(p, 8);
        memcpy(out, &u, 8);
        return true;
    }
    return false;
}

static const struct gguf_kv *find(const struct gguf_file *g, const char *key) {
    const struct gguf_kv *kv = kv_at(g, gguf_find_key(g, key));
    if (!kv) set_err(g, "key '%s' not found", key ? key : "(null)");
    return kv;
}

/* The value of key if it is stored as exactly type t. */
static const uint8_t *typed(const struct gguf_file *g, const char *key, enum gguf_type t) {
    const struct gguf_kv *kv = find(g, key);
    if (!kv) return NULL;
    if (kv->type != t) {
        set_err(g, "key '%s' is %s, not %s", key, gguf_type_name(kv->type), gguf_type_name(t));
        return NULL;
    }
    return kv->val;
}

#define SCALAR_GETTER(fn, ctype, gtype)                                                                      \
    bool fn(const struct gguf_file *g, const char *key, ctype *out) {                                        \
        const uint8_t *p = typed(g, key, gtype);                                                             \
        if (!p) return false;                                                                                \
        uint64_t u = load_le(p, sizeof(ctype));                                                              \
        ctype v;                                                                                             \
        memcpy(&v, &u, sizeof v); /* little-endian host */                                                   \
        *out = v;                                                                                            \
        return true;                                                                                         \
    }

SCALAR_GETTER(gguf_get_u8, uint8_t, GGUF_TYPE_UINT8)
SCALAR_GETTER(gguf_get_i8, int8_t, GGUF_TYPE_INT8)
SCALAR_GETTER(gguf_get_u16, uint16_t, GGUF_TYPE_UINT16)
SCALAR_GETTER(gguf_get_i16, int16_t, GGUF_TYPE_INT16)
SCALAR_GETTER(gguf_get_u32, uint32_t, GGUF_TYPE_UINT32)
SCALAR_GETTER(gguf_get_i32, int32_t, GGUF_TYPE_INT32)
SCALAR_GETTER(gguf_get_u64, uint64_t, GGUF_TYPE_UINT64)
SCALAR_GETTER(gguf_get_i64, int64_t, GGUF_TYPE_INT64)
SCALAR_GETTER(gguf_get_f32, float, GGUF_TYPE_FLOAT32)
SCALAR_GETTER(gguf_get_f64, double, GGUF_TYPE_FLOAT64)

bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out) {
    const uint8_t *p = typed(g, key, GGUF_TYPE_BOOL);
    if (!p) return false;
    *out = *p != 0;
    return true;
}

bool gguf_get_str(const struct gguf_file *g, const char *key, struct gguf_str *out) {
    const uint8_t *p = typed(g, key, GGUF_TYPE_STRING);
    if (!p) return false;
    out->len = load_le(p, 8);
    out->ptr = (const char *)p + 8;
    return true;
}

bool gguf_get_int(const struct gguf_file *g, const char *key, int64_t *out) {
    const struct gguf_kv *kv = find(g, key);
    if (!kv) return false;
    if (!decode_int(kv->type, kv->val, out)) {
        if (kv->type == GGUF_TYPE_UINT64) return set_err(g, "key '%s': u64 value does not fit in int64", key);
        return set_err(g, "key '%s' is %s, not an integer", key, gguf_type_name(kv->type));
    }
    return true;
}

bool gguf_get_float(const struct gguf_file *g, const char *key, double *out) {
    const struct gguf_kv *kv = find(g, key);
    if (!kv) return false;
    if (!decode_float(kv->type, kv->val, out))
        return set_err(g, "key '%s' is %s, not f32 or f64", key, gguf_type_name(kv->type));
    return true;
}

/* ---- arrays */

/* The array at kv index i, with idx in range. */
static const struct gguf_kv *array_elem(const struct gguf_file *g, int64_t i, uint64_t idx) {
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv) {
        set_err(g, "key index %lld out of range (%lld keys)", (long long)i, (long long)g->n_kv);
        return NULL;
    }
    if (kv->type != GGUF_TYPE_ARRAY) {
        set_err(g, "key '%.*s' is %s, not an array", (int)(kv->key.len > 100 ? 100 : kv->key.len),
                kv->key.ptr, gguf_type_name(kv->type));
        return NULL;
    }
    if (idx >= kv->arr_n) {
        set_err(g, "index %llu out of range for key '%.*s' (%llu elements)", (unsigned long long)idx,
                (int)(kv->key.len > 100 ? 100 : kv->key.len), kv->key.ptr, (unsigned long long)kv->arr_n);
        return NULL;
    }
    return kv;
}

static bool elem_type_err(const struct gguf_file *g, const struct gguf_kv *kv, const char *want) {
    return set_err(g, "key '%.*s' is an array of %s, not of %s", (int)(kv->key.len > 100 ? 100 : kv->key.len),
                   kv->key.ptr, gguf_type_name(kv->arr_type), want);
}

bool gguf_arr_get_str(const struct gguf_file *g, int64_t i, uint64_t idx, struct gguf_str *out) {
    const struct gguf_kv *kv = array_elem(g, i, idx);
    if (!kv) return false;
    if (kv->arr_type != GGUF_TYPE_STRING) return elem_type_err(g, kv, "str");
    *out = kv->strs[idx];
    return true;
}

bool gguf_arr_get_int(const struct gguf_file *g, int64_t i, uint64_t idx, int64_t *out) {
    const struct gguf_kv *kv = array_elem(g, i, idx);
    if (!kv) return false;
    size_t es = gguf_scalar_size(kv->arr_type);
    if (es == 0 || !decode_int(kv->arr_type, kv->val + idx * es, out)) {
        if (kv->arr_type == GGUF_TYPE_UINT64)
            return set_err(g, "u64 element %llu does not fit in int64", (unsigned long long)idx);
        return elem_type_err(g, kv, "integers");
    }
    return true;
}

bool gguf_arr_get_float(const struct gguf_file *g, int64_t i, uint64_t idx, double *out) {
    const struct gguf_kv *kv = array_elem(g, i, idx);
    if (!kv) return false;
    size_t es = gguf_scalar_size(kv->arr_type);
    if (es == 0 || !decode_float(kv->arr_type, kv->val + idx * es, out))
        return elem_type_err(g, kv, "f32 or f64");
    return true;
}

bool gguf_arr_copy(const struct gguf_file *g, int64_t i, enum gguf_type type, void *out, uint64_t n) {
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != GGUF_TYPE_ARRAY) return set_err(g, "key index %lld is not an array", (long long)i);
    if (kv->arr_type != type) return elem_type_err(g, kv, gguf_type_name(type));
    if (type == GGUF_TYPE_STRING || type == GGUF_TYPE_ARRAY)
        return set_err(g, "gguf_arr_copy copies numeric arrays only (this one holds %s)",
                       gguf_type_name(type));
    if (n != kv->arr_n)
        return set_err(g, "array has %llu elements, not %llu", (unsigned long long)kv->arr_n,
                       (unsigned long long)n);
    if (kv->val_size) memcpy(out, kv->val, kv->val_size); /* file and host are both little-endian */
    return true;
}

/* ---- tensors */

int64_t gguf_n_tensors(const struct gguf_file *g) {
    return g->n_tensors;
}

int64_t gguf_find_tensor(const struct gguf_file *g, const char *name) {
    if (!name) return -1;
    return gguf_index_find(&g->tensor_index, name, strlen(name), gguf_tensor_name_of, g->tensors);
}

const struct gguf_tensor_info *gguf_tensor(const struct gguf_file *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
