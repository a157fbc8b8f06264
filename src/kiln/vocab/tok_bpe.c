/*
 * tok_bpe.c - byte-level BPE (model "gpt2", and SPM-style BPE such as gemma4)
 * as llama.cpp does it: the pre-tokenizer splits the text into words, each
 * word is byte-encoded (GPT-2's byte->character mapping) and split into
 * characters, then the adjacent pair with the lowest merge rank is merged
 * until none is left (ties: leftmost first). Symbols that are not tokens fall
 * back to their single bytes where those are tokens.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

struct sym {
    int prev, next;
    size_t off, n;
    int32_t id; /* token of the symbol's text, or -1 */
};
struct work {
    struct sym *s;
    size_t cap;
    struct kv_merge_heap h;
    struct kv_buf word;
};

static bool add_bigram(const struct kiln_vocab *v, struct work *w, int l, int r) {
    if (l < 0 || r < 0) return true;
    /* merges name tokens only (checked at load), so a symbol that is no token cannot merge */
    int32_t rank = kv_merge_rank(v, w->s[l].id, w->s[r].id);
    if (rank < 0) return true;
    struct kv_merge m = {l, r, (double)rank, w->s[l].n, w->s[r].n};
    return kv_merge_push(&w->h, m);
}

static bool emit_symbol(const struct kiln_vocab *v, const char *t, size_t n, int32_t id, struct kv_ids *out) {
    if (id >= 0) return kv_ids_push(out, id);
    for (size_t j = 0; j < n; j++) {
        int32_t b;
        if (v->byte_encode) {
            b = kv_find(v, t + j, 1);
        } else {
            static const char hex[] = "0123456789ABCDEF";
            uint8_t c = (uint8_t)t[j];
            char buf[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
            b = kv_find(v, buf, 6);
        }
        if (b >= 0 && !kv_ids_push(out, b)) return false;
    }
    return true;
}

static bool bpe_word(const struct kiln_vocab *v, struct work *w, const char *t, size_t len, struct kv_ids *out) {
    if (len == 0) return true;
    int32_t whole = kv_find(v, t, len);
    if (v->ignore_merges && whole >= 0) return kv_ids_push(out, whole);
    if (v->gemma4_model && whole >= 0 && strspn(t, "\n") >= len) return kv_ids_push(out, whole);
    if (len > w->cap) {
        struct sym *s = realloc(w->s, len * sizeof *s);
        if (!s) return false;
        w->s = s;
        w->cap = len;
    }
    struct sym *s = w->s;
    int n = 0;
    for (size_t off = 0; off < len;) {
        size_t l = kv_utf8_len((unsigned char)t[off]);
        if (l > len - off) l = len - off;
        s[n] = (struct sym){n - 1, off + l == len ? -1 : n + 1, off, l, kv_find(v, t + off, l)};
        off += l;
        n++;
    }
    w->h.n = 0;
    for (int i = 1; i < n; i++)
        if (!add_bigram(v, w, i - 1, i)) return false;
    while (w->h.n) {
        struct kv_merge b = kv_merge_pop(&w->h);
        struct sym *L = &s[b.left], *R = &s[b.right];
        if (L->n != b.ln || R->n != b.rn || L->n == 0 || R->n == 0) continue;
        L->n += R->n;
        R->n = 0;
        L->id = kv_find(v, t + L->off, L->n);
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = b.left;
        if (!add_bigram(v, w, L->prev, b.left) || !add_bigram(v, w, b.left, L->next)) return false;
    }
    for (int i = 0; i < n; i++)
        if (s[i].n > 0 && !emit_symbol(v, t + s[i].off, s[i].n, s[i].id, out)) return false;
    return true;
}

/* Words repeat: a per-call, direct-mapped cache of word -> ids spares the merges
 * (the result of a word depends on nothing else). Made only for longer texts. */
#define WC_SLOTS 4096
struct wcache {
    struct {
        uint64_t hash;
        size_t woff, wlen, ioff, ilen;
    } *slot;
    struct kv_buf words;
    struct kv_ids ids;
};

static bool wc_lookup(struct wcache *c, uint64_t h, const char *w, size_t n, struct kv_ids *out, bool *hit) {
    *hit = false;
    if (!c->slot) return true;
    size_t i = h & (WC_SLOTS - 1);
    if (c->slot[i].hash != h || c->slot[i].wlen != n || memcmp(c->words.p + c->slot[i].woff, w, n)) return true;
    *hit = true;
    for (size_t k = 0; k < c->slot[i].ilen; k++)
        if (!kv_ids_push(out, c->ids.p[c->slot[i].ioff + k])) return false;
    return true;
}

static bool wc_store(struct wcache *c, uint64_t h, const char *w, size_t n, const int32_t *ids, size_t k) {
    if (!c->slot) return true;
    size_t i = h & (WC_SLOTS - 1), woff = c->words.n, ioff = c->ids.n;
    if (!kv_buf_put(&c->words, w, n)) return false;
    for (size_t j = 0; j < k; j++)
        if (!kv_ids_push(&c->ids, ids[j])) return false;
    c->slot[i].hash = h, c->slot[i].woff = woff, c->slot[i].wlen = n, c->slot[i].ioff = ioff, c->slot[i].ilen = k;
    return true;
}

bool kv_tokenize_bpe(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out) {
    size_t n, *lens = NULL, n_lens = 0;
    uint32_t *cp = kv_utf8_to_cpts(text, len, &n);
    if (!cp) return false;
    struct work w = {0};
    struct wcache wc = {0};
    bool ok = kv_split(v->splitter, cp, n, &lens, &n_lens);
    if (ok && n_lens > 256) ok = (wc.slot = calloc(WC_SLOTS, sizeof *wc.slot)) != NULL;
    size_t c0 = 0;
    for (size_t k = 0; ok && k < n_lens; k++) {
        /* the word as the merges see it: UTF-8, then (byte_encode) each byte as its GPT-2 character */
        w.word.n = 0;
        for (size_t i = c0; ok && i < c0 + lens[k]; i++) {
            char u[4];
            size_t ul = kv_utf8_encode(cp[i], u);
            if (!v->byte_encode) {
                ok = kv_buf_put(&w.word, u, ul);
                continue;
            }
            for (size_t j = 0; ok && j < ul; j++) {
                char e[4];
                ok = kv_buf_put(&w.word, e, kv_utf8_encode(kv_byte_to_cpt((uint8_t)u[j]), e));
            }
        }
        c0 += lens[k];
        if (!ok || w.word.n == 0) continue;
        uint64_t h = kv_hash_bytes(w.word.p, w.word.n);
        bool hit;
        ok = wc_lookup(&wc, h, w.word.p, w.word.n, out, &hit);
        if (!ok || hit) continue;
        size_t start = out->n;
        ok = bpe_word(v, &w, w.word.p, w.word.n, out) &&
             wc_store(&wc, h, w.word.p, w.word.n, out->p + start, out->n - start);
    }
    free(wc.slot);
    free(wc.words.p);
    free(wc.ids.p);
    free(w.s);
    free(w.h.p);
    free(w.word.p);
    free(lens);
    free(cp);
    return ok;
}
