/*
 * filters.c - filters (x | name(args)) and tests (x is name). Where
 * @huggingface/jinja has a filter, kiln gives its result (tojson, default,
 * join, length, selectattr, map(attribute=), int, indent, ...); filters it
 * lacks and templates use follow Python's Jinja (map('upper'), select,
 * reject, min, max, sum, round) plus from_json. One table row per filter.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

struct fctx {
    struct jx *x;
    struct jenv *env;
    const char *name;
    bool parens; /* written with (args) */
};

_Noreturn static void wrong_type(struct fctx *f, struct jv v) {
    jx_fail(f->x, "filter '%s' cannot apply to a %s", f->name, jv_kind_name(v));
}

static bool absent(struct jv v) {
    return v.k == JV_UNDEF || v.k == JV_NONE;
}

static bool flag(struct fctx *f, struct jv v, const char *what) {
    if (v.k == JV_UNDEF) return false;
    if (v.k != JV_BOOL) jx_fail(f->x, "filter '%s': %s must be true or false", f->name, what);
    return v.b;
}

/* ------------------------------------------------------------------ JSON and defaults */

struct jv jx_tojson_filter(struct jx *x, struct jv v, const struct jargs *a) {
    jx_no_more_args(x, "tojson", a, 1, NAMES("indent", "ensure_ascii", "sort_keys", "separators"));
    struct jtojson o = {.indent = -1};
    struct jv ind = jx_arg(a, 0, "indent"), asc = jx_arg(a, SIZE_MAX, "ensure_ascii"),
              sk = jx_arg(a, SIZE_MAX, "sort_keys"), seps = jx_arg(a, SIZE_MAX, "separators");
    if (ind.k == JV_INT) {
        if (ind.i > 64) jx_fail(x, "tojson: indent is at most 64");
        o.indent = (int)ind.i;
    } else if (!absent(ind)) {
        jx_fail(x, "tojson: indent must be an integer");
    }
    if (!absent(asc) && asc.k != JV_BOOL) jx_fail(x, "tojson: ensure_ascii must be true or false");
    if (!absent(sk) && sk.k != JV_BOOL) jx_fail(x, "tojson: sort_keys must be true or false");
    o.ensure_ascii = asc.k == JV_BOOL && asc.b;
    o.sort_keys = sk.k == JV_BOOL && sk.b;
    if (!absent(seps)) {
        if (!jv_is_arr(seps) || seps.a->n != 2 || seps.a->v[0].k != JV_STR || seps.a->v[1].k != JV_STR)
            jx_fail(x, "tojson: separators must be two strings");
        o.item_sep = jx_strdup(x, seps.a->v[0].s.p, seps.a->v[0].s.n);
        o.key_sep = jx_strdup(x, seps.a->v[1].s.p, seps.a->v[1].s.n);
    }
    struct jbuf b = {0};
    jx_tojson(x, &b, v, &o, 0);
    return jv_str(b.p ? b.p : "", b.n);
}

static struct jv f_tojson(struct fctx *f, struct jv v, const struct jargs *a) {
    return jx_tojson_filter(f->x, v, a);
}

static struct jv f_from_json(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "from_json", a, 0, NULL);
    if (v.k != JV_STR) wrong_type(f, v);
    return jx_json_parse(f->x, v.s.p, v.s.n, "from_json's input");
}

static struct jv f_default(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "default", a, 2, NAMES("default_value", "boolean"));
    struct jv d = jx_arg(a, 0, "default_value");
    bool boolean = flag(f, jx_arg(a, 1, "boolean"), "boolean");
    if (v.k == JV_UNDEF || (boolean && !jv_truthy(v))) return d.k == JV_UNDEF ? jv_strz("") : d;
    return v;
}

static struct jv f_safe(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "safe", a, 0, NULL);
    return v;
}

/* ------------------------------------------------------------------ sizes and sequences */

static struct jv f_length(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, f->name, a, 0, NULL);
    if (v.k == JV_STR) return jv_int((int64_t)ju_count(v.s.p, v.s.n));
    if (jv_is_arr(v)) return jv_int((int64_t)v.a->n);
    if (jv_is_obj(v)) return jv_int((int64_t)v.o->n);
    wrong_type(f, v);
}

