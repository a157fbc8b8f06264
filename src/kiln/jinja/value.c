/*
 * value.c - the interpreter's values: constructors, arrays, insertion-ordered
 * objects (hashed past a few keys), truth, equality and ordering, and how a
 * value becomes text. Equality and text follow the reference engine
 * (@huggingface/jinja), which inherits JavaScript's rules: `==` is loose
 * (null equals undefined, "1" equals 1), `~` prints 3.0 as 3, {{ true }} is "true".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

struct jv jv_str(const char *p, size_t n) {
    return (struct jv){.k = JV_STR, .s = {p, n}};
}

struct jv jv_strz(const char *p) {
    return jv_str(p, strlen(p));
}

struct jv jv_str_copy(struct jx *x, const char *p, size_t n) {
    return jv_str(jx_strdup(x, p, n), n);
}

struct jv jv_array(struct jx *x, size_t cap) {
    struct jarr *a = jx_alloc(x, sizeof *a);
    if (cap) {
        if (cap > x->lim.max_memory / sizeof(struct jv)) jx_fail(x, "a list of %zu items is too large", cap);
        a->v = jx_alloc(x, cap * sizeof *a->v);
        a->cap = cap;
    }
    return (struct jv){.k = JV_ARRAY, .a = a};
}

struct jv jv_object(struct jx *x, uint8_t kind) {
    return (struct jv){.k = kind, .o = jx_alloc(x, sizeof(struct jobj))};
}

void jarr_push(struct jx *x, struct jarr *a, struct jv v) {
    a->v = jx_grow(x, a->v, &a->cap, a->n + 1, sizeof *a->v);
    a->v[a->n++] = v;
}

static uint32_t hash(const char *k, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

#define INDEX_FROM 8

static void reindex(struct jx *x, struct jobj *o) {
    size_t cap = 16;
    while (cap < o->n * 2) cap *= 2;
    o->ix = jx_alloc(x, cap * sizeof *o->ix);
    o->ixcap = cap;
    for (size_t i = 0; i < o->n; i++) {
        size_t h = hash(o->e[i].k, o->e[i].kn) & (cap - 1);
        while (o->ix[h]) h = (h + 1) & (cap - 1);
        o->ix[h] = (uint32_t)(i + 1);
    }
}

static struct jent *jobj_get_entry(const struct jobj *o, const char *k, size_t kn);

struct jv *jobj_get(const struct jobj *o, const char *k, size_t kn) {
    struct jent *e = jobj_get_entry(o, k, kn);
    return e ? &e->v : NULL;
}

static struct jent *jobj_get_entry(const struct jobj *o, const char *k, size_t kn) {
    if (o->ix) {
        size_t h = hash(k, kn) & (o->ixcap - 1);
        for (; o->ix[h]; h = (h + 1) & (o->ixcap - 1)) {
            struct jent *e = &o->e[o->ix[h] - 1];
            if (e->kn == kn && memcmp(e->k, k, kn) == 0) return e;
        }
        return NULL;
    }
    for (size_t i = 0; i < o->n; i++)
        if (o->e[i].kn == kn && memcmp(o->e[i].k, k, kn) == 0) return &o->e[i];
    return NULL;
}

void jobj_set(struct jx *x, struct jobj *o, const char *k, size_t kn, struct jv v) {
    struct jv *old = jobj_get(o, k, kn);
    if (old) {
        *old = v;
        return;
    }
    if (o->n >= UINT32_MAX - 1) jx_fail(x, "an object has too many keys");
    o->e = jx_grow(x, o->e, &o->cap, o->n + 1, sizeof *o->e);
    o->e[o->n++] = (struct jent){k, kn, v, false};
    if (o->n > INDEX_FROM && (!o->ix || o->n * 2 > o->ixcap))
        reindex(x, o);
    else if (o->ix) {
        size_t h = hash(k, kn) & (o->ixcap - 1);
        while (o->ix[h]) h = (h + 1) & (o->ixcap - 1);
        o->ix[h] = (uint32_t)o->n;
    }
}

void jobj_set_key(struct jx *x, struct jobj *o, struct jv key, struct jv v) {
    bool ikey = key.k == JV_INT;
    if (ikey) key = jv_to_str(x, key);
    if (key.k != JV_STR) jx_fail(x, "a mapping's keys must be strings or integers, not a %s", jv_kind_name(key));
    jobj_set(x, o, key.s.p, key.s.n, v);
    if (ikey) jobj_get_entry(o, key.s.p, key.s.n)->ikey = true;
}

struct jv jent_key(const struct jent *e) {
    if (e->ikey) return jv_int(strtoll(e->k, NULL, 10));
    return jv_str(e->k, e->kn);
}

bool jv_is_num(struct jv v) {
    return v.k == JV_INT || v.k == JV_FLOAT;
}

double jv_num(struct jv v) {
    return v.k == JV_INT ? (double)v.i : v.k == JV_FLOAT ? v.f : v.k == JV_BOOL ? (double)v.b : NAN;
}

bool jv_is_arr(struct jv v) {
    return v.k == JV_ARRAY || v.k == JV_TUPLE;
}

bool jv_is_obj(struct jv v) {
    return v.k == JV_OBJECT || v.k == JV_KWARGS;
}

bool jv_is_attrs(struct jv v) {
    return v.k == JV_OBJECT || v.k == JV_KWARGS || v.k == JV_NS;
}

const char *jv_kind_name(struct jv v) {
    static const char *const names[] = {"undefined", "none",   "boolean", "integer",   "float",     "string",
                                        "list",      "tuple",  "mapping", "keywords",  "namespace", "function"};
    return v.k < sizeof names / sizeof names[0] ? names[v.k] : "?";
}

bool jv_truthy(struct jv v) {
    switch (v.k) {
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0 && !isnan(v.f);
    case JV_STR: return v.s.n > 0;
    case JV_ARRAY:
    case JV_TUPLE: return v.a->n > 0;
    case JV_OBJECT:
    case JV_KWARGS: return v.o->n > 0;
    case JV_NS:
    case JV_FUNC: return true;
    default: return false;
    }
}

/* ------------------------------------------------------------------ equality */

