/*
 * gbnf.c - GBNF text (llama.cpp's grammar format) into a rule tree: rules
 * `name ::= alternatives`, literals, character classes with ranges and
 * negation, groups, `.`, repetition `* + ? {m} {m,} {m,n}`, comments; every
 * error names the line and column. Checks of the whole grammar (undefined
 * rules, left recursion, size) are the compiler's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

struct gp {
    const uint8_t *s;
    size_t n, i;
    int32_t line, col; /* of s[i] */
    struct gtree *t;
    int32_t *stack; /* scratch: children of the sequences being built */
    int32_t n_stack, cap_stack;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail(struct gp *p, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "grammar line %d, column %d: %s", (int)p->line, (int)p->col, msg);
    return false;
}

static int peek(const struct gp *p) { return p->i < p->n ? p->s[p->i] : -1; }
static int peek_at(const struct gp *p, size_t k) { return p->i + k < p->n ? p->s[p->i + k] : -1; }

static void adv(struct gp *p) {
    if (p->i >= p->n) return;
    if (p->s[p->i] == '\n') {
        p->line++;
        p->col = 1;
    } else if ((p->s[p->i] & 0xC0) != 0x80) {
        p->col++; /* columns count characters */
    }
    p->i++;
}

/* ------------------------------------------------------------------ tree building */

#define GROW(arr, n, cap, need)                                                           \
    do {                                                                                  \
        if ((n) + (need) > (cap)) {                                                       \
            int64_t nc_ = (cap) ? (int64_t)(cap)*2 : 64;                                  \
            while (nc_ < (int64_t)(n) + (need)) nc_ *= 2;                                 \
            if (nc_ > INT32_MAX) return -1;                                               \
            void *np_ = realloc((arr), (size_t)nc_ * sizeof *(arr));                      \
            if (!np_) return -1;                                                          \
            (arr) = np_;                                                                  \
            (cap) = (int32_t)nc_;                                                         \
        }                                                                                 \
    } while (0)

static int32_t new_node(struct gtree *t, int32_t kind, int32_t a, int32_t b, int32_t c) {
    GROW(t->nodes, t->n_nodes, t->cap_nodes, 1);
    t->nodes[t->n_nodes] = (struct gn){kind, a, b, c};
    return t->n_nodes++;
}

static int32_t push_kids(struct gtree *t, const int32_t *ids, int32_t n) {
    GROW(t->kids, t->n_kids, t->cap_kids, n);
    memcpy(t->kids + t->n_kids, ids, sizeof *ids * (size_t)n);
    int32_t off = t->n_kids;
    t->n_kids += n;
    return off;
}

static int32_t push_bytes(struct gtree *t, const uint8_t *b, int32_t n) {
    GROW(t->bytes, t->n_bytes, t->cap_bytes, n);
    memcpy(t->bytes + t->n_bytes, b, (size_t)n);
    int32_t off = t->n_bytes;
    t->n_bytes += n;
    return off;
}

static int32_t push_ranges(struct gtree *t, const uint32_t *r, int32_t n_pairs) {
    GROW(t->ranges, t->n_ranges, t->cap_ranges, 2 * n_pairs);
    memcpy(t->ranges + t->n_ranges, r, sizeof *r * 2 * (size_t)n_pairs);
    int32_t off = t->n_ranges;
    t->n_ranges += 2 * n_pairs;
    return off;
}

static int32_t stack_push(struct gp *p, int32_t id) {
    GROW(p->stack, p->n_stack, p->cap_stack, 1);
    p->stack[p->n_stack++] = id;
    return id;
}

void gtree_free(struct gtree *t) {
    for (int32_t i = 0; i < t->n_rules; i++) free(t->rules[i].name);
    free(t->rules);
    free(t->nodes);
    free(t->kids);
    free(t->bytes);
    free(t->ranges);
    memset(t, 0, sizeof *t);
}

int32_t gtree_find_rule(const struct gtree *t, const char *name) {
    for (int32_t i = 0; i < t->n_rules; i++)
        if (!strcmp(t->rules[i].name, name)) return i;
    return -1;
}

