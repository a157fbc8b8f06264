/*
 * reader.c - opens a GGUF file (mmap, or read() where mapping fails) and
 * validates all of it before anyone sees it: a cursor that checks every length
 * against the bytes left, counts bounded by what the remaining bytes could hold
 * before anything is allocated for them, then shapes, types, alignment and the
 * extent of every tensor. Every failure names the problem and its byte offset.
 */
#include "gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest encodings, used to bound counts before allocating for them:
 * a key/value is key length (8) + at least one key byte + type (4) + a 1-byte value;
 * a tensor info is name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8). */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_INFO_BYTES 32
#define ARRAY_HEADER_BYTES 12 /* element type (4) + count (8) */

/* Grow *arr (of elem-byte elements) so that index i fits; doubling keeps memory
 * proportional to what has actually been parsed, never to a claimed count. */
static bool grow(void **arr, size_t *cap, size_t i, size_t elem) {
    if (i < *cap) return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    if (ncap > SIZE_MAX / elem) return false;
    void *p = realloc(*arr, ncap * elem);
    if (!p) return false;
    *arr = p;
    *cap = ncap;
    return true;
}

/* Validate one value of type t at the cursor and move past it. For a top-level
 * string array, strs (n elements) receives each element. */
static bool parse_value(struct gguf_cursor *c, enum gguf_type t, int depth, const char *key,
                        struct gguf_str *strs);

static bool parse_array(struct gguf_cursor *c, int depth, const char *key, enum gguf_type *elem_out,
                        uint64_t *n_out, struct gguf_str **strs_out) {
    size_t at = c->pos;
    uint32_t et;
    uint64_t n;
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return gguf_cur_fail(c, at, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_ARRAY_DEPTH);
    if (!gguf_cur_u32(c, &et, "array element type")) return false;
    if (et >= GGUF_TYPE_COUNT) return gguf_cur_fail(c, at, "key '%s': unknown array element type %u", key, et);
    size_t n_at = c->pos;
    if (!gguf_cur_u64(c, &n, "array length")) return false;
    enum gguf_type e = (enum gguf_type)et;
    size_t min = e == GGUF_TYPE_STRING ? 8 : e == GGUF_TYPE_ARRAY ? ARRAY_HEADER_BYTES : gguf_scalar_size(e);
    if (n > gguf_cur_left(c) / min)
        return gguf_cur_fail(c, n_at,
                    "key '%s': array length %llu (%s, at least %zu bytes each) exceeds the %zu bytes left",
                    key, (unsigned long long)n, gguf_type_name(e), min, gguf_cur_left(c));
    if (elem_out) *elem_out = e;
    if (n_out) *n_out = n;
    if (e != GGUF_TYPE_STRING && e != GGUF_TYPE_ARRAY) { /* fixed-size elements: already bounded */
        c->pos += (size_t)(n * min);
        return true;
    }
    struct gguf_str *strs = NULL;
    if (strs_out && e == GGUF_TYPE_STRING && n > 0) {
        strs = malloc((size_t)n * sizeof *strs); /* n <= bytes left / 8: bounded by the file */
        if (!strs) return gguf_cur_fail(c, at, "key '%s': out of memory for %llu strings", key, (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!parse_value(c, e, depth + 1, key, strs ? &strs[i] : NULL)) {
            free(strs);
            return false;
        }
    }
    if (strs_out) *strs_out = strs;
    return true;
}

static bool parse_value(struct gguf_cursor *c, enum gguf_type t, int depth, const char *key,
                        struct gguf_str *str) {
    switch (t) {
    case GGUF_TYPE_STRING: {
        struct gguf_str s;
        if (!gguf_cur_str(c, &s, "string value")) return false;
        if (str) *str = s;
        return true;
    }
    case GGUF_TYPE_ARRAY:
        return parse_array(c, depth, key, NULL, NULL, NULL);
    default: {
        size_t n = gguf_scalar_size(t);
        if (n == 0) return gguf_cur_fail(c, c->pos, "key '%s': unknown value type %d", key, (int)t);
        if (!gguf_cur_need(c, n, gguf_type_name(t))) return false;
        c->pos += n;
        return true;
    }
    }
}

/* Where an entry starts in the file: its name's length field. */
static size_t entry_at(const struct gguf_file *g, struct gguf_str name) {
    return (size_t)((const uint8_t *)name.ptr - g->base) - 8;
}

static bool parse_header(struct gguf_file *g, struct gguf_cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    if (!gguf_cur_need(c, 4, "magic")) return false;
    if (memcmp(c->base, GGUF_MAGIC, 4) != 0) {
        char m[5];
        for (int i = 0; i < 4; i++) m[i] = c->base[i] >= 0x20 && c->base[i] < 0x7f ? (char)c->base[i] : '?';
        m[4] = 0;
        return gguf_cur_fail(c, 0, "bad magic '%s' (expected 'GGUF')", m);
    }
    c->pos = 4;
    if (!gguf_cur_u32(c, &g->version, "version")) return false;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return gguf_cur_fail(c, 4,
                        "unsupported GGUF version 1 (the obsolete v1 layout; versions 2 and 3 are read)");
        if ((g->version & 0xffff) == 0)
            return gguf_cur_fail(c, 4, "unsupported GGUF version %u (a big-endian file? versions 2 and 3 are read)",
                        g->version);
        return gguf_cur_fail(c, 4, "unsupported GGUF version %u (versions 2 and 3 are read)", g->version);
    }
    /* v2 and v3 share the layout (u64 counts and lengths); v3 only allowed big-endian files */
    if (!gguf_cur_u64(c, n_tensors, "tensor count")) return false;
    if (!gguf_cur_u64(c, n_kv, "key/value count")) return false;
    if (*n_kv > gguf_cur_left(c) / MIN_KV_BYTES)
        return gguf_cur_fail(c, 16, "key/value count %llu is more than the %zu bytes left can hold",
                    (unsigned long long)*n_kv, gguf_cur_left(c));
    if (*n_tensors > gguf_cur_left(c) / MIN_TENSOR_INFO_BYTES)
        return gguf_cur_fail(c, 8, "tensor count %llu is more than the %zu bytes left can hold",
                    (unsigned long long)*n_tensors, gguf_cur_left(c));
    return true;
}

