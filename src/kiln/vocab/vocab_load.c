/*
 * vocab_load.c - builds a kiln_vocab from GGUF metadata (tokenizer.ggml.*):
 * checks every key before use (types, lengths, id ranges, merges naming known
 * tokens), applies llama.cpp's defaults per tokenizer model and pre-tokenizer,
 * its attribute and end-of-generation rules, and precomputes each token's
 * decoded piece so that tokenizing and detokenizing only read the vocab.
 */
#include "gguf.h"
#include "vocab_impl.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

struct loader {
    const struct gguf_file *g;
    char *err;
    size_t errlen;
};

static bool fail(struct loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct loader *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* Optional keys: absent -> true with *present = false; present with another type -> error. */
static bool opt_str(struct loader *L, const char *key, struct gguf_str *out, bool *present) {
    *present = gguf_find_key(L->g, key) >= 0;
    if (*present && !gguf_get_str(L->g, key, out)) return fail(L, "%s: expected a string", key);
    return true;
}

static bool opt_bool(struct loader *L, const char *key, bool *out) {
    if (gguf_find_key(L->g, key) < 0) return true;
    if (!gguf_get_bool(L->g, key, out)) return fail(L, "%s: expected a bool", key);
    return true;
}

/* A special token id: if the key is present it must name a token. */
static bool opt_id(struct loader *L, const char *key, int32_t n_tokens, int32_t *id) {
    if (gguf_find_key(L->g, key) < 0) return true;
    int64_t x;
    if (!gguf_get_int(L->g, key, &x)) return fail(L, "%s: expected an integer", key);
    if (x < 0 || x >= n_tokens)
        return fail(L, "%s: token id %lld is out of range (vocabulary of %d tokens)", key, (long long)x, n_tokens);
    *id = (int32_t)x;
    return true;
}

/* An array key of the given element type; returns its index, -1 if absent (err set only on failure). */
static int64_t array_key(struct loader *L, const char *key, bool *ok) {
    int64_t i = gguf_find_key(L->g, key);
    *ok = true;
    if (i < 0) return -1;
    if (gguf_kv_type(L->g, i) != GGUF_TYPE_ARRAY) *ok = fail(L, "%s: expected an array", key);
    return i;
}

static bool str_eq(struct gguf_str s, const char *c) { return s.len == strlen(c) && !memcmp(s.ptr, c, s.len); }

/* ---- tokens, scores, types */

static bool load_tokens(struct loader *L, struct kiln_vocab *v) {
    bool ok;
    int64_t kt = array_key(L, KEY_TOKENS, &ok);
    if (!ok) return false;
    if (kt < 0) return fail(L, "%s: missing (the file has no vocabulary)", KEY_TOKENS);
    if (gguf_arr_type(L->g, kt) != GGUF_TYPE_STRING) return fail(L, "%s: expected an array of strings", KEY_TOKENS);
    uint64_t n = gguf_arr_n(L->g, kt);
    if (n == 0 || n > INT32_MAX / 2) return fail(L, "%s: %llu tokens is not a usable vocabulary", KEY_TOKENS,
                                                 (unsigned long long)n);
    /* the reader has checked every string against the file size, so n and the
     * total below are bounded by the file */
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        if (!gguf_arr_get_str(L->g, kt, i, &s)) return fail(L, "%s: %s", KEY_TOKENS, gguf_error(L->g));
        total += (s.len ? s.len : 32) + 1;
    }
    if (total > UINT32_MAX) return fail(L, "%s: token texts too large", KEY_TOKENS);
    v->n_tokens = (int32_t)n;
    v->tok = calloc(n, sizeof *v->tok);
    v->text = malloc(total);
    if (!v->tok || !v->text) return fail(L, "out of memory for %llu tokens", (unsigned long long)n);
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        gguf_arr_get_str(L->g, kt, i, &s);
        size_t len = s.len;
        if (len) memcpy(v->text + off, s.ptr, len);
        else len = (size_t)snprintf(v->text + off, 32, "[EMPTY_%llu]", (unsigned long long)i); /* as llama.cpp */
        v->text[off + len] = 0;
        v->tok[i].text_off = (uint32_t)off;
        v->tok[i].text_len = (uint32_t)len;
        v->tok[i].attr = KILN_TOKEN_ATTR_NORMAL;
        if ((int32_t)len > v->max_token_len) v->max_token_len = (int32_t)len;
        off += len + 1;
    }

    int64_t ks = array_key(L, KEY_SCORES, &ok);
    if (!ok) return false;
    if (ks >= 0) {
        enum gguf_type t = gguf_arr_type(L->g, ks);
        if (t != GGUF_TYPE_FLOAT32 && t != GGUF_TYPE_INT32)
            return fail(L, "%s: expected an array of float32 or int32", KEY_SCORES);
        if (gguf_arr_n(L->g, ks) != n)
            return fail(L, "%s: %llu scores for %llu tokens", KEY_SCORES, (unsigned long long)gguf_arr_n(L->g, ks),
                        (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            double d = 0;
            int64_t x = 0;
            bool got = t == GGUF_TYPE_FLOAT32 ? gguf_arr_get_float(L->g, ks, i, &d) : gguf_arr_get_int(L->g, ks, i, &x);
            if (!got) return fail(L, "%s: %s", KEY_SCORES, gguf_error(L->g));
            v->tok[i].score = t == GGUF_TYPE_FLOAT32 ? (float)d : (float)x;
        }
    }

    int64_t ky = array_key(L, KEY_TYPES, &ok);
    if (!ok) return false;
    if (ky >= 0) {
        if (gguf_arr_type(L->g, ky) != GGUF_TYPE_INT32) return fail(L, "%s: expected an array of int32", KEY_TYPES);
        if (gguf_arr_n(L->g, ky) != n)
            return fail(L, "%s: %llu types for %llu tokens", KEY_TYPES, (unsigned long long)gguf_arr_n(L->g, ky),
                        (unsigned long long)n);
        static const uint32_t attr_of_type[] = {
            KILN_TOKEN_ATTR_UNDEFINED, KILN_TOKEN_ATTR_NORMAL, KILN_TOKEN_ATTR_UNKNOWN, KILN_TOKEN_ATTR_CONTROL,
            KILN_TOKEN_ATTR_USER_DEFINED, KILN_TOKEN_ATTR_UNUSED, KILN_TOKEN_ATTR_BYTE};
        for (uint64_t i = 0; i < n; i++) {
            int64_t x;
            if (!gguf_arr_get_int(L->g, ky, i, &x)) return fail(L, "%s: %s", KEY_TYPES, gguf_error(L->g));
            v->tok[i].attr = x >= 0 && x < 7 ? attr_of_type[x] : KILN_TOKEN_ATTR_UNDEFINED;
        }
    }
    return true;
}

