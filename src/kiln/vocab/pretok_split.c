/*
 * pretok_split.c - runs a pre-tokenizer's regexes the way llama.cpp does.
 * Which engine decides exactness, so kiln reproduces llama.cpp's own: the
 * common patterns (gpt2, llama3, qwen2, qwen3.5, kimi-k2, afmoe digits,
 * newline runs) are hand-written scanners (pretok_custom.c) with llama.cpp's
 * exact decisions; every other regex runs on PCRE2 with ECMAScript-like
 * iteration over the same text llama.cpp's std::regex sees: if the regex names
 * Unicode classes (\p{L}...), over a "collapsed" text with one byte per code
 * point (ASCII kept, other code points replaced by a byte standing for their
 * category, whitespace by \v), with \p{X} rewritten to that byte plus X's
 * ASCII members; otherwise over the code points themselves (UTF mode, no UCP)
 * with non-ASCII whitespace replaced by \v.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretok_custom.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kv_step {
    enum kv_custom custom; /* KV_CUSTOM_NONE: use code */
    bool collapsed;
    pcre2_code *code;
};

struct kv_splitter {
    int n;
    struct kv_step step[KV_MAX_REGEX];
};

/* ---- regex collapse */

struct ucat {
    const char *name;
    unsigned char byte;  /* the collapsed byte for non-ASCII members */
    const char *ascii;   /* the ASCII members, as class items */
};
static const struct ucat ucats[] = {
    {"\\p{N}", 0xD1, "0-9"},
    {"\\p{L}", 0xD2, "A-Za-z"},
    {"\\p{P}", 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", 0xD4, ""},
    {"\\p{S}", 0xD5, "\\$\\+<->^`\\|\\~"},
    /* llama.cpp folds the letter subclasses into \p{L} */
    {"\\p{Lu}", 0xD2, "A-Za-z"},
    {"\\p{Ll}", 0xD2, "A-Za-z"},
    {"\\p{Lt}", 0xD2, "A-Za-z"},
    {"\\p{Lm}", 0xD2, "A-Za-z"},
    {"\\p{Lo}", 0xD2, "A-Za-z"},
};
#define N_UCATS (sizeof ucats / sizeof ucats[0])

static bool uses_ucat(const char *rx) {
    for (size_t i = 0; i < N_UCATS; i++)
        if (strstr(rx, ucats[i].name)) return true;
    return false;
}

static unsigned char collapse_cpt(uint32_t cp) {
    if (cp < 128) return (unsigned char)cp;
    uint16_t f = kv_cpt_flags(cp);
    if (f & KV_F_WHITESPACE) return 0x0B;
    switch (f & KV_F_CATEGORIES) {
    case KV_F_NUMBER: return 0xD1;
    case KV_F_LETTER: return 0xD2;
    case KV_F_PUNCT: return 0xD3;
    case KV_F_MARK: return 0xD4;
    case KV_F_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

/* Rewrite \p{X} to [<byte><ascii members>] (without the brackets inside a class). */
static char *collapse_regex(const char *rx) {
    size_t n = strlen(rx);
    struct kv_buf b = {0};
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        bool ok = true;
        if (rx[i] == '[' && (i == 0 || rx[i - 1] != '\\')) {
            ok = kv_buf_putc(&b, '[');
            inside = true;
        } else if (inside && rx[i] == ']' && rx[i - 1] != '\\') {
            ok = kv_buf_putc(&b, ']');
            inside = false;
        } else {
            const struct ucat *u = NULL;
            if (rx[i] == '\\' && i + 3 < n && rx[i + 1] == 'p' && rx[i + 2] == '{') {
                const char *close = strchr(rx + i + 3, '}');
                if (close && (size_t)(close - rx) <= i + 10) {
                    size_t len = (size_t)(close - rx) - i + 1;
                    for (size_t k = 0; k < N_UCATS; k++)
                        if (strlen(ucats[k].name) == len && !memcmp(ucats[k].name, rx + i, len)) u = &ucats[k];
                    if (u) {
                        char byte = (char)u->byte;
                        ok = (inside || kv_buf_putc(&b, '[')) && kv_buf_putc(&b, byte) &&
                             kv_buf_put(&b, u->ascii, strlen(u->ascii)) && (inside || kv_buf_putc(&b, ']'));
                        i += len - 1;
                    }
                }
            }
            if (!u) ok = kv_buf_putc(&b, rx[i]);
        }
        if (!ok) {
            free(b.p);
            return NULL;
        }
    }
    if (!b.p && !kv_buf_put(&b, "", 0)) return NULL;
    return b.p;
}

struct kv_splitter *kv_splitter_new(const struct kv_pretok *p, char *err, size_t errlen) {
    struct kv_splitter *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < KV_MAX_REGEX && p->regex[i]; i++) {
        struct kv_step *st = &s->step[s->n++];
        const char *rx = p->regex[i];
        st->custom = kv_custom_for(rx);
        if (st->custom != KV_CUSTOM_NONE) continue;
        st->collapsed = uses_ucat(rx);
        char *pat = st->collapsed ? collapse_regex(rx) : NULL;
        if (st->collapsed && !pat) {
            snprintf(err, errlen, "out of memory");
            kv_splitter_free(s);
            return NULL;
        }
        /* ECMAScript's $ is the end of input only */
        uint32_t opts = PCRE2_DOLLAR_ENDONLY | (st->collapsed ? 0 : PCRE2_UTF);
        int ec;
        PCRE2_SIZE eo;
        st->code = pcre2_compile((PCRE2_SPTR)(pat ? pat : rx), PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        free(pat);
        if (!st->code) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            snprintf(err, errlen, "tokenizer.ggml.pre: cannot compile pre-tokenizer regex %d: %s", i, (char *)msg);
            kv_splitter_free(s);
            return NULL;
        }
        (void)pcre2_jit_compile(st->code, PCRE2_JIT_COMPLETE); /* optional speed-up */
    }
    return s;
}

void kv_splitter_free(struct kv_splitter *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) pcre2_code_free(s->step[i].code);
    free(s);
}