/* JavaScript's Number(string): whitespace trimmed, "" is 0, decimal, 0x/0o/0b, Infinity; else NaN */
static double js_to_number(const char *p, size_t n) {
    size_t l;
    while (n && ju_space_at(p, n, &l)) p += l, n -= l;
    while (n) {
        size_t b = n - 1;
        while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
        if (!ju_space_at(p + b, n - b, &l) || b + l != n) break;
        n = b;
    }
    if (n == 0) return 0;
    char buf[64];
    if (n >= sizeof buf) return NAN;
    memcpy(buf, p, n);
    buf[n] = 0;
    const char *s = buf;
    int sign = 1;
    if (n > 2 && s[0] == '0' && strchr("xXoObB", s[1])) {
        int base = (s[1] | 32) == 'x' ? 16 : (s[1] | 32) == 'o' ? 8 : 2;
        double v = 0;
        for (s += 2; *s; s++) {
            int d = *s >= '0' && *s <= '9' ? *s - '0' : (*s | 32) >= 'a' && (*s | 32) <= 'f' ? (*s | 32) - 'a' + 10 : 99;
            if (d >= base) return NAN;
            v = v * base + d;
        }
        return v;
    }
    if (*s == '+' || *s == '-') sign = *s++ == '-' ? -1 : 1;
    if (strcmp(s, "Infinity") == 0) return sign * INFINITY;
    /* digits [. digits] [e [+-] digits], at least one digit in the mantissa */
    const char *q = s;
    int digits = 0;
    while (*q >= '0' && *q <= '9') q++, digits++;
    if (*q == '.') {
        q++;
        while (*q >= '0' && *q <= '9') q++, digits++;
    }
    if (!digits) return NAN;
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return NAN;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q) return NAN;
    return sign * strtod(s, NULL);
}