static int32_t rule_id(struct gp *p, const uint8_t *name, size_t len, int32_t line, int32_t col) {
    struct gtree *t = p->t;
    for (int32_t i = 0; i < t->n_rules; i++)
        if (strlen(t->rules[i].name) == len && !memcmp(t->rules[i].name, name, len)) return i;
    GROW(t->rules, t->n_rules, t->cap_rules, 1);
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, name, len);
    s[len] = 0;
    t->rules[t->n_rules] = (struct grule){s, -1, line, col};
    return t->n_rules++;
}

/* ------------------------------------------------------------------ lexical */

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* spaces, tabs, comments; newlines too when nl */
static void space(struct gp *p, bool nl) {
    for (;;) {
        int c = peek(p);
        if (c == ' ' || c == '\t' || (nl && (c == '\n' || c == '\r'))) {
            adv(p);
        } else if (c == '#') {
            while (peek(p) >= 0 && peek(p) != '\n' && peek(p) != '\r') adv(p);
        } else {
            return;
        }
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class, escapes included; false on error. */
static bool parse_char(struct gp *p, uint32_t *cp) {
    int c = peek(p);
    if (c < 0) return fail(p, "unexpected end of the grammar");
    if (c == '\\') {
        adv(p);
        int e = peek(p);
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            adv(p);
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = hexval(peek(p));
                if (h < 0) return fail(p, "expected %d hex digits after \\%c", digits, e);
                v = v * 16 + (uint32_t)h;
                adv(p);
            }
            if (v > 0x10FFFF) return fail(p, "code point U+%X is beyond U+10FFFF", (unsigned)v);
            *cp = v;
            return true;
        }
        switch (e) {
        case 't': *cp = '\t'; break;
        case 'r': *cp = '\r'; break;
        case 'n': *cp = '\n'; break;
        case '\\': case '"': case '[': case ']': case '-': *cp = (uint32_t)e; break;
        default:
            if (e < 0) return fail(p, "unexpected end of the grammar after '\\'");
            return fail(p, "unknown escape '\\%c'", e >= 0x20 && e < 0x7F ? e : '?');
        }
        adv(p);
        return true;
    }
    if (c == 0) return fail(p, "NUL byte in the grammar");
    int len = gutf8_decode(p->s + p->i, p->n - p->i, cp);
    if (!len) return fail(p, "invalid UTF-8");
    for (int k = 0; k < len; k++) adv(p);
    return true;
}

static bool parse_uint(struct gp *p, int32_t *out) {
    if (peek(p) < '0' || peek(p) > '9') return fail(p, "expected a number");
    int64_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        v = v * 10 + (peek(p) - '0');
        if (v > G_MAX_REP) return fail(p, "repetition bound over %d", G_MAX_REP);
        adv(p);
    }
    *out = (int32_t)v;
    return true;
}

/* ------------------------------------------------------------------ items */

static int cmp_range(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* sorted, merged; negated: the complement in [0, 0x10FFFF] */
static int32_t class_node(struct gp *p, uint32_t *r, int32_t n, bool negate) {
    qsort(r, (size_t)n, 2 * sizeof *r, cmp_range);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m > 0 && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    int32_t off;
    if (negate) {
        uint32_t *c = malloc(sizeof *c * 2 * (size_t)(m + 1));
        if (!c) return -1;
        int32_t k = 0;
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (r[2 * i] > next) {
                c[2 * k] = next;
                c[2 * k + 1] = r[2 * i] - 1;
                k++;
            }
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) {
            c[2 * k] = next;
            c[2 * k + 1] = 0x10FFFF;
            k++;
        }
        if (k == 0) {
            free(c);
            fail(p, "the negated class matches no character");
            return -2;
        }
        off = push_ranges(p->t, c, k);
        m = k;
        free(c);
    } else {
        off = push_ranges(p->t, r, m);
    }
    if (off < 0) return -1;
    return new_node(p->t, GN_CLASS, off, m, 0);
}

