/*
 * builtins.c - the names a template starts with (range, namespace,
 * raise_exception, strftime_now, true/false/none) and the methods of values:
 * Python's str methods that chat templates call (strip, split, startswith,
 * replace, format, ...), dict's get/items/keys/values, and list's
 * append/pop. Nothing here touches a file, the environment or the network;
 * strftime_now reads the clock the caller gave.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_impl.h"

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct jv need_str(struct jx *x, struct jv v, const char *fn, const char *what) {
    if (v.k != JV_STR) jx_fail(x, "%s: %s must be a string, not a %s", fn, what, jv_kind_name(v));
    return v;
}

static bool absent(struct jv v) {
    return v.k == JV_UNDEF || v.k == JV_NONE;
}

/* ------------------------------------------------------------------ globals */

static struct jv g_range(struct jx *x, struct jv self, const struct jargs *a) {
    (void)self;
    jx_no_more_args(x, "range", a, 3, NULL);
    if (a->n == 0) jx_fail(x, "range needs at least one argument");
    for (size_t i = 0; i < a->n; i++)
        if (a->pos[i].k != JV_INT) jx_fail(x, "range: arguments must be integers, not a %s", jv_kind_name(a->pos[i]));
    int64_t start = a->n > 1 ? a->pos[0].i : 0, stop = a->n > 1 ? a->pos[1].i : a->pos[0].i,
            step = a->n > 2 ? a->pos[2].i : 1;
    if (step == 0) jx_fail(x, "range: step must not be zero");
    double count = step > 0 ? ((double)stop - (double)start) / (double)step : ((double)start - (double)stop) / -(double)step;
    size_t n = count > 0 ? (size_t)((step > 0 ? (double)stop - (double)start + (double)step - 1
                                              : (double)start - (double)stop - (double)step - 1) /
                                    (step > 0 ? (double)step : -(double)step))
                         : 0;
    if (n > x->lim.max_memory / sizeof(struct jv)) jx_fail(x, "range of %zu numbers is too large", n);
    struct jv r = jv_array(x, n);
    for (size_t i = 0; i < n; i++) r.a->v[i] = jv_int(start + (int64_t)i * step);
    r.a->n = n;
    return r;
}

static struct jv g_namespace(struct jx *x, struct jv self, const struct jargs *a) {
    (void)self;
    if (a->n > 1) jx_fail(x, "namespace takes at most one positional argument");
    struct jv ns = jv_object(x, JV_NS);
    if (a->n == 1) {
        struct jv src = a->pos[0];
        if (jv_is_obj(src)) {
            for (size_t i = 0; i < src.o->n; i++) jobj_set(x, ns.o, src.o->e[i].k, src.o->e[i].kn, src.o->e[i].v);
        } else if (jv_is_arr(src)) {
            for (size_t i = 0; i < src.a->n; i++) {
                struct jv pair = src.a->v[i];
                if (!jv_is_arr(pair) || pair.a->n != 2 || pair.a->v[0].k != JV_STR)
                    jx_fail(x, "namespace: a list argument must hold [name, value] pairs");
                jobj_set(x, ns.o, pair.a->v[0].s.p, pair.a->v[0].s.n, pair.a->v[1]);
            }
        } else {
            jx_fail(x, "namespace: a %s is not a mapping", jv_kind_name(src));
        }
    }
    for (size_t i = 0; a->kw && i < a->kw->n; i++) jobj_set(x, ns.o, a->kw->e[i].k, a->kw->e[i].kn, a->kw->e[i].v);
    return ns;
}

static struct jv g_raise(struct jx *x, struct jv self, const struct jargs *a) {
    (void)self;
    struct jv m = jx_arg(a, 0, "message");
    if (m.k == JV_STR) jx_fail(x, "raise_exception: %.*s", (int)(m.s.n > 400 ? 400 : m.s.n), m.s.p);
    struct jv s = m.k == JV_UNDEF ? jv_strz("(no message)") : jv_to_str(x, m);
    jx_fail(x, "raise_exception: %.*s", (int)(s.s.n > 400 ? 400 : s.s.n), s.s.p);
}

