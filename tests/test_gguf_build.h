/*
 * test_gguf_build.h - crafts GGUF bytes by hand for the gguf tests, field by
 * field as the format describes them, independently of kiln's writer, so the
 * tests can make any malformed file and check the writer's bytes.
 */
#ifndef TEST_GGUF_BUILD_H
#define TEST_GGUF_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tb {
    uint8_t *p;
    size_t n, cap;
};

static inline void tb_bytes(struct tb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) abort();
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static inline void tb_u8(struct tb *b, uint8_t v) {
    tb_bytes(b, &v, 1);
}
static inline void tb_u32(struct tb *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    tb_bytes(b, x, 4);
}
static inline void tb_u64(struct tb *b, uint64_t v) {
    tb_u32(b, (uint32_t)v);
    tb_u32(b, (uint32_t)(v >> 32));
}
static inline void tb_str(struct tb *b, const char *s) {
    tb_u64(b, strlen(s));
    tb_bytes(b, s, strlen(s));
}
static inline void tb_header(struct tb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    tb_bytes(b, "GGUF", 4);
    tb_u32(b, version);
    tb_u64(b, n_tensors);
    tb_u64(b, n_kv);
}
/* value type ids, as in the format */
enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static inline void tb_kv_u32(struct tb *b, const char *key, uint32_t v) {
    tb_str(b, key);
    tb_u32(b, T_U32);
    tb_u32(b, v);
}
static inline void tb_kv_str(struct tb *b, const char *key, const char *v) {
    tb_str(b, key);
    tb_u32(b, T_STR);
    tb_str(b, v);
}
/* A tensor info: name, n_dims, ne[0..n_dims), type, offset. */
static inline void tb_tensor(struct tb *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type,
                      uint64_t offset) {
    tb_str(b, name);
    tb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) tb_u64(b, (uint64_t)ne[i]);
    tb_u32(b, type);
    tb_u64(b, offset);
}
static inline void tb_pad(struct tb *b, size_t align) {
    while (b->n % align) tb_u8(b, 0);
}
static inline void tb_fill(struct tb *b, size_t n, uint8_t v) {
    for (size_t i = 0; i < n; i++) tb_u8(b, (uint8_t)(v + i));
}

#endif
