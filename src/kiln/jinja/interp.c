/*
 * interp.c - running the syntax tree: statements write to the current output
 * (the result, or a capture for a macro, a block set or a filter block),
 * expressions return values. Scoping follows @huggingface/jinja: a for loop
 * and a macro call open a scope, `set` writes to the innermost one, a macro
 * body sees the scope it is called from. Every node counts a step and a level
 * of depth against the render's limits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

struct jenv *jx_env_new(struct jx *x, struct jenv *parent) {
    struct jenv *e = jx_alloc(x, sizeof *e);
    e->parent = parent;
    return e;
}

struct jv jx_lookup(struct jenv *env, const char *name, size_t n) {
    for (; env; env = env->parent) {
        struct jv *v = jobj_get(&env->vars, name, n);
        if (v) return *v;
    }
    return jv_undef();
}

void jx_setvar(struct jx *x, struct jenv *env, const char *name, size_t n, struct jv v) {
    jobj_set(x, &env->vars, name, n, v);
}

static void enter(struct jx *x, const struct jnode *n) {
    x->line = n->line;
    jx_step(x);
    if (++x->depth > x->lim.max_depth)
        jx_fail(x, "the template nests calls or expressions more than %d deep (runaway recursion?)", x->lim.max_depth);
}

/* ------------------------------------------------------------------ members and slices */

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Python's slice on n items: the indices it visits, written to idx (n of them at most) */
static size_t slice_indices(struct jx *x, int64_t n, struct jv start, struct jv stop, struct jv step, int64_t **idx) {
    int64_t st = step.k == JV_INT ? step.i : 1;
    if (st == 0) jx_fail(x, "a slice step cannot be zero");
    int64_t a, b;
    if (st > 0) {
        a = start.k == JV_INT ? (start.i < 0 ? clampi(n + start.i, 0, n) : clampi(start.i, 0, n)) : 0;
        b = stop.k == JV_INT ? (stop.i < 0 ? clampi(n + stop.i, 0, n) : clampi(stop.i, 0, n)) : n;
    } else {
        a = start.k == JV_INT ? (start.i < 0 ? clampi(n + start.i, -1, n - 1) : clampi(start.i, -1, n - 1)) : n - 1;
        b = stop.k == JV_INT ? (stop.i < -1 ? clampi(n + stop.i, -1, n - 1) : clampi(stop.i, -1, n - 1)) : -1;
    }
    size_t cnt = 0;
    *idx = jx_alloc(x, (size_t)(n > 0 ? n : 1) * sizeof **idx);
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
        (*idx)[cnt++] = i;
        if (st > 0 ? i > INT64_MAX - st : i < INT64_MIN - st) break;
    }
    return cnt;
}

static struct jv do_slice(struct jx *x, struct jenv *env, struct jv obj, const struct jnode *s) {
    if (!jv_is_arr(obj) && obj.k != JV_STR) jx_fail(x, "only a list or a string can be sliced, not a %s", jv_kind_name(obj));
    struct jv a = s->a ? jx_eval(x, env, s->a) : jv_undef(), b = s->b ? jx_eval(x, env, s->b) : jv_undef(),
              c = s->c ? jx_eval(x, env, s->c) : jv_undef();
    struct jv parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i].k != JV_INT && parts[i].k != JV_UNDEF && parts[i].k != JV_NONE)
            jx_fail(x, "slice bounds must be integers, not a %s", jv_kind_name(parts[i]));
    int64_t *idx;
    if (jv_is_arr(obj)) {
        size_t cnt = slice_indices(x, (int64_t)obj.a->n, a, b, c, &idx);
        struct jv r = jv_array(x, cnt);
        for (size_t i = 0; i < cnt; i++) r.a->v[i] = obj.a->v[idx[i]];
        r.a->n = cnt;
        return r;
    }
    /* strings slice by code point */
    size_t n = ju_count(obj.s.p, obj.s.n);
    size_t *off = jx_alloc(x, (n + 1) * sizeof *off);
    for (size_t i = 0, k = 0; i <= n; i++) {
        off[i] = k;
        uint32_t cp;
        if (i < n) k += ju_decode(obj.s.p + k, obj.s.n - k, &cp);
    }
    size_t cnt = slice_indices(x, (int64_t)n, a, b, c, &idx);
    if (cnt && (c.k != JV_INT || c.i == 1)) return jv_str(obj.s.p + off[idx[0]], off[idx[cnt - 1] + 1] - off[idx[0]]);
    struct jbuf out = {0};
    for (size_t i = 0; i < cnt; i++) jbuf_put(x, &out, obj.s.p + off[idx[i]], off[idx[i] + 1] - off[idx[i]]);
    return jv_str(out.p ? out.p : "", out.n);
}

