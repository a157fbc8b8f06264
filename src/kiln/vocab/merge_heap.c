/*
 * merge_heap.c - the priority queue of candidate merges that both merge loops
 * (SPM in tok_spm.c, BPE in tok_bpe.c) drain: a binary heap of adjacent symbol
 * pairs, lowest key first, ties to the leftmost pair (llama.cpp's order).
 */
#include "vocab_impl.h"

#include <stdlib.h>

static bool before(const struct kv_merge *a, const struct kv_merge *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool kv_merge_push(struct kv_merge_heap *h, struct kv_merge m) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct kv_merge *q = realloc(h->p, cap * sizeof *q);
        if (!q) return false;
        h->p = q;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&m, &h->p[parent])) break;
        h->p[i] = h->p[parent];
        i = parent;
    }
    h->p[i] = m;
    return true;
}

struct kv_merge kv_merge_pop(struct kv_merge_heap *h) {
    struct kv_merge top = h->p[0], last = h->p[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->p[c + 1], &h->p[c])) c++;
        if (!before(&h->p[c], &last)) break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (h->n) h->p[i] = last;
    return top;
}
