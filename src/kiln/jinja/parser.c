/*
 * parser.c - tokens into the syntax tree, with the grammar and operator
 * precedence of @huggingface/jinja (lowest first): `a if b else c`, or, and,
 * not, comparisons and `in`, + - ~, * / // %, **, `is` tests, | filters,
 * unary signs, calls and members, primaries. Nesting is bounded so that a
 * hostile template cannot exhaust the stack; a block left open is an error
 * naming the line where it opened.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

#define MAX_NEST 256

struct ps {
    struct jx *x;
    const struct jtok *t;
    size_t n, i;
    int nest;
};

static const struct jtok *peek(const struct ps *p, size_t k) {
    size_t i = p->i + k;
    return &p->t[i < p->n ? i : p->n - 1];
}

_Noreturn static void perr(struct ps *p, const char *fmt, const char *arg) {
    const struct jtok *t = peek(p, 0);
    p->x->line = t->line;
    if (t->t == T_EOF)
        jx_fail(p->x, fmt, arg, "the end of the template");
    char what[80];
    size_t n = t->n < 40 ? t->n : 40;
    memcpy(what, "'", 1);
    memcpy(what + 1, t->p, n);
    memcpy(what + 1 + n, "'", 2);
    jx_fail(p->x, fmt, arg, what);
}

static bool is(const struct ps *p, int type) {
    return peek(p, 0)->t == type;
}

static bool is_ident(const struct ps *p, size_t k, const char *name) {
    const struct jtok *t = peek(p, k);
    return t->t == T_IDENT && t->n == strlen(name) && memcmp(t->p, name, t->n) == 0;
}

static bool is_stmt(const struct ps *p, const char *name) {
    return is(p, T_OPEN_STMT) && is_ident(p, 1, name);
}

static const struct jtok *expect(struct ps *p, int type, const char *what) {
    if (!is(p, type)) perr(p, "expected %s, found %s", what);
    return &p->t[p->i++];
}

static void expect_ident(struct ps *p, const char *name) {
    if (!is_ident(p, 0, name)) perr(p, "expected '%s', found %s", name);
    p->i++;
}

static struct jnode *node(struct ps *p, int kind, int line) {
    struct jnode *n = jx_alloc(p->x, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

struct list {
    struct jnode **v;
    size_t n, cap;
};

static void add(struct ps *p, struct list *l, struct jnode *n) {
    l->v = jx_grow(p->x, l->v, &l->cap, l->n + 1, sizeof *l->v);
    l->v[l->n++] = n;
}

static void enter(struct ps *p) {
    if (++p->nest > MAX_NEST) perr(p, "the template nests more than 256 deep (at %s%s)", "");
    jx_step(p->x);
}

static struct jnode *expression(struct ps *p);
static struct jnode *primary(struct ps *p);
static struct jnode *any(struct ps *p);

/* statements until one of the names (a {% name %} ahead); fails at the end of the template */
static void block_until(struct ps *p, struct list *body, const char *const *names, const char *opener, int line) {
    for (;;) {
        for (const char *const *n = names; *n; n++)
            if (is_stmt(p, *n)) return;
        if (is(p, T_EOF)) {
            p->x->line = line;
            jx_fail(p->x, "{%% %s %%} is not closed (expected {%% %s %%})", opener, names[0]);
        }
        const struct jtok *kw = peek(p, 1);
        if (is(p, T_OPEN_STMT) && kw->t == T_IDENT &&
            ((kw->n > 3 && !memcmp(kw->p, "end", 3)) || (kw->n == 4 && !memcmp(kw->p, "else", 4)) ||
             (kw->n == 4 && !memcmp(kw->p, "elif", 4)))) {
            p->x->line = kw->line;
            jx_fail(p->x, "{%% %.*s %%} where {%% %s %%} (opened at line %d) expected {%% %s %%}", (int)kw->n, kw->p,
                    opener, line, names[0]);
        }
        add(p, body, any(p));
    }
}

/* ------------------------------------------------------------------ expressions */

