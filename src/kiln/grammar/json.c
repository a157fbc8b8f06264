/*
 * json.c - a strict JSON reader (RFC 8259) into a tree whose objects keep their
 * keys in document order (a schema's properties are generated in that order),
 * and a compact writer for const and enum values. Every allocation comes from
 * one arena freed at once. Errors name line and column.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "json.h"

/* ------------------------------------------------------------------ arena */

struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
};

static void *arena_alloc(void **arena, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct chunk *c = *arena;
    if (!c || c->used + n > c->cap) {
        size_t cap = n > ((size_t)64 << 10) ? n : ((size_t)64 << 10);
        struct chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = c;
        nc->used = 0;
        nc->cap = cap;
        *arena = c = nc;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

void json_free(struct jdoc *doc) {
    for (struct chunk *c = doc->arena, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    doc->arena = NULL;
}

/* ------------------------------------------------------------------ reader */

struct jp {
    const char *s;
    size_t n, i;
    int max_depth;
    void **arena;
    char *err;
    size_t errlen;
    bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
jfail(struct jp *p, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    int line = 1, col = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        if (p->s[k] == '\n') line++, col = 1;
        else if ((p->s[k] & 0xC0) != 0x80) col++;
    }
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "invalid JSON at line %d, column %d: %s", line, col, msg);
    return false;
}

static void ws(struct jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

static bool parse_string(struct jp *p, char **out, size_t *out_len) {
    p->i++; /* " */
    size_t start = p->i, cap = 0;
    /* the decoded text is never longer than the source */
    for (size_t k = p->i; k < p->n && p->s[k] != '"'; k++) {
        cap++;
        if (p->s[k] == '\\') k++, cap++;
    }
    char *o = arena_alloc(p->arena, cap + 1);
    if (!o) return jfail(p, "out of memory");
    size_t n = 0;
    (void)start;
    for (;;) {
        if (p->i >= p->n) return jfail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') break;
        if (c < 0x20) return jfail(p, "control character U+%04X inside a string", c);
        if (c != '\\') {
            uint32_t cp;
            int l = gutf8_decode((const uint8_t *)p->s + p->i, p->n - p->i, &cp);
            if (!l) return jfail(p, "invalid UTF-8 inside a string");
            memcpy(o + n, p->s + p->i, (size_t)l);
            n += (size_t)l;
            p->i += (size_t)l;
            continue;
        }
        if (p->i + 1 >= p->n) return jfail(p, "unterminated string");
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            int v = p->i + 4 <= p->n ? hex4(p->s + p->i) : -1;
            if (v < 0) return jfail(p, "\\u needs 4 hex digits");
            p->i += 4;
            uint32_t cp = (uint32_t)v;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u' ? hex4(p->s + p->i + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return jfail(p, "a lone surrogate \\u%04X", (unsigned)cp);
                p->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return jfail(p, "a lone surrogate \\u%04X", (unsigned)cp);
            }
            n += (size_t)gutf8_encode(cp, (uint8_t *)o + n);
            break;
        }
        default: return jfail(p, "unknown escape '\\%c'", e >= 0x20 && e < 0x7F ? e : '?');
        }
    }
    p->i++; /* " */
    o[n] = 0;
    *out = o;
    *out_len = n;
    return true;
}

static bool parse_number(struct jp *p, struct jval *v) {
    size_t a = p->i;
    bool frac = false;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "expected a digit");
    if (p->s[p->i] == '0') p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        frac = true;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "expected a digit after '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        frac = true;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "expected a digit in the exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    size_t len = p->i - a;
    char small[64], *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) return jfail(p, "out of memory");
    memcpy(buf, p->s + a, len);
    buf[len] = 0;
    v->t = J_NUM;
    v->num = strtod(buf, NULL);
    if (!frac) {
        errno = 0;
        long long ll = strtoll(buf, NULL, 10);
        v->is_int = errno == 0;
        v->i = ll;
    }
    if (buf != small) free(buf);
    return true;
}

static bool parse_value(struct jp *p, struct jval *v, int depth);

