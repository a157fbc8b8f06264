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
    void *map;   /* mmap'ed region to munmap, or NULL */
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
};

#define GGUF_ERRLEN 1024 /* room for a long path and the reason after it */

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

/* Format into a caller's buffer (NULL or 0 length: nothing). */
void gguf_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void gguf_vfmt(char *buf, size_t len, const char *fmt, va_list ap);

#endif
