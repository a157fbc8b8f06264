/*
 * tok_spm.c - SentencePiece-style tokenization (model "llama"), as llama.cpp
 * does it: the text (already ▁-escaped) is split into UTF-8 characters, then
 * the adjacent pair whose concatenation is the highest-scoring token is merged,
 * again and again (ties: leftmost first). Pieces that are not tokens fall back
 * to <0xXX> byte tokens, or to the unknown token when the vocab has none.
 */
#include "vocab_impl.h"

#include <stdlib.h>

struct sym {
    int prev, next;
    size_t off, n;
};
struct bigram {
    int left, right;
    float score;
    size_t size;
};

/* max-heap: higher score first, then the leftmost */
static bool before(const struct bigram *a, const struct bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct heap {
    struct bigram *p;
    size_t n, cap;
};

static bool heap_push(struct heap *h, struct bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct bigram *q = realloc(h->p, cap * sizeof *q);
        if (!q) return false;
        h->p = q;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &h->p[parent])) break;
        h->p[i] = h->p[parent];
        i = parent;
    }
    h->p[i] = b;
    return true;
}

static struct bigram heap_pop(struct heap *h) {
    struct bigram top = h->p[0], last = h->p[--h->n];
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

int32_t kv_byte_token(const struct kiln_vocab *v, uint8_t b) {
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = kv_find(v, buf, 6);
    if (id >= 0) return id;
    char c = (char)b;
    return kv_find(v, &c, 1);
}

static bool try_add(const struct kiln_vocab *v, const char *text, const struct sym *s, int l, int r, struct heap *h) {
    if (l < 0 || r < 0) return true;
    size_t size = s[l].n + s[r].n; /* adjacent symbols are adjacent bytes */
    int32_t id = kv_find(v, text + s[l].off, size);
    if (id < 0) return true;
    struct bigram b = {l, r, v->tok[id].score, size};
    return heap_push(h, b);
}

bool kv_tokenize_spm(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out) {
    if (len == 0) return true;
    struct sym *s = malloc(len * sizeof *s);
    struct heap h = {0};
    bool ok = s != NULL;
    int n = 0;
    for (size_t off = 0; ok && off < len;) {
        size_t l = kv_utf8_len((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        s[n] = (struct sym){n - 1, off + l == len ? -1 : n + 1, off, l};
        off += l;
        n++;
    }
    for (int i = 1; ok && i < n; i++) ok = try_add(v, text, s, i - 1, i, &h);
    while (ok && h.n) {
        struct bigram b = heap_pop(&h);
        struct sym *L = &s[b.left], *R = &s[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = b.left;
        ok = try_add(v, text, s, L->prev, b.left, &h) && try_add(v, text, s, b.left, L->next, &h);
    }
    /* Every merged symbol is a token, so llama.cpp's re-segmentation through its
     * merge map reduces to: a token, or its bytes. */
    for (int i = 0; ok && n > 0 && i != -1; i = s[i].next) {
        int32_t id = kv_find(v, text + s[i].off, s[i].n);
        if (id >= 0) {
            ok = kv_ids_push(out, id);
            continue;
        }
        for (size_t j = 0; ok && j < s[i].n; j++) {
            int32_t bt = kv_byte_token(v, (uint8_t)text[s[i].off + j]);
            if (bt < 0) bt = v->unk;
            if (bt >= 0) ok = kv_ids_push(out, bt);
        }
    }
    free(h.p);
    free(s);
    return ok;
}
