/*
 * gguf.h - the GGUF file layer: a validated reader over a read-only mapping of
 * the file, and a writer.
 *
 * The reader checks everything before the caller sees it (lengths against the
 * bytes left, counts, types, shapes, alignment, tensor extents, duplicates), so
 * that after gguf_open() succeeds every accessor is safe on any input. Values
 * and tensor data are not copied: strings and tensor data point into the
 * mapping (strings are NOT NUL-terminated: use the length).
 *
 *   char err[256];
 *   struct gguf_file *g = gguf_open("model.gguf", err, sizeof err);
 *   if (!g) { fprintf(stderr, "%s\n", err); ... }
 *   uint32_t n_layer;
 *   if (!gguf_get_u32(g, "llama.block_count", &n_layer)) ... gguf_error(g) ...
 *   int64_t ti = gguf_find_tensor(g, "token_embd.weight");
 *   const struct gguf_tensor_info *info = gguf_tensor(g, ti);
 *   ... info->data points into the mapping ...
 *   gguf_close(g);
 */
#ifndef GGUF_H
#define GGUF_H

#include "kt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32

/* Value type ids as stored in the file. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT,
};
const char *gguf_type_name(enum gguf_type t);

/* A string in the file: ptr points into the mapping, len bytes, no terminator. */
struct gguf_str {
    const char *ptr;
    uint64_t len;
};

struct gguf_tensor_info {
    struct gguf_str name;
    int n_dims;
    int64_t ne[KT_MAX_DIMS]; /* unused dims are 1 */
    enum kt_type type;
    uint64_t offset;         /* relative to the data section */
    size_t size;             /* bytes (kt_row_size * rows) */
    const void *data;        /* into the mapping */
};

struct gguf_file;

/* ---- reader */

/* Open and validate; NULL on failure with a message in err naming the problem
 * and the byte offset where it was found. */
struct gguf_file *gguf_open(const char *path, char *err, size_t errlen);
/* Same over memory the caller owns and keeps alive (fuzzing, tests). */
struct gguf_file *gguf_open_memory(const void *data, size_t size, char *err, size_t errlen);
void gguf_close(struct gguf_file *g);

uint32_t gguf_version(const struct gguf_file *g);
size_t gguf_alignment(const struct gguf_file *g);
size_t gguf_data_offset(const struct gguf_file *g); /* start of the data section in the file */
const void *gguf_base(const struct gguf_file *g);   /* the whole file's bytes */
size_t gguf_size(const struct gguf_file *g);
/* Whether [p, p + n) lies in a read-only mapping of the file (not a read() copy):
 * pages there may be dropped and are read back from the file when touched. */
bool gguf_in_mapping(const struct gguf_file *g, const void *p, size_t n);
/* Hand back the whole pages of [p, p + n) when they lie in that mapping (a loader that
 * copied the bytes elsewhere); false, nothing done, otherwise. */
bool gguf_release_pages(const struct gguf_file *g, const void *p, size_t n);
/* Message of the last failed getter on this file. */
const char *gguf_error(const struct gguf_file *g);

/* metadata: keys by index 0..n_kv-1 in file order */
int64_t gguf_n_kv(const struct gguf_file *g);
int64_t gguf_find_key(const struct gguf_file *g, const char *key); /* -1 if absent */
struct gguf_str gguf_key(const struct gguf_file *g, int64_t i);
enum gguf_type gguf_kv_type(const struct gguf_file *g, int64_t i);
/* for arrays: element type and count (nested arrays: GGUF_TYPE_ARRAY) */
enum gguf_type gguf_arr_type(const struct gguf_file *g, int64_t i);
uint64_t gguf_arr_n(const struct gguf_file *g, int64_t i);

/* Typed getters by key: false if absent or stored with another type (message in gguf_error).
 * No implicit conversions: asking u32 for an i32 value fails. */
bool gguf_get_u8(const struct gguf_file *g, const char *key, uint8_t *out);
bool gguf_get_i8(const struct gguf_file *g, const char *key, int8_t *out);
bool gguf_get_u16(const struct gguf_file *g, const char *key, uint16_t *out);
bool gguf_get_i16(const struct gguf_file *g, const char *key, int16_t *out);
bool gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out);
bool gguf_get_i32(const struct gguf_file *g, const char *key, int32_t *out);
bool gguf_get_u64(const struct gguf_file *g, const char *key, uint64_t *out);
bool gguf_get_i64(const struct gguf_file *g, const char *key, int64_t *out);
bool gguf_get_f32(const struct gguf_file *g, const char *key, float *out);
bool gguf_get_f64(const struct gguf_file *g, const char *key, double *out);
bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out);
bool gguf_get_str(const struct gguf_file *g, const char *key, struct gguf_str *out);
/* Any integer type whose value fits in int64 (for hyper-parameters that converters store
 * as u32 or i32 or u64). Still fails for non-integers. */