/* the code points of a string as a list */
static struct jv chars(struct jx *x, struct jv s) {
    struct jv r = jv_array(x, 0);
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        size_t l = ju_decode(s.s.p + i, s.s.n - i, &cp);
        jarr_push(x, r.a, jv_str(s.s.p + i, l));
        i += l;
    }
    return r;
}

static struct jv as_list(struct fctx *f, struct jv v) {
    if (jv_is_arr(v)) return v;
    if (v.k == JV_STR) return chars(f->x, v);
    if (jv_is_obj(v)) {
        struct jv r = jv_array(f->x, v.o->n);
        for (size_t i = 0; i < v.o->n; i++) r.a->v[i] = jent_key(&v.o->e[i]);
        r.a->n = v.o->n;
        return r;
    }
    wrong_type(f, v);
}

static struct jv f_list(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "list", a, 0, NULL);
    struct jv l = as_list(f, v);
    if (l.k == JV_TUPLE) l.k = JV_ARRAY;
    return l;
}

static struct jv f_first(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "first", a, 0, NULL);
    struct jv l = as_list(f, v);
    return l.a->n ? l.a->v[0] : jv_undef();
}

static struct jv f_last(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "last", a, 0, NULL);
    struct jv l = as_list(f, v);
    return l.a->n ? l.a->v[l.a->n - 1] : jv_undef();
}

static struct jv f_reverse(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "reverse", a, 0, NULL);
    struct jv l = as_list(f, v);
    struct jv r = jv_array(f->x, l.a->n);
    for (size_t i = 0; i < l.a->n; i++) r.a->v[i] = l.a->v[l.a->n - 1 - i];
    r.a->n = l.a->n;
    if (v.k != JV_STR) return r;
    struct jbuf b = {0};
    for (size_t i = 0; i < r.a->n; i++) jbuf_put(f->x, &b, r.a->v[i].s.p, r.a->v[i].s.n);
    return jv_str(b.p ? b.p : "", b.n);
}

/* an item joined into text, as JavaScript's Array.join writes it: none and undefined as nothing */
static void join_item(struct jx *x, struct jbuf *b, struct jv v) {
    if (v.k == JV_NONE || v.k == JV_UNDEF) return;
    struct jv s = jv_join_str(x, v);
    jbuf_put(x, b, s.s.p, s.s.n);
}

static struct jv f_join(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "join", a, 2, NAMES("d", "attribute"));
    struct jv sep = jx_arg(a, 0, "d"), attr = jx_arg(a, 1, "attribute");
    if (v.k == JV_STR && !f->parens) return v;
    if (sep.k == JV_UNDEF) sep = jv_strz("");
    if (sep.k != JV_STR) jx_fail(f->x, "join: the separator must be a string");
    struct jv l = as_list(f, v);
    jx_steps(f->x, l.a->n);
    struct jbuf b = {0};
    for (size_t i = 0; i < l.a->n; i++) {
        if (i) jbuf_put(f->x, &b, sep.s.p, sep.s.n);
        join_item(f->x, &b, absent(attr) ? l.a->v[i] : jx_attr_path(f->x, l.a->v[i], attr));
    }
    return jv_str(b.p ? b.p : "", b.n);
}

static struct jv f_unique(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "unique", a, 0, NULL);
    struct jv l = as_list(f, v);
    struct jv r = jv_array(f->x, 0);
    for (size_t i = 0; i < l.a->n; i++) {
        bool seen = false;
        for (size_t k = 0; k < r.a->n && !seen; k++) {
            jx_step(f->x);
            seen = jv_strict_eq(r.a->v[k], l.a->v[i]) ||
                   (r.a->v[k].k == JV_FLOAT && l.a->v[i].k == JV_FLOAT && isnan(r.a->v[k].f) && isnan(l.a->v[i].f));
        }
        if (!seen) jarr_push(f->x, r.a, l.a->v[i]);
    }
    return r;
}