/* the i-th code point of s (negative from the end), undefined when out of range */
static struct jv str_at(struct jv s, int64_t i) {
    size_t n = ju_count(s.s.p, s.s.n);
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return jv_undef();
    size_t k = 0;
    uint32_t cp;
    for (int64_t j = 0; j < i; j++) k += ju_decode(s.s.p + k, s.s.n - k, &cp);
    return jv_str(s.s.p + k, ju_decode(s.s.p + k, s.s.n - k, &cp));
}

struct jv jx_member(struct jx *x, struct jv obj, struct jv prop) {
    if (jv_is_attrs(obj)) {
        if (prop.k == JV_INT) prop = jv_to_str(x, prop); /* integer keys are kept as their digits */
        if (prop.k != JV_STR) jx_fail(x, "a mapping's key must be a string, not a %s", jv_kind_name(prop));
        struct jv *v = jobj_get(obj.o, prop.s.p, prop.s.n);
        if (v) return *v;
        return obj.k == JV_NS ? jv_undef() : jx_method(x, obj, prop.s.p, prop.s.n);
    }
    if (jv_is_arr(obj) || obj.k == JV_STR) {
        if (prop.k == JV_INT) {
            if (obj.k == JV_STR) return str_at(obj, prop.i);
            int64_t i = prop.i < 0 ? prop.i + (int64_t)obj.a->n : prop.i;
            return i >= 0 && (uint64_t)i < obj.a->n ? obj.a->v[i] : jv_undef();
        }
        if (prop.k == JV_STR) return jx_method(x, obj, prop.s.p, prop.s.n);
        jx_fail(x, "a %s is indexed by an integer, not a %s", jv_kind_name(obj), jv_kind_name(prop));
    }
    if (prop.k != JV_STR) jx_fail(x, "a %s has no item %s", jv_kind_name(obj), jv_kind_name(prop));
    return jx_method(x, obj, prop.s.p, prop.s.n);
}

struct jv jx_attr_path(struct jx *x, struct jv v, struct jv path) {
    struct jv p = path.k == JV_INT ? jv_to_str(x, path) : path;
    if (p.k != JV_STR) jx_fail(x, "an attribute must be a string or an integer, not a %s", jv_kind_name(path));
    size_t i = 0;
    for (;;) {
        size_t e = i;
        while (e < p.s.n && p.s.p[e] != '.') e++;
        if (jv_is_attrs(v)) {
            struct jv *f = jobj_get(v.o, p.s.p + i, e - i);
            v = f ? *f : jv_undef();
        } else if (jv_is_arr(v)) {
            char *end;
            char buf[24];
            size_t l = e - i < sizeof buf - 1 ? e - i : sizeof buf - 1;
            memcpy(buf, p.s.p + i, l);
            buf[l] = 0;
            long long k = strtoll(buf, &end, 10);
            if (end == buf || k < 0 || (uint64_t)k >= v.a->n) return jv_undef();
            v = v.a->v[k];
        } else {
            return jv_undef();
        }
        if (e >= p.s.n) return v;
        i = e + 1;
    }
}

/* ------------------------------------------------------------------ operators */

