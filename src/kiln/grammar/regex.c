/*
 * regex.c - a JSON Schema `pattern` (ECMAScript regular expression, unicode
 * mode, as validators such as ajv run it) as GBNF for the inside of a JSON
 * string. The pattern constrains the decoded string, the grammar makes the
 * encoded text: every character is written as JSON writes it. Supported:
 * literals and escapes, classes (ranges, negation, \d \w \s and their
 * negations), `.`, groups (plain, (?:...), named), alternation, quantifiers
 * (greedy or lazy: the same strings), ^ and $ at the ends. Anything else is
 * refused by name.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "schema.h"

#define RX_MAX_DEPTH 64

struct rx {
    const char *s;
    size_t n, i;
    struct sb *out;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
rfail(struct rx *r, const char *fmt, ...) {
    if (r->failed) return false;
    r->failed = true;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "pattern at offset %zu: %s", r->i, msg);
    return false;
}

static int peek(const struct rx *r) { return r->i < r->n ? (unsigned char)r->s[r->i] : -1; }

/* ------------------------------------------------------------------ code point sets */

struct cset {
    uint32_t *r; /* lo, hi pairs */
    int n, cap;
};

static void cs_add(struct cset *c, uint32_t lo, uint32_t hi) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->r = realloc(c->r, sizeof *c->r * 2 * (size_t)c->cap);
        if (!c->r) abort(); /* tiny: out of memory here is not worth a path of its own */
    }
    c->r[2 * c->n] = lo;
    c->r[2 * c->n + 1] = hi;
    c->n++;
}

static int cmp_lo(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void cs_norm(struct cset *c) {
    if (c->n > 1) qsort(c->r, (size_t)c->n, 2 * sizeof *c->r, cmp_lo);
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (m && c->r[2 * i] <= c->r[2 * m - 1] + 1) {
            if (c->r[2 * i + 1] > c->r[2 * m - 1]) c->r[2 * m - 1] = c->r[2 * i + 1];
        } else {
            c->r[2 * m] = c->r[2 * i], c->r[2 * m + 1] = c->r[2 * i + 1], m++;
        }
    }
    c->n = m;
}

static void cs_negate(struct cset *c) {
    cs_norm(c);
    struct cset o = {0};
    uint32_t next = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->r[2 * i] > next) cs_add(&o, next, c->r[2 * i] - 1);
        next = c->r[2 * i + 1] + 1;
    }
    if (next <= 0x10FFFF) cs_add(&o, next, 0x10FFFF);
    free(c->r);
    *c = o;
}

/* \d \w \s (and their capitals, negated) as JavaScript defines them */
static bool cs_shorthand(struct cset *c, int e) {
    struct cset t = {0};
    switch (e | 0x20) {
    case 'd': cs_add(&t, '0', '9'); break;
    case 'w':
        cs_add(&t, '0', '9'), cs_add(&t, 'A', 'Z'), cs_add(&t, 'a', 'z'), cs_add(&t, '_', '_');
        break;
    case 's':
        cs_add(&t, 9, 13), cs_add(&t, ' ', ' '), cs_add(&t, 0xA0, 0xA0), cs_add(&t, 0x1680, 0x1680);
        cs_add(&t, 0x2000, 0x200A), cs_add(&t, 0x2028, 0x2029), cs_add(&t, 0x202F, 0x202F);
        cs_add(&t, 0x205F, 0x205F), cs_add(&t, 0x3000, 0x3000), cs_add(&t, 0xFEFF, 0xFEFF);
        break;
    default: return false;
    }
    if (e >= 'A' && e <= 'Z') cs_negate(&t);
    for (int i = 0; i < t.n; i++) cs_add(c, t.r[2 * i], t.r[2 * i + 1]);
    free(t.r);
    return true;
}

/* ------------------------------------------------------------------ JSON text of characters */

static const char *short_escape(uint32_t cp) {
    return cp == '\b' ? "b" : cp == '\f' ? "f" : cp == '\n' ? "n" : cp == '\r' ? "r" : cp == '\t' ? "t" : NULL;
}

static void json_char(struct sb *b, uint32_t cp) {
    uint8_t u[4];
    if (cp == '"') sb_str(b, "\"\\\\\\\"\"");       /* the text \" */
    else if (cp == '\\') sb_str(b, "\"\\\\\\\\\""); /* the text \\ */
    else if (cp < 0x20) { /* \u00XX in either case, and the short escape where JSON has one */
        unsigned d = cp & 15;
        sb_printf(b, "(\"\\\\u00%u\" [%x", (unsigned)(cp >> 4), d);
        if (d > 9) sb_printf(b, "%X", d);
        sb_str(b, "]");
        if (short_escape(cp)) sb_printf(b, " | \"\\\\%s\"", short_escape(cp));
        sb_str(b, ")");
    } else {
        int n = gutf8_encode(cp, u);
        sb_literal(b, (const char *)u, (size_t)n);
    }
}