/* stable merge sort of items by key (attribute path, or the item) */
static void sort_items(struct jx *x, struct jv *v, struct jv *keys, size_t n, bool reverse, bool cs) {
    if (n < 2) return;
    struct jv *tv = jx_alloc(x, n * sizeof *tv), *tk = jx_alloc(x, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid || j < hi) {
                bool take_right = false;
                if (i < mid && j < hi) {
                    jx_step(x);
                    int c = jv_compare(x, keys[j], keys[i], cs);
                    take_right = reverse ? c > 0 : c < 0;
                } else {
                    take_right = i >= mid;
                }
                size_t s = take_right ? j++ : i++;
                tv[k] = v[s];
                tk[k++] = keys[s];
            }
        }
        memcpy(v, tv, n * sizeof *v);
        memcpy(keys, tk, n * sizeof *keys);
    }
}

static struct jv f_sort(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "sort", a, 3, NAMES("reverse", "case_sensitive", "attribute"));
    bool rev = flag(f, jx_arg(a, 0, "reverse"), "reverse"), cs = flag(f, jx_arg(a, 1, "case_sensitive"), "case_sensitive");
    struct jv attr = jx_arg(a, 2, "attribute");
    struct jv l = as_list(f, v);
    struct jv r = jv_array(f->x, l.a->n);
    struct jv *keys = jx_alloc(f->x, (l.a->n + 1) * sizeof *keys);
    for (size_t i = 0; i < l.a->n; i++) {
        r.a->v[i] = l.a->v[i];
        keys[i] = absent(attr) ? l.a->v[i] : jx_attr_path(f->x, l.a->v[i], attr);
    }
    r.a->n = l.a->n;
    sort_items(f->x, r.a->v, keys, r.a->n, rev, cs);
    return r;
}

struct jv jx_dictsort(struct jx *x, struct jv o, const struct jargs *a) {
    jx_no_more_args(x, "dictsort", a, 3, NAMES("case_sensitive", "by", "reverse"));
    struct jv cs = jx_arg(a, 0, "case_sensitive"), by = jx_arg(a, 1, "by"), rev = jx_arg(a, 2, "reverse");
    if (!absent(cs) && cs.k != JV_BOOL) jx_fail(x, "dictsort: case_sensitive must be true or false");
    if (!absent(rev) && rev.k != JV_BOOL) jx_fail(x, "dictsort: reverse must be true or false");
    bool by_value = false;
    if (!absent(by)) {
        if (by.k != JV_STR || !((by.s.n == 3 && !memcmp(by.s.p, "key", 3)) || (by.s.n == 5 && !memcmp(by.s.p, "value", 5))))
            jx_fail(x, "dictsort: by must be 'key' or 'value'");
        by_value = by.s.n == 5;
    }
    struct jv items = jx_items(x, o);
    struct jv *keys = jx_alloc(x, (items.a->n + 1) * sizeof *keys);
    for (size_t i = 0; i < items.a->n; i++) keys[i] = items.a->v[i].a->v[by_value ? 1 : 0];
    sort_items(x, items.a->v, keys, items.a->n, rev.k == JV_BOOL && rev.b, cs.k == JV_BOOL && cs.b);
    return items;
}

static struct jv f_dictsort(struct fctx *f, struct jv v, const struct jargs *a) {
    if (!jv_is_obj(v)) wrong_type(f, v);
    return jx_dictsort(f->x, v, a);
}

static struct jv f_items(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "items", a, 0, NULL);
    if (!jv_is_obj(v)) wrong_type(f, v);
    return jx_items(f->x, v);
}

static struct jv minmax(struct fctx *f, struct jv v, const struct jargs *a, int sign) {
    jx_no_more_args(f->x, f->name, a, 2, NAMES("case_sensitive", "attribute"));
    bool cs = flag(f, jx_arg(a, 0, "case_sensitive"), "case_sensitive");
    struct jv attr = jx_arg(a, 1, "attribute");
    struct jv l = as_list(f, v), best = jv_undef(), bk = jv_undef();
    jx_steps(f->x, l.a->n);
    for (size_t i = 0; i < l.a->n; i++) {
        struct jv k = absent(attr) ? l.a->v[i] : jx_attr_path(f->x, l.a->v[i], attr);
        if (i == 0 || jv_compare(f->x, k, bk, cs) * sign > 0) best = l.a->v[i], bk = k;
    }
    return best;
}
static struct jv f_min(struct fctx *f, struct jv v, const struct jargs *a) {
    return minmax(f, v, a, -1);
}
static struct jv f_max(struct fctx *f, struct jv v, const struct jargs *a) {
    return minmax(f, v, a, 1);
}