/* a, b, c as a tuple (when there is a comma), else the single expression */
static struct jnode *sequence(struct ps *p, bool prim) {
    int line = peek(p, 0)->line;
    struct jnode *first = prim ? primary(p) : expression(p);
    if (!is(p, T_COMMA)) return first;
    struct list l = {0};
    add(p, &l, first);
    while (is(p, T_COMMA)) {
        p->i++;
        add(p, &l, prim ? primary(p) : expression(p));
    }
    struct jnode *t = node(p, E_TUPLE, line);
    t->body = l.v;
    t->nbody = l.n;
    return t;
}

/* ( args ): call arguments, or (params) of a macro */
static void args(struct ps *p, struct list *out, bool params) {
    expect(p, T_LPAREN, "'('");
    bool saw_kw = false, saw_spread = false;
    while (!is(p, T_RPAREN)) {
        if (is(p, T_EOF)) perr(p, "expected ')', found %s%s", "");
        int line = peek(p, 0)->line;
        bool kwspread = is(p, T_POW), spread = is(p, T_MUL) && peek(p, 0)->n == 1 && peek(p, 0)->p[0] == '*';
        if (params && (kwspread || spread)) perr(p, "argument unpacking in a parameter list (at %s%s)", "");
        if (kwspread) {
            p->i++;
            struct jnode *n = node(p, E_KWSPREAD, line);
            n->a = expression(p);
            add(p, out, n);
            if (is(p, T_COMMA)) p->i++;
            if (!is(p, T_RPAREN)) perr(p, "`**` must be the last argument (found %s%s)", "");
            break;
        }
        struct jnode *a;
        if (spread) {
            if (saw_spread) perr(p, "only one `*` argument is allowed (at %s%s)", "");
            saw_spread = true;
            p->i++;
            a = node(p, E_SPREAD, line);
            a->a = expression(p);
        } else {
            a = expression(p);
            if (is(p, T_EQUALS)) {
                p->i++;
                if (a->kind != E_IDENT) perr(p, "a keyword argument needs a name before '=' (at %s%s)", "");
                struct jnode *kw = node(p, E_KWARG, line);
                kw->s = a->s;
                kw->a = expression(p);
                a = kw;
            }
            if (params) {
                if (a->kind != E_IDENT && a->kind != E_KWARG) perr(p, "expected a parameter name (at %s%s)", "");
                for (size_t k = 0; k < out->n; k++)
                    if (out->v[k]->s.n == a->s.n && memcmp(out->v[k]->s.p, a->s.p, a->s.n) == 0)
                        perr(p, "a parameter name appears twice (at %s%s)", "");
            }
            if (a->kind == E_KWARG)
                saw_kw = true;
            else if (saw_kw)
                perr(p, params ? "a parameter without a default follows one with a default (at %s%s)"
                               : "a positional argument follows a keyword argument (at %s%s)",
                     "");
            else if (saw_spread)
                perr(p, "a positional argument follows `*` unpacking (at %s%s)", "");
        }
        add(p, out, a);
        if (is(p, T_COMMA)) p->i++;
    }
    expect(p, T_RPAREN, "')'");
}

static struct jnode *call(struct ps *p, struct jnode *callee);

/* [ i ], [ a:b:c ] */
static struct jnode *subscript(struct ps *p) {
    int line = peek(p, 0)->line;
    struct jnode *parts[4] = {0};
    size_t np = 0;
    bool slice = false;
    while (!is(p, T_RBRACKET)) {
        if (is(p, T_EOF) || np >= 4) perr(p, "expected ']', found %s%s", "");
        if (is(p, T_COLON)) {
            parts[np++] = NULL;
            p->i++;
            slice = true;
        } else {
            parts[np++] = expression(p);
            if (is(p, T_COLON)) {
                p->i++;
                slice = true;
            }
        }
    }
    if (np == 0) perr(p, "empty [] (at %s%s)", "");
    if (!slice) return parts[0];
    if (np > 3) perr(p, "a slice has at most 3 parts (at %s%s)", "");
    struct jnode *s = node(p, E_SLICE, line);
    s->a = parts[0], s->b = np > 1 ? parts[1] : NULL, s->c = np > 2 ? parts[2] : NULL;
    return s;
}

static struct jnode *members(struct ps *p, struct jnode *obj) {
    while (is(p, T_DOT) || is(p, T_LBRACKET)) {
        int line = peek(p, 0)->line;
        bool computed = is(p, T_LBRACKET);
        p->i++;
        struct jnode *m = node(p, E_MEMBER, line);
        m->a = obj;
        m->flag = computed;
        if (computed) {
            m->b = subscript(p);
            expect(p, T_RBRACKET, "']'");
        } else {
            m->b = primary(p);
            if (m->b->kind != E_IDENT && m->b->kind != E_INT) perr(p, "expected a name after '.' (before %s%s)", "");
        }
        obj = m;
    }
    return obj;
}