void json_chars_gbnf(struct sb *b, const uint32_t *r, int n) {
    /* the characters written as themselves, in one class; the others as escapes */
    struct sb cls = {0};
    int parts = 0;
    bool quote = false, bslash = false;
    uint32_t ctl = 0; /* bit c: control character c */
    for (int i = 0; i < n; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        for (uint32_t c = lo; c <= hi && c < 0x20; c++) ctl |= 1u << c;
        if (lo <= '"' && '"' <= hi) quote = true;
        if (lo <= '\\' && '\\' <= hi) bslash = true;
        if (lo < 0x20) lo = 0x20;
        /* the class part: [lo, hi] without " and \ */
        uint32_t cuts[3] = {'"', '\\', 0};
        uint32_t a = lo;
        for (int k = 0; k < 2 && a <= hi; k++) {
            if (cuts[k] < a || cuts[k] > hi) continue;
            if (cuts[k] > a) {
                sb_class_char(&cls, a);
                if (cuts[k] - 1 > a) sb_str(&cls, "-"), sb_class_char(&cls, cuts[k] - 1);
            }
            a = cuts[k] + 1;
        }
        if (a <= hi && lo <= hi) {
            sb_class_char(&cls, a);
            if (hi > a) sb_str(&cls, "-"), sb_class_char(&cls, hi);
        }
    }
    int alts = (cls.n > 0) + quote + bslash + (ctl != 0) * 2;
    if (alts > 1) sb_str(b, "(");
    if (cls.n > 0) sb_printf(b, "[%s]", cls.s), parts++;
    if (quote) sb_printf(b, "%s\"\\\\\\\"\"", parts++ ? " | " : "");
    if (bslash) sb_printf(b, "%s\"\\\\\\\\\"", parts++ ? " | " : "");
    for (int hi4 = 0; hi4 < 2; hi4++) { /* \u000X and \u001X, the last digit as a class (either case) */
        uint32_t m = (ctl >> (16 * hi4)) & 0xFFFF;
        if (!m) continue;
        sb_printf(b, "%s\"\\\\u00%d\" [", parts++ ? " | " : "", hi4);
        for (int d = 0; d < 16; d++)
            if (m >> d & 1) sb_printf(b, d > 9 ? "%x%X" : "%x", d, d);
        sb_str(b, "]");
    }
    for (uint32_t c = 0; c < 0x20; c++) /* and the short escapes: \n \t ... */
        if (ctl >> c & 1 && short_escape(c)) sb_printf(b, "%s\"\\\\%s\"", parts++ ? " | " : "", short_escape(c));
    if (alts > 1) sb_str(b, ")");
    if (alts == 0) sb_str(b, "[^\\x00-\\U0010FFFF]"); /* never taken: callers refuse empty sets */
    sb_free(&cls);
}

static void emit_set(struct rx *r, struct cset *c) {
    cs_norm(c);
    json_chars_gbnf(r->out, c->r, c->n);
}

/* ------------------------------------------------------------------ parsing, emitting as it goes */

static bool parse_hex(struct rx *r, int digits, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < digits; k++) {
        int c = peek(r);
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return rfail(r, "expected %d hex digits", digits);
        *v = *v * 16 + (uint32_t)h;
        r->i++;
    }
    return true;
}

