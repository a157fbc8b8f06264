/*
 * writer.c - builds a GGUF v3 file: metadata values serialized as they are set,
 * tensors referenced until written (or produced by a fill callback while
 * writing, for files larger than memory), data laid out back to back at the file's
 * alignment (the layout ggml's reader requires). Written through gguf_outfile
 * (outfile.c): a temporary renamed into place, so a failure leaves no half file.
 */
#include "gguf_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct wkv {
    char *key;
    size_t key_len;
    enum gguf_type type, arr_type;
    uint64_t arr_n;
    uint8_t *val; /* serialized value (arrays: the elements) */
    size_t val_size;
};

struct wtensor {
    char *name;
    enum kt_type type;
    int n_dims;
    int64_t ne[KT_MAX_DIMS];
    size_t size;
    const void *data;
    gguf_fill_fn fill; /* instead of data: rows produced at write time */
    void *user;
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    char err[GGUF_ERRLEN];
};

static bool werr(struct gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool werr(struct gguf_writer *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gguf_vfmt(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return false;
}

struct gguf_writer *gguf_writer_new(void) {
    return calloc(1, sizeof(struct gguf_writer));
}

void gguf_writer_free(struct gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].val);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

const char *gguf_writer_error(const struct gguf_writer *w) {
    return w->err;
}

static bool grow(struct gguf_writer *w, void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = ncap <= SIZE_MAX / elem ? realloc(*arr, ncap * elem) : NULL;
    if (!p) return werr(w, "out of memory");
    *arr = p;
    *cap = ncap;
    return true;
}

/* Store key's value (taking ownership of val), replacing an earlier value of the same key. */
static bool put(struct gguf_writer *w, const char *key, size_t key_len, enum gguf_type type,
                enum gguf_type arr_type, uint64_t arr_n, uint8_t *val, size_t val_size) {
    if (!w || !key || key_len == 0) {
        free(val);
        return w ? werr(w, "empty key") : false;
    }
    struct wkv *kv = NULL;
    for (size_t i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == key_len && !memcmp(w->kv[i].key, key, key_len)) kv = &w->kv[i];
    if (kv) {
        free(kv->val);
    } else {
        char *k = malloc(key_len + 1);
        if (!k || !grow(w, (void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
            free(k);
            free(val);
            return werr(w, "out of memory");
        }
        memcpy(k, key, key_len);
        k[key_len] = 0;
        kv = &w->kv[w->n_kv++];
        kv->key = k;
        kv->key_len = key_len;
    }
    kv->type = type;
    kv->arr_type = arr_type;
    kv->arr_n = arr_n;
    kv->val = val;
    kv->val_size = val_size;
    return true;
}

static void store_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static bool put_scalar(struct gguf_writer *w, const char *key, enum gguf_type t, const void *v) {
    size_t n = gguf_scalar_size(t);
    uint8_t *val = malloc(n);
    if (!val) return werr(w, "out of memory");
    memcpy(val, v, n); /* little-endian host, as the file */
    return put(w, key, key ? strlen(key) : 0, t, GGUF_TYPE_COUNT, 0, val, n);
}

bool gguf_writer_set_u8(struct gguf_writer *w, const char *key, uint8_t v) {
    return put_scalar(w, key, GGUF_TYPE_UINT8, &v);
}
bool gguf_writer_set_i8(struct gguf_writer *w, const char *key, int8_t v) {
    return put_scalar(w, key, GGUF_TYPE_INT8, &v);
}
bool gguf_writer_set_u16(struct gguf_writer *w, const char *key, uint16_t v) {
    return put_scalar(w, key, GGUF_TYPE_UINT16, &v);
}
bool gguf_writer_set_i16(struct gguf_writer *w, const char *key, int16_t v) {
    return put_scalar(w, key, GGUF_TYPE_INT16, &v);
}
bool gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v) {
    return put_scalar(w, key, GGUF_TYPE_UINT32, &v);
}
bool gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v) {
    return put_scalar(w, key, GGUF_TYPE_INT32, &v);
}
bool gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v) {
    return put_scalar(w, key, GGUF_TYPE_UINT64, &v);
}
bool gguf_writer_set_i64(struct gguf_writer *w, const char *key, int64_t v) {
    return put_scalar(w, key, GGUF_TYPE_INT64, &v);
}
bool gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v) {
    return put_scalar(w, key, GGUF_TYPE_FLOAT32, &v);
}
bool gguf_writer_set_f64(struct gguf_writer *w, const char *key, double v) {
    return put_scalar(w, key, GGUF_TYPE_FLOAT64, &v);
}
bool gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return put_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