static struct jv arith(struct jx *x, int op, struct jv l, struct jv r) {
    bool fl = l.k == JV_FLOAT || r.k == JV_FLOAT;
    if (!fl) {
        int64_t a = l.i, b = r.i, v;
        bool over = false;
        switch (op) {
        case OP_ADD: over = __builtin_add_overflow(a, b, &v); break;
        case OP_SUB: over = __builtin_sub_overflow(a, b, &v); break;
        case OP_MUL: over = __builtin_mul_overflow(a, b, &v); break;
        case OP_FLOORDIV:
        case OP_MOD:
            if (b == 0) jx_fail(x, "division by zero");
            if (a == INT64_MIN && b == -1) jx_fail(x, "integer overflow");
            v = op == OP_MOD ? a % b : a / b;
            if (op == OP_FLOORDIV && (a % b != 0) && ((a < 0) != (b < 0))) v--;
            /* the reference engine's % keeps the dividend's sign (JavaScript) */
            break;
        default: v = 0;
        }
        if (over) jx_fail(x, "integer overflow");
        if (op != OP_DIV) return jv_int(v);
    }
    double a = jv_num(l), b = jv_num(r), v = 0;
    switch (op) {
    case OP_ADD: v = a + b; break;
    case OP_SUB: v = a - b; break;
    case OP_MUL: v = a * b; break;
    case OP_DIV:
        if (b == 0) jx_fail(x, "division by zero");
        return jv_float(a / b);
    case OP_FLOORDIV:
        if (b == 0) jx_fail(x, "division by zero");
        v = floor(a / b);
        break;
    case OP_MOD:
        if (b == 0) jx_fail(x, "division by zero");
        v = fmod(a, b);
        break;
    }
    return jv_float(v);
}

static struct jv power(struct jx *x, struct jv l, struct jv r) {
    double a = jv_num(l), b = jv_num(r);
    if (a == 0 && b < 0) jx_fail(x, "0 cannot be raised to a negative power");
    bool fl = l.k == JV_FLOAT || r.k == JV_FLOAT || b < 0;
    if (!fl) {
        int64_t base = l.k == JV_BOOL ? l.b : l.i, e = r.k == JV_BOOL ? r.b : r.i, v = 1;
        for (int64_t i = 0; i < e; i++) {
            if (__builtin_mul_overflow(v, base, &v)) jx_fail(x, "integer overflow in **");
            if (v == 0 || v == 1) break;
            if (i > 64 && (v == -1)) break;
        }
        if (v == -1 && (e & 1) == 0) v = 1;
        return jv_int(v);
    }
    double v = pow(a, b);
    if (!isfinite(v)) jx_fail(x, "** gives no finite real number");
    return jv_float(v);
}

static bool contains(struct jx *x, struct jv l, struct jv r, bool *ok) {
    *ok = true;
    if (jv_is_arr(r)) {
        jx_steps(x, r.a->n);
        for (size_t i = 0; i < r.a->n; i++)
            if (jv_strict_eq(r.a->v[i], l)) return true;
        return false;
    }
    if (l.k == JV_STR && r.k == JV_STR) {
        size_t at;
        jx_steps(x, r.s.n / 16);
        return ju_find(r.s.p, r.s.n, l.s.p, l.s.n, 0, &at);
    }
    if (l.k == JV_STR && jv_is_obj(r)) return jobj_get(r.o, l.s.p, l.s.n) != NULL;
    *ok = false;
    return false;
}

static const char *op_name(int op) {
    static const char *const n[] = {"?", "+", "-", "~", "*", "/", "//", "%", "**",
                                    "==", "!=", "<", ">", "<=", ">=", "in", "not in"};
    return op < (int)(sizeof n / sizeof n[0]) ? n[op] : "?";
}