static bool parse_kvs(struct gguf_file *g, struct gguf_cursor *c, uint64_t n_kv) {
    size_t cap = 0;
    char name[80];
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = c->pos;
        struct gguf_kv kv = {0};
        if (!gguf_cur_str(c, &kv.key, "key")) return false;
        if (kv.key.len == 0) return gguf_cur_fail(c, at, "key %llu is empty", (unsigned long long)i);
        gguf_printable(kv.key, name, sizeof name);
        /* keys are identifiers and the spec makes them UTF-8: anything else is damage. String
         * VALUES are not checked: real vocabularies carry token texts that are not whole UTF-8
         * (pieces of a character), which the tokenizer handles and the tools escape */
        size_t valid = gguf_utf8_valid_len(kv.key.ptr, (size_t)kv.key.len);
        if (valid < kv.key.len) return gguf_cur_fail(c, at + 8 + valid, "key '%s' is not valid UTF-8", name);
        size_t type_at = c->pos;
        uint32_t t;
        if (!gguf_cur_u32(c, &t, "value type")) return false;
        if (t >= GGUF_TYPE_COUNT) return gguf_cur_fail(c, type_at, "key '%s' has unknown value type %u", name, t);
        kv.type = (enum gguf_type)t;
        if (kv.type == GGUF_TYPE_ARRAY) {
            size_t start = c->pos;
            if (!parse_array(c, 0, name, &kv.arr_type, &kv.arr_n, &kv.strs)) return false;
            kv.val = c->base + start + ARRAY_HEADER_BYTES;
            kv.val_size = c->pos - start - ARRAY_HEADER_BYTES;
        } else {
            size_t start = c->pos;
            if (!parse_value(c, kv.type, 0, name, NULL)) return false;
            kv.val = c->base + start;
            kv.val_size = c->pos - start;
        }
        if (!grow((void **)&g->kv, &cap, (size_t)g->n_kv, sizeof *g->kv)) {
            free(kv.strs);
            return gguf_cur_fail(c, at, "out of memory for key/value %llu", (unsigned long long)i);
        }
        g->kv[g->n_kv++] = kv;
    }
    int64_t dup;
    if (!gguf_index_build(&g->kv_index, g->n_kv, gguf_kv_name_of, g->kv, &dup))
        return gguf_cur_fail(c, c->pos, "out of memory for the key index");
    if (dup >= 0)
        return gguf_cur_fail(c, entry_at(g, g->kv[dup].key), "duplicate key '%s'",
                    gguf_printable(g->kv[dup].key, name, sizeof name));

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = gguf_index_find(&g->kv_index, "general.alignment", strlen("general.alignment"),
                                 gguf_kv_name_of, g->kv);
    if (ai >= 0) {
        const struct gguf_kv *kv = &g->kv[ai];
        size_t at = entry_at(g, kv->key);
        if (kv->type != GGUF_TYPE_UINT32)
            return gguf_cur_fail(c, at, "general.alignment must be u32, not %s", gguf_type_name(kv->type));
        uint32_t a = gguf_le32(kv->val);
        if (a == 0 || (a & (a - 1)) != 0)
            return gguf_cur_fail(c, at, "general.alignment %u is not a non-zero power of two", a);
        g->alignment = a;
    }
    return true;
}

