/*
 * render.c - the public face of the interpreter (kiln.h): parse a template
 * once into an immutable tree, render it any number of times (from any number
 * of threads) with a JSON context under the limits the caller chose. Each call
 * owns one arena and one jump target, so every failure ends here, freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_impl.h"

#define MAX_TEMPLATE (4u << 20)

struct kiln_jinja {
    struct jarena arena;
    struct jnode *prog;
};

struct kiln_jinja_opts kiln_jinja_default_opts(void) {
    return (struct kiln_jinja_opts){
        .limits = {.max_steps = 100000000, .max_memory = 256u << 20, .max_output = 32u << 20, .max_depth = 1000},
        .now = -1,
    };
}

struct kiln_jinja *kiln_jinja_parse(const char *src, size_t len, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    struct kiln_jinja *volatile t = calloc(1, sizeof *t);
    struct jx *volatile x = calloc(1, sizeof *x);
    if (!t || !x) {
        free(t);
        free(x);
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    x->err = err;
    x->errlen = errlen;
    x->lim = kiln_jinja_default_opts().limits;
    x->lim.max_memory = 256u << 20;
    if (setjmp(x->jb)) {
        jx_arena_free(&x->arena);
        free(x);
        free(t);
        return NULL;
    }
    if (!src && len) jx_fail(x, "no template text");
    if (len > MAX_TEMPLATE) jx_fail(x, "the template is larger than %u bytes", MAX_TEMPLATE);
    struct jtoks toks = {0};
    jx_lex(x, src ? src : "", len, &toks);
    t->prog = jx_parse_program(x, &toks);
    t->arena = x->arena;
    free(x);
    return t;
}

void kiln_jinja_free(struct kiln_jinja *t) {
    if (!t) return;
    jx_arena_free(&t->arena);
    free(t);
}

char *kiln_jinja_render(const struct kiln_jinja *t, const char *ctx_json, size_t ctx_len,
                        const struct kiln_jinja_opts *opts, size_t *len, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    struct kiln_jinja_opts def = kiln_jinja_default_opts();
    if (!opts) opts = &def;
    struct jx *volatile x = calloc(1, sizeof *x);
    struct jbuf *volatile out = calloc(1, sizeof *out);
    if (!x || !out || !t) {
        free(x);
        free(out);
        if (err && errlen) snprintf(err, errlen, t ? "out of memory" : "no template");
        return NULL;
    }
    x->err = err;
    x->errlen = errlen;
    x->lim = opts->limits;
    x->now = opts->now >= 0 ? opts->now : (int64_t)time(NULL);
    x->main = x->out = out;
    if (setjmp(x->jb)) {
        jx_arena_free(&x->arena);
        free(x);
        free(out);
        return NULL;
    }
    if (x->lim.max_depth < 1 || x->lim.max_memory < 4096 || x->lim.max_steps < 1)
        jx_fail(x, "the limits leave no room to render");
    struct jenv *root = jx_env_new(x, NULL);
    jx_globals(x, root);
    if (ctx_json && ctx_len) {
        struct jv ctx = jx_json_parse(x, ctx_json, ctx_len, "the context");
        if (ctx.k != JV_OBJECT) jx_fail(x, "the context must be a JSON object");
        for (size_t i = 0; i < ctx.o->n; i++) jx_setvar(x, root, ctx.o->e[i].k, ctx.o->e[i].kn, ctx.o->e[i].v);
    }
    int flow = jx_exec_block(x, root, t->prog->body, t->prog->nbody);
    if (flow != FLOW_NORMAL) jx_fail(x, "{%% break %%} or {%% continue %%} outside a loop");
    char *r = malloc(out->n + 1);
    if (!r) jx_fail(x, "out of memory");
    if (out->n) memcpy(r, out->p, out->n);
    r[out->n] = 0;
    if (len) *len = out->n;
    jx_arena_free(&x->arena);
    free(x);
    free(out);
    return r;
}