static struct jv g_strftime(struct jx *x, struct jv self, const struct jargs *a) {
    (void)self;
    jx_no_more_args(x, "strftime_now", a, 1, NULL);
    struct jv f = need_str(x, jx_arg(a, 0, NULL), "strftime_now", "the format");
    if (f.s.n > 256) jx_fail(x, "strftime_now: the format is longer than 256 bytes");
    char fmt[260], out[1024];
    memcpy(fmt, f.s.p, f.s.n);
    fmt[f.s.n] = 0;
    time_t t = (time_t)x->now;
    struct tm tm;
    if (!localtime_r(&t, &tm)) jx_fail(x, "strftime_now: the clock is out of range");
    size_t n = f.s.n ? strftime(out, sizeof out, fmt, &tm) : 0;
    return jv_str_copy(x, out, n);
}

void jx_globals(struct jx *x, struct jenv *env) {
    jx_setvar(x, env, "true", 4, jv_bool(true));
    jx_setvar(x, env, "false", 5, jv_bool(false));
    jx_setvar(x, env, "none", 4, jv_none());
    jx_setvar(x, env, "True", 4, jv_bool(true));
    jx_setvar(x, env, "False", 5, jv_bool(false));
    jx_setvar(x, env, "None", 4, jv_none());
    jx_setvar(x, env, "range", 5, jv_func(x, "range", g_range, jv_undef()));
    jx_setvar(x, env, "namespace", 9, jv_func(x, "namespace", g_namespace, jv_undef()));
    jx_setvar(x, env, "raise_exception", 15, jv_func(x, "raise_exception", g_raise, jv_undef()));
    jx_setvar(x, env, "strftime_now", 12, jv_func(x, "strftime_now", g_strftime, jv_undef()));
}

/* ------------------------------------------------------------------ str methods */

static struct jv m_upper(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "upper", a, 0, NULL);
    return ju_case(x, s, 'u');
}
static struct jv m_lower(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "lower", a, 0, NULL);
    return ju_case(x, s, 'l');
}
static struct jv m_title(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "title", a, 0, NULL);
    return ju_case(x, s, 't');
}
static struct jv m_capitalize(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "capitalize", a, 0, NULL);
    return ju_case(x, s, 'c');
}

/* strip(chars): Python's, the given characters; without them, whitespace */
static struct jv strip_(struct jx *x, struct jv s, const struct jargs *a, bool l, bool r, const char *fn) {
    jx_no_more_args(x, fn, a, 1, NAMES("chars"));
    struct jv chars = jx_arg(a, 0, "chars");
    if (!absent(chars)) need_str(x, chars, fn, "chars");
    return ju_trim(x, s, l, r, chars);
}
static struct jv m_strip(struct jx *x, struct jv s, const struct jargs *a) {
    return strip_(x, s, a, true, true, "strip");
}
static struct jv m_lstrip(struct jx *x, struct jv s, const struct jargs *a) {
    return strip_(x, s, a, true, false, "lstrip");
}
static struct jv m_rstrip(struct jx *x, struct jv s, const struct jargs *a) {
    return strip_(x, s, a, false, true, "rstrip");
}

static bool affix(struct jx *x, struct jv s, const struct jargs *a, bool end, const char *fn) {
    jx_no_more_args(x, fn, a, 1, NULL);
    struct jv p = jx_arg(a, 0, NULL);
    struct jv one[1] = {p};
    const struct jv *list = one;
    size_t n = 1;
    if (jv_is_arr(p)) list = p.a->v, n = p.a->n;
    for (size_t i = 0; i < n; i++) {
        struct jv q = need_str(x, list[i], fn, "the prefix");
        if (q.s.n <= s.s.n && memcmp(s.s.p + (end ? s.s.n - q.s.n : 0), q.s.p, q.s.n) == 0) return true;
    }
    return false;
}
static struct jv m_startswith(struct jx *x, struct jv s, const struct jargs *a) {
    return jv_bool(affix(x, s, a, false, "startswith"));
}
static struct jv m_endswith(struct jx *x, struct jv s, const struct jargs *a) {
    return jv_bool(affix(x, s, a, true, "endswith"));
}

static int64_t maxsplit_arg(struct jx *x, const struct jargs *a, const char *fn) {
    struct jv m = jx_arg(a, 1, "maxsplit");
    if (absent(m)) return -1;
    if (m.k != JV_INT) jx_fail(x, "%s: maxsplit must be an integer", fn);
    return m.i;
}