/* One tensor info: name, n_dims, ne[], type, offset. Checks everything that
 * does not depend on the other tensors or on where the data section starts. */
static bool parse_tensor_info(struct gguf_file *g, struct gguf_cursor *c, struct gguf_tensor_info *t) {
    size_t at = c->pos;
    char name[80];
    memset(t, 0, sizeof *t);
    if (!gguf_cur_str(c, &t->name, "tensor name")) return false;
    gguf_printable(t->name, name, sizeof name);
    size_t valid = gguf_utf8_valid_len(t->name.ptr, (size_t)t->name.len); /* a name, like a key */
    if (valid < t->name.len) return gguf_cur_fail(c, at + 8 + valid, "tensor name '%s' is not valid UTF-8", name);
    if (t->name.len >= KT_MAX_NAME)
        return gguf_cur_fail(c, at, "tensor name '%s' is %llu bytes (at most %d)", name,
                    (unsigned long long)t->name.len, KT_MAX_NAME - 1);
    size_t dims_at = c->pos;
    uint32_t n_dims;
    if (!gguf_cur_u32(c, &n_dims, "tensor n_dims")) return false;
    if (n_dims < 1 || n_dims > KT_MAX_DIMS)
        return gguf_cur_fail(c, dims_at, "tensor '%s' has n_dims %u (must be 1..%d)", name, n_dims, KT_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int j = 0; j < KT_MAX_DIMS; j++) {
        t->ne[j] = 1;
        if (j >= t->n_dims) continue;
        size_t ne_at = c->pos;
        uint64_t v;
        if (!gguf_cur_u64(c, &v, "tensor dimension")) return false;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return gguf_cur_fail(c, ne_at, "tensor '%s' dimension %d is %lld (must be positive)", name, j,
                        (long long)v);
        t->ne[j] = (int64_t)v;
        if (nel > INT64_MAX / t->ne[j])
            return gguf_cur_fail(c, ne_at, "tensor '%s': element count overflows at dimension %d", name, j);
        nel *= t->ne[j];
    }
    size_t type_at = c->pos;
    uint32_t type;
    if (!gguf_cur_u32(c, &type, "tensor type")) return false;
    if (type >= KT_TYPE_COUNT || !kt_type_is_valid((int)type))
        return gguf_cur_fail(c, type_at, "tensor '%s' has unknown type id %u", name, type);
    t->type = (enum kt_type)type;
    int64_t blck = kt_blck_size(t->type);
    if (blck <= 0 || t->ne[0] % blck != 0)
        return gguf_cur_fail(c, type_at, "tensor '%s': row length %lld is not a multiple of %s's block size %lld",
                    name, (long long)t->ne[0], kt_type_name(t->type), (long long)blck);
    uint64_t row = (uint64_t)(t->ne[0] / blck); /* blocks per row */
    size_t tsize = kt_type_size(t->type);
    uint64_t rows = (uint64_t)(nel / t->ne[0]);
    if (tsize == 0 || row > SIZE_MAX / tsize || row * tsize > SIZE_MAX / rows)
        return gguf_cur_fail(c, type_at, "tensor '%s': byte size overflows", name);
    t->size = (size_t)(row * tsize * rows);
    size_t off_at = c->pos;
    if (!gguf_cur_u64(c, &t->offset, "tensor offset")) return false;
    if (t->offset % g->alignment != 0)
        return gguf_cur_fail(c, off_at, "tensor '%s': offset %llu is not a multiple of the alignment %zu", name,
                    (unsigned long long)t->offset, g->alignment);
    return true;
}

/* Byte position of a tensor info's offset field (for messages about extents). */
static size_t offset_field_at(const struct gguf_file *g, const struct gguf_tensor_info *t) {
    return entry_at(g, t->name) + 8 + (size_t)t->name.len + 4 + 8 * (size_t)t->n_dims + 4;
}

