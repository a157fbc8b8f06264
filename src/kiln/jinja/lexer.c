/*
 * lexer.c - template text into tokens, as @huggingface/jinja does it: first
 * the whole text is rewritten (the last newline dropped, lstrip_blocks,
 * trim_blocks, transformers' {% generation %} tags removed), then tokens are
 * read with `{%-`/`-%}` trimming the text beside them. Every byte keeps the
 * line it had in the original text, so errors name the line the author sees.
 */
#include <stdio.h>
#include <string.h>

#include "jinja_impl.h"

struct txt {
    char *s;
    int *line;
    size_t n;
};

static struct txt txt_new(struct jx *x, size_t cap) {
    if (cap > x->lim.max_memory / (sizeof(int) + 1)) jx_fail(x, "the template is too large");
    struct txt t = {jx_alloc(x, cap + 1), jx_alloc(x, (cap + 1) * sizeof(int)), 0};
    return t;
}

static void txt_put(struct txt *t, const struct txt *from, size_t i) {
    t->s[t->n] = from->s[i];
    t->line[t->n++] = from->line[i];
}

static bool line_start(const struct txt *t, size_t i) {
    if (i == 0) return true;
    char c = t->s[i - 1];
    if (c == '\n' || c == '\r') return true;
    /* U+2028, U+2029 end lines for JavaScript's ^ too */
    return i >= 3 && (unsigned char)t->s[i - 3] == 0xE2 && (unsigned char)t->s[i - 2] == 0x80 &&
           ((unsigned char)t->s[i - 1] == 0xA8 || (unsigned char)t->s[i - 1] == 0xA9);
}

static size_t space_len(const struct txt *t, size_t i) {
    size_t l = 0;
    return ju_space_at(t->s + i, t->n - i, &l) ? l : 0;
}

/* {%-? \s* (end)? generation \s* -?%} at i: its end, or 0; *ls, *rs: the dashes */
static size_t generation_tag(const struct txt *t, size_t i, bool *ls, bool *rs) {
    if (i + 2 > t->n || t->s[i] != '{' || t->s[i + 1] != '%') return 0;
    size_t p = i + 2, l;
    *ls = p < t->n && t->s[p] == '-';
    if (*ls) p++;
    while ((l = space_len(t, p))) p += l;
    if (t->n - p >= 3 && memcmp(t->s + p, "end", 3) == 0) p += 3;
    if (t->n - p < 10 || memcmp(t->s + p, "generation", 10) != 0) return 0;
    p += 10;
    while ((l = space_len(t, p))) p += l;
    *rs = p < t->n && t->s[p] == '-';
    if (*rs) p++;
    if (t->n - p < 2 || t->s[p] != '%' || t->s[p + 1] != '}') return 0;
    return p + 2;
}

static struct txt preprocess(struct jx *x, const char *src, size_t len) {
    struct txt a = txt_new(x, len);
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        a.s[i] = src[i];
        a.line[i] = line;
        if (src[i] == '\n') line++;
    }
    a.n = len;
    if (a.n && a.s[a.n - 1] == '\n') a.n--;

    /* lstrip_blocks: spaces and tabs from a line's start to a {% {# {- */
    struct txt b = txt_new(x, a.n);
    for (size_t i = 0; i < a.n;) {
        if (line_start(&a, i)) {
            size_t k = i;
            while (k < a.n && (a.s[k] == ' ' || a.s[k] == '\t')) k++;
            if (k + 1 < a.n && a.s[k] == '{' && (a.s[k + 1] == '#' || a.s[k + 1] == '%' || a.s[k + 1] == '-')) {
                i = k;
                txt_put(&b, &a, i++);
                continue;
            }
        }
        txt_put(&b, &a, i++);
    }

    /* trim_blocks: the newline after #} %} -} */
    struct txt c = txt_new(x, b.n);
    for (size_t i = 0; i < b.n;) {
        if (i + 2 < b.n && (b.s[i] == '#' || b.s[i] == '%' || b.s[i] == '-') && b.s[i + 1] == '}' &&
            b.s[i + 2] == '\n') {
            txt_put(&c, &b, i);
            txt_put(&c, &b, i + 1);
            i += 3;
            continue;
        }
        txt_put(&c, &b, i++);
    }

    /* {% generation %} / {% endgeneration %} go, with the space around them unless a dash keeps it */
    struct txt d = txt_new(x, c.n);
    size_t ws_from = 0; /* where the run of whitespace that ends d began (in d) */
    for (size_t i = 0; i < c.n;) {
        bool ls, rs;
        size_t end = generation_tag(&c, i, &ls, &rs);
        if (end) {
            if (ls) d.n = ws_from;
            size_t k = end, l;
            while ((l = space_len(&c, k))) k += l;
            if (!rs)
                for (size_t j = end; j < k; j++) txt_put(&d, &c, j);
            i = k;
            ws_from = d.n;
            continue;
        }
        size_t l = space_len(&c, i);
        if (!l) {
            txt_put(&d, &c, i++);
            ws_from = d.n;
        } else {
            for (size_t j = 0; j < l; j++) txt_put(&d, &c, i + j);
            i += l;
        }
    }
    d.s[d.n] = 0;
    return d;
}