/* ---- piece lists */

bool kv_pieces_push(struct kv_pieces *p, size_t len) {
    if (len == 0) return true; /* empty pieces tokenize to nothing */
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        size_t *q = realloc(p->len, cap * sizeof *q);
        if (!q) return false;
        p->len = q;
        p->cap = cap;
    }
    p->len[p->n++] = len;
    return true;
}

static size_t count_cpts(const unsigned char *s, size_t a, size_t b) {
    size_t n = 0;
    for (size_t i = a; i < b; i++) n += (s[i] & 0xc0) != 0x80;
    return n;
}

/* Per-call matching state: the JIT stack grows only for inputs that need it
 * (long runs under a repeated group), and stays private to the call. */
struct matcher {
    const pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    bool raised; /* interpreter limits raised (only without JIT) */
};

static int match(struct matcher *m, const unsigned char *subj, size_t len, size_t start, uint32_t opts) {
    int rc = pcre2_match(m->code, subj, len, start, opts | PCRE2_NO_UTF_CHECK, m->md, m->mc);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !m->js) {
        m->mc = pcre2_match_context_create(NULL);
        m->js = pcre2_jit_stack_create(64 * 1024, 512 * 1024 * 1024, NULL);
        if (!m->mc || !m->js) return rc;
        pcre2_jit_stack_assign(m->mc, NULL, m->js);
        rc = pcre2_match(m->code, subj, len, start, opts | PCRE2_NO_UTF_CHECK, m->md, m->mc);
    }
    if ((rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) && !m->raised) {
        m->raised = true;
        if (!m->mc && !(m->mc = pcre2_match_context_create(NULL))) return rc;
        pcre2_set_heap_limit(m->mc, 4u * 1024 * 1024); /* KiB */
        pcre2_set_match_limit(m->mc, 0xffffffffu);
        pcre2_set_depth_limit(m->mc, 0xffffffffu);
        rc = pcre2_match(m->code, subj, len, start, opts | PCRE2_NO_UTF_CHECK, m->md, m->mc);
    }
    return rc;
}

/* One regex over one chunk of units (bytes of the subject). Matches and the gaps
 * between them become pieces; after an empty match the next one must be non-empty
 * at the same place or start one character later (std::regex_iterator's rule).
 * Piece lengths are counted in code points. */