struct span {
    uint64_t offset;
    int64_t i;
};
static int by_offset(const void *a, const void *b) {
    uint64_t x = ((const struct span *)a)->offset, y = ((const struct span *)b)->offset;
    return x < y ? -1 : x > y;
}

static bool parse_tensors(struct gguf_file *g, struct gguf_cursor *c, uint64_t n_tensors, bool external_data) {
    size_t cap = 0;
    char name[80], name2[80];
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (!grow((void **)&g->tensors, &cap, (size_t)g->n_tensors, sizeof *g->tensors))
            return gguf_cur_fail(c, c->pos, "out of memory for tensor info %llu", (unsigned long long)i);
        if (!parse_tensor_info(g, c, &g->tensors[g->n_tensors])) return false;
        g->n_tensors++;
    }
    int64_t dup;
    if (!gguf_index_build(&g->tensor_index, g->n_tensors, gguf_tensor_name_of, g->tensors, &dup))
        return gguf_cur_fail(c, c->pos, "out of memory for the tensor index");
    if (dup >= 0)
        return gguf_cur_fail(c, entry_at(g, g->tensors[dup].name), "duplicate tensor name '%s'",
                    gguf_printable(g->tensors[dup].name, name, sizeof name));

    /* the data section starts at the next multiple of the alignment */
    size_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    if (g->n_tensors == 0 || external_data) { /* vocabulary-only files may end before the padding */
        g->data_offset = pad <= gguf_cur_left(c) ? c->pos + pad : c->size;
        return true;
    }
    if (pad > gguf_cur_left(c))
        return gguf_cur_fail(
            c, c->pos,
            "truncated: the data section would start at byte %zu, past the end of the file (%zu bytes)",
            c->pos + pad, c->size);
    g->data_offset = c->pos + pad;
    size_t data_bytes = c->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor_info *t = &g->tensors[i];
        if (t->offset > data_bytes || t->size > data_bytes - t->offset)
            return gguf_cur_fail(c, offset_field_at(g, t),
                        "tensor '%s': data [%llu, %llu) of the data section runs past the end of the file "
                        "(the data section has %zu bytes)",
                        gguf_printable(t->name, name, sizeof name), (unsigned long long)t->offset,
                        (unsigned long long)t->offset + t->size, data_bytes);
        t->data = g->base + g->data_offset + t->offset;
    }
    /* no two tensors may share bytes: sort by offset, compare neighbours */
    struct span *order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return gguf_cur_fail(c, c->pos, "out of memory checking tensor overlap");
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = (struct span){g->tensors[i].offset, i};
    qsort(order, (size_t)g->n_tensors, sizeof *order, by_offset);
    bool ok = true;
    for (int64_t i = 0; ok && i + 1 < g->n_tensors; i++) {
        const struct gguf_tensor_info *a = &g->tensors[order[i].i], *b = &g->tensors[order[i + 1].i];
        if (a->offset + a->size > b->offset)
            ok = gguf_cur_fail(c, offset_field_at(g, b), "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                      gguf_printable(a->name, name, sizeof name), (unsigned long long)a->offset,
                      (unsigned long long)(a->offset + a->size), gguf_printable(b->name, name2, sizeof name2),
                      (unsigned long long)b->offset, (unsigned long long)(b->offset + b->size));
    }
    free(order);
    return ok;
}

struct gguf_file *gguf_parse(const void *data, size_t size, bool external_data, char *err, size_t errlen) {
    struct gguf_file *g = calloc(1, sizeof *g);
    char *gerr = calloc(1, GGUF_ERRLEN);
    if (!g || !gerr) {
        free(g);
        free(gerr);
        gguf_fmt(err, errlen, "out of memory");
        return NULL;
    }
    g->err = gerr;
    g->base = data;
    g->size = size;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    struct gguf_cursor c = {.base = data, .size = size, .pos = 0, .err = err, .errlen = errlen};
    uint64_t n_tensors, n_kv;
    if (!parse_header(g, &c, &n_tensors, &n_kv) || !parse_kvs(g, &c, n_kv) ||
        !parse_tensors(g, &c, n_tensors, external_data)) {
        gguf_close(g);
        return NULL;
    }
    return g;
}