static struct jv split_(struct jx *x, struct jv s, const struct jargs *a, bool right) {
    const char *fn = right ? "rsplit" : "split";
    jx_steps(x, s.s.n / 16);
    jx_no_more_args(x, fn, a, 2, NAMES("sep", "maxsplit"));
    struct jv sep = jx_arg(a, 0, "sep");
    int64_t max = maxsplit_arg(x, a, fn);
    struct jv out = jv_array(x, 0);
    if (absent(sep)) { /* runs of whitespace; none at the ends */
        const char *p = s.s.p;
        size_t n = s.s.n, i = 0, l, nw = 0;
        struct jv spans = jv_array(x, 0); /* start, end of each word, as ints */
        while (i < n) {
            while (i < n && ju_space_at(p + i, n - i, &l)) i += l;
            if (i >= n) break;
            size_t st = i;
            while (i < n && !ju_space_at(p + i, n - i, &l)) i++;
            jarr_push(x, spans.a, jv_int((int64_t)st));
            jarr_push(x, spans.a, jv_int((int64_t)i));
            nw++;
        }
        size_t keep = nw; /* words that stand alone; the rest join with their spaces */
        if (max >= 0 && (uint64_t)max < nw) keep = (size_t)max;
        if (!right) {
            for (size_t w = 0; w < keep; w++)
                jarr_push(x, out.a, jv_str(p + spans.a->v[2 * w].i, (size_t)(spans.a->v[2 * w + 1].i - spans.a->v[2 * w].i)));
            if (keep < nw) {
                struct jv rest = jv_str(p + spans.a->v[2 * keep].i, n - (size_t)spans.a->v[2 * keep].i);
                jarr_push(x, out.a, rest);
            }
            return out;
        }
        if (keep < nw) {
            size_t last = nw - keep - 1;
            jarr_push(x, out.a, jv_str(p, (size_t)spans.a->v[2 * last + 1].i));
        }
        for (size_t w = nw - keep; w < nw; w++)
            jarr_push(x, out.a, jv_str(p + spans.a->v[2 * w].i, (size_t)(spans.a->v[2 * w + 1].i - spans.a->v[2 * w].i)));
        return out;
    }
    need_str(x, sep, fn, "the separator");
    if (sep.s.n == 0) jx_fail(x, "%s: empty separator", fn);
    if (!right) {
        size_t i = 0, at;
        while ((max < 0 || (int64_t)out.a->n < max) && ju_find(s.s.p, s.s.n, sep.s.p, sep.s.n, i, &at)) {
            jarr_push(x, out.a, jv_str(s.s.p + i, at - i));
            i = at + sep.s.n;
            jx_step(x);
        }
        jarr_push(x, out.a, jv_str(s.s.p + i, s.s.n - i));
        return out;
    }
    size_t e = s.s.n;
    struct jv rev = jv_array(x, 0);
    while (max < 0 || (int64_t)rev.a->n < max) {
        size_t found = SIZE_MAX;
        for (size_t i = e; i >= sep.s.n; i--)
            if (memcmp(s.s.p + i - sep.s.n, sep.s.p, sep.s.n) == 0) {
                found = i - sep.s.n;
                break;
            }
        if (found == SIZE_MAX) break;
        jarr_push(x, rev.a, jv_str(s.s.p + found + sep.s.n, e - found - sep.s.n));
        e = found;
        jx_step(x);
    }
    jarr_push(x, out.a, jv_str(s.s.p, e));
    for (size_t i = rev.a->n; i-- > 0;) jarr_push(x, out.a, rev.a->v[i]);
    return out;
}
static struct jv m_split(struct jx *x, struct jv s, const struct jargs *a) {
    return split_(x, s, a, false);
}
static struct jv m_rsplit(struct jx *x, struct jv s, const struct jargs *a) {
    return split_(x, s, a, true);
}