static struct jv f_sum(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "sum", a, 2, NAMES("attribute", "start"));
    struct jv attr = jx_arg(a, 0, "attribute"), acc = jx_arg(a, 1, "start");
    if (acc.k == JV_UNDEF) acc = jv_int(0);
    struct jv l = as_list(f, v);
    jx_steps(f->x, l.a->n);
    for (size_t i = 0; i < l.a->n; i++) {
        struct jv k = absent(attr) ? l.a->v[i] : jx_attr_path(f->x, l.a->v[i], attr);
        if (!(jv_is_num(k) || k.k == JV_BOOL) || !jv_is_num(acc)) jx_fail(f->x, "sum: items must be numbers");
        if (k.k != JV_FLOAT && acc.k == JV_INT) {
            int64_t s;
            if (__builtin_add_overflow(acc.i, k.k == JV_BOOL ? (int64_t)k.b : k.i, &s)) jx_fail(f->x, "sum: overflow");
            acc = jv_int(s);
        } else {
            acc = jv_float(jv_num(acc) + jv_num(k));
        }
    }
    return acc;
}

/* ------------------------------------------------------------------ selecting and mapping */

static bool passes(struct fctx *f, struct jv item, const struct jargs *a, size_t first) {
    struct jv test = jx_arg(a, first, NULL);
    if (test.k == JV_UNDEF) return jv_truthy(item);
    if (test.k != JV_STR) jx_fail(f->x, "%s: the test must be named by a string", f->name);
    struct jargs rest = {a->pos + first + 1, a->n > first + 1 ? a->n - first - 1 : 0, NULL};
    return jx_test(f->x, test.s.p, test.s.n, item, &rest);
}

static struct jv select_(struct fctx *f, struct jv v, const struct jargs *a, bool attr, bool keep) {
    if (a->kw && a->kw->n) jx_fail(f->x, "%s takes no keyword arguments", f->name);
    if (!jv_is_arr(v)) wrong_type(f, v);
    jx_steps(f->x, v.a->n);
    struct jv r = jv_array(f->x, 0);
    for (size_t i = 0; i < v.a->n; i++) {
        struct jv item = v.a->v[i];
        bool ok;
        if (attr) {
            if (a->n < 1) jx_fail(f->x, "%s needs an attribute name", f->name);
            if (!jv_is_attrs(item)) jx_fail(f->x, "%s applies to a list of mappings, not of %s", f->name, jv_kind_name(item));
            struct jv val = jx_attr_path(f->x, item, a->pos[0]);
            /* a missing attribute fails the test, as the reference engine has it */
            ok = val.k == JV_UNDEF ? false : passes(f, val, a, 1);
        } else {
            ok = passes(f, item, a, 0);
        }
        if (ok == keep) jarr_push(f->x, r.a, item);
    }
    return r;
}
static struct jv f_selectattr(struct fctx *f, struct jv v, const struct jargs *a) {
    return select_(f, v, a, true, true);
}
static struct jv f_rejectattr(struct fctx *f, struct jv v, const struct jargs *a) {
    return select_(f, v, a, true, false);
}
static struct jv f_select(struct fctx *f, struct jv v, const struct jargs *a) {
    return select_(f, v, a, false, true);
}
static struct jv f_reject(struct fctx *f, struct jv v, const struct jargs *a) {
    return select_(f, v, a, false, false);
}

static struct jv apply_named(struct fctx *f, const char *name, size_t n, struct jv v, const struct jargs *a);