static bool load_merges(struct loader *L, struct kiln_vocab *v, bool required) {
    bool ok;
    int64_t km = array_key(L, KEY_MERGES, &ok);
    if (!ok) return false;
    if (km < 0) return required ? fail(L, "%s: missing (needed by a BPE vocabulary)", KEY_MERGES) : true;
    if (gguf_arr_type(L->g, km) != GGUF_TYPE_STRING) return fail(L, "%s: expected an array of strings", KEY_MERGES);
    uint64_t n = gguf_arr_n(L->g, km);
    if (n > INT32_MAX) return fail(L, "%s: too many merges", KEY_MERGES);
    if (!kv_pairmap_init(v, n)) return fail(L, "out of memory for %llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        if (!gguf_arr_get_str(L->g, km, i, &s)) return fail(L, "%s: %s", KEY_MERGES, gguf_error(L->g));
        /* "left right", split at the first space after the first byte (a merge may start with a space) */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) return fail(L, "%s[%llu]: '%.*s' is not 'left right'", KEY_MERGES, (unsigned long long)i,
                             (int)(s.len > 64 ? 64 : s.len), s.ptr);
        size_t ll = (size_t)(sp - s.ptr);
        int32_t a = kv_find(v, s.ptr, ll), b = kv_find(v, sp + 1, s.len - ll - 1);
        if (a < 0 || b < 0)
            return fail(L, "%s[%llu]: '%.*s' names a token that is not in %s", KEY_MERGES, (unsigned long long)i,
                        (int)(s.len > 64 ? 64 : s.len), s.ptr, KEY_TOKENS);
        kv_pairmap_add(v, a, b, (int32_t)i);
    }
    return true;
}