bool gguf_get_int(const struct gguf_file *g, const char *key, int64_t *out);
/* f32 or f64 */
bool gguf_get_float(const struct gguf_file *g, const char *key, double *out);

/* Arrays by key index (from gguf_find_key). Element accessors check the element
 * type and bounds (false + message otherwise). Numeric arrays are stored
 * unaligned in the file; these copy out. */
bool gguf_arr_get_str(const struct gguf_file *g, int64_t kv, uint64_t idx, struct gguf_str *out);
bool gguf_arr_get_int(const struct gguf_file *g, int64_t kv, uint64_t idx, int64_t *out); /* any int type */
bool gguf_arr_get_float(const struct gguf_file *g, int64_t kv, uint64_t idx, double *out); /* f32/f64 */
/* Copy a whole array of elem type `type` into out (n = gguf_arr_n elements of that type's size). */
bool gguf_arr_copy(const struct gguf_file *g, int64_t kv, enum gguf_type type, void *out, uint64_t n);
/* Raw bytes of a scalar or array value (for printing nested arrays); NULL if i is out of range.
 * Strings: u64 length + bytes. Arrays: the elements only (after the element type and count), each
 * string element length-prefixed, each nested array with its own element type and count. */
const void *gguf_kv_data(const struct gguf_file *g, int64_t i, size_t *size);

/* tensors */
int64_t gguf_n_tensors(const struct gguf_file *g);
int64_t gguf_find_tensor(const struct gguf_file *g, const char *name); /* -1 if absent */
const struct gguf_tensor_info *gguf_tensor(const struct gguf_file *g, int64_t i);

/* ---- legacy files: GGML (magic 'lmgg'), GGMF v1 ('fmgg'), GGJT v1-v3 ('tjgg'), the
 * llama.cpp weight formats before GGUF. Opened as a llama GGUF description built in
 * memory (metadata and tensor infos synthesized, GGUF tensor names, SPM tokenizer);
 * tensor data still points into the legacy file's mapping (gguf_base), not copied.
 * gguf_open and gguf_open_memory accept them too, with the default options. */
#define GGUF_LEGACY_DEFAULT_EPS 5e-6  /* llama.cpp's converter's defaults */
#define GGUF_LEGACY_DEFAULT_CTX 2048
struct gguf_legacy_opts {
    int64_t gqa;      /* n_head / n_head_kv; 0: from the shape of layer 0's K projection */
    double eps;       /* RMS norm epsilon; 0: GGUF_LEGACY_DEFAULT_EPS */
    int64_t n_ctx;    /* context length; 0: GGUF_LEGACY_DEFAULT_CTX */
    const char *name; /* general.name; NULL: the file's name */
};
struct gguf_file *gguf_open_legacy(const char *path, const struct gguf_legacy_opts *o, char *err, size_t errlen);
struct gguf_file *gguf_open_legacy_memory(const void *data, size_t size, const struct gguf_legacy_opts *o,
                                          char *err, size_t errlen);
/* The legacy format a file was converted from ("GGJT v3"), or NULL for a GGUF file. */
const char *gguf_legacy_format(const struct gguf_file *g);
/* The legacy format named by the first bytes of the file at path, or NULL (not legacy,
 * unreadable): lets a tool say what it is about to convert before it opens it. */
const char *gguf_legacy_probe(const char *path);

/* ---- UTF-8 (strict: no overlongs, surrogates or code points above U+10FFFF) */

/* Length of the valid UTF-8 sequence at s[i..n), or 0 if the bytes there are not one. */
size_t gguf_utf8_seq(const char *s, size_t i, size_t n);
/* Length of the longest valid UTF-8 prefix of s[0..n): n when all of it is valid. */
size_t gguf_utf8_valid_len(const char *s, size_t n);

/* ---- output files
 * Every file kiln writes: a temporary beside the target (in its directory, so the
 * rename is atomic), renamed over it only at commit; a symlinked target is replaced
 * and the link kept (a dangling link's target is created; a looping link is refused);
 * a replaced file keeps its mode, a new one gets 0666 less the umask; an existing
 * device or FIFO is written directly. */
