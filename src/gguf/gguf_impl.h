/*
 * gguf_impl.h - private to src/gguf: the parsed form of a GGUF file that the
 * reader (reader.c) builds once at open and the accessors (access.c) read, and
 * the name index (index.c) that makes key and tensor lookup O(1).
 */
#ifndef GGUF_IMPL_H
#define GGUF_IMPL_H

#include "gguf.h"

#include <stdarg.h>

/* Deepest nesting of arrays the reader accepts: real files use none (ggml rejects
 * nested arrays); the limit keeps validation's recursion bounded on hostile input. */
#define GGUF_MAX_ARRAY_DEPTH 8

/* One metadata entry; every pointer is into the file's bytes. */
struct gguf_kv {
    struct gguf_str key;
    enum gguf_type type;     /* GGUF_TYPE_ARRAY for arrays */
    enum gguf_type arr_type; /* element type (arrays only) */
    uint64_t arr_n;          /* element count (arrays only) */
    const uint8_t *val;      /* scalar value, or the first array element */
    size_t val_size;         /* bytes of the value (arrays: of all elements) */
    struct gguf_str *strs;   /* string arrays: each element, indexed at open (owned) */
};

/* Open-addressing hash from a name to an index (slots hold index + 1, 0 = empty). */
struct gguf_index {
    uint64_t *slots;
    size_t mask; /* n_slots - 1 (a power of two) */
};

struct gguf_file {
    const uint8_t *base;
    size_t size;
    void *map;   /* mmap'ed region to munmap (map_size bytes), or NULL */
    size_t map_size;
    void *owned; /* read() fallback buffer to free, or NULL */
    uint32_t version;
    size_t alignment;
    size_t data_offset;

    struct gguf_kv *kv;
    int64_t n_kv;
    struct gguf_tensor_info *tensors;
    int64_t n_tensors;
    struct gguf_index kv_index, tensor_index;

    char *err; /* last getter failure (separate allocation so const accessors can set it) */

    /* Legacy files (legacy.c): the metadata and tensor infos are a synthesized GGUF
     * header in meta (owned, the kv strings point into it), tensor data points into
     * base, the legacy file's own bytes. legacy names the format ("GGJT v3"), or is
     * empty for a GGUF file. */
    void *meta;
    void *data_copy; /* GGML/GGMF data is not aligned for mapping: base is this aligned copy */
    char legacy[16];
};

#define GGUF_ERRLEN 1024 /* room for a long path and the reason after it */

/* The bytes a writer would put before its data section (header, metadata, tensor
 * infos, padding), malloc'd: the metadata of a file whose tensor data lives
 * elsewhere (legacy.c). NULL with the message in gguf_writer_error. */
uint8_t *gguf_writer_header_bytes(struct gguf_writer *w, size_t *size);

/* Byte size of a scalar of type t (0 for STRING, ARRAY and unknown ids). */
size_t gguf_scalar_size(enum gguf_type t);

/* Name index: build over n names (returns the index of the first duplicate
 * in dup, or -1; false only when out of memory), look up, free. */
bool gguf_index_build(struct gguf_index *ix, int64_t n, struct gguf_str (*name_of)(const void *, int64_t),
                      const void *ctx, int64_t *dup);
int64_t gguf_index_find(const struct gguf_index *ix, const char *name, size_t len,
                        struct gguf_str (*name_of)(const void *, int64_t), const void *ctx);
void gguf_index_free(struct gguf_index *ix);
/* name_of callbacks for the two indexes (ctx: the kv or tensor array) */
struct gguf_str gguf_kv_name_of(const void *ctx, int64_t i);
struct gguf_str gguf_tensor_name_of(const void *ctx, int64_t i);

/* A read position over untrusted bytes (cursor.c); err receives failures. */
struct gguf_cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
    char *err;
    size_t errlen;
};
/* Message "<fmt> at byte <at>" into c->err; returns false. */
bool gguf_cur_fail(struct gguf_cursor *c, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t gguf_cur_left(const struct gguf_cursor *c);
bool gguf_cur_need(struct gguf_cursor *c, size_t n, const char *what); /* n bytes left, else "truncated" */
bool gguf_cur_u32(struct gguf_cursor *c, uint32_t *v, const char *what);
bool gguf_cur_u64(struct gguf_cursor *c, uint64_t *v, const char *what);
bool gguf_cur_str(struct gguf_cursor *c, struct gguf_str *s, const char *what); /* u64 length + bytes */
uint32_t gguf_le32(const uint8_t *p);
uint64_t gguf_le64(const uint8_t *p);
/* A name for messages: printable, cut short (names in files are untrusted bytes). */
const char *gguf_printable(struct gguf_str s, char *buf, size_t n);

/* Parse and validate a GGUF image. With external_data the image ends at the data
 * section (legacy.c's synthesized header): tensor extents are not checked against it
 * and tensor data is left NULL for the caller to set. */
struct gguf_file *gguf_parse(const void *data, size_t size, bool external_data, char *err, size_t errlen);

/* A legacy file (GGML/GGMF/GGJT) as a GGUF description over its bytes: NULL with a
 * message naming the problem and its offset. o NULL: the defaults. Sets everything
 * but map/owned, which stay the caller's until it attaches them. */
bool gguf_legacy_magic(const void *data, size_t size);
struct gguf_file *gguf_legacy_parse(const uint8_t *data, size_t size, const struct gguf_legacy_opts *o,
                                    const char *default_name, char *err, size_t errlen);

/* Format into a caller's buffer (NULL or 0 length: nothing). */
void gguf_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void gguf_vfmt(char *buf, size_t len, const char *fmt, va_list ap);

#endif