/* An escape after '\' as one character (*cp) or a set (added to set, *cp = -1). */
static bool parse_escape(struct rx *r, bool in_class, struct cset *set, int64_t *cp) {
    int e = peek(r);
    if (e < 0) return rfail(r, "the pattern ends with '\\'");
    r->i++;
    *cp = -1;
    if (strchr("dDwWsS", e)) return cs_shorthand(set, e);
    uint32_t v;
    switch (e) {
    case 't': *cp = '\t'; return true;
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    case '0':
        if (peek(r) >= '0' && peek(r) <= '9') return rfail(r, "backreferences and octal escapes are not supported");
        *cp = 0;
        return true;
    case 'x':
        if (!parse_hex(r, 2, &v)) return false;
        *cp = v;
        return true;
    case 'u':
        if (peek(r) == '{') {
            r->i++;
            v = 0;
            int k = 0;
            while (peek(r) >= 0 && peek(r) != '}' && k < 7) {
                uint32_t d;
                if (!parse_hex(r, 1, &d)) return false;
                v = v * 16 + d, k++;
            }
            if (peek(r) != '}' || k == 0 || v > 0x10FFFF) return rfail(r, "bad \\u{...} escape");
            r->i++;
        } else if (!parse_hex(r, 4, &v)) {
            return false;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return rfail(r, "surrogate escapes are not supported");
        *cp = v;
        return true;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return true;
        }
        return rfail(r, "word boundaries (\\b) are not supported");
    case 'B': return rfail(r, "word boundaries (\\B) are not supported");
    case 'p':
    case 'P': return rfail(r, "unicode property escapes (\\%c{...}) are not supported", e);
    case 'k': return rfail(r, "backreferences (\\k<name>) are not supported");
    case 'c': return rfail(r, "control escapes (\\c) are not supported");
    default:
        if (e >= '1' && e <= '9') return rfail(r, "backreferences (\\%c) are not supported", e);
        if (strchr("^$\\.*+?()[]{}|/", e) || (in_class && e == '-')) {
            *cp = e;
            return true;
        }
        return rfail(r, "'\\%c' is not a valid escape in a unicode pattern", e >= 0x20 && e < 0x7F ? e : '?');
    }
}

static bool parse_char(struct rx *r, uint32_t *cp) {
    int l = gutf8_decode((const uint8_t *)r->s + r->i, r->n - r->i, cp);
    if (!l) return rfail(r, "invalid UTF-8");
    r->i += (size_t)l;
    return true;
}

static bool parse_class(struct rx *r) {
    r->i++; /* [ */
    bool neg = peek(r) == '^';
    if (neg) r->i++;
    struct cset c = {0};
    bool ok = false;
    while (peek(r) != ']') {
        if (peek(r) < 0) {
            rfail(r, "unterminated character class");
            goto done;
        }
        int64_t lo = -1, hi;
        uint32_t v;
        if (peek(r) == '\\') {
            r->i++;
            if (!parse_escape(r, true, &c, &lo)) goto done;
        } else {
            if (!parse_char(r, &v)) goto done;
            lo = v;
        }
        if (peek(r) == '-' && r->i + 1 < r->n && r->s[r->i + 1] != ']') {
            r->i++;
            if (lo < 0) {
                rfail(r, "a class escape cannot start a range");
                goto done;
            }
            if (peek(r) == '\\') {
                r->i++;
                if (!parse_escape(r, true, &c, &hi)) goto done;
                if (hi < 0) {
                    rfail(r, "a class escape cannot end a range");
                    goto done;
                }
            } else {
                if (!parse_char(r, &v)) goto done;
                hi = v;
            }
            if (hi < lo) {
                rfail(r, "range out of order in character class");
                goto done;
            }
            cs_add(&c, (uint32_t)lo, (uint32_t)hi);
        } else if (lo >= 0) {
            cs_add(&c, (uint32_t)lo, (uint32_t)lo);
        }
    }
    r->i++; /* ] */
    if (neg) cs_negate(&c);
    else cs_norm(&c);
    if (c.n == 0) {
        rfail(r, "the character class matches nothing");
        goto done;
    }
    emit_set(r, &c);
    ok = true;
done:
    free(c.r);
    return ok;
}

static bool parse_alt(struct rx *r);

/* one atom, written to the output; false on error */
static bool parse_atom(struct rx *r) {
    int c = peek(r);
    if (c == '(') {
        r->i++;
        if (peek(r) == '?') {
            r->i++;
            int k = peek(r);
            if (k == ':') {
                r->i++;
            } else if (k == '<' && r->i + 1 < r->n && r->s[r->i + 1] != '=' && r->s[r->i + 1] != '!') {
                while (peek(r) >= 0 && peek(r) != '>') r->i++; /* a named group: the name does not matter */
                if (peek(r) != '>') return rfail(r, "unterminated group name");
                r->i++;
            } else {
                return rfail(r, "lookaround and other (?...) groups are not supported");
            }
        }
        if (++r->depth > RX_MAX_DEPTH) return rfail(r, "groups nested deeper than %d", RX_MAX_DEPTH);
        sb_str(r->out, "(");
        if (!parse_alt(r)) return false;
        sb_str(r->out, ")");
        r->depth--;
        if (peek(r) != ')') return rfail(r, "unbalanced parentheses");
        r->i++;
        return true;
    }
    if (c == '[') return parse_class(r);
    if (c == '.') { /* any character but the line terminators */
        r->i++;
        struct cset s = {0};
        cs_add(&s, '\n', '\n'), cs_add(&s, '\r', '\r'), cs_add(&s, 0x2028, 0x2029);
        cs_negate(&s);
        emit_set(r, &s);
        free(s.r);
        return true;
    }
    if (c == '\\') {
        r->i++;
        struct cset s = {0};
        int64_t cp;
        bool ok = parse_escape(r, false, &s, &cp);
        if (ok && cp >= 0) json_char(r->out, (uint32_t)cp);
        else if (ok) emit_set(r, &s);
        free(s.r);
        return ok;
    }
    if (c == '^' || c == '$') return rfail(r, "anchors are supported only at the start and the end of the pattern");
    if (c == '*' || c == '+' || c == '?') return rfail(r, "nothing to repeat before '%c'", c);
    if (c == '{' || c == '}' || c == ']') return rfail(r, "a lone '%c' (escape it)", c);
    uint32_t cp;
    if (!parse_char(r, &cp)) return false;
    json_char(r->out, cp);
    return true;
}