static struct jv f_map(struct fctx *f, struct jv v, const struct jargs *a) {
    struct jv l = as_list(f, v);
    jx_steps(f->x, l.a->n);
    struct jv r = jv_array(f->x, l.a->n);
    struct jv attr = a->kw ? jx_arg(&(struct jargs){NULL, 0, a->kw}, 0, "attribute") : jv_undef();
    if (attr.k != JV_UNDEF) {
        jx_no_more_args(f->x, "map", a, 0, NAMES("attribute", "default"));
        struct jv def = jx_arg(&(struct jargs){NULL, 0, a->kw}, 0, "default");
        for (size_t i = 0; i < l.a->n; i++) {
            if (!jv_is_attrs(l.a->v[i])) jx_fail(f->x, "map(attribute=) applies to a list of mappings");
            struct jv val = jx_attr_path(f->x, l.a->v[i], attr);
            r.a->v[i] = val.k == JV_UNDEF ? def : val;
        }
    } else {
        struct jv name = jx_arg(a, 0, NULL);
        if (name.k != JV_STR) jx_fail(f->x, "map needs attribute= or the name of a filter");
        struct jargs rest = {a->pos + 1, a->n - 1, a->kw};
        for (size_t i = 0; i < l.a->n; i++) r.a->v[i] = apply_named(f, name.s.p, name.s.n, l.a->v[i], &rest);
    }
    r.a->n = l.a->n;
    return r;
}

/* ------------------------------------------------------------------ strings */

static struct jv need_str_op(struct fctx *f, struct jv v) {
    if (v.k != JV_STR) wrong_type(f, v);
    return v;
}

static struct jv f_upper(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "upper", a, 0, NULL);
    return ju_case(f->x, need_str_op(f, v), 'u');
}
static struct jv f_lower(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "lower", a, 0, NULL);
    return ju_case(f->x, need_str_op(f, v), 'l');
}
static struct jv f_title(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "title", a, 0, NULL);
    return ju_case(f->x, need_str_op(f, v), 't');
}
static struct jv f_capitalize(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "capitalize", a, 0, NULL);
    return ju_case(f->x, need_str_op(f, v), 'c');
}

static struct jv f_trim(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, f->name, a, 1, NAMES("chars"));
    struct jv c = jx_arg(a, 0, "chars");
    if (!absent(c) && c.k != JV_STR) jx_fail(f->x, "trim: chars must be a string");
    return ju_trim(f->x, need_str_op(f, v), true, true, c);
}

static struct jv f_replace(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "replace", a, 3, NAMES("count"));
    need_str_op(f, v);
    struct jv old = jx_arg(a, 0, NULL), new_ = jx_arg(a, 1, NULL), c = jx_arg(a, 2, "count");
    if (old.k != JV_STR || new_.k != JV_STR) jx_fail(f->x, "replace: the old and new text must be strings");
    if (!absent(c) && c.k != JV_INT) jx_fail(f->x, "replace: count must be an integer");
    return jx_str_replace(f->x, v, old, new_, absent(c) ? -1 : c.i);
}

static struct jv f_indent(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "indent", a, 3, NAMES("width", "first", "blank"));
    need_str_op(f, v);
    struct jv w = jx_arg(a, 0, "width");
    bool first = jv_truthy(jx_arg(a, 1, "first")), blank = jv_truthy(jx_arg(a, 2, "blank"));
    struct jv pad;
    if (w.k == JV_UNDEF) {
        pad = jv_strz("    ");
    } else if (w.k == JV_STR) {
        pad = w;
    } else if (w.k == JV_INT && w.i >= 0 && w.i <= 1024) {
        char *p = jx_alloc(f->x, (size_t)w.i + 1);
        memset(p, ' ', (size_t)w.i);
        pad = jv_str(p, (size_t)w.i);
    } else {
        jx_fail(f->x, "indent: width must be an integer in [0, 1024] or a string");
    }
    struct jbuf b = {0};
    size_t i = 0;
    for (size_t line = 0;; line++) {
        size_t e = i;
        while (e < v.s.n && v.s.p[e] != '\n') e++;
        bool empty = e == i;
        if ((first || line > 0) && (blank || !empty)) jbuf_put(f->x, &b, pad.s.p, pad.s.n);
        jbuf_put(f->x, &b, v.s.p + i, e - i);
        if (e >= v.s.n) break;
        jbuf_put(f->x, &b, "\n", 1);
        i = e + 1;
    }
    return jv_str(b.p ? b.p : "", b.n);
}