static struct jv binary(struct jx *x, struct jenv *env, const struct jnode *n) {
    struct jv l = jx_eval(x, env, n->a), r = jx_eval(x, env, n->b);
    int op = n->op;
    x->line = n->line;
    if (op == OP_EQ) return jv_bool(jv_loose_eq(x, l, r));
    if (op == OP_NE) return jv_bool(!jv_loose_eq(x, l, r));
    if (l.k == JV_UNDEF || r.k == JV_UNDEF) {
        if (r.k == JV_UNDEF && (op == OP_IN || op == OP_NOT_IN)) return jv_bool(op == OP_NOT_IN);
        jx_fail(x, "cannot apply '%s' to an undefined value", op_name(op));
    }
    if (l.k == JV_NONE || r.k == JV_NONE) jx_fail(x, "cannot apply '%s' to none", op_name(op));
    if (op == OP_CONCAT) return jv_concat(x, jv_join_str(x, l), jv_join_str(x, r));
    bool ln = jv_is_num(l) || l.k == JV_BOOL, rn = jv_is_num(r) || r.k == JV_BOOL;
    if (op == OP_POW && ln && rn) return power(x, l, r);
    if (jv_is_num(l) && jv_is_num(r)) {
        double a = jv_num(l), b = jv_num(r);
        switch (op) {
        case OP_LT: return jv_bool(a < b);
        case OP_GT: return jv_bool(a > b);
        case OP_LE: return jv_bool(a <= b);
        case OP_GE: return jv_bool(a >= b);
        case OP_IN:
        case OP_NOT_IN: break;
        default: return arith(x, op, l, r);
        }
    } else if (jv_is_arr(l) && jv_is_arr(r) && op == OP_ADD) {
        struct jv c = jv_array(x, l.a->n + r.a->n);
        if (l.a->n) memcpy(c.a->v, l.a->v, l.a->n * sizeof *l.a->v);
        if (r.a->n) memcpy(c.a->v + l.a->n, r.a->v, r.a->n * sizeof *r.a->v);
        c.a->n = l.a->n + r.a->n;
        return c;
    }
    if (op == OP_IN || op == OP_NOT_IN) {
        bool ok;
        bool in = contains(x, l, r, &ok);
        if (ok) return jv_bool(op == OP_IN ? in : !in);
    }
    if ((l.k == JV_STR || r.k == JV_STR) && op == OP_ADD && !jv_is_attrs(l) && !jv_is_attrs(r))
        return jv_concat(x, jv_join_str(x, l), jv_join_str(x, r));
    if (l.k == JV_STR && r.k == JV_STR && op >= OP_LT && op <= OP_GE) {
        int c = jv_compare(x, l, r, true);
        return jv_bool(op == OP_LT ? c < 0 : op == OP_GT ? c > 0 : op == OP_LE ? c <= 0 : c >= 0);
    }
    jx_fail(x, "cannot apply '%s' to a %s and a %s", op_name(op), jv_kind_name(l), jv_kind_name(r));
}

/* ------------------------------------------------------------------ calls */

struct jv jx_arg(const struct jargs *a, size_t i, const char *name) {
    if (i < a->n) return a->pos[i];
    if (name && a->kw) {
        struct jv *v = jobj_get(a->kw, name, strlen(name));
        if (v) return *v;
    }
    return jv_undef();
}

void jx_no_more_args(struct jx *x, const char *fn, const struct jargs *a, size_t npos, const char *const *names) {
    if (a->n > npos) jx_fail(x, "%s takes at most %zu positional arguments, got %zu", fn, npos, a->n);
    for (size_t i = 0; a->kw && i < a->kw->n; i++) {
        bool known = false;
        for (const char *const *n = names; n && *n && !known; n++)
            known = strlen(*n) == a->kw->e[i].kn && memcmp(*n, a->kw->e[i].k, a->kw->e[i].kn) == 0;
        if (!known) jx_fail(x, "%s has no argument '%.*s'", fn, (int)a->kw->e[i].kn, a->kw->e[i].k);
    }
}

/* evaluate call arguments: positional (with *spread) first, then keywords (with **spread) */
void jx_eval_args(struct jx *x, struct jenv *env, struct jnode *const *args, size_t n, struct jargs *out) {
    struct jarr pos = {0};
    struct jobj *kw = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct jnode *a = args[i];
        if (a->kind == E_SPREAD) {
            struct jv v = jx_eval(x, env, a->a);
            if (!jv_is_arr(v)) jx_fail(x, "* needs a list, not a %s", jv_kind_name(v));
            for (size_t k = 0; k < v.a->n; k++) jarr_push(x, &pos, v.a->v[k]);
        } else if (a->kind != E_KWARG && a->kind != E_KWSPREAD) {
            jarr_push(x, &pos, jx_eval(x, env, a));
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct jnode *a = args[i];
        if (a->kind != E_KWARG && a->kind != E_KWSPREAD) continue;
        if (!kw) kw = jx_alloc(x, sizeof *kw);
        if (a->kind == E_KWARG) {
            if (jobj_get(kw, a->s.p, a->s.n)) jx_fail(x, "keyword argument '%.*s' given twice", (int)a->s.n, a->s.p);
            jobj_set(x, kw, a->s.p, a->s.n, jx_eval(x, env, a->a));
        } else {
            struct jv v = jx_eval(x, env, a->a);
            if (!jv_is_obj(v)) jx_fail(x, "** needs a mapping, not a %s", jv_kind_name(v));
            for (size_t k = 0; k < v.o->n; k++) {
                if (jobj_get(kw, v.o->e[k].k, v.o->e[k].kn))
                    jx_fail(x, "keyword argument '%.*s' given twice", (int)v.o->e[k].kn, v.o->e[k].k);
                jobj_set(x, kw, v.o->e[k].k, v.o->e[k].kn, v.o->e[k].v);
            }
        }
    }
    out->pos = pos.v;
    out->n = pos.n;
    out->kw = kw;
}