/* ------------------------------------------------------------------ tokens */

struct lx {
    struct jx *x;
    struct txt t;
    size_t pos;
    struct jtoks *out;
};

static void push(struct lx *l, int type, const char *p, size_t n, int line) {
    struct jtoks *o = l->out;
    o->t = jx_grow(l->x, o->t, &o->cap, o->n + 2, sizeof *o->t);
    o->t[o->n++] = (struct jtok){(uint8_t)type, line, p, n};
}

static int last_type(const struct lx *l) {
    return l->out->n ? l->out->t[l->out->n - 1].t : -1;
}

static bool at(const struct lx *l, const char *s) {
    size_t n = strlen(s);
    return l->t.n - l->pos >= n && memcmp(l->t.s + l->pos, s, n) == 0;
}

static int cur_line(const struct lx *l) {
    return l->pos < l->t.n ? l->t.line[l->pos] : l->t.n ? l->t.line[l->t.n - 1] : 1;
}

_Noreturn static void lex_fail(struct lx *l, const char *msg) {
    l->x->line = cur_line(l);
    jx_fail(l->x, "%s", msg);
}

static void strip_trailing(struct lx *l) {
    if (last_type(l) != T_TEXT) return;
    struct jtok *t = &l->out->t[l->out->n - 1];
    struct jv s = ju_trim(l->x, jv_str(t->p, t->n), false, true, jv_undef());
    t->n = s.s.n;
    if (!t->n) l->out->n--;
}