/* ---- pieces */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* byte tokens are "<0xXX>": the two characters after "<0x" in hex */
static char token_byte(const struct kiln_vocab *v, int32_t id) {
    const char *t = kv_text(v, id);
    size_t len = v->tok[id].text_len;
    int x = 0;
    for (size_t i = 3; i < 5 && i < len && hexval(t[i]) >= 0; i++) x = x * 16 + hexval(t[i]);
    return (char)x;
}

bool kv_build_piece(const struct kiln_vocab *v, int32_t id, struct kv_buf *b) {
    const char *t = kv_text(v, id);
    size_t len = v->tok[id].text_len;
    uint32_t a = v->tok[id].attr;
    if (a & (KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_USER_DEFINED)) return kv_buf_put(b, t, len);
    if (a & KILN_TOKEN_ATTR_NORMAL) {
        if (v->type != KILN_VOCAB_BPE || v->escape_ws) { /* ▁ -> space */
            for (size_t i = 0; i < len; i++) {
                bool esc = i + 2 < len && (unsigned char)t[i] == 0xe2 && (unsigned char)t[i + 1] == 0x96 &&
                           (unsigned char)t[i + 2] == 0x81;
                if (!kv_buf_putc(b, esc ? ' ' : t[i])) return false;
                if (esc) i += 2;
            }
            return true;
        }
        /* byte-level: each character back to its byte */
        for (size_t i = 0; i < len;) {
            size_t adv;
            uint32_t c = kv_utf8_decode(t + i, len - i, &adv);
            i += adv;
            int byte = kv_cpt_to_byte(c);
            if (byte >= 0) {
                if (!kv_buf_putc(b, (char)byte)) return false;
                continue;
            }
            /* llama.cpp writes characters outside the mapping out like this */
            char u[4], hx[4];
            size_t ul = kv_utf8_encode(c, u);
            if (!kv_buf_put(b, "[UNK_BYTE_0x", 12)) return false;
            for (size_t j = 0; j < ul; j++) {
                snprintf(hx, sizeof hx, "%02x", (unsigned char)u[j]);
                if (!kv_buf_put(b, hx, 2)) return false;
            }
            if (!kv_buf_put(b, t, len) || !kv_buf_putc(b, ']')) return false;
        }
        return true;
    }
    if (a & KILN_TOKEN_ATTR_BYTE) return kv_buf_putc(b, token_byte(v, id));
    return true; /* undefined / unused: no text */
}

/* ---- the whole load */

bool kv_special_setup(struct kiln_vocab *v, const struct gguf_file *g, const char *pre, size_t pre_len);