static bool mentions(const struct jnode *n, const char *name, int depth) {
    if (!n || depth > 200) return false;
    if (n->kind == E_IDENT && n->s.n == strlen(name) && memcmp(n->s.p, name, n->s.n) == 0) return true;
    if (mentions(n->a, name, depth + 1) || mentions(n->b, name, depth + 1) || mentions(n->c, name, depth + 1))
        return true;
    for (size_t i = 0; i < n->nbody; i++)
        if (mentions(n->body[i], name, depth + 1)) return true;
    for (size_t i = 0; i < n->nalt; i++)
        if (mentions(n->alt[i], name, depth + 1)) return true;
    return false;
}

static bool body_mentions(const struct jnode *m, const char *name) {
    for (size_t i = 0; i < m->nbody; i++)
        if (mentions(m->body[i], name, 0)) return true;
    return false;
}

/* parameters of macro (or call block) m bound in scope from a */
static void bind(struct jx *x, const struct jnode *m, const char *what, const struct jargs *a, struct jenv *scope) {
    struct jobj *kw = jx_alloc(x, sizeof *kw);
    for (size_t i = 0; a->kw && i < a->kw->n; i++) jobj_set(x, kw, a->kw->e[i].k, a->kw->e[i].kn, a->kw->e[i].v);
    size_t np = m->nalt;
    bool *pending = jx_alloc(x, np + 1);
    for (size_t i = 0; i < np; i++) {
        const struct jnode *p = m->alt[i];
        struct jv v = jv_undef();
        bool have = false;
        if (i < a->n) {
            v = a->pos[i];
            have = true;
        } else {
            struct jv *k = jobj_get(kw, p->s.p, p->s.n);
            if (k) {
                v = *k;
                have = true;
                /* consumed: drop it from the leftovers */
                for (size_t e = 0; e < kw->n; e++)
                    if (kw->e[e].kn == p->s.n && memcmp(kw->e[e].k, p->s.p, p->s.n) == 0) {
                        memmove(&kw->e[e], &kw->e[e + 1], (kw->n - e - 1) * sizeof *kw->e);
                        kw->n--;
                        kw->ix = NULL;
                        break;
                    }
            }
        }
        pending[i] = !have && p->kind == E_KWARG;
        jx_setvar(x, scope, p->s.p, p->s.n, v);
    }
    if (body_mentions(m, "kwargs")) {
        struct jv o = {.k = JV_OBJECT, .o = kw};
        jx_setvar(x, scope, "kwargs", 6, o);
    } else if (kw->n) {
        jx_fail(x, "%s takes no keyword argument '%.*s'", what, (int)kw->e[0].kn, kw->e[0].k);
    }
    if (body_mentions(m, "varargs")) {
        struct jv va = jv_array(x, 0);
        for (size_t i = np; i < a->n; i++) jarr_push(x, va.a, a->pos[i]);
        jx_setvar(x, scope, "varargs", 7, va);
    } else if (a->n > np) {
        jx_fail(x, "%s takes at most %zu arguments, got %zu", what, np, a->n);
    }
    for (size_t i = 0; i < np; i++)
        if (pending[i]) jx_setvar(x, scope, m->alt[i]->s.p, m->alt[i]->s.n, jx_eval(x, scope, m->alt[i]->a));
}

static struct jv run_body(struct jx *x, const struct jnode *m, struct jenv *scope) {
    struct jbuf buf = {0}, *saved = x->out;
    x->out = &buf;
    int flow = jx_exec_block(x, scope, m->body, m->nbody);
    x->out = saved;
    if (flow != FLOW_NORMAL) jx_fail(x, "{%% break %%} or {%% continue %%} outside a loop");
    return jv_str(buf.p ? buf.p : "", buf.n);
}