struct keyref {
    const char *s;
    size_t len;
};

static int cmp_key(const void *a, const void *b) {
    const struct keyref *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->s, y->s, x->len);
}

/* a schema with a key twice is ambiguous (which one holds?): refused */
static bool unique_keys(struct jp *p, char **keys, const size_t *klen, size_t n) {
    struct keyref *r = malloc(sizeof *r * n);
    if (!r) return jfail(p, "out of memory");
    for (size_t k = 0; k < n; k++) r[k] = (struct keyref){keys[k], klen[k]};
    qsort(r, n, sizeof *r, cmp_key);
    for (size_t k = 1; k < n; k++)
        if (!cmp_key(&r[k - 1], &r[k])) {
            jfail(p, "duplicate key \"%.60s\" in the object ending here", r[k].s);
            free(r);
            return false;
        }
    free(r);
    return true;
}

static bool parse_container(struct jp *p, struct jval *v, int depth, bool obj) {
    if (depth >= p->max_depth) return jfail(p, "nested deeper than %d", p->max_depth);
    p->i++;
    v->t = obj ? J_OBJ : J_ARR;
    /* children go to a growing array first, then to the arena */
    struct jval *kids = NULL;
    char **keys = NULL;
    size_t *klen = NULL, n = 0, cap = 0;
    bool ok = false;
    ws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        ok = true;
        goto done;
    }
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            struct jval *nk = realloc(kids, sizeof *nk * cap);
            char **nks = realloc(keys, sizeof *nks * cap);
            size_t *nkl = realloc(klen, sizeof *nkl * cap);
            if (nk) kids = nk;
            if (nks) keys = nks;
            if (nkl) klen = nkl;
            if (!nk || !nks || !nkl) {
                jfail(p, "out of memory");
                goto done;
            }
        }
        memset(&kids[n], 0, sizeof kids[n]);
        ws(p);
        if (obj) {
            if (p->i >= p->n || p->s[p->i] != '"') {
                jfail(p, "expected a key (a string)");
                goto done;
            }
            if (!parse_string(p, &keys[n], &klen[n])) goto done;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                jfail(p, "expected ':'");
                goto done;
            }
            p->i++;
        }
        if (!parse_value(p, &kids[n], depth + 1)) goto done;
        n++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            ok = true;
            break;
        }
        jfail(p, "expected ',' or '%c'", obj ? '}' : ']');
        goto done;
    }
done:
    if (ok && obj && n > 1 && !unique_keys(p, keys, klen, n)) ok = false;
    if (ok && n > 0) {
        v->kids = arena_alloc(p->arena, sizeof *kids * n);
        v->keys = obj ? arena_alloc(p->arena, sizeof *keys * n) : NULL;
        v->key_len = obj ? arena_alloc(p->arena, sizeof *klen * n) : NULL;
        if (!v->kids || (obj && (!v->keys || !v->key_len))) {
            ok = jfail(p, "out of memory");
        } else {
            memcpy(v->kids, kids, sizeof *kids * n);
            if (obj) memcpy(v->keys, keys, sizeof *keys * n), memcpy(v->key_len, klen, sizeof *klen * n);
            v->n = n;
        }
    }
    free(kids), free(keys), free(klen);
    return ok;
}

static bool parse_value(struct jp *p, struct jval *v, int depth) {
    ws(p);
    if (p->i >= p->n) return jfail(p, "expected a value");
    size_t a = p->i;
    char c = p->s[p->i];
    bool ok;
    if (c == '{' || c == '[') {
        ok = parse_container(p, v, depth, c == '{');
    } else if (c == '"') {
        v->t = J_STR;
        ok = parse_string(p, &v->s, &v->len);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = parse_number(p, v);
    } else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) {
        v->t = J_TRUE, p->i += 4, ok = true;
    } else if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) {
        v->t = J_FALSE, p->i += 5, ok = true;
    } else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) {
        v->t = J_NULL, p->i += 4, ok = true;
    } else {
        return jfail(p, "unexpected '%c'", c >= 0x20 && c < 0x7F ? c : '?');
    }
    v->raw = p->s + a;
    v->raw_len = p->i - a;
    return ok;
}

