/*
 * tokenize.c - the public tokenize / detokenize entry points: special-token
 * partitioning of the raw text (llama.cpp's order and strip rules), BOS/EOS
 * per the metadata, dispatch to the model's tokenizer, token -> piece, and
 * ids -> text with llama.cpp's leading-space and space clean-up rules.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

struct frag {
    size_t off, len;
    int32_t token; /* >= 0: a special token; -1: raw text */
};
struct frags {
    struct frag *p;
    size_t n, cap;
};

static bool frag_push(struct frags *f, struct frag x) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct frag *q = realloc(f->p, cap * sizeof *q);
        if (!q) return false;
        f->p = q;
        f->cap = cap;
    }
    f->p[f->n++] = x;
    return true;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static const char *find_bytes(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    return memmem(h, hn, n, nn);
}

/* Split raw fragments on each special token in turn (longest first); control and
 * unknown tokens only when parse_special, user-defined tokens always. */
static bool partition(const struct kiln_vocab *v, const char *text, size_t len, bool parse_special, struct frags *out) {
    struct frags cur = {0}, next = {0};
    bool ok = frag_push(&cur, (struct frag){0, len, -1});
    for (size_t s = 0; ok && s < v->n_specials; s++) {
        int32_t id = v->specials[s];
        uint32_t attr = v->tok[id].attr;
        if (!parse_special && (attr & (KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_UNKNOWN))) continue;
        const char *tt = kv_text(v, id);
        size_t tl = v->tok[id].text_len;
        next.n = 0;
        for (size_t i = 0; ok && i < cur.n; i++) {
            struct frag f = cur.p[i];
            if (f.token >= 0) {
                ok = frag_push(&next, f);
                continue;
            }
            size_t off = f.off, rem = f.len;
            for (;;) {
                const char *m = find_bytes(text + off, rem, tt, tl);
                if (!m) {
                    ok = frag_push(&next, (struct frag){off, rem, -1});
                    break;
                }
                size_t mpos = (size_t)(m - text);
                size_t left = mpos - off;
                if (attr & KILN_TOKEN_ATTR_LSTRIP)
                    while (left > 0 && is_space(text[off + left - 1])) left--;
                if (left > 0 && !(ok = frag_push(&next, (struct frag){off, left, -1}))) break;
                if (!(ok = frag_push(&next, (struct frag){0, 0, id}))) break;
                size_t roff = mpos + tl, rlen = off + rem - roff;
                if (attr & KILN_TOKEN_ATTR_RSTRIP)
                    while (rlen > 0 && is_space(text[roff])) roff++, rlen--;
                if (rlen == 0) break;
                off = roff;
                rem = rlen;
            }
        }
        struct frags t = cur;
        cur = next;
        next = t;
    }
    free(next.p);
    if (!ok) {
        free(cur.p);
        return false;
    }
    *out = cur;
    return true;
}

bool kv_tokenize_all(const struct kiln_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                     struct kv_ids *out) {
    if (v->type == KILN_VOCAB_NONE) return true;
    struct frags fr = {0};
    if (len > 0 && !partition(v, text, len, parse_special, &fr)) return false;
    bool ok = true;
    struct kv_buf buf = {0};
    if (add_special && v->add_bos && v->bos >= 0) ok = kv_ids_push(out, v->bos);
    bool prev_special = true; /* SPM: a space prefix at the start and after each special token */
    for (size_t i = 0; ok && i < fr.n; i++) {
        const struct frag *f = &fr.p[i];
        if (f->token >= 0) {
            ok = kv_ids_push(out, f->token);
            prev_special = true;
            continue;
        }
        const char *t = text + f->off;
        size_t n = f->len;
        if (v->type == KILN_VOCAB_WPM) {
            ok = kv_tokenize_wpm(v, t, n, out);
            continue;
        }
        bool escape = v->type == KILN_VOCAB_SPM || v->escape_ws;
        if (escape) { /* spaces -> U+2581 ("▁") */
            buf.n = 0;
            if (v->type == KILN_VOCAB_SPM && v->add_space_prefix && prev_special) ok = kv_buf_put(&buf, "\xe2\x96\x81", 3);
            for (size_t j = 0; ok && j < n; j++) ok = t[j] == ' ' ? kv_buf_put(&buf, "\xe2\x96\x81", 3) : kv_buf_putc(&buf, t[j]);
            t = buf.p;
            n = buf.n;
        }
        if (ok) ok = v->type == KILN_VOCAB_SPM ? kv_tokenize_spm(v, t, n, out) : kv_tokenize_bpe(v, t, n, out);
        prev_special = false;
    }
    if (ok && add_special) {
        if (v->type == KILN_VOCAB_WPM) {
            if (v->sep >= 0) ok = kv_ids_push(out, v->sep);
        } else if (v->add_eos && v->eos >= 0) {
            ok = kv_ids_push(out, v->eos);
        }
    }
    free(buf.p);
    free(fr.p);
    return ok;
}