struct jv jx_call(struct jx *x, struct jenv *env, struct jv fn, const struct jargs *a) {
    if (fn.k != JV_FUNC) jx_fail(x, "cannot call a %s: it is not a function or macro", jv_kind_name(fn));
    struct jfunc *f = fn.fn;
    if (f->kind == JF_BUILTIN) return f->fn(x, f->self, a);
    int line = x->line;
    struct jenv *scope = jx_env_new(x, f->kind == JF_CALLER ? f->env : env);
    char what[80];
    snprintf(what, sizeof what, "macro '%.60s'", f->name);
    bind(x, f->m, f->kind == JF_CALLER ? "the call block" : what, a, scope);
    struct jv r = run_body(x, f->m, scope);
    x->line = line;
    return r;
}

/* ------------------------------------------------------------------ expressions */

struct jv jx_eval(struct jx *x, struct jenv *env, const struct jnode *n) {
    enter(x, n);
    struct jv v;
    switch (n->kind) {
    case E_INT: v = jv_int(n->i); break;
    case E_FLOAT: v = jv_float(n->f); break;
    case E_STR: v = jv_str(n->s.p, n->s.n); break;
    case E_IDENT: v = jx_lookup(env, n->s.p, n->s.n); break;
    case E_ARRAY:
    case E_TUPLE:
        v = jv_array(x, n->nbody);
        for (size_t i = 0; i < n->nbody; i++) v.a->v[i] = jx_eval(x, env, n->body[i]);
        v.a->n = n->nbody;
        if (n->kind == E_TUPLE) v.k = JV_TUPLE;
        break;
    case E_OBJECT:
        v = jv_object(x, JV_OBJECT);
        for (size_t i = 0; i + 1 < n->nbody; i += 2) {
            struct jv k = jx_eval(x, env, n->body[i]);
            jobj_set_key(x, v.o, k, jx_eval(x, env, n->body[i + 1]));
        }
        break;
    case E_MEMBER: {
        struct jv obj = jx_eval(x, env, n->a);
        x->line = n->line;
        if (n->flag && n->b->kind == E_SLICE) {
            v = do_slice(x, env, obj, n->b);
            break;
        }
        struct jv prop = n->flag ? jx_eval(x, env, n->b)
                         : n->b->kind == E_INT ? jv_int(n->b->i)
                                               : jv_str(n->b->s.p, n->b->s.n);
        x->line = n->line;
        v = jx_member(x, obj, prop);
        break;
    }
    case E_CALL: {
        struct jargs a;
        jx_eval_args(x, env, n->body, n->nbody, &a);
        struct jv fn = jx_eval(x, env, n->a);
        x->line = n->line;
        v = jx_call(x, env, fn, &a);
        break;
    }
    case E_BINARY: v = binary(x, env, n); break;
    case E_AND: {
        struct jv l = jx_eval(x, env, n->a);
        v = jv_truthy(l) ? jx_eval(x, env, n->b) : l;
        break;
    }
    case E_OR: {
        struct jv l = jx_eval(x, env, n->a);
        v = jv_truthy(l) ? l : jx_eval(x, env, n->b);
        break;
    }
    case E_NOT: v = jv_bool(!jv_truthy(jx_eval(x, env, n->a))); break;
    case E_NEG: {
        struct jv a = jx_eval(x, env, n->a);
        x->line = n->line;
        if (a.k == JV_FLOAT)
            v = jv_float(n->op == '-' ? -a.f : a.f);
        else if (a.k == JV_INT || a.k == JV_BOOL) {
            int64_t i = a.k == JV_BOOL ? a.b : a.i;
            if (n->op == '-' && i == INT64_MIN) jx_fail(x, "integer overflow");
            v = jv_int(n->op == '-' ? -i : i);
        } else {
            jx_fail(x, "cannot apply unary '%c' to a %s", n->op, jv_kind_name(a));
        }
        break;
    }
    case E_FILTER: {
        struct jv operand = jx_eval(x, env, n->a);
        x->line = n->line;
        v = jx_filter(x, env, operand, n);
        break;
    }
    case E_TEST: {
        struct jv operand = jx_eval(x, env, n->a);
        struct jargs a;
        jx_eval_args(x, env, n->body, n->nbody, &a);
        x->line = n->line;
        bool r = jx_test(x, n->s.p, n->s.n, operand, &a);
        v = jv_bool(n->flag ? !r : r);
        break;
    }
    case E_SELECT: v = jv_truthy(jx_eval(x, env, n->b)) ? jx_eval(x, env, n->a) : jv_undef(); break;
    case E_TERNARY: v = jv_truthy(jx_eval(x, env, n->a)) ? jx_eval(x, env, n->b) : jx_eval(x, env, n->c); break;
    case E_KWARG: jx_fail(x, "a keyword argument outside a call");
    case E_SPREAD:
    case E_KWSPREAD: jx_fail(x, "* or ** outside a call");
    default: jx_fail(x, "a statement where an expression belongs");
    }
    x->depth--;
    return v;
}