/* a value as JavaScript sees it in ==: a number, string, boolean, null, undefined or an object */
enum { P_NUM, P_STR, P_BOOL, P_NULL, P_UNDEF, P_OBJ };
struct prim {
    int t;
    double d;
    struct jv s; /* P_STR */
    const void *id;
};

static struct prim prim_of(struct jv v) {
    switch (v.k) {
    case JV_INT:
    case JV_FLOAT: return (struct prim){.t = P_NUM, .d = jv_num(v)};
    case JV_STR: return (struct prim){.t = P_STR, .s = v};
    case JV_BOOL: return (struct prim){.t = P_BOOL, .d = v.b};
    case JV_NONE: return (struct prim){.t = P_NULL};
    case JV_UNDEF: return (struct prim){.t = P_UNDEF};
    case JV_ARRAY:
    case JV_TUPLE: return (struct prim){.t = P_OBJ, .id = v.a, .s = v};
    case JV_FUNC: return (struct prim){.t = P_OBJ, .id = v.fn, .s = v};
    default: return (struct prim){.t = P_OBJ, .id = v.o, .s = v};
    }
}

bool jv_loose_eq(struct jx *x, struct jv a, struct jv b) {
    struct prim p = prim_of(a), q = prim_of(b);
    for (int round = 0; round < 4; round++) {
        if (p.t == q.t) {
            switch (p.t) {
            case P_NUM:
            case P_BOOL: return p.d == q.d;
            case P_STR: return p.s.s.n == q.s.s.n && memcmp(p.s.s.p, q.s.s.p, p.s.s.n) == 0;
            case P_OBJ: return p.id == q.id;
            default: return true;
            }
        }
        if ((p.t == P_NULL || p.t == P_UNDEF) && (q.t == P_NULL || q.t == P_UNDEF)) return true;
        if (p.t == P_NULL || p.t == P_UNDEF || q.t == P_NULL || q.t == P_UNDEF) return false;
        /* booleans become numbers, strings against numbers become numbers, objects become strings */
        if (p.t == P_BOOL) p.t = P_NUM;
        else if (q.t == P_BOOL) q.t = P_NUM;
        else if (p.t == P_STR && q.t == P_NUM) p = (struct prim){.t = P_NUM, .d = js_to_number(p.s.s.p, p.s.s.n)};
        else if (q.t == P_STR && p.t == P_NUM) q = (struct prim){.t = P_NUM, .d = js_to_number(q.s.s.p, q.s.s.n)};
        else if (p.t == P_OBJ) p = (struct prim){.t = P_STR, .s = jv_join_str(x, p.s)};
        else if (q.t == P_OBJ) q = (struct prim){.t = P_STR, .s = jv_join_str(x, q.s)};
    }
    return false;
}

bool jv_strict_eq(struct jv a, struct jv b) {
    if (jv_is_num(a) && jv_is_num(b)) return jv_num(a) == jv_num(b);
    if (a.k != b.k) return false;
    switch (a.k) {
    case JV_BOOL: return a.b == b.b;
    case JV_STR: return a.s.n == b.s.n && memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case JV_ARRAY:
    case JV_TUPLE: return a.a == b.a;
    case JV_FUNC: return a.fn == b.fn;
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NS: return a.o == b.o;
    default: return true;
    }
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? (c < 0 ? -1 : 1) : an < bn ? -1 : an > bn ? 1 : 0;
}

int jv_compare(struct jx *x, struct jv a, struct jv b, bool case_sensitive) {
    if (a.k == JV_NONE || b.k == JV_NONE || a.k == JV_UNDEF || b.k == JV_UNDEF) {
        if (a.k == b.k) return 0;
        jx_fail(x, "cannot compare %s with %s", jv_kind_name(a), jv_kind_name(b));
    }
    bool an = jv_is_num(a) || a.k == JV_BOOL, bn = jv_is_num(b) || b.k == JV_BOOL;
    if (an && bn) {
        double p = jv_num(a), q = jv_num(b);
        return p < q ? -1 : p > q ? 1 : 0;
    }
    if (a.k == JV_STR && b.k == JV_STR) {
        if (case_sensitive) return cmp_bytes(a.s.p, a.s.n, b.s.p, b.s.n);
        struct jv la = ju_case(x, a, 'l'), lb = ju_case(x, b, 'l');
        return cmp_bytes(la.s.p, la.s.n, lb.s.p, lb.s.n);
    }
    jx_fail(x, "cannot compare %s with %s", jv_kind_name(a), jv_kind_name(b));
}