static struct jnode *call(struct ps *p, struct jnode *callee) {
    enter(p);
    struct jnode *c = node(p, E_CALL, peek(p, 0)->line);
    c->a = callee;
    struct list l = {0};
    args(p, &l, false);
    c->body = l.v;
    c->nbody = l.n;
    struct jnode *e = members(p, c);
    if (is(p, T_LPAREN)) e = call(p, e);
    p->nest--;
    return e;
}

static struct jnode *call_member(struct ps *p) {
    struct jnode *m = members(p, primary(p));
    return is(p, T_LPAREN) ? call(p, m) : m;
}

static struct jnode *unary_sign(struct ps *p) {
    const struct jtok *t = peek(p, 0);
    if ((t->t == T_UNARY || t->t == T_ADD) && t->n == 1 && (t->p[0] == '-' || t->p[0] == '+')) {
        enter(p);
        p->i++;
        struct jnode *n = node(p, E_NEG, t->line);
        n->op = (uint8_t)t->p[0];
        n->a = unary_sign(p);
        p->nest--;
        return n;
    }
    return call_member(p);
}

/* a filter or test name with its optional (args) */
static struct jnode *named_op(struct ps *p, int kind, struct jnode *operand, const char *what) {
    int line = peek(p, 0)->line;
    struct jnode *name = primary(p);
    if (name->kind != E_IDENT) perr(p, what, "");
    struct jnode *f = node(p, kind, line);
    f->a = operand;
    f->s = name->s;
    if (is(p, T_LPAREN)) {
        struct list l = {0};
        args(p, &l, false);
        f->body = l.v;
        f->nbody = l.n;
        f->op = 1; /* written with parentheses */
    }
    return f;
}

static struct jnode *filter_expr(struct ps *p) {
    struct jnode *operand = unary_sign(p);
    while (is(p, T_PIPE)) {
        p->i++;
        enter(p);
        operand = named_op(p, E_FILTER, operand, "expected a filter name after '|' (before %s%s)");
        p->nest--;
    }
    return operand;
}

static struct jnode *test_expr(struct ps *p) {
    struct jnode *operand = filter_expr(p);
    while (is_ident(p, 0, "is")) {
        p->i++;
        bool neg = is_ident(p, 0, "not");
        if (neg) p->i++;
        enter(p);
        operand = named_op(p, E_TEST, operand, "expected a test name after 'is' (before %s%s)");
        operand->flag = neg;
        p->nest--;
    }
    return operand;
}