static bool load(struct loader *L, struct kiln_vocab *v) {
    const struct gguf_file *g = L->g;
    struct gguf_str model, pre = {"", 0};
    bool has_model, has_pre;
    if (!opt_str(L, KEY_MODEL, &model, &has_model) || !opt_str(L, KEY_PRE, &pre, &has_pre)) return false;
    if (!has_model) return fail(L, "%s: missing", KEY_MODEL);

    int32_t nul = KILN_TOKEN_NULL;
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = v->nl = nul;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = nul;
    v->byte_encode = true;
    v->wpm_lowercase = v->wpm_strip_accents = true;

    if (str_eq(model, "no_vocab") || str_eq(model, "none")) {
        v->type = KILN_VOCAB_NONE;
        snprintf(v->pre_name, sizeof v->pre_name, "default");
        return true;
    }
    if (str_eq(model, "llama")) {
        v->type = KILN_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = true, v->add_bos = true;
    } else if (str_eq(model, "bert")) {
        v->type = KILN_VOCAB_WPM;
        v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->add_bos = true, v->add_sep = true, v->clean_spaces = true;
    } else if (str_eq(model, "gpt2") || str_eq(model, "gemma4")) {
        v->type = KILN_VOCAB_BPE;
        v->gemma4_model = str_eq(model, "gemma4");
        if (!v->gemma4_model) v->bos = 11, v->eos = 11;
        if (v->gemma4_model) pre = (struct gguf_str){"gemma4", 6};
        const struct kv_pretok *p = pre.len == 0 ? kv_pretok_default() : kv_pretok_find(pre.ptr, (size_t)pre.len);
        if (!p)
            return fail(L, "%s: unknown pre-tokenizer '%.*s'", KEY_PRE, (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
        v->pre = p;
        v->clean_spaces = p->clean_spaces, v->ignore_merges = p->ignore_merges, v->add_bos = p->add_bos;
        v->escape_ws = p->escape_ws, v->byte_encode = p->byte_encode, v->add_sep = p->add_sep;
        if (p->no_bos) v->bos = nul;
        if (!strcmp(p->names, "whitespace")) v->wpm_lowercase = false;
    } else {
        return fail(L, "%s: unsupported tokenizer model '%.*s' (kiln knows llama, gpt2, gemma4, bert)", KEY_MODEL,
                    (int)(model.len > 64 ? 64 : model.len), model.ptr);
    }
    snprintf(v->pre_name, sizeof v->pre_name, "%.*s", pre.len ? (int)(pre.len > 63 ? 63 : pre.len) : 7,
             pre.len ? pre.ptr : "default");
    if (!opt_bool(L, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix) ||
        !opt_bool(L, "tokenizer.ggml.remove_extra_whitespaces", &v->remove_extra_ws))
        return false;

    if (!load_tokens(L, v) || !kv_maps_build(v, L->err, L->errlen)) return false;
    /* a vocabulary none of whose tokens has text would load and then print nothing */
    const uint32_t text = KILN_TOKEN_ATTR_NORMAL | KILN_TOKEN_ATTR_BYTE | KILN_TOKEN_ATTR_USER_DEFINED;
    int64_t n_text = 0;
    for (int64_t i = 0; i < v->n_tokens; i++) n_text += (v->tok[i].attr & text) != 0;
    if (v->n_tokens > 0 && n_text == 0)
        return fail(L, "%s: none of the %lld tokens has a text type (normal, byte or user-defined)", KEY_TYPES,
                    (long long)v->n_tokens);
    if (v->type == KILN_VOCAB_SPM) {
        v->spm_cut_before_space = true;
        for (int32_t id = 0; id < v->n_tokens && v->spm_cut_before_space; id++) {
            const unsigned char *t = (const unsigned char *)kv_text(v, id);
            for (uint32_t i = 1; i + 3 <= v->tok[id].text_len; i++)
                if (t[i - 1] < 0x80 && t[i] == 0xe2 && t[i + 1] == 0x96 && t[i + 2] == 0x81) v->spm_cut_before_space = false;
        }
    }
    if (v->type == KILN_VOCAB_BPE && !load_merges(L, v, !(pre.len == 7 && !memcmp(pre.ptr, "kimi-k2", 7))))
        return false;

    /* defaults that do not fit this vocabulary are dropped; ids the file names must fit */
    int32_t *defaults[] = {&v->bos, &v->eos, &v->unk, &v->sep, &v->pad, &v->mask};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (*defaults[i] >= v->n_tokens) *defaults[i] = nul;
    static const struct {
        const char *key;
        size_t off;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(struct kiln_vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(struct kiln_vocab, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(struct kiln_vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(struct kiln_vocab, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(struct kiln_vocab, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(struct kiln_vocab, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(struct kiln_vocab, pad)},
        {"tokenizer.ggml.mask_token_id", offsetof(struct kiln_vocab, mask)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(struct kiln_vocab, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(struct kiln_vocab, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(struct kiln_vocab, fim_mid)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(struct kiln_vocab, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(struct kiln_vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(struct kiln_vocab, fim_sep)},
        {"tokenizer.ggml.prefix_token_id", offsetof(struct kiln_vocab, fim_pre)},
        {"tokenizer.ggml.suffix_token_id", offsetof(struct kiln_vocab, fim_suf)},
        {"tokenizer.ggml.middle_token_id", offsetof(struct kiln_vocab, fim_mid)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (!opt_id(L, ids[i].key, v->n_tokens, (int32_t *)((char *)v + ids[i].off))) return false;
    if (!opt_bool(L, "tokenizer.ggml.add_bos_token", &v->add_bos) ||
        !opt_bool(L, "tokenizer.ggml.add_eos_token", &v->add_eos) ||
        !opt_bool(L, "tokenizer.ggml.add_sep_token", &v->add_sep))
        return false;
    if (v->pre && !strncmp(v->pre->names, "gemma4", 6)) v->add_bos = true; /* llama.cpp forces it for gemma4 */
    if (!opt_bool(L, "tokenizer.ggml.normalizer.lowercase", &v->wpm_lowercase)) return false;
    v->wpm_strip_accents = v->wpm_lowercase;
    if (!opt_bool(L, "tokenizer.ggml.normalizer.strip_accents", &v->wpm_strip_accents)) return false;

    if (!kv_special_setup(v, g, pre.ptr, (size_t)pre.len)) return fail(L, "out of memory");

    if (v->type == KILN_VOCAB_BPE) {
        char err[200];
        v->splitter = kv_splitter_new(v->pre, err, sizeof err);
        if (!v->splitter) return fail(L, "%s", err);
    }

    /* pieces, as llama.cpp caches them (rendered with special = true) */
    struct kv_buf pieces = {0};
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t start = pieces.n;
        if (!kv_build_piece(v, id, &pieces) || pieces.n > UINT32_MAX) {
            free(pieces.p);
            return fail(L, "out of memory for token pieces");
        }
        v->tok[id].piece_off = (uint32_t)start;
        v->tok[id].piece_len = (uint32_t)(pieces.n - start);
    }
    v->pieces = pieces.p ? pieces.p : calloc(1, 1);
    if (!v->pieces) return fail(L, "out of memory");

    /* the newline token */
    if (v->type == KILN_VOCAB_SPM) {
        v->nl = kv_byte_token(v, '\n');
        if (v->nl < 0) v->nl = v->pad;
    } else if (v->type == KILN_VOCAB_WPM) {
        v->nl = v->pad;
    } else {
        struct kv_ids nl = {0};
        if (!kv_tokenize_all(v, "\n", 1, false, false, &nl)) {
            free(nl.p);
            return fail(L, "out of memory");
        }
        v->nl = nl.n ? nl.p[0] : v->pad;
        free(nl.p);
    }
    return true;
}

struct kiln_vocab *kiln_vocab_load(const struct gguf_file *g, char *err, size_t errlen) {
    char dummy[8];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!g) {
        snprintf(err, errlen, "kiln_vocab_load: no file");
        return NULL;
    }
    struct kiln_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct loader L = {g, err, errlen};
    if (!load(&L, v)) {
        kiln_vocab_free(v);
        return NULL;
    }
    return v;
}

void kiln_vocab_free(struct kiln_vocab *v) {
    if (!v) return;
    kv_maps_free(v);
    kv_splitter_free(v->splitter);
    free(v->tok);
    free(v->text);
    free(v->pieces);
    free(v->eog);
    free(v->specials);
    free(v);
}