static int32_t parse_class(struct gp *p) {
    adv(p); /* [ */
    bool negate = peek(p) == '^';
    if (negate) adv(p);
    uint32_t *r = NULL;
    int32_t n = 0, cap = 0;
    while (peek(p) != ']') {
        uint32_t lo, hi;
        if (!parse_char(p, &lo)) goto bad;
        hi = lo;
        if (peek(p) == '-' && peek_at(p, 1) != ']' && peek_at(p, 1) >= 0) {
            adv(p);
            if (!parse_char(p, &hi)) goto bad;
            if (hi < lo) {
                fail(p, "range end U+%04X is before its start U+%04X", (unsigned)hi, (unsigned)lo);
                goto bad;
            }
        }
        if (n + 1 > cap) {
            cap = cap ? cap * 2 : 8;
            uint32_t *nr = realloc(r, sizeof *r * 2 * (size_t)cap);
            if (!nr) goto oom;
            r = nr;
        }
        r[2 * n] = lo;
        r[2 * n + 1] = hi;
        n++;
    }
    adv(p); /* ] */
    if (n == 0) {
        free(r);
        fail(p, "empty character class");
        return -2;
    }
    int32_t id = class_node(p, r, n, negate);
    free(r);
    return id;
oom:
    free(r);
    return -1;
bad:
    free(r);
    return -2;
}

static int32_t parse_literal(struct gp *p) {
    adv(p); /* " */
    uint8_t *b = NULL;
    int32_t n = 0, cap = 0;
    while (peek(p) != '"') {
        if (peek(p) < 0) {
            free(b);
            fail(p, "unterminated string literal");
            return -2;
        }
        uint32_t cp;
        if (!parse_char(p, &cp)) {
            free(b);
            return -2;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            free(b);
            fail(p, "U+%04X is a surrogate, not a character", (unsigned)cp);
            return -2;
        }
        if (n + 4 > cap) {
            cap = cap ? cap * 2 : 16;
            uint8_t *nb = realloc(b, (size_t)cap);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
        }
        n += gutf8_encode(cp, b + n);
    }
    adv(p); /* " */
    int32_t id;
    if (n == 0) {
        id = new_node(p->t, GN_EMPTY, 0, 0, 0);
    } else {
        int32_t off = push_bytes(p->t, b, n);
        id = off < 0 ? -1 : new_node(p->t, GN_LIT, off, n, 0);
    }
    free(b);
    return id;
}

static int32_t parse_alternates(struct gp *p, bool nested);

/* Quantifiers after an item: each wraps what came before. */
static int32_t parse_quantifiers(struct gp *p, int32_t item, bool nested) {
    for (int k = 0;; k++) {
        int c = peek(p);
        int32_t lo, hi;
        if (c == '*') lo = 0, hi = -1;
        else if (c == '+') lo = 1, hi = -1;
        else if (c == '?') lo = 0, hi = 1;
        else if (c == '{') {
            adv(p);
            space(p, nested);
            if (!parse_uint(p, &lo)) return -2;
            space(p, nested);
            if (peek(p) == '}') {
                hi = lo;
            } else if (peek(p) == ',') {
                adv(p);
                space(p, nested);
                hi = -1;
                if (peek(p) >= '0' && peek(p) <= '9' && !parse_uint(p, &hi)) return -2;
                space(p, nested);
                if (peek(p) != '}') return fail(p, "expected '}' to close the repetition"), -2;
                if (hi >= 0 && hi < lo) return fail(p, "repetition {%d,%d}: the maximum is below the minimum", lo, hi), -2;
            } else {
                return fail(p, "expected ',' or '}' in the repetition"), -2;
            }
        } else {
            return item;
        }
        if (k == 4) return fail(p, "more than 4 repetition operators in a row"), -2;
        adv(p);
        space(p, nested);
        item = new_node(p->t, GN_REP, item, lo, hi);
        if (item < 0) return -1;
    }
}

/* One item and its quantifiers: -2 on a syntax error, -1 out of memory, -3 nothing here. */
static int32_t parse_item(struct gp *p, bool nested) {
    int c = peek(p);
    int32_t item;
    if (c == '"') {
        item = parse_literal(p);
    } else if (c == '[') {
        item = parse_class(p);
    } else if (c == '.') {
        adv(p);
        uint32_t all[2] = {0, 0x10FFFF};
        int32_t off = push_ranges(p->t, all, 1);
        item = off < 0 ? -1 : new_node(p->t, GN_CLASS, off, 1, 0);
    } else if (c == '(') {
        if (++p->depth > G_MAX_DEPTH) return fail(p, "groups nested deeper than %d", G_MAX_DEPTH), -2;
        adv(p);
        space(p, true);
        item = parse_alternates(p, true);
        p->depth--;
        if (item < 0) return item;
        if (peek(p) != ')') return fail(p, "expected ')'"), -2;
        adv(p);
    } else if (is_word(c)) {
        int32_t line = p->line, col = p->col;
        size_t start = p->i;
        while (is_word(peek(p))) adv(p);
        int32_t r = rule_id(p, p->s + start, p->i - start, line, col);
        item = r < 0 ? -1 : new_node(p->t, GN_REF, r, 0, 0);
    } else if (c == '<' || c == '!') {
        return fail(p, "token references (<...>, !<...>) are not supported; write the text as a literal"), -2;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return fail(p, "'%c' has nothing before it to repeat", c), -2;
    } else {
        return -3;
    }
    if (item < 0) return item;
    space(p, nested);
    return parse_quantifiers(p, item, nested);
}