struct jv jx_str_replace(struct jx *x, struct jv s, struct jv old, struct jv new_, int64_t count) {
    if (count == 0) return s;
    jx_steps(x, s.s.n / 16);
    struct jbuf b = {0};
    size_t i = 0, at;
    int64_t done = 0;
    if (old.s.n == 0) { /* between every code point, and at both ends */
        while (i <= s.s.n && (count < 0 || done < count)) {
            jbuf_put(x, &b, new_.s.p, new_.s.n);
            done++;
            if (i == s.s.n) {
                i++;
                break;
            }
            uint32_t cp;
            size_t l = ju_decode(s.s.p + i, s.s.n - i, &cp);
            jbuf_put(x, &b, s.s.p + i, l);
            i += l;
        }
        if (i <= s.s.n) jbuf_put(x, &b, s.s.p + i, s.s.n - i);
        return jv_str(b.p ? b.p : "", b.n);
    }
    while ((count < 0 || done < count) && ju_find(s.s.p, s.s.n, old.s.p, old.s.n, i, &at)) {
        jbuf_put(x, &b, s.s.p + i, at - i);
        jbuf_put(x, &b, new_.s.p, new_.s.n);
        i = at + old.s.n;
        done++;
    }
    if (!done) return s;
    jbuf_put(x, &b, s.s.p + i, s.s.n - i);
    return jv_str(b.p ? b.p : "", b.n);
}

static struct jv m_replace(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "replace", a, 3, NAMES("count"));
    struct jv old = need_str(x, jx_arg(a, 0, NULL), "replace", "the old text");
    struct jv new_ = need_str(x, jx_arg(a, 1, NULL), "replace", "the new text");
    struct jv c = jx_arg(a, 2, "count");
    if (!absent(c) && c.k != JV_INT) jx_fail(x, "replace: count must be an integer");
    return jx_str_replace(x, s, old, new_, absent(c) ? -1 : c.i);
}

static struct jv m_find(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "find", a, 1, NULL);
    struct jv n = need_str(x, jx_arg(a, 0, NULL), "find", "the text");
    jx_steps(x, s.s.n / 16);
    size_t at;
    if (!ju_find(s.s.p, s.s.n, n.s.p, n.s.n, 0, &at)) return jv_int(-1);
    return jv_int((int64_t)ju_count(s.s.p, at));
}

static struct jv m_count(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "count", a, 1, NULL);
    jx_steps(x, jv_is_arr(s) ? s.a->n : s.s.n / 16);
    if (jv_is_arr(s)) {
        int64_t c = 0;
        for (size_t i = 0; i < s.a->n; i++) c += jv_strict_eq(s.a->v[i], jx_arg(a, 0, NULL));
        return jv_int(c);
    }
    struct jv n = need_str(x, jx_arg(a, 0, NULL), "count", "the text");
    if (!n.s.n) return jv_int((int64_t)ju_count(s.s.p, s.s.n) + 1);
    size_t i = 0, at;
    int64_t c = 0;
    while (ju_find(s.s.p, s.s.n, n.s.p, n.s.n, i, &at)) c++, i = at + n.s.n;
    return jv_int(c);
}

static struct jv m_join(struct jx *x, struct jv s, const struct jargs *a) {
    jx_no_more_args(x, "join", a, 1, NULL);
    struct jv l = jx_arg(a, 0, NULL);
    if (!jv_is_arr(l)) jx_fail(x, "join: the argument must be a list, not a %s", jv_kind_name(l));
    struct jbuf b = {0};
    for (size_t i = 0; i < l.a->n; i++) {
        if (i) jbuf_put(x, &b, s.s.p, s.s.n);
        struct jv e = need_str(x, l.a->v[i], "join", "each item");
        jbuf_put(x, &b, e.s.p, e.s.n);
    }
    return jv_str(b.p ? b.p : "", b.n);
}