struct gguf_file *gguf_open_memory(const void *data, size_t size, char *err, size_t errlen) {
    if (!data && size) {
        gguf_fmt(err, errlen, "no data");
        return NULL;
    }
    static const uint8_t empty[1];
    if (data && gguf_legacy_magic(data, size)) return gguf_legacy_parse(data, size, NULL, "legacy", err, errlen);
    return gguf_parse(data ? data : empty, size, false, err, errlen);
}

struct gguf_file *gguf_open_legacy_memory(const void *data, size_t size, const struct gguf_legacy_opts *o,
                                          char *err, size_t errlen) {
    if (!data || !gguf_legacy_magic(data, size)) {
        gguf_fmt(err, errlen, "not a legacy GGML/GGMF/GGJT file (no 'lmgg', 'fmgg' or 'tjgg' magic at byte 0)");
        return NULL;
    }
    return gguf_legacy_parse(data, size, o, "legacy", err, errlen);
}

/* Whole file by read(): for files that cannot be mapped (pipes, some file systems). */
static void *read_all(int fd, size_t *size) {
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        if (got == 0) {
            *size = n;
            return buf;
        }
        n += (size_t)got;
    }
    free(buf);
    return NULL;
}

/* Map (or read) a whole file: its bytes in *base, *map or *owned set for release. */
static bool load_file(const char *path, void **map, void **owned, size_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
    if (fd < 0) {
        gguf_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    *map = NULL;
    *owned = NULL;
    *size = 0;
    bool have_st = fstat(fd, &st) == 0;
    if (have_st && S_ISDIR(st.st_mode)) {
        close(fd);
        gguf_fmt(err, errlen, "cannot open %s: is a directory", path);
        return false;
    }
    /* a device or FIFO has no end to trust (/dev/zero would be read into memory forever) */
    if (have_st && !S_ISREG(st.st_mode)) {
        close(fd);
        gguf_fmt(err, errlen, "cannot open %s: not a regular file (a GGUF model must be a file)", path);
        return false;
    }
    if (have_st && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
        *size = (size_t)st.st_size;
        *map = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (*map == MAP_FAILED) *map = NULL;
    }
    if (!*map) {
        *owned = read_all(fd, size);
        if (!*owned) {
            int e = errno;
            close(fd);
            gguf_fmt(err, errlen, "cannot read %s: %s", path, strerror(e ? e : ENOMEM));
            return false;
        }
    }
    close(fd);
    return true;
}

/* legacy: 0 GGUF or legacy (legacy with o's settings), 1 legacy only */
static struct gguf_file *open_path(const char *path, const struct gguf_legacy_opts *o, bool legacy_only,
                                   char *err, size_t errlen) {
    void *map, *owned;
    size_t size;
    if (!load_file(path, &map, &owned, &size, err, errlen)) return NULL;
    const uint8_t *base = map ? map : owned;
    struct gguf_file *g;
    if (gguf_legacy_magic(base, size)) {
        const char *slash = strrchr(path, '/');
        g = gguf_legacy_parse(base, size, o, slash ? slash + 1 : path, err, errlen);
    } else if (legacy_only) {
        g = NULL;
        if (size >= 4 && !memcmp(base, GGUF_MAGIC, 4))
            gguf_fmt(err, errlen, "%s is already a GGUF file", path);
        else
            gguf_fmt(err, errlen, "not a legacy GGML/GGMF/GGJT file (no 'lmgg', 'fmgg' or 'tjgg' magic at byte 0)");
    } else {
        g = gguf_parse(base, size, false, err, errlen);
    }
    if (!g) {
        if (map) munmap(map, size);
        free(owned);
        return NULL;
    }
    g->map = map;
    g->map_size = size;
    g->owned = owned;
    return g;
}

struct gguf_file *gguf_open(const char *path, char *err, size_t errlen) {
    return open_path(path, NULL, false, err, errlen);
}

struct gguf_file *gguf_open_legacy(const char *path, const struct gguf_legacy_opts *o, char *err, size_t errlen) {
    return open_path(path, o, true, err, errlen);
}

const char *gguf_legacy_format(const struct gguf_file *g) {
    return g->legacy[0] ? g->legacy : NULL;
}

void gguf_close(struct gguf_file *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) free(g->kv[i].strs);
    free(g->kv);
    free(g->tensors);
    gguf_index_free(&g->kv_index);
    gguf_index_free(&g->tensor_index);
    if (g->map) munmap(g->map, g->map_size);
    free(g->owned);
    free(g->meta);
    free(g->data_copy);
    free(g->err);
    free(g);
}
