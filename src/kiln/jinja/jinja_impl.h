/*
 * jinja_impl.h - what the Jinja interpreter's files share: the arena every
 * parse and render allocates from, values, tokens, the syntax tree, and the
 * context that carries limits and the error exit. A failure anywhere longjmps
 * back to kiln_jinja_parse / kiln_jinja_render, which free the arena: no path
 * inside the interpreter frees anything or checks a return for errors.
 */
#ifndef KILN_JINJA_IMPL_H
#define KILN_JINJA_IMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

/* ------------------------------------------------------------------ arena */

struct ja_chunk {
    struct ja_chunk *next;
    size_t size, used;
    _Alignas(16) char data[];
};

struct jarena {
    struct ja_chunk *head;
    size_t total; /* bytes taken from malloc */
};

/* ------------------------------------------------------------------ values */

enum jkind {
    JV_UNDEF, /* a name or member that does not exist */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_ARRAY,
    JV_TUPLE,  /* an array literal written with commas or parentheses */
    JV_OBJECT, /* insertion-ordered string keys */
    JV_KWARGS, /* keyword arguments of a call: an object */
    JV_NS,     /* namespace(): attributes that set may change */
    JV_FUNC,
};

struct jarr;
struct jobj;
struct jfunc;

struct jv {
    uint8_t k;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct jarr *a;
        struct jobj *o;
        struct jfunc *fn;
    };
};

struct jarr {
    struct jv *v;
    size_t n, cap;
};

struct jent {
    const char *k;
    size_t kn;
    struct jv v;
    bool ikey; /* an integer key (Python allows them), kept as its digits */
};

struct jobj {
    struct jent *e;
    size_t n, cap;
    uint32_t *ix; /* open-addressing index into e (+1; 0 empty), built past a few keys */
    size_t ixcap;
};

struct jx;
struct jargs {
    const struct jv *pos;
    size_t n;
    const struct jobj *kw; /* NULL: none */
};
typedef struct jv (*jbuiltin)(struct jx *x, struct jv self, const struct jargs *a);

struct jnode;
struct jenv;
enum { JF_BUILTIN, JF_MACRO, JF_CALLER };
struct jfunc {
    int kind;
    const char *name;
    jbuiltin fn;           /* JF_BUILTIN */
    struct jv self;        /* JF_BUILTIN: the bound object of a method */
    const struct jnode *m; /* JF_MACRO, JF_CALLER: the macro or call block */
    struct jenv *env;      /* JF_CALLER: the scope of the call block */
};

/* ------------------------------------------------------------------ tokens */

enum jtok_kind {
    T_EOF,
    T_TEXT,
    T_NUM,
    T_STR,
    T_IDENT,
    T_EQUALS,
    T_LPAREN,
    T_RPAREN,
    T_OPEN_STMT,
    T_CLOSE_STMT,
    T_OPEN_EXPR,
    T_CLOSE_EXPR,
    T_LBRACKET,
    T_RBRACKET,
    T_LBRACE,
    T_RBRACE,
    T_COMMA,
    T_DOT,
    T_COLON,
    T_PIPE,
    T_ADD,   /* + - ~ */
    T_MUL,   /* * / // % */
    T_POW,   /* ** */
    T_CMP,   /* < > <= >= == != */
    T_UNARY, /* a sign before an operand */
    T_COMMENT,
};

struct jtok {
    uint8_t t;
    int line;
    const char *p; /* the token's text (string literals unescaped) */
    size_t n;
};

/* ------------------------------------------------------------------ syntax tree */

enum jnode_kind {
    /* statements */
    N_TEXT,   /* s */
    N_OUTPUT, /* {{ a }} */
    N_IF,     /* a test, body, alt */
    N_FOR,    /* a target, b iterable, c filter test or NULL, body, alt (else) */
    N_SET,    /* a target, b value or NULL (block set: body) */
    N_MACRO,  /* s name, params in alt, body */
    N_CALLBLOCK, /* a the call, caller params in alt, body */
    N_FILTERBLOCK, /* a the filter, body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    E_INT,    /* i */
    E_FLOAT,  /* f */
    E_STR,    /* s */
    E_IDENT,  /* s */
    E_ARRAY,  /* body */
    E_TUPLE,  /* body */
    E_OBJECT, /* body: key, value, key, value ... */
    E_MEMBER, /* a object, b property; flag: written [b] */
    E_SLICE,  /* a start, b stop, c step (each may be NULL) */
    E_CALL,   /* a callee, body args */
    E_BINARY, /* op, a, b */
    E_AND,
    E_OR,
    E_NOT,     /* a */
    E_NEG,     /* a; op '-' or '+' */
    E_FILTER,  /* a operand, s filter name, body args (flag: written with parentheses) */
    E_TEST,    /* a operand, s test name, body args; flag: is not */
    E_SELECT,  /* a value, b test: `a if b` without else */
    E_TERNARY, /* a test, b then, c else */
    E_KWARG,   /* s name, a value */
    E_SPREAD,  /* *a */
    E_KWSPREAD, /* **a */
};