struct gguf_outfile {
    FILE *f;    /* write here between open and commit */
    char *path; /* the target (symlinks resolved) */
    char *tmp;  /* the temporary (NULL when writing to a device or FIFO) */
    int slot;   /* in the signal-cleanup table, -1 if none */
};
/* Refuses (false, message in err) a directory, and an output that is the same file as
 * input (same device and inode, through symlinks and hard links) when input is not NULL. */
bool gguf_outfile_open(struct gguf_outfile *o, const char *path, const char *input, char *err, size_t errlen);
/* Flush, fsync and rename into place; false with a message (and no file left) on any error. */
bool gguf_outfile_commit(struct gguf_outfile *o, char *err, size_t errlen);
/* Close and remove the temporary; safe after a failed open or commit. */
void gguf_outfile_abort(struct gguf_outfile *o);
/* Are a and b the same existing file (symlinks followed)? */
bool gguf_outfile_same(const char *a, const char *b);
/* False (message in err) when path is the same regular file as one of inputs[0..n)
 * (through symlinks and hard links; NULL entries skipped): writing it would lose that
 * input. For a command that reads several files, or whose writer is given no input. */
bool gguf_outfile_check_inputs(const char *path, const char *const *inputs, size_t n_inputs, char *err,
                               size_t errlen);
/* Unlink every temporary still open: async-signal-safe, for a SIGINT/SIGTERM handler
 * that then re-raises the signal. */
void gguf_outfile_remove_temps(void);

/* ---- writer */

struct gguf_writer;

struct gguf_writer *gguf_writer_new(void);
void gguf_writer_free(struct gguf_writer *w);
/* Setting a key twice replaces its value. All copy their arguments. */
bool gguf_writer_set_u8(struct gguf_writer *w, const char *key, uint8_t v);
bool gguf_writer_set_i8(struct gguf_writer *w, const char *key, int8_t v);
bool gguf_writer_set_u16(struct gguf_writer *w, const char *key, uint16_t v);
bool gguf_writer_set_i16(struct gguf_writer *w, const char *key, int16_t v);
bool gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
bool gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
bool gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
bool gguf_writer_set_i64(struct gguf_writer *w, const char *key, int64_t v);
bool gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
bool gguf_writer_set_f64(struct gguf_writer *w, const char *key, double v);
bool gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
bool gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v);
bool gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *v, size_t len);
/* array of n numeric elements of `type` (not STRING/ARRAY) */
bool gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_type type, const void *data, uint64_t n);
bool gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const struct gguf_str *strs, uint64_t n);
/* Copy every key/value of a reader (e.g. quantize keeps metadata), then override as needed. */
bool gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *g);
/* Drop key if present (true either way). A key set again after removal goes to the end,
 * as ggml's writer orders a value it replaces. */
bool gguf_writer_remove_key(struct gguf_writer *w, const char *key);
bool gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);
/* Add a tensor; data (kt_row_size(type, ne[0]) * rows bytes) is referenced, not copied:
 * it must stay valid until gguf_writer_write returns. */
bool gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum kt_type type, int n_dims,
                            const int64_t *ne, const void *data);
/* Streaming: a tensor whose bytes are produced while the file is written, so that
 * files larger than memory (quantized or synthetic models) never sit in memory.
 * fill writes rows [row0, row0 + nrows) into buf (kt_row_size(type, ne[0]) bytes
 * per row, rows counted over ne[1..3]); it is called in row order with slabs of
 * at most GGUF_FILL_SLAB bytes (at least one row) and returns false with a
 * message in err to abandon the write (no file is left behind). */
#define GGUF_FILL_SLAB ((size_t)32 << 20)
typedef bool (*gguf_fill_fn)(void *user, int64_t row0, int64_t nrows, void *buf, char *err, size_t errlen);
bool gguf_writer_add_tensor_fill(struct gguf_writer *w, const char *name, enum kt_type type, int n_dims,
                                 const int64_t *ne, gguf_fill_fn fill, void *user);
/* Write to path (via a temporary file renamed into place, so a failure never leaves a half file). */
bool gguf_writer_write(struct gguf_writer *w, const char *path);
const char *gguf_writer_error(const struct gguf_writer *w);
/* Write an opened file (a GGUF, or a legacy file converted in memory) to path as GGUF:
 * every key/value and tensor, bytes unchanged. False with a message in err. */
bool gguf_write_copy(const struct gguf_file *g, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GGUF_H */
