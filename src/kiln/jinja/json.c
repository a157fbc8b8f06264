/*
 * json.c - JSON in and out of the interpreter: the render context (and the
 * from_json filter) parsed strictly into values, and tojson as transformers
 * and @huggingface/jinja write it: Python's json.dumps separators (", ", ": "),
 * non-ASCII kept unless ensure_ascii, numbers as JavaScript prints them.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

/* ------------------------------------------------------------------ numbers */

void jx_fmt_double(double d, char *buf, size_t size) {
    if (isnan(d)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(buf, size, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (d == 0) {
        snprintf(buf, size, "0");
        return;
    }
    /* the shortest digits that read back as d */
    char e[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, d);
        if (strtod(e, NULL) == d) break;
    }
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int k = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int n = atoi(p + 1) + 1; /* d = 0.digits * 10^n */
    char out[64], *o = out;
    if (neg) *o++ = '-';
    if (k <= n && n <= 21) {
        memcpy(o, digits, (size_t)k), o += k;
        for (int i = k; i < n; i++) *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, digits, (size_t)n), o += n;
        *o++ = '.';
        memcpy(o, digits + n, (size_t)(k - n)), o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0', *o++ = '.';
        for (int i = 0; i < -n; i++) *o++ = '0';
        memcpy(o, digits, (size_t)k), o += k;
    } else {
        *o++ = digits[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(k - 1)), o += k - 1;
        }
        o += sprintf(o, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
    *o = 0;
    snprintf(buf, size, "%s", out);
}

/* ------------------------------------------------------------------ parse */

struct jp {
    struct jx *x;
    const char *s, *end, *p;
    const char *what;
    int depth;
};

_Noreturn static void bad(struct jp *j, const char *msg) {
    jx_fail(j->x, "%s is not valid JSON: %s at byte %zu", j->what, msg, (size_t)(j->p - j->s));
}

static void ws(struct jp *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static unsigned hex4(struct jp *j) {
    if (j->end - j->p < 4) bad(j, "short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
        if (d < 0) bad(j, "bad \\u escape");
        v = v * 16 + (unsigned)d;
    }
    return v;
}

static struct jv jstring(struct jp *j) {
    j->p++; /* " */
    const char *start = j->p;
    bool plain = true;
    while (j->p < j->end && *j->p != '"') {
        if ((unsigned char)*j->p < 0x20) bad(j, "control character in a string");
        if (*j->p == '\\') {
            plain = false;
            j->p++;
        }
        j->p++;
    }
    if (j->p >= j->end) bad(j, "unterminated string");
    size_t n = (size_t)(j->p - start);
    j->p++;
    if (plain) return jv_str_copy(j->x, start, n);
    char *out = jx_alloc(j->x, n + 1), *o = out;
    const char *end = j->p - 1;
    struct jp sub = *j;
    for (sub.p = start; sub.p < end;) {
        char c = *sub.p++;
        if (c != '\\') {
            *o++ = c;
            continue;
        }
        c = *sub.p++;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp = hex4(&sub);
            if (cp >= 0xD800 && cp <= 0xDBFF && end - sub.p >= 6 && sub.p[0] == '\\' && sub.p[1] == 'u') {
                const char *save = sub.p;
                sub.p += 2;
                unsigned lo = hex4(&sub);
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    sub.p = save;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* a lone surrogate has no UTF-8 form */
            o += ju_encode(cp, o);
            break;
        }
        default: j->p = sub.p - 1; bad(j, "bad escape");
        }
    }
    *o = 0;
    return jv_str(out, (size_t)(o - out));
}

static struct jv jnumber(struct jp *j) {
    const char *start = j->p;
    if (j->p < j->end && *j->p == '-') j->p++;
    if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9')) bad(j, "bad number");
    if (*j->p == '0')
        j->p++;
    else
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    bool integral = true;
    if (j->p < j->end && *j->p == '.') {
        integral = false;
        j->p++;
        if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9')) bad(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        integral = false;
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9')) bad(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    char buf[512];
    size_t n = (size_t)(j->p - start);
    if (n >= sizeof buf) bad(j, "number too long");
    memcpy(buf, start, n);
    buf[n] = 0;
    if (integral) {
        char *e;
        long long v = strtoll(buf, &e, 10);
        if (v != LLONG_MAX && v != LLONG_MIN) return jv_int(v);
    }
    double d = strtod(buf, NULL);
    /* JavaScript has one number type: an integral value is an integer to the reference engine */
    if (isfinite(d) && d == floor(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
    return jv_float(d);
}

static struct jv jvalue(struct jp *j) {
    ws(j);
    if (j->p >= j->end) bad(j, "unexpected end");
    if (++j->depth > 512) bad(j, "nested more than 512 deep");
    jx_step(j->x);
    struct jv v;
    char c = *j->p;
    if (c == '{') {
        j->p++;
        v = jv_object(j->x, JV_OBJECT);
        ws(j);
        if (j->p < j->end && *j->p == '}') {
            j->p++;
        } else {
            for (;;) {
                ws(j);
                if (j->p >= j->end || *j->p != '"') bad(j, "expected a key");
                struct jv k = jstring(j);
                ws(j);
                if (j->p >= j->end || *j->p != ':') bad(j, "expected ':'");
                j->p++;
                jobj_set(j->x, v.o, k.s.p, k.s.n, jvalue(j));
                ws(j);
                if (j->p < j->end && *j->p == ',') {
                    j->p++;
                    continue;
                }
                if (j->p < j->end && *j->p == '}') {
                    j->p++;
                    break;
                }
                bad(j, "expected ',' or '}'");
            }
        }
    } else if (c == '[') {
        j->p++;
        v = jv_array(j->x, 0);
        ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
        } else {
            for (;;) {
                jarr_push(j->x, v.a, jvalue(j));
                ws(j);
                if (j->p < j->end && *j->p == ',') {
                    j->p++;
                    continue;
                }
                if (j->p < j->end && *j->p == ']') {
                    j->p++;
                    break;
                }
                bad(j, "expected ',' or ']'");
            }
        }
    } else if (c == '"') {
        v = jstring(j);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        v = jnumber(j);
    } else if ((size_t)(j->end - j->p) >= 4 && memcmp(j->p, "true", 4) == 0) {
        j->p += 4;
        v = jv_bool(true);
    } else if ((size_t)(j->end - j->p) >= 5 && memcmp(j->p, "false", 5) == 0) {
        j->p += 5;
        v = jv_bool(false);
    } else if ((size_t)(j->end - j->p) >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4;
        v = jv_none();
    } else {
        bad(j, "unexpected character");
    }
    j->depth--;
    return v;
}

struct jv jx_json_parse(struct jx *x, const char *s, size_t n, const char *what) {
    struct jp j = {x, s, s + n, s, what, 0};
    struct jv v = jvalue(&j);
    ws(&j);
    if (j.p != j.end) bad(&j, "trailing data");
    return v;
}

/* ------------------------------------------------------------------ tojson */

static void put_json_string(struct jx *x, struct jbuf *b, const char *s, size_t n, bool ascii) {
    static const char hex[] = "0123456789abcdef";
    jbuf_put(x, b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, pending */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        size_t el = 0, l = 1;
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, el = 2;
        } else if (c < 0x20) {
            const char *named = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t" : NULL;
            if (named)
                memcpy(esc, named, 2), el = 2;
            else
                el = (size_t)snprintf(esc, sizeof esc, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        } else if (ascii && c >= 0x7F) {
            uint32_t cp;
            l = ju_decode(s + i, n - i, &cp);
            if (cp >= 0x10000) { /* a surrogate pair, as JavaScript's strings hold it */
                uint32_t v = cp - 0x10000;
                el = (size_t)snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                el = (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
        }
        if (!el) {
            run++;
            i++;
            continue;
        }
        jbuf_put(x, b, s + i - run, run);
        run = 0;
        jbuf_put(x, b, esc, el);
        i += l;
    }
    jbuf_put(x, b, s + n - run, run);
    jbuf_put(x, b, "\"", 1);
}

static void pad(struct jx *x, struct jbuf *b, int indent, int depth) {
    jbuf_put(x, b, "\n", 1);
    for (int i = 0; i < indent * depth; i++) jbuf_put(x, b, " ", 1);
}

/* JavaScript's localeCompare for keys, near enough: letters case-folded first, then lower before upper */
static int key_order(const struct jent *a, const struct jent *b) {
    size_t n = a->kn < b->kn ? a->kn : b->kn;
    for (size_t i = 0; i < n; i++) {
        int p = (unsigned char)a->k[i], q = (unsigned char)b->k[i];
        int fp = p >= 'A' && p <= 'Z' ? p + 32 : p, fq = q >= 'A' && q <= 'Z' ? q + 32 : q;
        if (fp != fq) return fp - fq;
    }
    if (a->kn != b->kn) return a->kn < b->kn ? -1 : 1;
    for (size_t i = 0; i < n; i++)
        if (a->k[i] != b->k[i]) return (unsigned char)b->k[i] - (unsigned char)a->k[i];
    return 0;
}

void jx_tojson(struct jx *x, struct jbuf *b, struct jv v, const struct jtojson *o, int depth) {
    if (depth > x->lim.max_depth) jx_fail(x, "tojson: the value is nested too deeply (or contains itself)");
    jx_step(x);
    bool ind = o->indent > 0;
    const char *isep = o->item_sep ? o->item_sep : ind ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    switch (v.k) {
    case JV_NONE: jbuf_put(x, b, "null", 4); return;
    case JV_UNDEF:
        if (o->undef_as_undefined)
            jbuf_put(x, b, "undefined", 9);
        else
            jbuf_put(x, b, "null", 4);
        return;
    case JV_BOOL: v.b ? jbuf_put(x, b, "true", 4) : jbuf_put(x, b, "false", 5); return;
    case JV_INT: {
        char t[32];
        jbuf_put(x, b, t, (size_t)snprintf(t, sizeof t, "%lld", (long long)v.i));
        return;
    }
    case JV_FLOAT: {
        char t[40];
        if (!isfinite(v.f))
            snprintf(t, sizeof t, "null");
        else
            jx_fmt_double(v.f, t, sizeof t);
        jbuf_put(x, b, t, strlen(t));
        return;
    }
    case JV_STR: put_json_string(x, b, v.s.p, v.s.n, o->ensure_ascii); return;
    case JV_ARRAY:
    case JV_TUPLE:
        jbuf_put(x, b, "[", 1);
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) jbuf_put(x, b, isep, strlen(isep));
            if (ind) pad(x, b, o->indent, depth + 1);
            jx_tojson(x, b, v.a->v[i], o, depth + 1);
        }
        if (ind && v.a->n) pad(x, b, o->indent, depth);
        jbuf_put(x, b, "]", 1);
        return;
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NS: {
        const struct jent *e = v.o->e;
        if (o->sort_keys && v.o->n > 1) {
            struct jent *s = jx_alloc(x, v.o->n * sizeof *s);
            memcpy(s, v.o->e, v.o->n * sizeof *s);
            for (size_t i = 1; i < v.o->n; i++) /* insertion sort: stable, and objects are small */
                for (size_t k = i; k > 0 && key_order(&s[k - 1], &s[k]) > 0; k--) {
                    struct jent t = s[k];
                    s[k] = s[k - 1], s[k - 1] = t;
                    jx_step(x);
                }
            e = s;
        }
        jbuf_put(x, b, "{", 1);
        for (size_t i = 0; i < v.o->n; i++) {
            if (i) jbuf_put(x, b, isep, strlen(isep));
            if (ind) pad(x, b, o->indent, depth + 1);
            put_json_string(x, b, e[i].k, e[i].kn, o->ensure_ascii);
            jbuf_put(x, b, ksep, strlen(ksep));
            jx_tojson(x, b, e[i].v, o, depth + 1);
        }
        if (ind && v.o->n) pad(x, b, o->indent, depth);
        jbuf_put(x, b, "}", 1);
        return;
    }
    default: jx_fail(x, "tojson: a %s cannot be written as JSON", jv_kind_name(v));
    }
}

/* ------------------------------------------------------------------ Python's repr */

static void pyrepr_str(struct jx *x, struct jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_put(x, b, &q, 1);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = ju_decode(s + i, n - i, &cp);
        char esc[16];
        size_t el = 0;
        if (cp == '\\' || cp == (uint32_t)q) esc[0] = '\\', esc[1] = (char)cp, el = 2;
        else if (cp == '\n') memcpy(esc, "\\n", 2), el = 2;
        else if (cp == '\r') memcpy(esc, "\\r", 2), el = 2;
        else if (cp == '\t') memcpy(esc, "\\t", 2), el = 2;
        else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) el = (size_t)snprintf(esc, sizeof esc, "\\x%02x", cp);
        if (el)
            jbuf_put(x, b, esc, el);
        else
            jbuf_put(x, b, s + i, l);
        i += l;
    }
    jbuf_put(x, b, &q, 1);
}

void jx_pyrepr(struct jx *x, struct jbuf *b, struct jv v, int depth) {
    if (depth > x->lim.max_depth) jx_fail(x, "string: the value is nested too deeply (or contains itself)");
    jx_step(x);
    char t[48];
    switch (v.k) {
    case JV_NONE:
    case JV_UNDEF: jbuf_put(x, b, "None", 4); return;
    case JV_BOOL: v.b ? jbuf_put(x, b, "True", 4) : jbuf_put(x, b, "False", 5); return;
    case JV_INT: jbuf_put(x, b, t, (size_t)snprintf(t, sizeof t, "%lld", (long long)v.i)); return;
    case JV_FLOAT:
        if (isnan(v.f)) snprintf(t, sizeof t, "nan");
        else if (isinf(v.f)) snprintf(t, sizeof t, v.f < 0 ? "-inf" : "inf");
        else if (v.f == floor(v.f) && fabs(v.f) < 1e16) snprintf(t, sizeof t, "%.1f", v.f);
        else {
            for (int p = 1; p <= 17; p++) {
                snprintf(t, sizeof t, "%.*g", p, v.f);
                if (strtod(t, NULL) == v.f) break;
            }
        }
        jbuf_put(x, b, t, strlen(t));
        return;
    case JV_STR: pyrepr_str(x, b, v.s.p, v.s.n); return;
    case JV_ARRAY:
    case JV_TUPLE:
        jbuf_put(x, b, v.k == JV_TUPLE ? "(" : "[", 1);
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) jbuf_put(x, b, ", ", 2);
            jx_pyrepr(x, b, v.a->v[i], depth + 1);
        }
        if (v.k == JV_TUPLE && v.a->n == 1) jbuf_put(x, b, ",", 1);
        jbuf_put(x, b, v.k == JV_TUPLE ? ")" : "]", 1);
        return;
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NS:
        jbuf_put(x, b, "{", 1);
        for (size_t i = 0; i < v.o->n; i++) {
            if (i) jbuf_put(x, b, ", ", 2);
            if (v.o->e[i].ikey)
                jbuf_put(x, b, v.o->e[i].k, v.o->e[i].kn);
            else
                pyrepr_str(x, b, v.o->e[i].k, v.o->e[i].kn);
            jbuf_put(x, b, ": ", 2);
            jx_pyrepr(x, b, v.o->e[i].v, depth + 1);
        }
        jbuf_put(x, b, "}", 1);
        return;
    default: jx_fail(x, "string: a %s has no text form", jv_kind_name(v));
    }
}