/* Python's str.format for {} {0} {name} and {{ }} (no format specs) */
static struct jv m_format(struct jx *x, struct jv s, const struct jargs *a) {
    struct jbuf b = {0};
    size_t auto_i = 0;
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        if ((c == '{' || c == '}') && i + 1 < s.s.n && s.s.p[i + 1] == c) {
            jbuf_put(x, &b, &c, 1);
            i++;
            continue;
        }
        if (c == '}') jx_fail(x, "format: single '}' in the format string");
        if (c != '{') {
            jbuf_put(x, &b, &c, 1);
            continue;
        }
        size_t e = i + 1;
        while (e < s.s.n && s.s.p[e] != '}') e++;
        if (e >= s.s.n) jx_fail(x, "format: '{' is not closed");
        const char *f = s.s.p + i + 1;
        size_t fn = e - i - 1;
        struct jv v;
        if (fn == 0) {
            v = jx_arg(a, auto_i++, NULL);
        } else if (f[0] >= '0' && f[0] <= '9') {
            v = jx_arg(a, (size_t)strtoul(f, NULL, 10), NULL);
        } else {
            struct jv *k = a->kw ? jobj_get(a->kw, f, fn) : NULL;
            v = k ? *k : jv_undef();
        }
        if (v.k == JV_UNDEF) jx_fail(x, "format: no value for {%.*s}", (int)(fn > 40 ? 40 : fn), f);
        jv_write(x, &b, v);
        i = e;
    }
    return jv_str(b.p ? b.p : "", b.n);
}

/* ------------------------------------------------------------------ dict and list methods */

static struct jv m_get(struct jx *x, struct jv o, const struct jargs *a) {
    jx_no_more_args(x, "get", a, 2, NAMES("default"));
    struct jv k = jx_arg(a, 0, "key");
    if (k.k == JV_INT) k = jv_to_str(x, k);
    if (k.k != JV_STR) jx_fail(x, "get: the key must be a string, not a %s", jv_kind_name(k));
    struct jv *v = jobj_get(o.o, k.s.p, k.s.n);
    if (v) return *v;
    struct jv d = jx_arg(a, 1, "default");
    return d.k == JV_UNDEF ? jv_none() : d;
}

struct jv jx_items(struct jx *x, struct jv o) {
    struct jv r = jv_array(x, o.o->n);
    for (size_t i = 0; i < o.o->n; i++) {
        struct jv pair = jv_array(x, 2);
        pair.a->v[0] = jent_key(&o.o->e[i]);
        pair.a->v[1] = o.o->e[i].v;
        pair.a->n = 2;
        r.a->v[i] = pair;
    }
    r.a->n = o.o->n;
    return r;
}

static struct jv m_items(struct jx *x, struct jv o, const struct jargs *a) {
    jx_no_more_args(x, "items", a, 0, NULL);
    return jx_items(x, o);
}

static struct jv m_keys(struct jx *x, struct jv o, const struct jargs *a) {
    jx_no_more_args(x, "keys", a, 0, NULL);
    struct jv r = jv_array(x, o.o->n);
    for (size_t i = 0; i < o.o->n; i++) r.a->v[i] = jent_key(&o.o->e[i]);
    r.a->n = o.o->n;
    return r;
}

static struct jv m_values(struct jx *x, struct jv o, const struct jargs *a) {
    jx_no_more_args(x, "values", a, 0, NULL);
    struct jv r = jv_array(x, o.o->n);
    for (size_t i = 0; i < o.o->n; i++) r.a->v[i] = o.o->e[i].v;
    r.a->n = o.o->n;
    return r;
}

static struct jv m_dictsort(struct jx *x, struct jv o, const struct jargs *a) {
    return jx_dictsort(x, o, a);
}

static struct jv m_append(struct jx *x, struct jv l, const struct jargs *a) {
    jx_no_more_args(x, "append", a, 1, NULL);
    if (a->n != 1) jx_fail(x, "append takes one argument");
    jarr_push(x, l.a, a->pos[0]);
    return jv_none();
}

static struct jv m_extend(struct jx *x, struct jv l, const struct jargs *a) {
    jx_no_more_args(x, "extend", a, 1, NULL);
    struct jv m = jx_arg(a, 0, NULL);
    if (!jv_is_arr(m)) jx_fail(x, "extend: the argument must be a list");
    size_t n = m.a->n;
    for (size_t i = 0; i < n; i++) jarr_push(x, l.a, m.a->v[i]);
    return jv_none();
}

