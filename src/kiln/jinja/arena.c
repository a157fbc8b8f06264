/*
 * arena.c - the interpreter's memory and its exits: one bump arena per parse
 * or render (freed whole at the end, so an error can longjmp out from any
 * depth without leaking), the memory, step and output bounds, and jx_fail,
 * which writes "template line N: ..." and jumps back to the entry point.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

_Noreturn void jx_fail(struct jx *x, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (x->err && x->errlen) {
        if (x->line > 0)
            snprintf(x->err, x->errlen, "template line %d: %s", x->line, msg);
        else
            snprintf(x->err, x->errlen, "template: %s", msg);
    }
    longjmp(x->jb, 1);
}

#define CHUNK_MIN (64u << 10)

void *jx_alloc(struct jx *x, size_t n) {
    if (n >= 1024 && x->lim.max_steps) jx_steps(x, n / 64); /* making something big is work too */
    n = (n + 15) & ~(size_t)15;
    struct ja_chunk *c = x->arena.head;
    if (!c || c->size - c->used < n) {
        size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
        if (c && size < c->size * 2 && c->size * 2 <= (16u << 20)) size = c->size * 2;
        if (size > x->lim.max_memory || x->arena.total > x->lim.max_memory - size)
            jx_fail(x, "the template needs more than %zu bytes of memory", x->lim.max_memory);
        struct ja_chunk *nc = malloc(sizeof *nc + size);
        if (!nc) jx_fail(x, "out of memory");
        nc->next = c;
        nc->size = size;
        nc->used = 0;
        x->arena.head = nc;
        x->arena.total += size;
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jx_strdup(struct jx *x, const char *s, size_t n) {
    if (n == SIZE_MAX) jx_fail(x, "string too long");
    char *p = jx_alloc(x, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void *jx_grow(struct jx *x, void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : 4;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) jx_fail(x, "a list or string grew too large");
        nc *= 2;
    }
    void *q = jx_alloc(x, nc * elem);
    if (*cap) memcpy(q, p, *cap * elem);
    *cap = nc;
    return q;
}

void jx_arena_free(struct jarena *a) {
    for (struct ja_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

void jx_steps(struct jx *x, uint64_t n) {
    x->steps += n;
    jx_step(x);
}

void jx_step(struct jx *x) {
    if (++x->steps > x->lim.max_steps)
        jx_fail(x, "the template ran more than %llu steps (a loop that does not end?)",
                (unsigned long long)x->lim.max_steps);
}

void jbuf_put(struct jx *x, struct jbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (b == x->main && (n > x->lim.max_output || b->n > x->lim.max_output - n))
        jx_fail(x, "the output is larger than %zu bytes", x->lim.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap;
        char *p = jx_grow(x, b->p, &cap, b->n + n + 1, 1);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jx_emit(struct jx *x, const char *s, size_t n) {
    jbuf_put(x, x->out, s, n);
}