bool gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *v, size_t len) {
    if (!w) return false;
    if (!v && len) return werr(w, "key '%s': NULL string", key ? key : "");
    uint8_t *val = len <= SIZE_MAX - 8 ? malloc(8 + len) : NULL;
    if (!val) return werr(w, "out of memory");
    store_le(val, len, 8);
    if (len) memcpy(val + 8, v, len);
    return put(w, key, key ? strlen(key) : 0, GGUF_TYPE_STRING, GGUF_TYPE_COUNT, 0, val, 8 + len);
}

bool gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v) {
    return gguf_writer_set_strn(w, key, v ? v : "", v ? strlen(v) : 0);
}

bool gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_type type, const void *data,
                         uint64_t n) {
    if (!w) return false;
    size_t es = gguf_scalar_size(type);
    if (es == 0)
        return werr(w, "key '%s': gguf_writer_set_arr takes numeric element types, not %s", key ? key : "",
                    gguf_type_name(type));
    if (n > SIZE_MAX / es) return werr(w, "key '%s': array too large", key ? key : "");
    if (!data && n) return werr(w, "key '%s': NULL array data", key ? key : "");
    size_t size = (size_t)n * es;
    uint8_t *val = malloc(size ? size : 1);
    if (!val) return werr(w, "out of memory");
    if (size) memcpy(val, data, size);
    return put(w, key, key ? strlen(key) : 0, GGUF_TYPE_ARRAY, type, n, val, size);
}

bool gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const struct gguf_str *strs,
                             uint64_t n) {
    if (!w) return false;
    if (!strs && n) return werr(w, "key '%s': NULL string array", key ? key : "");
    size_t size = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i].ptr && strs[i].len)
            return werr(w, "key '%s': string %llu is NULL", key ? key : "", (unsigned long long)i);
        if (strs[i].len > SIZE_MAX - 8 - size) return werr(w, "key '%s': array too large", key ? key : "");
        size += 8 + (size_t)strs[i].len;
    }
    uint8_t *val = malloc(size ? size : 1), *p = val;
    if (!val) return werr(w, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        store_le(p, strs[i].len, 8);
        if (strs[i].len) memcpy(p + 8, strs[i].ptr, (size_t)strs[i].len);
        p += 8 + strs[i].len;
    }
    return put(w, key, key ? strlen(key) : 0, GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, n, val, size);
}

bool gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *g) {
    if (!w) return false;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        struct gguf_str k = gguf_key(g, i);
        size_t size = 0;
        const void *data = gguf_kv_data(g, i, &size);
        uint8_t *val = malloc(size ? size : 1);
        if (!val) return werr(w, "out of memory");
        if (size) memcpy(val, data, size);
        enum gguf_type t = gguf_kv_type(g, i);
        bool arr = t == GGUF_TYPE_ARRAY;
        if (!put(w, k.ptr, (size_t)k.len, t, arr ? gguf_arr_type(g, i) : GGUF_TYPE_COUNT,
                 arr ? gguf_arr_n(g, i) : 0, val, size))
            return false;
    }
    return true;
}

bool gguf_writer_remove_key(struct gguf_writer *w, const char *key) {
    if (!w || !key) return false;
    size_t len = strlen(key);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].key_len != len || memcmp(w->kv[i].key, key, len) != 0) continue;
        free(w->kv[i].key);
        free(w->kv[i].val);
        memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
        w->n_kv--;
        break;
    }
    return true;
}

bool gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment) {
    if (!w) return false;
    if (alignment == 0 || (alignment & (alignment - 1)))
        return werr(w, "alignment %u is not a non-zero power of two", alignment);
    return gguf_writer_set_u32(w, "general.alignment", alignment);
}