static struct jv m_pop(struct jx *x, struct jv l, const struct jargs *a) {
    jx_no_more_args(x, "pop", a, 1, NULL);
    if (jv_is_obj(l)) {
        struct jv k = need_str(x, jx_arg(a, 0, NULL), "pop", "the key");
        for (size_t i = 0; i < l.o->n; i++)
            if (l.o->e[i].kn == k.s.n && memcmp(l.o->e[i].k, k.s.p, k.s.n) == 0) {
                struct jv v = l.o->e[i].v;
                memmove(&l.o->e[i], &l.o->e[i + 1], (l.o->n - i - 1) * sizeof *l.o->e);
                l.o->n--;
                l.o->ix = NULL;
                l.o->ixcap = 0;
                return v;
            }
        jx_fail(x, "pop: no key '%.*s'", (int)(k.s.n > 40 ? 40 : k.s.n), k.s.p);
    }
    struct jv iv = jx_arg(a, 0, NULL);
    if (!absent(iv) && iv.k != JV_INT) jx_fail(x, "pop: the index must be an integer");
    int64_t i = absent(iv) ? -1 : iv.i;
    if (i < 0) i += (int64_t)l.a->n;
    if (i < 0 || (uint64_t)i >= l.a->n) jx_fail(x, "pop: index out of range");
    struct jv v = l.a->v[i];
    memmove(&l.a->v[i], &l.a->v[i + 1], (l.a->n - (size_t)i - 1) * sizeof *l.a->v);
    l.a->n--;
    return v;
}

static struct jv m_index(struct jx *x, struct jv l, const struct jargs *a) {
    jx_no_more_args(x, "index", a, 1, NULL);
    jx_steps(x, l.a->n);
    for (size_t i = 0; i < l.a->n; i++)
        if (jv_strict_eq(l.a->v[i], jx_arg(a, 0, NULL))) return jv_int((int64_t)i);
    jx_fail(x, "index: the value is not in the list");
}

static struct jv m_insert(struct jx *x, struct jv l, const struct jargs *a) {
    jx_no_more_args(x, "insert", a, 2, NULL);
    struct jv iv = jx_arg(a, 0, NULL);
    if (iv.k != JV_INT || a->n != 2) jx_fail(x, "insert takes an integer index and a value");
    int64_t i = iv.i < 0 ? iv.i + (int64_t)l.a->n : iv.i;
    size_t at = i < 0 ? 0 : (uint64_t)i > l.a->n ? l.a->n : (size_t)i;
    jarr_push(x, l.a, jv_none());
    memmove(&l.a->v[at + 1], &l.a->v[at], (l.a->n - 1 - at) * sizeof *l.a->v);
    l.a->v[at] = a->pos[1];
    return jv_none();
}

struct method {
    const char *name;
    jbuiltin fn;
};

static const struct method str_methods[] = {
    {"upper", m_upper},       {"lower", m_lower},     {"strip", m_strip},           {"lstrip", m_lstrip},
    {"rstrip", m_rstrip},     {"title", m_title},     {"capitalize", m_capitalize}, {"startswith", m_startswith},
    {"endswith", m_endswith}, {"split", m_split},     {"rsplit", m_rsplit},         {"replace", m_replace},
    {"find", m_find},         {"count", m_count},     {"join", m_join},             {"format", m_format},
};
static const struct method obj_methods[] = {
    {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"dictsort", m_dictsort}, {"pop", m_pop},
};
static const struct method arr_methods[] = {
    {"append", m_append}, {"pop", m_pop}, {"extend", m_extend}, {"index", m_index}, {"count", m_count},
    {"insert", m_insert},
};

static struct jv find_method(struct jx *x, struct jv obj, const struct method *t, size_t nt, const char *name,
                             size_t n) {
    for (size_t i = 0; i < nt; i++)
        if (strlen(t[i].name) == n && memcmp(t[i].name, name, n) == 0) return jv_func(x, t[i].name, t[i].fn, obj);
    return jv_undef();
}

#define FIND(t) find_method(x, obj, t, sizeof t / sizeof t[0], name, n)

struct jv jx_method(struct jx *x, struct jv obj, const char *name, size_t n) {
    if (obj.k == JV_STR) {
        if (n == 6 && memcmp(name, "length", 6) == 0) return jv_int((int64_t)ju_count(obj.s.p, obj.s.n));
        return FIND(str_methods);
    }
    if (jv_is_arr(obj)) {
        if (n == 6 && memcmp(name, "length", 6) == 0) return jv_int((int64_t)obj.a->n);
        return FIND(arr_methods);
    }
    if (jv_is_obj(obj)) return FIND(obj_methods);
    return jv_undef();
}
