/*
 * index.c - the name index of a GGUF file: an open-addressing hash table from
 * key or tensor name to its position, built once at open. The runtime looks up
 * every tensor by name, and files hold thousands, so lookup must not scan.
 * Building it also finds duplicate names in linear time.
 */
#include "gguf_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64-bit: names are short, and this is only an index, not a defence
 * against chosen collisions (a hostile file can at worst make open slower). */
static uint64_t hash_name(const char *p, size_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static bool same(struct gguf_str a, const char *p, size_t len) {
    return a.len == len && (len == 0 || memcmp(a.ptr, p, len) == 0);
}

bool gguf_index_build(struct gguf_index *ix, int64_t n, struct gguf_str (*name_of)(const void *, int64_t),
                      const void *ctx, int64_t *dup) {
    *dup = -1;
    ix->slots = NULL;
    ix->mask = 0;
    /* at most half full: probes stay short */
    size_t cap = 8;
    while (cap < (size_t)n * 2) {
        if (cap > SIZE_MAX / 2 / sizeof(uint64_t)) return false;
        cap *= 2;
    }
    ix->slots = calloc(cap, sizeof(uint64_t));
    if (!ix->slots) return false;
    ix->mask = cap - 1;
    for (int64_t i = 0; i < n; i++) {
        struct gguf_str s = name_of(ctx, i);
        size_t at = (size_t)hash_name(s.ptr, (size_t)s.len) & ix->mask;
        for (;; at = (at + 1) & ix->mask) {
            uint64_t v = ix->slots[at];
            if (v == 0) {
                ix->slots[at] = (uint64_t)i + 1;
                break;
            }
            if (same(name_of(ctx, (int64_t)v - 1), s.ptr, (size_t)s.len)) {
                *dup = i;
                return true;
            }
        }
    }
    return true;
}

int64_t gguf_index_find(const struct gguf_index *ix, const char *name, size_t len,
                        struct gguf_str (*name_of)(const void *, int64_t), const void *ctx) {
    if (!ix->slots || !name) return -1;
    for (size_t at = (size_t)hash_name(name, len) & ix->mask;; at = (at + 1) & ix->mask) {
        uint64_t v = ix->slots[at];
        if (v == 0) return -1;
        if (same(name_of(ctx, (int64_t)v - 1), name, len)) return (int64_t)v - 1;
    }
}

void gguf_index_free(struct gguf_index *ix) {
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}

void gguf_vfmt(char *buf, size_t len, const char *fmt, va_list ap) {
    if (!buf || len == 0) return;
    vsnprintf(buf, len, fmt, ap);
}

void gguf_fmt(char *buf, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gguf_vfmt(buf, len, fmt, ap);
    va_end(ap);
}