static struct jv f_wordcount(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "wordcount", a, 0, NULL);
    need_str_op(f, v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < v.s.n; i++) {
        char c = v.s.p[i];
        bool w = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (unsigned char)c >= 0x80;
        if (w && !in) n++;
        in = w;
    }
    return jv_int(n);
}

static struct jv f_escape(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "escape", a, 0, NULL);
    struct jv s = jv_to_str(f->x, v);
    struct jbuf b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        const char *r = s.s.p[i] == '&' ? "&amp;" : s.s.p[i] == '<' ? "&lt;" : s.s.p[i] == '>' ? "&gt;"
                        : s.s.p[i] == '"' ? "&#34;" : s.s.p[i] == '\'' ? "&#39;" : NULL;
        r ? jbuf_put(f->x, &b, r, strlen(r)) : jbuf_put(f->x, &b, s.s.p + i, 1);
    }
    return jv_str(b.p ? b.p : "", b.n);
}

/* ------------------------------------------------------------------ numbers and conversion */

/* JavaScript's parseInt(s, 10) and parseFloat(s): the longest number at the start, after whitespace */
static bool parse_lead(const char *p, size_t n, bool integer, double *out) {
    size_t i = 0, l;
    while (i < n && ju_space_at(p + i, n - i, &l)) i += l;
    char buf[400];
    size_t k = 0;
    if (i < n && (p[i] == '+' || p[i] == '-')) buf[k++] = p[i++];
    if (!integer && n - i >= 8 && memcmp(p + i, "Infinity", 8) == 0) {
        *out = k && buf[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    size_t d0 = k;
    while (i < n && k < sizeof buf - 8 && p[i] >= '0' && p[i] <= '9') buf[k++] = p[i++];
    size_t int_digits = k - d0;
    if (!integer && i < n && p[i] == '.') {
        size_t save = k;
        buf[k++] = p[i++];
        while (i < n && k < sizeof buf - 8 && p[i] >= '0' && p[i] <= '9') buf[k++] = p[i++];
        if (k == save + 1 && !int_digits) return false;
        if (i < n && (p[i] == 'e' || p[i] == 'E')) {
            size_t e = i + 1, ek = k;
            char eb[8];
            size_t en = 0;
            eb[en++] = 'e';
            if (e < n && (p[e] == '+' || p[e] == '-')) eb[en++] = p[e++];
            if (e < n && p[e] >= '0' && p[e] <= '9') {
                memcpy(buf + k, eb, en);
                k += en;
                while (e < n && k < sizeof buf - 1 && p[e] >= '0' && p[e] <= '9') buf[k++] = p[e++];
            }
            (void)ek;
        }
    } else if (!int_digits) {
        return false;
    }
    buf[k] = 0;
    *out = strtod(buf, NULL);
    return true;
}

static struct jv f_int(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "int", a, 2, NAMES("default", "base"));
    struct jv d = jx_arg(a, 0, "default");
    if (d.k == JV_UNDEF) d = jv_int(0);
    switch (v.k) {
    case JV_STR: {
        double r;
        if (!parse_lead(v.s.p, v.s.n, true, &r) || !isfinite(r) || fabs(r) >= 9.2e18) return d;
        return jv_int((int64_t)r);
    }
    case JV_INT: return v;
    case JV_FLOAT:
        if (f->parens) return v; /* the reference engine leaves a number alone when int has arguments */
        if (!isfinite(v.f) || fabs(v.f) >= 9.2e18) jx_fail(f->x, "int: %g is out of range", v.f);
        return jv_int((int64_t)floor(v.f));
    case JV_BOOL: return jv_int(v.b);
    default: wrong_type(f, v);
    }
}

static struct jv f_float(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "float", a, 1, NAMES("default"));
    struct jv d = jx_arg(a, 0, "default");
    if (d.k == JV_UNDEF) d = jv_float(0);
    switch (v.k) {
    case JV_STR: {
        double r;
        return parse_lead(v.s.p, v.s.n, false, &r) ? jv_float(r) : d;
    }
    case JV_INT: return f->parens ? v : jv_float((double)v.i);
    case JV_FLOAT: return v;
    case JV_BOOL: return jv_float(v.b);
    default: wrong_type(f, v);
    }
}