static struct jnode *binary(struct ps *p, int op, struct jnode *a, struct jnode *b, int line) {
    struct jnode *n = node(p, E_BINARY, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static int op_of(const struct jtok *t) {
    static const struct {
        const char *s;
        int op;
    } ops[] = {{"+", OP_ADD},       {"-", OP_SUB},  {"~", OP_CONCAT}, {"*", OP_MUL}, {"/", OP_DIV},
               {"//", OP_FLOORDIV}, {"%", OP_MOD},  {"**", OP_POW},   {"==", OP_EQ}, {"!=", OP_NE},
               {"<", OP_LT},        {">", OP_GT},   {"<=", OP_LE},    {">=", OP_GE}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (t->n == strlen(ops[i].s) && memcmp(t->p, ops[i].s, t->n) == 0) return ops[i].op;
    return 0;
}

static struct jnode *power(struct ps *p) {
    struct jnode *l = test_expr(p);
    while (is(p, T_POW)) {
        int line = peek(p, 0)->line;
        p->i++;
        enter(p);
        l = binary(p, OP_POW, l, test_expr(p), line);
        p->nest--;
    }
    return l;
}

static struct jnode *multiplicative(struct ps *p) {
    struct jnode *l = power(p);
    while (is(p, T_MUL)) {
        const struct jtok *t = &p->t[p->i++];
        enter(p);
        l = binary(p, op_of(t), l, power(p), t->line);
        p->nest--;
    }
    return l;
}

static struct jnode *additive(struct ps *p) {
    struct jnode *l = multiplicative(p);
    while (is(p, T_ADD)) {
        const struct jtok *t = &p->t[p->i++];
        enter(p);
        l = binary(p, op_of(t), l, multiplicative(p), t->line);
        p->nest--;
    }
    return l;
}

static struct jnode *comparison(struct ps *p) {
    struct jnode *l = additive(p);
    for (;;) {
        int line = peek(p, 0)->line, op;
        if (is_ident(p, 0, "not") && is_ident(p, 1, "in")) {
            op = OP_NOT_IN;
            p->i += 2;
        } else if (is_ident(p, 0, "in")) {
            op = OP_IN;
            p->i++;
        } else if (is(p, T_CMP)) {
            op = op_of(&p->t[p->i++]);
        } else {
            break;
        }
        enter(p);
        l = binary(p, op, l, additive(p), line);
        p->nest--;
    }
    return l;
}

static struct jnode *negation(struct ps *p) {
    if (is_ident(p, 0, "not")) {
        int line = peek(p, 0)->line;
        p->i++;
        enter(p);
        struct jnode *n = node(p, E_NOT, line);
        n->a = negation(p);
        p->nest--;
        return n;
    }
    return comparison(p);
}

static struct jnode *logical_and(struct ps *p) {
    struct jnode *l = negation(p);
    while (is_ident(p, 0, "and")) {
        int line = peek(p, 0)->line;
        p->i++;
        enter(p);
        struct jnode *n = node(p, E_AND, line);
        n->a = l;
        n->b = negation(p);
        l = n;
        p->nest--;
    }
    return l;
}

static struct jnode *logical_or(struct ps *p) {
    struct jnode *l = logical_and(p);
    while (is_ident(p, 0, "or")) {
        int line = peek(p, 0)->line;
        p->i++;
        enter(p);
        struct jnode *n = node(p, E_OR, line);
        n->a = l;
        n->b = logical_and(p);
        l = n;
        p->nest--;
    }
    return l;
}

static struct jnode *expression(struct ps *p) {
    enter(p);
    struct jnode *a = logical_or(p);
    if (is_ident(p, 0, "if")) {
        int line = peek(p, 0)->line;
        p->i++;
        struct jnode *test = logical_or(p);
        if (is_ident(p, 0, "else")) {
            p->i++;
            struct jnode *t = node(p, E_TERNARY, line);
            t->a = test;
            t->b = a;
            t->c = expression(p);
            a = t;
        } else {
            struct jnode *s = node(p, E_SELECT, line);
            s->a = a;
            s->b = test;
            a = s;
        }
    }
    p->nest--;
    return a;
}

static struct jnode *primary(struct ps *p) {
    enter(p);
    const struct jtok *t = peek(p, 0);
    struct jnode *n = NULL;
    switch (t->t) {
    case T_NUM: {
        p->i++;
        char buf[64];
        if (t->n >= sizeof buf) perr(p, "number too long%s (before %s)", "");
        memcpy(buf, t->p, t->n);
        buf[t->n] = 0;
        if (memchr(t->p, '.', t->n)) {
            n = node(p, E_FLOAT, t->line);
            n->f = strtod(buf, NULL);
        } else {
            char *end;
            errno = 0;
            long long v = strtoll(buf, &end, 10);
            if (errno == ERANGE) {
                n = node(p, E_FLOAT, t->line);
                n->f = strtod(buf, NULL);
            } else {
                n = node(p, E_INT, t->line);
                n->i = v;
            }
        }
        break;
    }
    case T_STR: {
        p->i++;
        n = node(p, E_STR, t->line);
        n->s.p = t->p;
        n->s.n = t->n;
        if (is(p, T_STR)) { /* adjacent literals join */
            struct jbuf b = {0};
            jbuf_put(p->x, &b, t->p, t->n);
            while (is(p, T_STR)) {
                const struct jtok *u = &p->t[p->i++];
                jbuf_put(p->x, &b, u->p, u->n);
            }
            n->s.p = b.p;
            n->s.n = b.n;
        }
        break;
    }
    case T_IDENT:
        p->i++;
        n = node(p, E_IDENT, t->line);
        n->s.p = t->p;
        n->s.n = t->n;
        break;
    case T_LPAREN:
        p->i++;
        n = sequence(p, false);
        expect(p, T_RPAREN, "')'");
        break;
    case T_LBRACKET: {
        p->i++;
        struct list l = {0};
        while (!is(p, T_RBRACKET)) {
            if (is(p, T_EOF)) perr(p, "expected ']', found %s%s", "");
            add(p, &l, expression(p));
            if (is(p, T_COMMA)) p->i++;
        }
        p->i++;
        n = node(p, E_ARRAY, t->line);
        n->body = l.v;
        n->nbody = l.n;
        break;
    }
    case T_LBRACE: {
        p->i++;
        struct list l = {0};
        while (!is(p, T_RBRACE)) {
            if (is(p, T_EOF)) perr(p, "expected '}', found %s%s", "");
            add(p, &l, expression(p));
            expect(p, T_COLON, "':' between a key and its value");
            add(p, &l, expression(p));
            if (is(p, T_COMMA)) p->i++;
        }
        p->i++;
        n = node(p, E_OBJECT, t->line);
        n->body = l.v;
        n->nbody = l.n;
        break;
    }
    default: perr(p, "unexpected %s%s", "");
    }
    p->nest--;
    return n;
}

/* ------------------------------------------------------------------ statements */

static struct jnode *if_stmt(struct ps *p, int line) {
    struct jnode *n = node(p, N_IF, line);
    n->a = expression(p);
    expect(p, T_CLOSE_STMT, "'%}'");
    struct list body = {0}, alt = {0};
    static const char *const until[] = {"endif", "elif", "else", NULL};
    block_until(p, &body, until, "if", line);
    if (is_stmt(p, "elif")) {
        int l2 = peek(p, 0)->line;
        p->i += 2;
        enter(p);
        add(p, &alt, if_stmt(p, l2));
        p->nest--;
    } else if (is_stmt(p, "else")) {
        p->i += 2;
        expect(p, T_CLOSE_STMT, "'%}'");
        static const char *const end[] = {"endif", NULL};
        block_until(p, &alt, end, "if", line);
    }
    n->body = body.v, n->nbody = body.n;
    n->alt = alt.v, n->nalt = alt.n;
    return n;
}

static struct jnode *for_stmt(struct ps *p, int line) {
    struct jnode *n = node(p, N_FOR, line);
    n->a = sequence(p, true);
    if (n->a->kind != E_IDENT && n->a->kind != E_TUPLE) perr(p, "expected loop variables before %s%s", "");
    if (!is_ident(p, 0, "in")) perr(p, "expected 'in' after the loop variables, found %s%s", "");
    p->i++;
    struct jnode *it = expression(p);
    if (it->kind == E_SELECT) { /* for x in xs if cond */
        n->b = it->a;
        n->c = it->b;
    } else {
        n->b = it;
    }
    expect(p, T_CLOSE_STMT, "'%}'");
    struct list body = {0}, alt = {0};
    static const char *const until[] = {"endfor", "else", NULL};
    block_until(p, &body, until, "for", line);
    if (is_stmt(p, "else")) {
        p->i += 2;
        expect(p, T_CLOSE_STMT, "'%}'");
        static const char *const end[] = {"endfor", NULL};
        block_until(p, &alt, end, "for", line);
    }
    n->body = body.v, n->nbody = body.n;
    n->alt = alt.v, n->nalt = alt.n;
    return n;
}

static void end_tag(struct ps *p, const char *name) {
    expect(p, T_OPEN_STMT, "'{%'");
    expect_ident(p, name);
    expect(p, T_CLOSE_STMT, "'%}'");
}

static struct jnode *statement(struct ps *p) {
    int line = expect(p, T_OPEN_STMT, "'{%'")->line;
    if (!is(p, T_IDENT)) perr(p, "expected a statement name after {%%, found %s%s", "");
    const struct jtok *name = &p->t[p->i++];
    struct jnode *n;
#define NAME_IS(s) (name->n == strlen(s) && memcmp(name->p, s, name->n) == 0)
    if (NAME_IS("set")) {
        n = node(p, N_SET, line);
        n->a = sequence(p, false);
        if (is(p, T_EQUALS)) {
            p->i++;
            n->b = sequence(p, false);
        } else {
            expect(p, T_CLOSE_STMT, "'=' or '%}'");
            struct list body = {0};
            static const char *const end[] = {"endset", NULL};
            block_until(p, &body, end, "set", line);
            n->body = body.v, n->nbody = body.n;
            expect(p, T_OPEN_STMT, "'{%'");
            expect_ident(p, "endset");
        }
        expect(p, T_CLOSE_STMT, "'%}'");
    } else if (NAME_IS("if")) {
        n = if_stmt(p, line);
        end_tag(p, "endif");
    } else if (NAME_IS("for")) {
        n = for_stmt(p, line);
        end_tag(p, "endfor");
    } else if (NAME_IS("macro")) {
        n = node(p, N_MACRO, line);
        struct jnode *id = primary(p);
        if (id->kind != E_IDENT) perr(p, "expected a macro name before %s%s", "");
        n->s = id->s;
        struct list params = {0}, body = {0};
        args(p, &params, true);
        expect(p, T_CLOSE_STMT, "'%}'");
        static const char *const end[] = {"endmacro", NULL};
        block_until(p, &body, end, "macro", line);
        n->body = body.v, n->nbody = body.n;
        n->alt = params.v, n->nalt = params.n;
        end_tag(p, "endmacro");
    } else if (NAME_IS("call")) {
        n = node(p, N_CALLBLOCK, line);
        struct list params = {0}, body = {0};
        if (is(p, T_LPAREN)) args(p, &params, true);
        struct jnode *callee = primary(p);
        if (callee->kind != E_IDENT) perr(p, "expected a macro name after {%% call, before %s%s", "");
        struct jnode *c = node(p, E_CALL, line);
        c->a = callee;
        struct list a = {0};
        args(p, &a, false);
        c->body = a.v, c->nbody = a.n;
        n->a = c;
        expect(p, T_CLOSE_STMT, "'%}'");
        static const char *const end[] = {"endcall", NULL};
        block_until(p, &body, end, "call", line);
        n->body = body.v, n->nbody = body.n;
        n->alt = params.v, n->nalt = params.n;
        end_tag(p, "endcall");
    } else if (NAME_IS("filter")) {
        n = node(p, N_FILTERBLOCK, line);
        n->a = named_op(p, E_FILTER, NULL, "expected a filter name after {%% filter (before %s%s)");
        expect(p, T_CLOSE_STMT, "'%}'");
        struct list body = {0};
        static const char *const end[] = {"endfilter", NULL};
        block_until(p, &body, end, "filter", line);
        n->body = body.v, n->nbody = body.n;
        end_tag(p, "endfilter");
    } else if (NAME_IS("break") || NAME_IS("continue")) {
        n = node(p, NAME_IS("break") ? N_BREAK : N_CONTINUE, line);
        expect(p, T_CLOSE_STMT, "'%}'");
    } else {
        p->i--;
        if (NAME_IS("include") || NAME_IS("import") || NAME_IS("extends") || NAME_IS("from"))
            perr(p, "%s: templates cannot load other files here (%s)", "sandbox");
        perr(p, "unknown statement %s%s", "");
    }
#undef NAME_IS
    return n;
}

static struct jnode *any(struct ps *p) {
    enter(p);
    const struct jtok *t = peek(p, 0);
    struct jnode *n;
    switch (t->t) {
    case T_COMMENT:
        p->i++;
        n = node(p, N_TEXT, t->line); /* prints nothing */
        break;
    case T_TEXT:
        p->i++;
        n = node(p, N_TEXT, t->line);
        n->s.p = t->p;
        n->s.n = t->n;
        break;
    case T_OPEN_STMT: n = statement(p); break;
    case T_OPEN_EXPR:
        p->i++;
        n = node(p, N_OUTPUT, t->line);
        n->a = expression(p);
        expect(p, T_CLOSE_EXPR, "'}}'");
        break;
    default: perr(p, "unexpected %s%s outside {{ }} or {% %}", "");
    }
    p->nest--;
    return n;
}

struct jnode *jx_parse_program(struct jx *x, const struct jtoks *toks) {
    struct ps p = {x, toks->t, toks->n, 0, 0};
    struct list body = {0};
    while (!is(&p, T_EOF)) add(&p, &body, any(&p));
    struct jnode *prog = node(&p, N_IF, 1); /* the program: an if that is always true */
    prog->body = body.v;
    prog->nbody = body.n;
    return prog;
}