/* ------------------------------------------------------------------ statements */

static void assign(struct jx *x, struct jenv *env, const struct jnode *target, struct jv v) {
    if (target->kind == E_IDENT) {
        jx_setvar(x, env, target->s.p, target->s.n, v);
    } else if (target->kind == E_TUPLE) {
        if (!jv_is_arr(v)) jx_fail(x, "cannot unpack a %s into %zu names", jv_kind_name(v), target->nbody);
        if (v.a->n != target->nbody)
            jx_fail(x, "too %s values to unpack (%zu into %zu names)", v.a->n < target->nbody ? "few" : "many",
                    v.a->n, target->nbody);
        for (size_t i = 0; i < target->nbody; i++) {
            if (target->body[i]->kind != E_IDENT) jx_fail(x, "can only unpack into names");
            jx_setvar(x, env, target->body[i]->s.p, target->body[i]->s.n, v.a->v[i]);
        }
    } else if (target->kind == E_MEMBER && !target->flag && target->b->kind == E_IDENT) {
        struct jv obj = jx_eval(x, env, target->a);
        if (obj.k != JV_NS) jx_fail(x, "only a namespace() takes attribute assignment, not a %s", jv_kind_name(obj));
        jobj_set(x, obj.o, target->b->s.p, target->b->s.n, v);
    } else {
        jx_fail(x, "cannot assign to this expression");
    }
}

static void loop_vars(struct jx *x, struct jenv *env, const struct jnode *target, struct jv item) {
    if (target->kind == E_TUPLE && !jv_is_arr(item))
        jx_fail(x, "cannot unpack a %s into the loop variables", jv_kind_name(item));
    assign(x, env, target, item);
}

static int exec_for(struct jx *x, struct jenv *env, const struct jnode *n) {
    struct jenv *scope = jx_env_new(x, env);
    struct jv it = jx_eval(x, scope, n->b);
    x->line = n->line;
    if (jv_is_obj(it)) {
        struct jv keys = jv_array(x, it.o->n);
        for (size_t i = 0; i < it.o->n; i++) keys.a->v[i] = jent_key(&it.o->e[i]);
        keys.a->n = it.o->n;
        it = keys;
    }
    if (it.k == JV_UNDEF) it = jv_array(x, 0); /* as Python's Jinja: nothing to loop over */
    if (!jv_is_arr(it)) jx_fail(x, "for loops over a list or a mapping, not a %s", jv_kind_name(it));
    struct jv *items = it.a->v;
    size_t count = it.a->n;
    if (n->c) { /* for x in xs if test: the items that pass */
        items = jx_alloc(x, (count ? count : 1) * sizeof *items);
        size_t k = 0;
        for (size_t i = 0; i < it.a->n; i++) {
            jx_step(x);
            struct jenv *ls = jx_env_new(x, scope);
            loop_vars(x, ls, n->a, it.a->v[i]);
            if (jv_truthy(jx_eval(x, ls, n->c))) items[k++] = it.a->v[i];
        }
        count = k;
    }
    struct jv loop = jv_object(x, JV_OBJECT);
    static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first",
                                       "last",  "length", "previtem", "nextitem"};
    for (size_t k = 0; k < 9; k++) jobj_set(x, loop.o, keys[k], strlen(keys[k]), jv_undef());
    bool none = true;
    struct jarr *live = n->c ? NULL : it.a; /* the body may change the list it walks: read it as it is now */
    for (size_t i = 0; i < count; i++) {
        jx_step(x); /* an empty body still costs its iterations */
        if (live) {
            if (i >= live->n) break;
            items = live->v;
        }
        struct jent *e = loop.o->e;
        e[0].v = jv_int((int64_t)i + 1);
        e[1].v = jv_int((int64_t)i);
        e[2].v = jv_int((int64_t)(count - i));
        e[3].v = jv_int((int64_t)(count - i - 1));
        e[4].v = jv_bool(i == 0);
        e[5].v = jv_bool(i == count - 1);
        e[6].v = jv_int((int64_t)count);
        e[7].v = i > 0 ? items[i - 1] : jv_undef();
        e[8].v = i + 1 < count && (!live || i + 1 < live->n) ? items[i + 1] : jv_undef();
        jx_setvar(x, scope, "loop", 4, loop);
        loop_vars(x, scope, n->a, items[i]);
        int flow = jx_exec_block(x, scope, n->body, n->nbody);
        if (flow == FLOW_CONTINUE) continue;
        if (flow == FLOW_BREAK) break;
        none = false; /* as the reference engine: an iteration that ends in continue or break does not count */
    }
    if (none) return jx_exec_block(x, scope, n->alt, n->nalt);
    return FLOW_NORMAL;
}