enum jop {
    OP_ADD = 1,
    OP_SUB,
    OP_CONCAT, /* ~ */
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_IN,
    OP_NOT_IN,
};

struct jnode {
    uint8_t kind, op;
    bool flag;
    int line;
    struct jnode *a, *b, *c;
    struct jnode **body, **alt;
    size_t nbody, nalt;
    union {
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
    };
};

/* ------------------------------------------------------------------ the context */

struct jenv {
    struct jenv *parent;
    struct jobj vars;
};

struct jbuf {
    char *p;
    size_t n, cap;
};

struct jx {
    jmp_buf jb;
    char *err;
    size_t errlen;
    int line; /* template line of what runs now: errors name it */
    struct jarena arena;
    /* limits (render) */
    struct kiln_jinja_limits lim;
    uint64_t steps;
    int depth;
    int64_t now;        /* strftime_now's clock */
    struct jbuf *out;   /* where output goes now (the result, or a capture) */
    struct jbuf *main;  /* the result: its size is bounded by lim.max_output */
    const struct jx_globals *g;
};

/* ---- arena and errors (arena.c) */
_Noreturn void jx_fail(struct jx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *jx_alloc(struct jx *x, size_t n);   /* zeroed, 16-aligned; fails past lim.max_memory */
char *jx_strdup(struct jx *x, const char *s, size_t n); /* NUL-terminated copy */
void *jx_grow(struct jx *x, void *p, size_t *cap, size_t need, size_t elem); /* array growth */
void jx_arena_free(struct jarena *a);
void jx_step(struct jx *x);               /* one unit of work: fails past lim.max_steps */
void jx_steps(struct jx *x, uint64_t n);  /* n units: work that walks a list or a string */
void jbuf_put(struct jx *x, struct jbuf *b, const char *s, size_t n);
void jx_emit(struct jx *x, const char *s, size_t n); /* to x->out, bounded */

/* ---- values (value.c) */
static inline struct jv jv_undef(void) { return (struct jv){.k = JV_UNDEF}; }
static inline struct jv jv_none(void) { return (struct jv){.k = JV_NONE}; }
static inline struct jv jv_bool(bool b) { return (struct jv){.k = JV_BOOL, .b = b}; }
static inline struct jv jv_int(int64_t i) { return (struct jv){.k = JV_INT, .i = i}; }
static inline struct jv jv_float(double f) { return (struct jv){.k = JV_FLOAT, .f = f}; }
struct jv jv_str(const char *p, size_t n); /* refers to p: p must live as long as the arena */
struct jv jv_strz(const char *p);
struct jv jv_str_copy(struct jx *x, const char *p, size_t n);
struct jv jv_array(struct jx *x, size_t cap);
struct jv jv_object(struct jx *x, uint8_t kind);
void jarr_push(struct jx *x, struct jarr *a, struct jv v);
struct jv *jobj_get(const struct jobj *o, const char *k, size_t kn);
void jobj_set(struct jx *x, struct jobj *o, const char *k, size_t kn, struct jv v);
void jobj_set_key(struct jx *x, struct jobj *o, struct jv key, struct jv v); /* a string or integer key */
struct jv jent_key(const struct jent *e);                                 /* the key as a value */
bool jv_truthy(struct jv v);
bool jv_is_num(struct jv v); /* int or float */
double jv_num(struct jv v);  /* int, float or bool as a double */
bool jv_is_arr(struct jv v); /* array or tuple */
bool jv_is_obj(struct jv v); /* object or kwargs (a mapping) */
bool jv_is_attrs(struct jv v); /* object, kwargs or namespace */
const char *jv_kind_name(struct jv v);
bool jv_loose_eq(struct jx *x, struct jv a, struct jv b);  /* == */
bool jv_strict_eq(struct jv a, struct jv b);              /* `in` on arrays, unique */
int jv_compare(struct jx *x, struct jv a, struct jv b, bool case_sensitive); /* sort, min, max */
/* The text {{ v }} prints, and the text '~' and '+' join. */
struct jv jv_to_str(struct jx *x, struct jv v);
struct jv jv_join_str(struct jx *x, struct jv v);
struct jv jv_concat(struct jx *x, struct jv a, struct jv b); /* two strings */
struct jv jv_func(struct jx *x, const char *name, jbuiltin fn, struct jv self);
void jv_write(struct jx *x, struct jbuf *b, struct jv v); /* as {{ v }} prints it (none/undefined: nothing) */

/* ---- JSON (json.c) */
struct jv jx_json_parse(struct jx *x, const char *s, size_t n, const char *what);
struct jtojson {
    int indent; /* < 0: none */
    bool ensure_ascii, sort_keys;
    const char *item_sep, *key_sep; /* NULL: the defaults */
    bool undef_as_undefined;        /* print undefined as `undefined` (str of containers), not null */
};
void jx_tojson(struct jx *x, struct jbuf *b, struct jv v, const struct jtojson *o, int depth);
void jx_fmt_double(double d, char *buf, size_t size); /* JavaScript's Number to string */
void jx_pyrepr(struct jx *x, struct jbuf *b, struct jv v, int depth); /* Python's repr() of v */

/* ---- UTF-8 text (text.c) */
size_t ju_decode(const char *s, size_t n, uint32_t *cp); /* bytes of one sequence (>= 1; U+FFFD if bad) */
size_t ju_encode(uint32_t cp, char *out);                /* 1..4 */
size_t ju_count(const char *s, size_t n);                /* code points */
bool ju_space_at(const char *s, size_t n, size_t *len);  /* JavaScript \s at s: its length in *len */
struct jv ju_trim(struct jx *x, struct jv s, bool left, bool right, struct jv chars); /* chars: undef/none: space */
struct jv ju_case(struct jx *x, struct jv s, int mode); /* 'u' upper, 'l' lower, 't' title, 'c' capitalize */
bool ju_find(const char *h, size_t hn, const char *n, size_t nn, size_t from, size_t *at);

/* ---- lexer (lexer.c), parser (parser.c) */
struct jtoks {
    struct jtok *t;
    size_t n, cap;
};
void jx_lex(struct jx *x, const char *src, size_t len, struct jtoks *out);
struct jnode *jx_parse_program(struct jx *x, const struct jtoks *toks);

/* ---- interpreter (interp.c) */
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };
struct jv jx_eval(struct jx *x, struct jenv *env, const struct jnode *n);
int jx_exec_block(struct jx *x, struct jenv *env, struct jnode *const *body, size_t n);
struct jv jx_capture(struct jx *x, struct jenv *env, struct jnode *const *body, size_t n);
struct jv jx_call(struct jx *x, struct jenv *env, struct jv fn, const struct jargs *a);
void jx_eval_args(struct jx *x, struct jenv *env, struct jnode *const *args, size_t n, struct jargs *out);
struct jv jx_lookup(struct jenv *env, const char *name, size_t n);
void jx_setvar(struct jx *x, struct jenv *env, const char *name, size_t n, struct jv v);
struct jenv *jx_env_new(struct jx *x, struct jenv *parent);
/* An attribute or item of v by a dotted path ("function.name", "0"), undefined where missing. */
struct jv jx_attr_path(struct jx *x, struct jv v, struct jv path);
struct jv jx_member(struct jx *x, struct jv obj, struct jv prop);

/* ---- filters and tests (filters.c), methods and globals (builtins.c) */
struct jv jx_filter(struct jx *x, struct jenv *env, struct jv v, const struct jnode *f);
bool jx_test(struct jx *x, const char *name, size_t n, struct jv v, const struct jargs *a);
bool jx_has_test(const char *name, size_t n);
struct jv jx_method(struct jx *x, struct jv obj, const char *name, size_t n); /* undefined: none */
void jx_globals(struct jx *x, struct jenv *env);
struct jv jx_tojson_filter(struct jx *x, struct jv v, const struct jargs *a);
struct jv jx_items(struct jx *x, struct jv obj);                      /* [[key, value], ...] */
struct jv jx_dictsort(struct jx *x, struct jv obj, const struct jargs *a);
struct jv jx_str_replace(struct jx *x, struct jv s, struct jv old, struct jv new_, int64_t count); /* count < 0: all */

/* argument helpers: positional i, else keyword name, else undefined */
struct jv jx_arg(const struct jargs *a, size_t i, const char *name);
void jx_no_more_args(struct jx *x, const char *fn, const struct jargs *a, size_t npos, const char *const *names);

#endif