static void skip_space(struct lx *l) {
    size_t n;
    while ((n = space_len(&l->t, l->pos))) l->pos += n;
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static bool is_word(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static size_t digits(struct lx *l) {
    size_t s = l->pos;
    while (l->pos < l->t.n && is_digit(l->t.s[l->pos])) l->pos++;
    return l->pos - s;
}

static int hexval(char c) {
    return is_digit(c) ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

/* a quoted string: escapes as the reference engine knows them */
static void string_literal(struct lx *l, char quote) {
    int line = cur_line(l);
    l->pos++;
    size_t start = l->pos;
    while (l->pos < l->t.n && l->t.s[l->pos] != quote) l->pos += l->t.s[l->pos] == '\\' ? 2 : 1;
    if (l->pos >= l->t.n) lex_fail(l, "a string literal is not closed");
    size_t end = l->pos;
    char *out = jx_alloc(l->x, end - start + 1), *o = out;
    for (size_t i = start; i < end;) {
        char c = l->t.s[i++];
        if (c != '\\') {
            *o++ = c;
            continue;
        }
        char e = l->t.s[i++];
        if (e == 'x' || e == 'u') {
            size_t n = e == 'x' ? 2 : 4;
            unsigned v = 0;
            for (size_t k = 0; k < n; k++) {
                int h = i + k < end ? hexval(l->t.s[i + k]) : -1;
                if (h < 0) lex_fail(l, "a \\x or \\u escape needs hexadecimal digits");
                v = v * 16 + (unsigned)h;
            }
            i += n;
            if (v >= 0xD800 && v <= 0xDBFF && i + 6 <= end && l->t.s[i] == '\\' && l->t.s[i + 1] == 'u') {
                unsigned lo = 0;
                bool ok = true;
                for (size_t k = 0; k < 4; k++) {
                    int h = hexval(l->t.s[i + 2 + k]);
                    ok = ok && h >= 0;
                    lo = lo * 16 + (unsigned)(h < 0 ? 0 : h);
                }
                if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (v >= 0xD800 && v <= 0xDFFF) v = 0xFFFD;
            o += ju_encode(v, o);
            continue;
        }
        static const char from[] = "ntrbfv'\"\\", to[] = "\n\t\r\b\f\v'\"\\";
        const char *f = e ? strchr(from, e) : NULL;
        if (!f) lex_fail(l, "unknown escape in a string literal");
        *o++ = to[f - from];
    }
    *o = 0;
    l->pos = end + 1;
    push(l, T_STR, out, (size_t)(o - out), line);
}

static const struct {
    const char *s;
    int type;
} table[] = {
    {"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR}, {"(", T_LPAREN},
    {")", T_RPAREN},     {"{", T_LBRACE},      {"}", T_RBRACE},     {"[", T_LBRACKET},   {"]", T_RBRACKET},
    {",", T_COMMA},      {".", T_DOT},         {":", T_COLON},      {"|", T_PIPE},       {"<=", T_CMP},
    {">=", T_CMP},       {"==", T_CMP},        {"!=", T_CMP},       {"<", T_CMP},        {">", T_CMP},
    {"+", T_ADD},        {"-", T_ADD},         {"~", T_ADD},        {"**", T_POW},       {"*", T_MUL},
    {"//", T_MUL},       {"/", T_MUL},         {"%", T_MUL},        {"=", T_EQUALS},
};

void jx_lex(struct jx *x, const char *src, size_t len, struct jtoks *out) {
    struct lx l = {x, preprocess(x, src, len), 0, out};
    int braces = 0; /* depth of { inside an expression: there }} closes a literal, not the expression */
    while (l.pos < l.t.n) {
        jx_step(x);
        int lt = last_type(&l);
        if (lt == -1 || lt == T_CLOSE_STMT || lt == T_CLOSE_EXPR || lt == T_COMMENT) {
            size_t s = l.pos;
            while (l.pos < l.t.n && !(l.t.s[l.pos] == '{' && l.pos + 1 < l.t.n &&
                                      (l.t.s[l.pos + 1] == '%' || l.t.s[l.pos + 1] == '{' || l.t.s[l.pos + 1] == '#')))
                l.pos++;
            if (l.pos > s) {
                push(&l, T_TEXT, l.t.s + s, l.pos - s, l.t.line[s]);
                continue;
            }
        }
        if (at(&l, "{#")) {
            int line = cur_line(&l);
            l.pos += 2;
            bool strip_before = l.pos < l.t.n && l.t.s[l.pos] == '-';
            if (strip_before) l.pos++;
            size_t s = l.pos;
            while (!(l.pos + 1 < l.t.n && l.t.s[l.pos] == '#' && l.t.s[l.pos + 1] == '}')) {
                if (l.pos + 2 >= l.t.n) lex_fail(&l, "a comment {# is not closed with #}");
                l.pos++;
            }
            bool strip_after = l.pos > s && l.t.s[l.pos - 1] == '-';
            if (strip_before) strip_trailing(&l);
            push(&l, T_COMMENT, l.t.s + s, l.pos - s, line);
            l.pos += 2;
            if (strip_after) skip_space(&l);
            continue;
        }
        if (at(&l, "{%-")) {
            strip_trailing(&l);
            push(&l, T_OPEN_STMT, "{%", 2, cur_line(&l));
            l.pos += 3;
            continue;
        }
        if (at(&l, "{{-")) {
            strip_trailing(&l);
            push(&l, T_OPEN_EXPR, "{{", 2, cur_line(&l));
            braces = 0;
            l.pos += 3;
            continue;
        }
        skip_space(&l);
        if (l.pos >= l.t.n) break;
        if (at(&l, "-%}")) {
            push(&l, T_CLOSE_STMT, "%}", 2, cur_line(&l));
            l.pos += 3;
            skip_space(&l);
            continue;
        }
        if (at(&l, "-}}")) {
            push(&l, T_CLOSE_EXPR, "}}", 2, cur_line(&l));
            l.pos += 3;
            skip_space(&l);
            continue;
        }
        char c = l.t.s[l.pos];
        int line = cur_line(&l);
        if (c == '-' || c == '+') {
            lt = last_type(&l);
            if (lt == T_TEXT || lt == -1) lex_fail(&l, "unexpected sign outside {{ }} or {% %}");
            if (lt != T_IDENT && lt != T_NUM && lt != T_STR && lt != T_RPAREN && lt != T_RBRACKET) {
                size_t s = l.pos++;
                size_t nd = digits(&l);
                if (nd && l.pos + 1 < l.t.n && l.t.s[l.pos] == '.' && is_digit(l.t.s[l.pos + 1])) {
                    l.pos++;
                    digits(&l);
                }
                if (nd)
                    push(&l, T_NUM, l.t.s + s, l.pos - s, line);
                else
                    push(&l, T_UNARY, l.t.s + s, 1, line);
                continue;
            }
        }
        bool matched = false;
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
            if (table[i].type == T_CLOSE_EXPR && braces > 0) continue;
            if (!at(&l, table[i].s)) continue;
            size_t n = strlen(table[i].s);
            push(&l, table[i].type, l.t.s + l.pos, n, line);
            if (table[i].type == T_OPEN_EXPR)
                braces = 0;
            else if (table[i].type == T_LBRACE)
                braces++;
            else if (table[i].type == T_RBRACE)
                braces--;
            l.pos += n;
            matched = true;
            break;
        }
        if (matched) continue;
        if (c == '\'' || c == '"') {
            string_literal(&l, c);
            continue;
        }
        if (is_digit(c)) {
            size_t s = l.pos;
            digits(&l);
            if (last_type(&l) != T_DOT && l.pos + 1 < l.t.n && l.t.s[l.pos] == '.' && is_digit(l.t.s[l.pos + 1])) {
                l.pos++;
                digits(&l);
            }
            push(&l, T_NUM, l.t.s + s, l.pos - s, line);
            continue;
        }
        if (is_word(c)) {
            size_t s = l.pos;
            while (l.pos < l.t.n && is_word(l.t.s[l.pos])) l.pos++;
            push(&l, T_IDENT, l.t.s + s, l.pos - s, line);
            continue;
        }
        char msg[64];
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
            snprintf(msg, sizeof msg, "unexpected character '%c'", c);
        else
            snprintf(msg, sizeof msg, "unexpected byte 0x%02x", (unsigned char)c);
        lex_fail(&l, msg);
    }
    push(&l, T_EOF, "", 0, cur_line(&l));
}