bool json_parse(const char *text, size_t len, int max_depth, struct jdoc *doc, char *err, size_t errlen) {
    memset(doc, 0, sizeof *doc);
    struct jp p = {text, len, 0, max_depth, &doc->arena, err, errlen, false};
    if (!text) return jfail(&p, "no text");
    if (parse_value(&p, &doc->root, 0)) {
        ws(&p);
        if (p.i < p.n) jfail(&p, "trailing data after the value");
    }
    if (p.failed) json_free(doc);
    return !p.failed;
}

/* ------------------------------------------------------------------ access, writer */

const struct jval *json_get(const struct jval *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    size_t l = strlen(key);
    for (size_t k = 0; k < o->n; k++)
        if (o->key_len[k] == l && !memcmp(o->keys[k], key, l)) return &o->kids[k];
    return NULL;
}

bool json_is_number(const struct jval *v) { return v && v->t == J_NUM; }

static bool put(char **buf, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = (*n + len + 1) * 2;
        char *b = realloc(*buf, c);
        if (!b) return false;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = 0;
    return true;
}

static bool dump_str(const char *s, size_t len, char **buf, size_t *n, size_t *cap) {
    if (!put(buf, n, cap, "\"", 1)) return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        const char *out = NULL;
        switch (c) {
        case '"': out = "\\\""; break;
        case '\\': out = "\\\\"; break;
        case '\b': out = "\\b"; break;
        case '\f': out = "\\f"; break;
        case '\n': out = "\\n"; break;
        case '\r': out = "\\r"; break;
        case '\t': out = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(e, sizeof e, "\\u%04x", c);
                out = e;
            }
        }
        if (out ? !put(buf, n, cap, out, strlen(out)) : !put(buf, n, cap, (const char *)&s[i], 1)) return false;
    }
    return put(buf, n, cap, "\"", 1);
}

bool json_dump(const struct jval *v, char **buf, size_t *n, size_t *cap) {
    switch (v->t) {
    case J_NULL: return put(buf, n, cap, "null", 4);
    case J_TRUE: return put(buf, n, cap, "true", 4);
    case J_FALSE: return put(buf, n, cap, "false", 5);
    case J_NUM: return put(buf, n, cap, v->raw, v->raw_len);
    case J_STR: return dump_str(v->s, v->len, buf, n, cap);
    case J_ARR:
    case J_OBJ:
        if (!put(buf, n, cap, v->t == J_OBJ ? "{" : "[", 1)) return false;
        for (size_t k = 0; k < v->n; k++) {
            if (k && !put(buf, n, cap, ",", 1)) return false;
            if (v->t == J_OBJ && (!dump_str(v->keys[k], v->key_len[k], buf, n, cap) || !put(buf, n, cap, ":", 1)))
                return false;
            if (!json_dump(&v->kids[k], buf, n, cap)) return false;
        }
        return put(buf, n, cap, v->t == J_OBJ ? "}" : "]", 1);
    }
    return false;
}

bool json_equal(const struct jval *a, const struct jval *b) {
    if (a->t != b->t) return false;
    switch (a->t) {
    case J_NUM: return a->num == b->num && a->raw_len && b->raw_len;
    case J_STR: return a->len == b->len && !memcmp(a->s, b->s, a->len);
    case J_ARR:
        if (a->n != b->n) return false;
        for (size_t k = 0; k < a->n; k++)
            if (!json_equal(&a->kids[k], &b->kids[k])) return false;
        return true;
    case J_OBJ:
        if (a->n != b->n) return false;
        for (size_t k = 0; k < a->n; k++) {
            const struct jval *o = NULL;
            for (size_t j = 0; j < b->n && !o; j++)
                if (b->key_len[j] == a->key_len[k] && !memcmp(b->keys[j], a->keys[k], a->key_len[k])) o = &b->kids[j];
            if (!o || !json_equal(&a->kids[k], o)) return false;
        }
        return true;
    default: return true;
    }
}
