/*
 * jscan.c - JSON without a tree, for the chat-reply parsers: check that a
 * value is JSON and where it ends (or that the text stopped inside it, while a
 * reply is still being generated), find an object's member, turn strings in
 * and out of JSON, and drop the whitespace between tokens. Nesting is bounded;
 * nothing recurses.
 */
#include <stdlib.h>
#include <string.h>

#include "toolcall_impl.h"

#define MAX_NEST 512

void tc_put(struct tc_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n + 1) c *= 2;
        char *p = realloc(b->p, c);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tc_puts(struct tc_buf *b, const char *s) {
    tc_put(b, s, strlen(s));
}

char *tc_take(struct tc_buf *b) {
    if (!b->p && !b->oom) tc_put(b, "", 0);
    char *p = b->p;
    b->p = NULL;
    b->n = b->cap = 0;
    return p;
}

bool tc_is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t tc_skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && tc_is_ws(s[i])) i++;
    return i;
}

/* a string starting at s[i] == '"': the index past its closing quote, 0 if bad, n if open */
static size_t scan_string(const char *s, size_t n, size_t i, bool *open) {
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') return i + 1;
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (++i >= n) break;
            char e = s[i];
            if (e == 'u') {
                for (int k = 0; k < 4; k++) {
                    if (++i >= n) {
                        *open = true;
                        return n;
                    }
                    char h = s[i];
                    if (!((h >= '0' && h <= '9') || ((h | 32) >= 'a' && (h | 32) <= 'f'))) return 0;
                }
            } else if (!strchr("\"\\/bfnrt", e) || !e) {
                return 0;
            }
        }
    }
    *open = true;
    return n;
}

static size_t scan_number(const char *s, size_t n, size_t i, bool *open) {
    size_t st = i;
    if (i < n && s[i] == '-') i++;
    if (i >= n) goto end;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return 0;
    if (i < n && s[i] == '.') {
        i++;
        if (i < n && !(s[i] >= '0' && s[i] <= '9')) return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i < n && !(s[i] >= '0' && s[i] <= '9')) return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
end:
    if (i >= n) *open = true; /* more digits may follow */
    return i > st ? i : 0;
}

size_t tc_json_scan(const char *s, size_t n, bool partial, bool *open) {
    bool dummy = false, op = false;
    if (!open) open = &dummy;
    *open = false;
    char stack[MAX_NEST]; /* '{' or '[' */
    int depth = 0;
    size_t i = tc_skip_ws(s, n, 0);
    enum { VALUE, KEY, COLON, AFTER } want = VALUE;
    for (;;) {
        i = tc_skip_ws(s, n, i);
        if (i >= n) {
            if (!partial) return 0;
            *open = true;
            return n;
        }
        char c = s[i];
        if (want == VALUE) {
            if (c == '{' || c == '[') {
                if (depth >= MAX_NEST) return 0;
                stack[depth++] = c;
                i++;
                i = tc_skip_ws(s, n, i);
                if (i < n && s[i] == (c == '{' ? '}' : ']')) {
                    depth--;
                    i++;
                    want = AFTER;
                } else {
                    want = c == '{' ? KEY : VALUE;
                }
                if (depth == 0 && want == AFTER) return i;
                continue;
            }
            size_t e;
            op = false;
            if (c == '"')
                e = scan_string(s, n, i, &op);
            else if (c == '-' || (c >= '0' && c <= '9'))
                e = scan_number(s, n, i, &op);
            else {
                static const char *const lits[] = {"true", "false", "null"};
                e = 0;
                for (int k = 0; k < 3 && !e; k++) {
                    size_t l = strlen(lits[k]);
                    size_t m = n - i < l ? n - i : l;
                    if (!memcmp(s + i, lits[k], m)) {
                        e = i + m;
                        op = m < l;
                    }
                }
            }
            if (!e) return 0;
            if (op) { /* the text ends inside this value */
                bool number = c == '-' || (c >= '0' && c <= '9');
                if (!partial) /* a number alone may end where the text ends */
                    return number && depth == 0 && s[n - 1] >= '0' && s[n - 1] <= '9' ? n : 0;
                *open = true;
                return n;
            }
            i = e;
            if (depth == 0) return i;
            want = AFTER;
            continue;
        }
        if (want == KEY) {
            if (c != '"') return 0;
            op = false;
            size_t e = scan_string(s, n, i, &op);
            if (!e) return 0;
            if (op) {
                if (!partial) return 0;
                *open = true;
                return n;
            }
            i = e;
            want = COLON;
            continue;
        }
        if (want == COLON) {
            if (c != ':') return 0;
            i++;
            want = VALUE;
            continue;
        }
        /* AFTER a value inside a container */
        char top = stack[depth - 1];
        if (c == ',') {
            i++;
            want = top == '{' ? KEY : VALUE;
            continue;
        }
        if (c != (top == '{' ? '}' : ']')) return 0;
        i++;
        if (--depth == 0) return i;
    }
}