int64_t kiln_tokenize(const struct kiln_vocab *v, const char *text, size_t len, int32_t *out, int64_t max,
                      bool add_special, bool parse_special) {
    if (!v || (!text && len)) return KILN_ERR_INVALID;
    struct kv_ids ids = {0};
    if (!kv_tokenize_all(v, text, len, add_special, parse_special, &ids)) {
        free(ids.p);
        return KILN_ERR_INVALID;
    }
    int64_t n = (int64_t)ids.n;
    if (n > max || (n > 0 && !out)) {
        free(ids.p);
        return -n;
    }
    if (n) memcpy(out, ids.p, (size_t)n * sizeof *out);
    free(ids.p);
    return n;
}

/* ---- pieces and detokenize */

int64_t kiln_token_to_piece(const struct kiln_vocab *v, int32_t id, char *buf, size_t size, bool special) {
    if (!v || id < 0 || id >= v->n_tokens) return KILN_ERR_INVALID;
    const struct kv_token *t = &v->tok[id];
    if (!special && (t->attr & (KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_CONTROL))) return 0;
    if (t->piece_len > size || (t->piece_len && !buf)) return -(int64_t)t->piece_len;
    memcpy(buf, v->pieces + t->piece_off, t->piece_len);
    return t->piece_len;
}

/* llama.cpp's clean-up for BPE/WPM output: no space before ?!., ; " ' " -> "'" ;
 * " 's", " 'm", " 're", " 've" lose their space. In place; returns the new length. */
static size_t clean_spaces(char *t, size_t total) {
    size_t n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) n--;
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < total && t[i - 1] == ' ' && t[i + 1] == ' ') {
            n--;
            t[++i] = 0;
        }
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < total) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') n--;
            else if (i + 2 < total && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) n--;
        }
        t[n++] = x;
    }
    return n;
}

int64_t kiln_detokenize(const struct kiln_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t size,
                        bool remove_special, bool unparse_special) {
    if (!v || n < 0 || (n > 0 && !ids)) return KILN_ERR_INVALID;
    if (v->type == KILN_VOCAB_NONE) return 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->n_tokens) return KILN_ERR_INVALID;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
        remove_space = false;
        ids++, n--;
    }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;
    /* assemble in scratch: the clean-up needs the whole text */
    struct kv_buf out = {0};
    for (int64_t i = 0; i < n; i++) {
        const struct kv_token *t = &v->tok[ids[i]];
        if (!unparse_special && (t->attr & (KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_CONTROL))) {
            remove_space = false;
            continue;
        }
        const char *p = v->pieces + t->piece_off;
        size_t len = t->piece_len;
        if (remove_space && len && p[0] == ' ') p++, len--; /* SPM's added leading space */
        remove_space = false;
        if (!kv_buf_put(&out, p, len)) {
            free(out.p);
            return KILN_ERR_INVALID;
        }
    }
    size_t total = out.n;
    if (v->clean_spaces && total) total = clean_spaces(out.p, total);
    if (total > size || (total && !buf)) {
        free(out.p);
        return -(int64_t)total;
    }
    if (total) memcpy(buf, out.p, total);
    free(out.p);
    return (int64_t)total;
}
