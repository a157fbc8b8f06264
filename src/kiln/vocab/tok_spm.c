/*
 * tok_spm.c - SentencePiece-style tokenization (model "llama"), as llama.cpp
 * does it: the text (already ▁-escaped) is split into UTF-8 characters, then
 * the adjacent pair whose concatenation is the highest-scoring token is merged,
 * again and again (ties: leftmost first). Pieces that are not tokens fall back
 * to <0xXX> byte tokens, or to the unknown token when the vocab has none.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

struct sym {
    int prev, next;
    size_t off, n;
};
int32_t kv_byte_token(const struct kiln_vocab *v, uint8_t b) {
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = kv_find(v, buf, 6);
    if (id >= 0) return id;
    char c = (char)b;
    return kv_find(v, &c, 1);
}

static bool try_add(const struct kiln_vocab *v, const char *text, const struct sym *s, int l, int r,
                    struct kv_merge_heap *h) {
    if (l < 0 || r < 0) return true;
    size_t size = s[l].n + s[r].n; /* adjacent symbols are adjacent bytes */
    int32_t id = kv_find(v, text + s[l].off, size);
    if (id < 0) return true;
    /* higher score first: the heap takes the lowest key */
    struct kv_merge m = {l, r, -(double)v->tok[id].score, s[l].n, s[r].n};
    return kv_merge_push(h, m);
}

/* Merge symbols s[lo..hi) (linked among themselves) and append their ids. */
static bool merge_range(const struct kiln_vocab *v, const char *text, struct sym *s, int lo, int hi,
                        struct kv_merge_heap *h, struct kv_ids *out) {
    bool ok = true;
    h->n = 0;
    for (int i = lo + 1; ok && i < hi; i++) ok = try_add(v, text, s, i - 1, i, h);
    while (ok && h->n) {
        struct kv_merge b = kv_merge_pop(h);
        struct sym *L = &s[b.left], *R = &s[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.ln + b.rn) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = b.left;
        ok = try_add(v, text, s, L->prev, b.left, h) && try_add(v, text, s, b.left, L->next, h);
    }
    /* Every merged symbol is a token, so llama.cpp's re-segmentation through its
     * merge map reduces to: a token, or its bytes. */
    for (int i = lo; ok && i != -1; i = s[i].next) {
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
    return ok;
}

bool kv_tokenize_spm(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out) {
    /* The merge order is global (best score first), but when no token holds an
     * ASCII byte followed by U+2581, no merge can cross from an ASCII symbol into
     * a following "\u2581": the text splits there into runs that merge exactly as
     * they would in one piece (ties stay leftmost-first), each with a small heap
     * and symbol array. */
    struct sym *s = NULL;
    size_t cap = 0;
    struct kv_merge_heap h = {0};
    bool ok = true;
    int n = 0;
    for (size_t off = 0; ok && off < len;) {
        size_t l = kv_utf8_len((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        bool cut = n > 0 && v->spm_cut_before_space && l == 3 && !memcmp(text + off, "\xe2\x96\x81", 3) &&
                   s[n - 1].n == 1 && !((unsigned char)text[s[n - 1].off] & 0x80);
        if (cut) {
            s[n - 1].next = -1;
            ok = merge_range(v, text, s, 0, n, &h, out);
            n = 0;
        }
        if ((size_t)n == cap) {
            cap = cap ? cap * 2 : 256;
            struct sym *q = realloc(s, cap * sizeof *q);
            if (!q) {
                ok = false;
                break;
            }
            s = q;
        }
        s[n] = (struct sym){n - 1, n + 1, off, l};
        off += l;
        n++;
    }
    if (ok && n > 0) {
        s[n - 1].next = -1;
        ok = merge_range(v, text, s, 0, n, &h, out);
    }
    free(h.p);
    free(s);
    return ok;
}