static int32_t parse_sequence(struct gp *p, bool nested) {
    int32_t base = p->n_stack;
    for (;;) {
        int32_t item = parse_item(p, nested);
        if (item == -3) break;
        if (item < 0 || stack_push(p, item) < 0) return item < 0 ? item : -1;
    }
    int32_t n = p->n_stack - base, id;
    if (n == 0) {
        id = new_node(p->t, GN_EMPTY, 0, 0, 0);
    } else if (n == 1) {
        id = p->stack[base];
    } else {
        int32_t off = push_kids(p->t, p->stack + base, n);
        id = off < 0 ? -1 : new_node(p->t, GN_SEQ, off, n, 0);
    }
    p->n_stack = base;
    return id;
}

static int32_t parse_alternates(struct gp *p, bool nested) {
    int32_t base = p->n_stack;
    for (;;) {
        int32_t seq = parse_sequence(p, nested);
        if (seq < 0 || stack_push(p, seq) < 0) return seq < 0 ? seq : -1;
        if (peek(p) != '|') break;
        adv(p);
        space(p, true);
    }
    int32_t n = p->n_stack - base, id;
    if (n == 1) {
        id = p->stack[base];
    } else {
        int32_t off = push_kids(p->t, p->stack + base, n);
        id = off < 0 ? -1 : new_node(p->t, GN_ALT, off, n, 0);
    }
    p->n_stack = base;
    return id;
}

static bool parse_rule(struct gp *p) {
    int32_t line = p->line, col = p->col;
    size_t start = p->i;
    while (is_word(peek(p))) adv(p);
    if (p->i == start) {
        int c = peek(p);
        return fail(p, "expected a rule name (letters, digits, '-'), found '%c'", c >= 0x20 && c < 0x7F ? c : '?');
    }
    int32_t r = rule_id(p, p->s + start, p->i - start, line, col);
    if (r < 0) return fail(p, "out of memory");
    struct grule *rule = &p->t->rules[r];
    if (rule->node >= 0) {
        p->line = line, p->col = col; /* the message points at the second definition's name */
        return fail(p, "rule '%s' is already defined at line %d", rule->name, (int)rule->line);
    }
    space(p, false);
    if (!(peek(p) == ':' && peek_at(p, 1) == ':' && peek_at(p, 2) == '=')) return fail(p, "expected '::=' after '%s'", rule->name);
    adv(p), adv(p), adv(p);
    space(p, true);
    int32_t body = parse_alternates(p, false);
    if (body == -1) return fail(p, "out of memory");
    if (body < 0) return false;
    rule = &p->t->rules[r]; /* the array may have moved */
    rule->node = body;
    rule->line = line;
    rule->col = col;
    int c = peek(p);
    if (c == '\r' || c == '\n') {
        adv(p);
    } else if (c >= 0) {
        return fail(p, "unexpected '%c' (a rule ends at the end of its line)", c >= 0x20 && c < 0x7F ? c : '?');
    }
    space(p, true);
    return true;
}

bool gbnf_parse(const char *text, size_t len, struct gtree *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (len > G_MAX_TEXT) {
        snprintf(err, errlen, "the grammar is %zu bytes; at most %zu", len, G_MAX_TEXT);
        return false;
    }
    struct gp p = {(const uint8_t *)text, len, 0, 1, 1, t, NULL, 0, 0, 0, err, errlen, false};
    space(&p, true);
    while (peek(&p) >= 0 && !p.failed)
        if (!parse_rule(&p)) break;
    free(p.stack);
    if (!p.failed && t->n_rules == 0) {
        snprintf(err, errlen, "the grammar has no rules");
        p.failed = true;
    }
    if (p.failed) gtree_free(t);
    return !p.failed;
}