static bool add_tensor(struct gguf_writer *w, const char *name, enum kt_type type, int n_dims,
                       const int64_t *ne, const void *data, gguf_fill_fn fill, void *user) {
    if (!w) return false;
    if (!name || !*name) return werr(w, "tensor name is empty");
    size_t len = strlen(name);
    if (len >= KT_MAX_NAME) return werr(w, "tensor name '%s' is longer than %d bytes", name, KT_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return werr(w, "duplicate tensor name '%s'", name);
    if (!kt_type_is_valid((int)type)) return werr(w, "tensor '%s': unknown type id %d", name, (int)type);
    if (n_dims < 1 || n_dims > KT_MAX_DIMS || !ne)
        return werr(w, "tensor '%s': n_dims %d (must be 1..%d)", name, n_dims, KT_MAX_DIMS);
    struct wtensor t = {.type = type, .n_dims = n_dims, .data = data, .fill = fill, .user = user};
    int64_t nel = 1;
    for (int j = 0; j < KT_MAX_DIMS; j++) {
        t.ne[j] = j < n_dims ? ne[j] : 1;
        if (t.ne[j] <= 0) return werr(w, "tensor '%s': dimension %d is %lld", name, j, (long long)t.ne[j]);
        if (nel > INT64_MAX / t.ne[j]) return werr(w, "tensor '%s': element count overflows", name);
        nel *= t.ne[j];
    }
    int64_t blck = kt_blck_size(type);
    if (t.ne[0] % blck)
        return werr(w, "tensor '%s': row length %lld is not a multiple of %s's block size %lld", name,
                    (long long)t.ne[0], kt_type_name(type), (long long)blck);
    size_t row = kt_row_size(type, t.ne[0]);
    uint64_t rows = (uint64_t)(nel / t.ne[0]);
    if (row == 0 || rows > SIZE_MAX / row) return werr(w, "tensor '%s': byte size overflows", name);
    t.size = row * (size_t)rows;
    if (!data && !fill) return werr(w, "tensor '%s': NULL data", name);
    t.name = malloc(len + 1);
    if (!t.name || !grow(w, (void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) {
        free(t.name);
        return werr(w, "out of memory");
    }
    memcpy(t.name, name, len + 1);
    w->t[w->n_t++] = t;
    return true;
}

bool gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum kt_type type, int n_dims,
                            const int64_t *ne, const void *data) {
    if (!data && w) return werr(w, "tensor '%s': NULL data", name ? name : "");
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

bool gguf_writer_add_tensor_fill(struct gguf_writer *w, const char *name, enum kt_type type, int n_dims,
                                 const int64_t *ne, gguf_fill_fn fill, void *user) {
    if (!fill && w) return werr(w, "tensor '%s': NULL fill callback", name ? name : "");
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, user);
}

/* ---- output */

struct out {
    FILE *f;
    uint64_t pos;
    bool ok;
};

static void put_bytes(struct out *o, const void *p, size_t n) {
    if (o->ok && n && fwrite(p, 1, n, o->f) != n) o->ok = false;
    o->pos += n;
}
static void put_u32(struct out *o, uint32_t v) {
    uint8_t b[4];
    store_le(b, v, 4);
    put_bytes(o, b, 4);
}
static void put_u64(struct out *o, uint64_t v) {
    uint8_t b[8];
    store_le(b, v, 8);
    put_bytes(o, b, 8);
}
static void put_str(struct out *o, const char *s, size_t len) {
    put_u64(o, len);
    put_bytes(o, s, len);
}
static void pad_to(struct out *o, size_t align) {
    static const uint8_t zeros[256];
    size_t n = (size_t)((align - o->pos % align) % align);
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        put_bytes(o, zeros, k);
        n -= k;
    }
}

/* The alignment the file will declare: general.alignment if set (u32), else the default. */
static bool file_alignment(struct gguf_writer *w, size_t *align) {
    *align = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0 || w->kv[i].key_len != strlen("general.alignment"))
            continue;
        uint32_t a = 0;
        if (w->kv[i].type == GGUF_TYPE_UINT32) memcpy(&a, w->kv[i].val, 4);
        if (w->kv[i].type != GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)))
            return werr(w, "general.alignment must be a u32 power of two");
        *align = a;
    }
    return true;
}

/* Stream a fill tensor through one slab buffer; false (message set) if the callback fails. */
static bool write_filled(struct gguf_writer *w, struct out *o, const struct wtensor *t, uint8_t **slab,
                         size_t *slab_size) {
    const size_t row = kt_row_size(t->type, t->ne[0]);
    const int64_t rows = (int64_t)(t->size / row);
    const int64_t per = row >= GGUF_FILL_SLAB ? 1 : (int64_t)(GGUF_FILL_SLAB / row);
    const size_t need = (size_t)(per < rows ? per : rows) * row;
    if (need > *slab_size) {
        uint8_t *p = realloc(*slab, need);
        if (!p) return werr(w, "out of memory (%zu bytes for tensor '%s')", need, t->name);
        *slab = p;
        *slab_size = need;
    }
    for (int64_t r = 0; r < rows && o->ok; r += per) {
        const int64_t n = rows - r < per ? rows - r : per;
        char msg[GGUF_ERRLEN] = "";
        if (!t->fill(t->user, r, n, *slab, msg, sizeof msg))
            return werr(w, "tensor '%s': %s", t->name, msg[0] ? msg : "data source failed");
        put_bytes(o, *slab, (size_t)n * row);
    }
    return true;
}