static bool stl_split_chunk(struct matcher *mt, const unsigned char *subj, size_t len, bool utf,
                            struct kv_pieces *out) {
    size_t start_idx = 0, p = 0;
    bool prev_empty = false;
    /* code points of subj[a..b) (UTF-8 when utf) */
#define NCP(a, b) (utf ? count_cpts(subj, (a), (b)) : (b) - (a))
    for (;;) {
        int rc;
        if (prev_empty) {
            if (p >= len) break;
            rc = match(mt, subj, len, p, PCRE2_ANCHORED | PCRE2_NOTEMPTY_ATSTART);
            if (rc == PCRE2_ERROR_NOMATCH) {
                p += utf ? kv_utf8_len(subj[p]) : 1;
                rc = match(mt, subj, len, p, 0);
            }
        } else {
            rc = match(mt, subj, len, p, 0);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return false; /* resource limits: treat as failure */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(mt->md);
        size_t ms = ov[0], me = ov[1];
        if (ms > start_idx && !kv_pieces_push(out, NCP(start_idx, ms))) return false;
        if (!kv_pieces_push(out, NCP(ms, me))) return false;
        start_idx = me;
        p = me;
        prev_empty = ms == me;
    }
    if (start_idx < len && !kv_pieces_push(out, NCP(start_idx, len))) return false;
#undef NCP
    return true;
}

static bool run_stl(const struct kv_step *st, const uint32_t *cpts, size_t n, const struct kv_pieces *in,
                    struct kv_pieces *out) {
    /* the whole text in the form this regex sees, then chunk by chunk */
    unsigned char *subj = malloc(n * 4 + 1);
    struct matcher mt = {st->code, pcre2_match_data_create_from_pattern(st->code, NULL), NULL, NULL, false};
    bool ok = subj && mt.md;
    size_t cp0 = 0;
    size_t *uoff = NULL; /* unit offset of each code point (UTF mode) */
    if (ok && !st->collapsed) {
        uoff = malloc((n + 1) * sizeof *uoff);
        ok = uoff != NULL;
    }
    if (ok) {
        size_t u = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t c = cpts[i];
            if (st->collapsed) {
                subj[u++] = collapse_cpt(c);
            } else {
                uoff[i] = u;
                if (c > 0x7f && (kv_cpt_flags(c) & KV_F_WHITESPACE)) c = 0x0B;
                if ((c >= 0xd800 && c < 0xe000) || c > 0x10ffff) c = 0xfffd; /* never in a class here */
                u += kv_utf8_encode(c, (char *)subj + u);
            }
        }
        if (uoff) uoff[n] = u;
    }
    for (size_t k = 0; ok && k < in->n; k++) {
        size_t clen = in->len[k];
        size_t ustart = st->collapsed ? cp0 : uoff[cp0];
        size_t uend = st->collapsed ? cp0 + clen : uoff[cp0 + clen];
        ok = stl_split_chunk(&mt, subj + ustart, uend - ustart, !st->collapsed, out);
        cp0 += clen;
    }
    pcre2_match_data_free(mt.md);
    pcre2_match_context_free(mt.mc);
    pcre2_jit_stack_free(mt.js);
    free(uoff);
    free(subj);
    return ok;
}

bool kv_split(const struct kv_splitter *s, const uint32_t *cpts, size_t n, size_t **lens, size_t *n_lens) {
    struct kv_pieces cur = {0}, next = {0};
    if (!kv_pieces_push(&cur, n)) return false;
    for (int i = 0; i < s->n; i++) {
        const struct kv_step *st = &s->step[i];
        next.n = 0;
        bool ok = st->custom != KV_CUSTOM_NONE ? kv_custom_split(st->custom, cpts, &cur, &next)
                                               : run_stl(st, cpts, n, &cur, &next);
        if (!ok) {
            free(cur.len);
            free(next.len);
            return false;
        }
        struct kv_pieces t = cur;
        cur = next;
        next = t;
    }
    free(next.len);
    *lens = cur.len;
    *n_lens = cur.n;
    return true;
}
