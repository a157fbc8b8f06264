/*
 * tok_wpm.c - WordPiece (model "bert") as llama.cpp does it: BERT-style
 * normalization (lowercase and accent stripping per metadata, control
 * characters dropped, punctuation / ASCII symbols / CJK ideographs split into
 * single-character words), then greedy longest match of "▁word" against the
 * vocabulary; a word that cannot be covered becomes the unknown token.
 */
#include "vocab_impl.h"

#include <stdlib.h>

/* CJK ranges as llama.cpp (and HF's BERT) list them, including their 0x2B920 start */
static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest-prefix cover of w[0..n); on failure nothing is appended. */
static bool cover_word(const struct kiln_vocab *v, const char *w, size_t n, struct kv_ids *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n < i + (size_t)v->max_token_len + 1 ? n : i + (size_t)v->max_token_len + 1;
        int32_t id = KILN_TOKEN_NULL;
        for (; j > i; j--)
            if ((id = kv_find(v, w + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = start;
            break;
        }
        if (!kv_ids_push(out, id)) return false;
        i = j;
    }
    if (out->n == start && v->unk >= 0) return kv_ids_push(out, v->unk);
    return true;
}

static bool flush(const struct kiln_vocab *v, struct kv_buf *w, struct kv_ids *out) {
    if (w->n <= 3) return true; /* only the "▁" prefix: no word */
    bool ok = cover_word(v, w->p, w->n, out);
    w->n = 3;
    return ok;
}

bool kv_tokenize_wpm(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out) {
    size_t n;
    uint32_t *cp = kv_utf8_to_cpts(text, len, &n);
    struct kv_buf w = {0};
    bool ok = cp && kv_buf_put(&w, "\xe2\x96\x81", 3);
    for (size_t i = 0; ok && i < n; i++) {
        uint32_t c = cp[i];
        if (v->wpm_strip_accents) c = kv_nfd_first(c);
        uint16_t f = kv_cpt_flags(c);
        if (f & KV_F_WHITESPACE) {
            ok = flush(v, &w, out);
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & KV_F_CONTROL)) continue;
        if (v->wpm_strip_accents && (f & KV_F_MARK)) continue;
        char u[4];
        size_t ul = kv_utf8_encode(v->wpm_lowercase ? kv_tolower(c) : c, u);
        if ((f & KV_F_PUNCT) || (c < 0x7F && (f & KV_F_SYMBOL)) || is_chinese(c)) {
            ok = flush(v, &w, out) && kv_buf_put(&w, u, ul) && flush(v, &w, out);
        } else {
            ok = kv_buf_put(&w, u, ul);
        }
    }
    if (ok) ok = flush(v, &w, out);
    free(w.p);
    free(cp);
    return ok;
}