static bool parse_uint(struct rx *r, int *v) {
    if (peek(r) < '0' || peek(r) > '9') return false;
    long x = 0;
    while (peek(r) >= '0' && peek(r) <= '9') {
        x = x * 10 + (peek(r) - '0');
        if (x > G_MAX_REP) return rfail(r, "repetition count over %d", G_MAX_REP);
        r->i++;
    }
    *v = (int)x;
    return true;
}

static bool parse_seq(struct rx *r) {
    bool any = false;
    for (;;) {
        int c = peek(r);
        if (c < 0 || c == '|' || c == ')') break;
        if (c == '$' && r->depth == 0 && (r->i + 1 == r->n || r->s[r->i + 1] == '|')) break; /* the end anchor */
        size_t at = r->out->n;
        sb_str(r->out, any ? " (" : "(");
        if (!parse_atom(r)) return false;
        sb_str(r->out, ")");
        (void)at;
        any = true;
        c = peek(r);
        if (c == '*' || c == '+' || c == '?') {
            r->i++;
            sb_add(r->out, (const char *)&(char){(char)c}, 1);
        } else if (c == '{') {
            size_t save = r->i;
            r->i++;
            int lo, hi = -1;
            if (!parse_uint(r, &lo)) {
                if (r->failed) return false;
                r->i = save;
                return rfail(r, "a lone '{' (escape it)");
            }
            bool comma = peek(r) == ',';
            if (comma) {
                r->i++;
                if (peek(r) != '}' && !parse_uint(r, &hi)) return r->failed ? false : rfail(r, "bad repetition");
            } else {
                hi = lo;
            }
            if (peek(r) != '}') return rfail(r, "bad repetition");
            r->i++;
            if (hi >= 0 && hi < lo) return rfail(r, "repetition {%d,%d} out of order", lo, hi);
            if (hi < 0) sb_printf(r->out, "{%d,}", lo);
            else sb_printf(r->out, "{%d,%d}", lo, hi);
        } else {
            continue;
        }
        if (peek(r) == '?') r->i++; /* lazy: the same strings */
        c = peek(r);
        if (c == '*' || c == '+' || c == '?' || c == '{') return rfail(r, "a quantifier after a quantifier");
    }
    if (!any) sb_str(r->out, "\"\"");
    return true;
}

static bool parse_alt(struct rx *r) {
    for (bool first = true;; first = false) {
        if (!first) sb_str(r->out, " | ");
        if (!parse_seq(r)) return false;
        if (peek(r) != '|') return true;
        r->i++;
    }
}

/* any character, as JSON text, any number of times */
static void any_text(struct sb *b) {
    uint32_t all[2] = {0, 0x10FFFF};
    sb_str(b, "(");
    json_chars_gbnf(b, all, 1);
    sb_str(b, ")*");
}

bool regex_to_gbnf(const char *pat, size_t len, struct sb *out, char *err, size_t errlen) {
    struct rx r = {pat, len, 0, out, 0, err, errlen, false};
    /* top-level alternatives, each with its own anchors */
    sb_str(out, "(");
    for (bool first = true;; first = false) {
        if (!first) sb_str(out, " | ");
        bool start = peek(&r) == '^';
        if (start) r.i++;
        if (!start) any_text(out), sb_str(out, " ");
        sb_str(out, "(");
        if (!parse_seq(&r)) return false;
        sb_str(out, ")");
        bool end = peek(&r) == '$';
        if (end) r.i++;
        if (!end) sb_str(out, " "), any_text(out);
        if (peek(&r) == ')') return rfail(&r, "unbalanced parentheses");
        if (peek(&r) != '|') break;
        r.i++;
    }
    sb_str(out, ")");
    if (r.i < r.n) return rfail(&r, "unexpected '%c'", r.s[r.i]);
    return !out->oom || rfail(&r, "out of memory");
}