/* ------------------------------------------------------------------ text */

static struct jv fmt(struct jx *x, const char *f, ...) __attribute__((format(printf, 2, 3)));
static struct jv fmt(struct jx *x, const char *f, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return jv_str_copy(x, buf, (size_t)n);
}

static struct jv float_str(struct jx *x, double d) {
    if (d == 0 && signbit(d)) return jv_strz("-0.0");
    if (isfinite(d) && d == floor(d) && fabs(d) < 1e21) return fmt(x, "%.1f", d);
    char buf[40];
    jx_fmt_double(d, buf, sizeof buf);
    return jv_str_copy(x, buf, strlen(buf));
}

struct jv jv_to_str(struct jx *x, struct jv v) {
    switch (v.k) {
    case JV_STR: return v;
    case JV_INT: return fmt(x, "%lld", (long long)v.i);
    case JV_FLOAT: return float_str(x, v.f);
    case JV_BOOL: return jv_strz(v.b ? "true" : "false");
    case JV_NONE: return jv_strz("null");
    case JV_UNDEF: return jv_strz("undefined");
    case JV_FUNC: jx_fail(x, "a function (%s) cannot be printed", v.fn->name ? v.fn->name : "macro");
    default: {
        struct jbuf b = {0};
        struct jtojson o = {.indent = -1, .undef_as_undefined = true};
        jx_tojson(x, &b, v, &o, 0);
        return jv_str(b.p ? b.p : "", b.n);
    }
    }
}

struct jv jv_join_str(struct jx *x, struct jv v) {
    switch (v.k) {
    case JV_FLOAT: {
        char buf[40];
        jx_fmt_double(v.f, buf, sizeof buf);
        return jv_str_copy(x, buf, strlen(buf));
    }
    case JV_ARRAY:
    case JV_TUPLE: {
        struct jbuf b = {0};
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) jbuf_put(x, &b, ",", 1);
            struct jv s = jv_to_str(x, v.a->v[i]);
            jbuf_put(x, &b, s.s.p, s.s.n);
        }
        return jv_str(b.p ? b.p : "", b.n);
    }
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NS: return jv_strz("[object Map]");
    default: return jv_to_str(x, v);
    }
}

struct jv jv_concat(struct jx *x, struct jv a, struct jv b) {
    if (a.s.n == 0) return b;
    if (b.s.n == 0) return a;
    if (a.s.n > SIZE_MAX / 2 || b.s.n > SIZE_MAX / 2) jx_fail(x, "string too long");
    char *p = jx_alloc(x, a.s.n + b.s.n + 1);
    memcpy(p, a.s.p, a.s.n);
    memcpy(p + a.s.n, b.s.p, b.s.n);
    return jv_str(p, a.s.n + b.s.n);
}

struct jv jv_func(struct jx *x, const char *name, jbuiltin fn, struct jv self) {
    struct jfunc *f = jx_alloc(x, sizeof *f);
    f->kind = JF_BUILTIN;
    f->name = name;
    f->fn = fn;
    f->self = self;
    return (struct jv){.k = JV_FUNC, .fn = f};
}

void jv_write(struct jx *x, struct jbuf *b, struct jv v) {
    if (v.k == JV_NONE || v.k == JV_UNDEF) return;
    if (v.k == JV_ARRAY || v.k == JV_TUPLE || jv_is_attrs(v)) {
        struct jtojson o = {.indent = -1, .undef_as_undefined = true};
        jx_tojson(x, b, v, &o, 0);
        return;
    }
    struct jv s = jv_to_str(x, v);
    jbuf_put(x, b, s.s.p, s.s.n);
}