static struct jv f_abs(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "abs", a, 0, NULL);
    if (v.k == JV_INT) {
        if (v.i == INT64_MIN) jx_fail(f->x, "abs: overflow");
        return jv_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.k == JV_FLOAT) return jv_float(fabs(v.f));
    wrong_type(f, v);
}

static struct jv f_round(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "round", a, 2, NAMES("precision", "method"));
    if (!jv_is_num(v)) wrong_type(f, v);
    struct jv p = jx_arg(a, 0, "precision"), m = jx_arg(a, 1, "method");
    int64_t prec = p.k == JV_INT ? p.i : 0;
    if (prec < 0 || prec > 15) jx_fail(f->x, "round: precision must be in [0, 15]");
    double scale = pow(10, (double)prec), d = jv_num(v) * scale;
    if (m.k == JV_STR && m.s.n == 5 && !memcmp(m.s.p, "floor", 5))
        d = floor(d);
    else if (m.k == JV_STR && m.s.n == 4 && !memcmp(m.s.p, "ceil", 4))
        d = ceil(d);
    else
        d = round(d);
    return jv_float(d / scale);
}

static struct jv f_string(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "string", a, 0, NULL);
    if (v.k == JV_NONE) return jv_strz("None");
    if (v.k == JV_UNDEF) return jv_strz("");
    if (jv_is_attrs(v)) { /* the reference engine has no string of a mapping: Python's str(dict) */
        struct jbuf b = {0};
        jx_pyrepr(f->x, &b, v, 0);
        return jv_str(b.p ? b.p : "", b.n);
    }
    return jv_to_str(f->x, v);
}

static struct jv f_bool(struct fctx *f, struct jv v, const struct jargs *a) {
    jx_no_more_args(f->x, "bool", a, 0, NULL);
    return jv_bool(jv_truthy(v));
}

/* ------------------------------------------------------------------ the table */

typedef struct jv (*filter_fn)(struct fctx *f, struct jv v, const struct jargs *a);
static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"abs", f_abs},
    {"bool", f_bool},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"from_json", f_from_json},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

/* Filters on a value that is not there. The reference engine fails on them; Python's Jinja, which
 * the templates are written for, reads undefined as an empty string or list (and a select or
 * map of none as an empty list): kiln does as Python does. */
static struct jv missing_operand(struct fctx *f, const char *name, size_t n, struct jv v) {
    static const char *const keep[] = {"default", "d", "tojson", "string", "safe", "bool", NULL};
    static const char *const lists[] = {"first", "last", "join", "list", "map", "select", "selectattr", "reject",
                                        "rejectattr", "sort", "unique", "min", "max", "sum", "reverse", NULL};
    if (v.k == JV_UNDEF)
        for (const char *const *k = keep; *k; k++)
            if (strlen(*k) == n && !memcmp(*k, name, n)) return v;
    for (const char *const *k = lists; *k; k++)
        if (strlen(*k) == n && !memcmp(*k, name, n)) return jv_array(f->x, 0);
    return v.k == JV_UNDEF ? jv_strz("") : v;
}

static struct jv apply_named(struct fctx *f, const char *name, size_t n, struct jv v, const struct jargs *a) {
    if (v.k == JV_UNDEF) v = missing_operand(f, name, n, v);
    else if (v.k == JV_NONE && n >= 6 && (!memcmp(name, "select", 6) || !memcmp(name, "reject", 6)))
        v = missing_operand(f, name, n, v);
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (strlen(filters[i].name) == n && memcmp(filters[i].name, name, n) == 0) {
            struct fctx g = *f;
            g.name = filters[i].name;
            return filters[i].fn(&g, v, a);
        }
    /* a mapping's methods serve as filters too (keys, values, ...) */
    if (jv_is_obj(v)) {
        struct jv m = jx_method(f->x, v, name, n);
        if (m.k == JV_FUNC) return jx_call(f->x, f->env, m, a);
    }
    jx_fail(f->x, "unknown filter '%.*s'", (int)(n > 40 ? 40 : n), name);
}

struct jv jx_filter(struct jx *x, struct jenv *env, struct jv v, const struct jnode *fn) {
    struct jargs a = {NULL, 0, NULL};
    if (fn->nbody) jx_eval_args(x, env, fn->body, fn->nbody, &a);
    x->line = fn->line;