/* Everything before the data section: header, metadata, tensor infos, padding. */
static void write_header(const struct gguf_writer *w, struct out *o, size_t align) {
    put_bytes(o, GGUF_MAGIC, 4);
    put_u32(o, 3);
    put_u64(o, w->n_t);
    put_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct wkv *kv = &w->kv[i];
        put_str(o, kv->key, kv->key_len);
        put_u32(o, (uint32_t)kv->type);
        if (kv->type == GGUF_TYPE_ARRAY) {
            put_u32(o, (uint32_t)kv->arr_type);
            put_u64(o, kv->arr_n);
        }
        put_bytes(o, kv->val, kv->val_size);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        put_str(o, t->name, strlen(t->name));
        put_u32(o, (uint32_t)t->n_dims);
        for (int j = 0; j < t->n_dims; j++) put_u64(o, (uint64_t)t->ne[j]);
        put_u32(o, (uint32_t)t->type);
        put_u64(o, offset);
        offset += t->size + (align - t->size % align) % align;
    }
    pad_to(o, align);
}

static bool write_all(struct gguf_writer *w, struct out *o, size_t align) {
    write_header(w, o, align);
    uint8_t *slab = NULL;
    size_t slab_size = 0;
    bool ok = true;
    for (size_t i = 0; i < w->n_t && ok && o->ok; i++) {
        if (w->t[i].fill)
            ok = write_filled(w, o, &w->t[i], &slab, &slab_size);
        else
            put_bytes(o, w->t[i].data, w->t[i].size);
        pad_to(o, align);
    }
    free(slab);
    return ok;
}

bool gguf_writer_write(struct gguf_writer *w, const char *path) {
    if (!w) return false;
    if (!path || !*path) return werr(w, "no output path");
    size_t align;
    if (!file_alignment(w, &align)) return false;
    /* no input to protect here: writing over a file that is being read (quantize IN IN)
     * is safe, since the reader's mapping keeps the old file alive past the rename */
    struct gguf_outfile of;
    if (!gguf_outfile_open(&of, path, NULL, w->err, sizeof w->err)) return false;
    struct out o = {.f = of.f, .pos = 0, .ok = true};
    if (!write_all(w, &o, align)) { /* a fill callback failed: its message is already in w->err */
        gguf_outfile_abort(&of);
        return false;
    }
    if (!o.ok) {
        werr(w, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        gguf_outfile_abort(&of);
        return false;
    }
    return gguf_outfile_commit(&of, w->err, sizeof w->err);
}

uint8_t *gguf_writer_header_bytes(struct gguf_writer *w, size_t *size) {
    size_t align;
    if (!file_alignment(w, &align)) return NULL;
    char *buf = NULL;
    size_t n = 0;
    struct out o = {.f = open_memstream(&buf, &n), .pos = 0, .ok = true};
    if (!o.f) {
        werr(w, "out of memory");
        return NULL;
    }
    write_header(w, &o, align);
    if (fclose(o.f) != 0 || !o.ok || n != o.pos) {
        free(buf);
        werr(w, "out of memory");
        return NULL;
    }
    *size = n;
    return (uint8_t *)buf;
}

bool gguf_write_copy(const struct gguf_file *g, const char *path, char *err, size_t errlen) {
    struct gguf_writer *w = gguf_writer_new();
    bool ok = w && gguf_writer_copy_kv(w, g);
    for (int64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct gguf_tensor_info *t = &g->tensors[i];
        char name[KT_MAX_NAME]; /* the reader bounds names below KT_MAX_NAME */
        gguf_fmt(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        ok = gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
    }
    ok = ok && gguf_writer_write(w, path);
    if (!ok) gguf_fmt(err, errlen, "%s", w ? gguf_writer_error(w) : "out of memory");
    gguf_writer_free(w);
    return ok;
}
