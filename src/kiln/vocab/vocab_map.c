/*
 * vocab_map.c - the two lookups tokenization lives on: token text -> id and
 * (left id, right id) -> BPE merge rank. Open addressing, sized once at load
 * and read-only afterwards (so concurrent tokenize calls need no locks).
 */
#include "vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t kv_hash_bytes(const char *s, size_t n) {
    /* FNV-1a, then a final mix so that the low bits used as slot index vary */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

bool kv_maps_build(struct kiln_vocab *v, char *err, size_t errlen) {
    size_t cap = pow2_at_least((size_t)v->n_tokens * 2 + 1);
    v->map.slots = malloc(cap * sizeof *v->map.slots);
    if (!v->map.slots) {
        snprintf(err, errlen, "out of memory for the token map");
        return false;
    }
    memset(v->map.slots, 0xff, cap * sizeof *v->map.slots);
    v->map.mask = cap - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const char *t = kv_text(v, id);
        size_t len = v->tok[id].text_len;
        size_t i = kv_hash_bytes(t, len) & v->map.mask;
        for (;;) {
            int32_t o = v->map.slots[i];
            if (o < 0) {
                v->map.slots[i] = id;
                break;
            }
            if (v->tok[o].text_len == len && !memcmp(kv_text(v, o), t, len)) {
                /* llama.cpp refuses such a vocabulary too (its map would lose an id) */
                snprintf(err, errlen, "tokenizer.ggml.tokens: tokens %d and %d have the same text", o, id);
                return false;
            }
            i = (i + 1) & v->map.mask;
        }
    }
    return true;
}

int32_t kv_find(const struct kiln_vocab *v, const char *s, size_t n) {
    if (!v->map.slots) return KILN_TOKEN_NULL;
    size_t i = kv_hash_bytes(s, n) & v->map.mask;
    for (;;) {
        int32_t o = v->map.slots[i];
        if (o < 0) return KILN_TOKEN_NULL;
        if (v->tok[o].text_len == n && !memcmp(kv_text(v, o), s, n)) return o;
        i = (i + 1) & v->map.mask;
    }
}

static uint64_t pair_key(int32_t l, int32_t r) { return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1; }

static size_t pair_slot(uint64_t k, size_t mask) {
    /* splitmix64's finalizer: ids are small and dense, every bit must move */
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return (size_t)k & mask;
}

bool kv_pairmap_init(struct kiln_vocab *v, size_t n) {
    size_t cap = pow2_at_least(n * 2 + 1);
    v->merges.keys = calloc(cap, sizeof *v->merges.keys);
    v->merges.ranks = malloc(cap * sizeof *v->merges.ranks);
    if (!v->merges.keys || !v->merges.ranks) return false;
    v->merges.mask = cap - 1;
    return true;
}

/* First occurrence wins, as in llama.cpp (a repeated merge keeps its first rank). */
bool kv_pairmap_add(struct kiln_vocab *v, int32_t left, int32_t right, int32_t rank) {
    uint64_t k = pair_key(left, right);
    size_t i = pair_slot(k, v->merges.mask);
    for (;;) {
        if (v->merges.keys[i] == 0) {
            v->merges.keys[i] = k;
            v->merges.ranks[i] = rank;
            return true;
        }
        if (v->merges.keys[i] == k) return true;
        i = (i + 1) & v->merges.mask;
    }
}

int32_t kv_merge_rank(const struct kiln_vocab *v, int32_t left, int32_t right) {
    if (!v->merges.keys || left < 0 || right < 0) return -1;
    uint64_t k = pair_key(left, right);
    size_t i = pair_slot(k, v->merges.mask);
    for (;;) {
        uint64_t o = v->merges.keys[i];
        if (o == 0) return -1;
        if (o == k) return v->merges.ranks[i];
        i = (i + 1) & v->merges.mask;
    }
}

void kv_maps_free(struct kiln_vocab *v) {
    free(v->map.slots);
    free(v->merges.keys);
    free(v->merges.ranks);
}