    struct fctx f = {x, env, "", fn->op != 0};
    return apply_named(&f, fn->s.p, fn->s.n, v, &a);
}

/* ------------------------------------------------------------------ tests */

static bool name_is(const char *name, size_t n, const char *s) {
    return strlen(s) == n && memcmp(name, s, n) == 0;
}

static const char *const tests[] = {"boolean", "callable", "odd", "even", "false", "true", "none", "string", "number",
                                    "integer", "float", "iterable", "mapping", "sequence", "lower", "upper",
                                    "defined", "undefined", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<",
                                    "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "divisibleby", "in", "sameas",
                                    "escaped", NULL};

bool jx_has_test(const char *name, size_t n) {
    for (const char *const *t = tests; *t; t++)
        if (name_is(name, n, *t)) return true;
    return false;
}

bool jx_test(struct jx *x, const char *name, size_t n, struct jv v, const struct jargs *a) {
#define T(s) name_is(name, n, s)
    struct jv o = jx_arg(a, 0, NULL);
    if (T("defined")) return v.k != JV_UNDEF;
    if (T("undefined")) return v.k == JV_UNDEF;
    if (T("none")) return v.k == JV_NONE;
    if (T("boolean")) return v.k == JV_BOOL;
    if (T("false")) return v.k == JV_BOOL && !v.b;
    if (T("true")) return v.k == JV_BOOL && v.b;
    if (T("string")) return v.k == JV_STR;
    if (T("number")) return jv_is_num(v);
    if (T("integer")) return v.k == JV_INT;
    if (T("float")) return v.k == JV_FLOAT;
    if (T("callable")) return v.k == JV_FUNC;
    if (T("iterable")) return jv_is_arr(v) || v.k == JV_STR;
    if (T("mapping")) return jv_is_obj(v);
    if (T("sequence")) return jv_is_arr(v) || jv_is_obj(v) || v.k == JV_STR;
    if (T("escaped")) return false;
    if (T("lower") || T("upper")) {
        if (v.k != JV_STR) return false;
        struct jv c = ju_case(x, v, T("lower") ? 'l' : 'u');
        return c.s.n == v.s.n && memcmp(c.s.p, v.s.p, v.s.n) == 0;
    }
    if (T("odd") || T("even")) {
        if (v.k != JV_INT) jx_fail(x, "test '%s' applies to an integer, not a %s", T("odd") ? "odd" : "even",
                                   jv_kind_name(v));
        return (v.i % 2 != 0) == T("odd");
    }
    if (T("divisibleby")) {
        if (v.k != JV_INT || o.k != JV_INT || o.i == 0) jx_fail(x, "test 'divisibleby' needs two integers, the divisor not 0");
        return v.i % o.i == 0;
    }
    if (T("eq") || T("equalto") || T("==")) return jv_strict_eq(v, o);
    if (T("ne") || T("!=")) return !jv_strict_eq(v, o);
    if (T("sameas")) return jv_strict_eq(v, o) && v.k == o.k;
    if (T("in")) {
        if (jv_is_arr(o)) {
            for (size_t i = 0; i < o.a->n; i++)
                if (jv_strict_eq(o.a->v[i], v)) return true;
            return false;
        }
        if (o.k == JV_STR && v.k == JV_STR) {
            size_t at;
            return ju_find(o.s.p, o.s.n, v.s.p, v.s.n, 0, &at);
        }
        if (jv_is_obj(o) && v.k == JV_STR) return jobj_get(o.o, v.s.p, v.s.n) != NULL;
        jx_fail(x, "test 'in' needs a list, string or mapping");
    }
    bool lt = T("lt") || T("lessthan") || T("<"), le = T("le") || T("<="),
         gt = T("gt") || T("greaterthan") || T(">"), ge = T("ge") || T(">=");
    if (lt || le || gt || ge) {
        int c = jv_compare(x, v, o, true);
        return lt ? c < 0 : le ? c <= 0 : gt ? c > 0 : c >= 0;
    }
#undef T
    jx_fail(x, "unknown test '%.*s'", (int)(n > 40 ? 40 : n), name);
}