struct jv jx_capture(struct jx *x, struct jenv *env, struct jnode *const *body, size_t n) {
    struct jbuf buf = {0}, *saved = x->out;
    x->out = &buf;
    int flow = jx_exec_block(x, env, body, n);
    x->out = saved;
    if (flow != FLOW_NORMAL) jx_fail(x, "{%% break %%} or {%% continue %%} outside a loop");
    return jv_str(buf.p ? buf.p : "", buf.n);
}

static int exec(struct jx *x, struct jenv *env, const struct jnode *n) {
    enter(x, n);
    int flow = FLOW_NORMAL;
    switch (n->kind) {
    case N_TEXT: jx_emit(x, n->s.p, n->s.n); break;
    case N_OUTPUT: {
        struct jv v = jx_eval(x, env, n->a);
        x->line = n->line;
        jv_write(x, x->out, v);
        break;
    }
    case N_IF:
        if (jv_truthy(jx_eval(x, env, n->a)))
            flow = jx_exec_block(x, env, n->body, n->nbody);
        else
            flow = jx_exec_block(x, env, n->alt, n->nalt);
        break;
    case N_FOR: flow = exec_for(x, env, n); break;
    case N_SET: {
        struct jv v = n->b ? jx_eval(x, env, n->b) : jx_capture(x, env, n->body, n->nbody);
        x->line = n->line;
        assign(x, env, n->a, v);
        break;
    }
    case N_MACRO: {
        struct jfunc *f = jx_alloc(x, sizeof *f);
        f->kind = JF_MACRO;
        f->name = jx_strdup(x, n->s.p, n->s.n);
        f->m = n;
        jx_setvar(x, env, n->s.p, n->s.n, (struct jv){.k = JV_FUNC, .fn = f});
        break;
    }
    case N_CALLBLOCK: {
        struct jfunc *caller = jx_alloc(x, sizeof *caller);
        caller->kind = JF_CALLER;
        caller->name = "caller";
        caller->m = n;
        caller->env = env;
        struct jargs a;
        jx_eval_args(x, env, n->a->body, n->a->nbody, &a);
        struct jv fn = jx_eval(x, env, n->a->a);
        x->line = n->line;
        struct jenv *scope = jx_env_new(x, env);
        jx_setvar(x, scope, "caller", 6, (struct jv){.k = JV_FUNC, .fn = caller});
        jv_write(x, x->out, jx_call(x, scope, fn, &a));
        break;
    }
    case N_FILTERBLOCK: {
        struct jv body = jx_capture(x, env, n->body, n->nbody);
        x->line = n->line;
        jv_write(x, x->out, jx_filter(x, env, body, n->a));
        break;
    }
    case N_BREAK: flow = FLOW_BREAK; break;
    case N_CONTINUE: flow = FLOW_CONTINUE; break;
    default: jx_fail(x, "an expression where a statement belongs");
    }
    x->depth--;
    return flow;
}

int jx_exec_block(struct jx *x, struct jenv *env, struct jnode *const *body, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int flow = exec(x, env, body[i]);
        if (flow != FLOW_NORMAL) return flow;
    }
    return FLOW_NORMAL;
}