void tc_minify(struct tc_buf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        if (s[i] == '"') {
            bool op = false;
            size_t e = scan_string(s, n, i, &op);
            if (!e) e = n;
            tc_put(b, s + st, e - st);
            i = e;
            continue;
        }
        while (i < n && s[i] != '"' && !tc_is_ws(s[i])) i++;
        tc_put(b, s + st, i - st);
        while (i < n && tc_is_ws(s[i])) i++;
    }
}

bool tc_json_member(const char *s, size_t n, const char *key, bool partial, const char **v, size_t *vn, bool *open) {
    bool dummy;
    if (!open) open = &dummy;
    *open = false;
    size_t i = tc_skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return false;
    i++;
    size_t kl = strlen(key);
    for (;;) {
        i = tc_skip_ws(s, n, i);
        if (i >= n || s[i] != '"') return false;
        bool op = false;
        size_t ke = scan_string(s, n, i, &op);
        if (!ke || op) return false;
        bool match = ke - i - 2 == kl && !memcmp(s + i + 1, key, kl);
        i = tc_skip_ws(s, n, ke);
        if (i >= n || s[i] != ':') return false;
        i = tc_skip_ws(s, n, i + 1);
        if (i >= n) return false;
        bool vop = false;
        size_t ve = tc_json_scan(s + i, n - i, partial, &vop);
        if (!ve) return false;
        if (match) {
            *v = s + i;
            *vn = ve;
            *open = vop;
            return true;
        }
        if (vop) return false;
        i = tc_skip_ws(s, n, i + ve);
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        return false;
    }
}

static int hexv(char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

bool tc_json_unquote(const char *s, size_t n, struct tc_buf *b) {
    size_t i = tc_skip_ws(s, n, 0);
    if (i >= n || s[i] != '"') return false;
    bool op = false;
    size_t e = scan_string(s, n, i, &op);
    if (!e || op) return false;
    for (i++; i < e - 1; i++) {
        if (s[i] != '\\') {
            size_t st = i;
            while (i < e - 1 && s[i] != '\\') i++;
            tc_put(b, s + st, i - st);
            i--;
            continue;
        }
        char c = s[++i];
        if (c == 'u') {
            unsigned cp = 0;
            for (int k = 1; k <= 4; k++) cp = cp * 16 + (unsigned)hexv(s[i + k]);
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < e && s[i + 1] == '\\' && s[i + 2] == 'u') {
                unsigned lo = 0;
                for (int k = 3; k <= 6; k++) lo = lo * 16 + (unsigned)hexv(s[i + k]);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            char u[4];
            size_t l;
            if (cp < 0x80) u[0] = (char)cp, l = 1;
            else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), l = 2;
            else if (cp < 0x10000)
                u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
                u[2] = (char)(0x80 | (cp & 0x3F)), l = 3;
            else
                u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), l = 4;
            tc_put(b, u, l);
            continue;
        }
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *f = strchr(from, c);
        char o = f ? to[f - from] : c;
        tc_put(b, &o, 1);
    }
    return true;
}

void tc_json_quote(struct tc_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    tc_put(b, "\"", 1);
    size_t st = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        tc_put(b, s + st, i - st);
        st = i + 1;
        char e[8] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            el = 6;
        }
        tc_put(b, e, el);
    }
    tc_put(b, s + st, n - st);
    tc_put(b, "\"", 1);
}
