/*
 * nfa.c - the rule tree as byte-level automata (Thompson construction): each
 * rule that keeps its own automaton gets one, with call edges where it names
 * another such rule; small and single-use rules are inlined into their callers
 * so that their states need no stack. Character classes become UTF-8 byte
 * sequences here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nfa.h"

/* ------------------------------------------------------------------ analysis of the tree */

#define MAXLEN_INF INT64_MAX

static int64_t sat_add(int64_t a, int64_t b) { return a > MAXLEN_INF - b ? MAXLEN_INF : a + b; }
static int64_t sat_mul(int64_t a, int64_t b) {
    if (a == 0 || b == 0) return 0;
    return a > MAXLEN_INF / b ? MAXLEN_INF : a * b;
}

/* longest match in bytes of a node, MAXLEN_INF when unbounded; rule results memoized in ml
 * (-2 unknown, -3 in progress: recursion, unbounded) */
static int64_t node_maxlen(const struct gtree *t, int32_t id, int64_t *ml, int depth) {
    const struct gn *n = &t->nodes[id];
    if (depth > 4 * G_MAX_DEPTH) return MAXLEN_INF; /* a long chain of rules: too deep to inline anyway */
    switch (n->kind) {
    case GN_EMPTY: return 0;
    case GN_LIT: return n->b;
    case GN_CLASS: {
        uint32_t hi = t->ranges[n->a + 2 * (n->b - 1) + 1];
        return hi < 0x80 ? 1 : hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
    }
    case GN_SEQ: {
        int64_t s = 0;
        for (int32_t i = 0; i < n->b; i++) s = sat_add(s, node_maxlen(t, t->kids[n->a + i], ml, depth + 1));
        return s;
    }
    case GN_ALT: {
        int64_t m = 0;
        for (int32_t i = 0; i < n->b; i++) {
            int64_t k = node_maxlen(t, t->kids[n->a + i], ml, depth + 1);
            if (k > m) m = k;
        }
        return m;
    }
    case GN_REP: {
        int64_t c = node_maxlen(t, n->a, ml, depth + 1);
        if (n->c < 0) return c == 0 ? 0 : MAXLEN_INF;
        return sat_mul(c, n->c);
    }
    case GN_REF: {
        if (ml[n->a] == -3) return MAXLEN_INF;
        if (ml[n->a] == -2) {
            ml[n->a] = -3;
            ml[n->a] = node_maxlen(t, t->rules[n->a].node, ml, depth + 1);
        }
        return ml[n->a];
    }
    }
    return MAXLEN_INF;
}

/* nodes after inlining (REP counts its copies), saturating; rules memoized in sz */
static int64_t node_size(const struct gtree *t, int32_t id, const uint8_t *inl, int64_t *sz, int depth) {
    const struct gn *n = &t->nodes[id];
    if (depth > 4 * G_MAX_DEPTH) return MAXLEN_INF;
    switch (n->kind) {
    case GN_SEQ:
    case GN_ALT: {
        int64_t s = 1;
        for (int32_t i = 0; i < n->b; i++) s = sat_add(s, node_size(t, t->kids[n->a + i], inl, sz, depth + 1));
        return s;
    }
    case GN_REP: {
        int64_t copies = n->c < 0 ? (n->b > 1 ? n->b : 1) : (n->c > 1 ? n->c : 1);
        return sat_add(1, sat_mul(node_size(t, n->a, inl, sz, depth + 1), copies));
    }
    case GN_CLASS: return 1 + n->b;
    case GN_REF:
        if (!inl[n->a]) return 1;
        if (sz[n->a] < 0) sz[n->a] = node_size(t, t->rules[n->a].node, inl, sz, depth + 1);
        return sz[n->a];
    default: return 1;
    }
}

struct refs {
    int32_t *from, *to; /* edges, one per REF node */
    int64_t n, cap;
    int32_t *uses;
};

/* the REF nodes under id (a repeated one counts twice) */
static bool collect_refs(const struct gtree *t, int32_t id, int32_t from, int weight, struct refs *r, int depth) {
    const struct gn *n = &t->nodes[id];
    if (depth > 8 * G_MAX_DEPTH) return false;
    switch (n->kind) {
    case GN_SEQ:
    case GN_ALT:
        for (int32_t i = 0; i < n->b; i++)
            if (!collect_refs(t, t->kids[n->a + i], from, weight, r, depth + 1)) return false;
        return true;
    case GN_REP: return collect_refs(t, n->a, from, n->c == 0 || n->c == 1 ? weight : 2, r, depth + 1);
    case GN_REF:
        if (r->n == r->cap) {
            int64_t cap = r->cap ? r->cap * 2 : 256;
            int32_t *f = realloc(r->from, sizeof *f * (size_t)cap), *to;
            if (!f) return false;
            r->from = f;
            if (!(to = realloc(r->to, sizeof *to * (size_t)cap))) return false;
            r->to = to;
            r->cap = cap;
        }
        r->from[r->n] = from;
        r->to[r->n++] = n->a;
        r->uses[n->a] += weight;
        return true;
    default: return true;
    }
}

bool nfa_plan(const struct gtree *t, int32_t root, uint8_t *inl, char *err, size_t errlen) {
    const int32_t nr = t->n_rules;
    if (nr <= 0 || nr > (1 << 24)) {
        snprintf(err, errlen, "the grammar has %d rules", (int)nr);
        return false;
    }
    bool ok = false;
    struct refs r = {0};
    r.uses = calloc((size_t)nr, sizeof *r.uses);
    int32_t *first = malloc(sizeof *first * (size_t)(nr + 1)), *adj = NULL;
    int32_t *index = malloc(sizeof *index * (size_t)nr), *low = malloc(sizeof *low * (size_t)nr);
    int32_t *stk = malloc(sizeof *stk * (size_t)nr), *cstk = malloc(sizeof *cstk * (size_t)nr);
    int32_t *cedge = malloc(sizeof *cedge * (size_t)nr);
    uint8_t *on = calloc((size_t)nr, 1), *rec = calloc((size_t)nr, 1);
    int64_t *ml = malloc(sizeof *ml * (size_t)nr), *sz = malloc(sizeof *sz * (size_t)nr);
    if (!r.uses || !first || !index || !low || !stk || !cstk || !cedge || !on || !rec || !ml || !sz) goto oom;
    for (int32_t i = 0; i < nr; i++)
        if (!collect_refs(t, t->rules[i].node, i, 1, &r, 0)) goto oom;
    /* calls as adjacency lists */
    memset(first, 0, sizeof *first * (size_t)(nr + 1));
    for (int64_t e = 0; e < r.n; e++) first[r.from[e] + 1]++;
    for (int32_t i = 0; i < nr; i++) first[i + 1] += first[i];
    if (!(adj = malloc(sizeof *adj * (size_t)(r.n > 0 ? r.n : 1)))) goto oom;
    for (int32_t i = 0; i < nr; i++) index[i] = first[i];
    for (int64_t e = 0; e < r.n; e++) adj[index[r.from[e]]++] = r.to[e];
    /* Tarjan's strongly connected components, without recursion: a rule is recursive
     * when its component has several rules or it calls itself */
    for (int32_t i = 0; i < nr; i++) index[i] = -1;
    int32_t next_index = 0, sp = 0;
    for (int32_t v0 = 0; v0 < nr; v0++) {
        if (index[v0] >= 0) continue;
        int32_t csp = 0;
        cstk[csp] = v0;
        cedge[csp++] = first[v0];
        index[v0] = low[v0] = next_index++;
        stk[sp++] = v0;
        on[v0] = 1;
        while (csp > 0) {
            int32_t v = cstk[csp - 1];
            if (cedge[csp - 1] < first[v + 1]) {
                int32_t w = adj[cedge[csp - 1]++];
                if (w == v) rec[v] = 1;
                if (index[w] < 0) {
                    index[w] = low[w] = next_index++;
                    stk[sp++] = w;
                    on[w] = 1;
                    cstk[csp] = w;
                    cedge[csp++] = first[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            csp--;
            if (csp > 0 && low[v] < low[cstk[csp - 1]]) low[cstk[csp - 1]] = low[v];
            if (low[v] == index[v]) {
                int32_t w, count = 0, bottom = sp;
                do {
                    w = stk[--bottom];
                    count++;
                } while (w != v);
                for (int32_t k = bottom; k < sp; k++) {
                    on[stk[k]] = 0;
                    if (count > 1) rec[stk[k]] = 1;
                }
                sp = bottom;
            }
        }
    }
    for (int32_t i = 0; i < nr; i++) ml[i] = rec[i] ? MAXLEN_INF : -2;
    /* inline the non-recursive rules used once, and the short small ones (char, space):
     * a rule that ends inside a token leaves the rest of the token to its caller, to be
     * checked against the actual stack at each mask, which is costly where many tokens
     * do it (whitespace then a word); a long or unbounded rule used in many places
     * (string, value) keeps one automaton, so that its states' token classes are
     * computed once for every use */
    memset(inl, 0, (size_t)nr);
    for (int32_t i = 0; i < nr; i++) {
        if (rec[i] || i == root) continue;
        inl[i] = r.uses[i] <= 1 || node_maxlen(t, t->rules[i].node, ml, 0) <= 32;
    }
    for (int32_t i = 0; i < nr; i++) sz[i] = -1;
    for (int32_t i = 0; i < nr; i++) {
        if (!inl[i] || r.uses[i] <= 1) continue;
        if (sz[i] < 0) sz[i] = node_size(t, t->rules[i].node, inl, sz, 0);
        if (sz[i] > 256) inl[i] = 0;
    }
    ok = true;
    goto done;
oom:
    snprintf(err, errlen, "out of memory (or rules nested too deeply)");
done:
    free(r.from);
    free(r.to);
    free(r.uses);
    free(first);
    free(adj);
    free(index);
    free(low);
    free(stk);
    free(cstk);
    free(cedge);
    free(on);
    free(rec);
    free(ml);
    free(sz);
    return ok;
}

/* ------------------------------------------------------------------ construction */

static int32_t new_state(struct nfa *a) {
    if (a->n_states >= G_MAX_NFA) {
        a->too_big = true;
        return -1;
    }
    if (a->n_states == a->cap_states) {
        int32_t cap = a->cap_states ? a->cap_states * 2 : 256;
        int32_t *f = realloc(a->first, sizeof *f * (size_t)cap);
        if (!f) return -1;
        a->first = f;
        a->cap_states = cap;
    }
    a->first[a->n_states] = -1;
    return a->n_states++;
}

static bool add_edge(struct nfa *a, int32_t from, int32_t to, int kind, uint8_t lo, uint8_t hi, int32_t rule) {
    if (from < 0 || to < 0) return false;
    if (a->n_edges == a->cap_edges) {
        int32_t cap = a->cap_edges ? a->cap_edges * 2 : 512;
        if (a->n_edges >= (1 << 28)) {
            a->too_big = true;
            return false;
        }
        struct nedge *e = realloc(a->edges, sizeof *e * (size_t)cap);
        if (!e) return false;
        a->edges = e;
        a->cap_edges = cap;
    }
    a->edges[a->n_edges] = (struct nedge){to, a->first[from], rule, (uint8_t)kind, lo, hi};
    a->first[from] = a->n_edges++;
    return true;
}

struct cls_ctx {
    struct nfa *a;
    int32_t s, e;
    bool ok;
};

static bool emit_seq(const struct gutf8_seq *q, void *data) {
    struct cls_ctx *c = data;
    int32_t at = c->s;
    for (int i = 0; i < q->n; i++) {
        int32_t to = i + 1 == q->n ? c->e : new_state(c->a);
        if (!add_edge(c->a, at, to, NE_BYTE, q->lo[i], q->hi[i], 0)) return c->ok = false;
        at = to;
    }
    return true;
}

/* fragment of node id between new states *s and *e */
static bool build(struct nfa *a, const struct gtree *t, const uint8_t *inl, int32_t id, int32_t *s, int32_t *e,
                  int depth) {
    const struct gn *n = &t->nodes[id];
    *s = new_state(a);
    if (*s < 0) return false;
    switch (n->kind) {
    case GN_EMPTY: *e = *s; return true;
    case GN_LIT: {
        int32_t at = *s;
        for (int32_t i = 0; i < n->b; i++) {
            int32_t to = new_state(a);
            uint8_t b = t->bytes[n->a + i];
            if (!add_edge(a, at, to, NE_BYTE, b, b, 0)) return false;
            at = to;
        }
        *e = at;
        return true;
    }
    case GN_CLASS: {
        *e = new_state(a);
        if (*e < 0) return false;
        struct cls_ctx c = {a, *s, *e, true};
        for (int32_t i = 0; i < n->b && c.ok; i++)
            gutf8_ranges(t->ranges[n->a + 2 * i], t->ranges[n->a + 2 * i + 1], emit_seq, &c);
        return c.ok;
    }
    case GN_SEQ: {
        int32_t at = *s;
        for (int32_t i = 0; i < n->b; i++) {
            int32_t cs, ce;
            if (!build(a, t, inl, t->kids[n->a + i], &cs, &ce, depth + 1) || !add_edge(a, at, cs, NE_EPS, 0, 0, 0))
                return false;
            at = ce;
        }
        *e = at;
        return true;
    }
    case GN_ALT: {
        *e = new_state(a);
        for (int32_t i = 0; i < n->b; i++) {
            int32_t cs, ce;
            if (!build(a, t, inl, t->kids[n->a + i], &cs, &ce, depth + 1) || !add_edge(a, *s, cs, NE_EPS, 0, 0, 0) ||
                !add_edge(a, ce, *e, NE_EPS, 0, 0, 0))
                return false;
        }
        return *e >= 0;
    }
    case GN_REP: {
        int32_t at = *s, cs, ce;
        for (int32_t k = 0; k < n->b; k++) {
            if (!build(a, t, inl, n->a, &cs, &ce, depth + 1) || !add_edge(a, at, cs, NE_EPS, 0, 0, 0)) return false;
            at = ce;
        }
        *e = new_state(a);
        if (*e < 0) return false;
        if (n->c < 0) { /* star: at -> child -> back to at */
            if (!build(a, t, inl, n->a, &cs, &ce, depth + 1) || !add_edge(a, at, cs, NE_EPS, 0, 0, 0) ||
                !add_edge(a, ce, at, NE_EPS, 0, 0, 0))
                return false;
        } else { /* (x (x (x)?)?)? */
            for (int32_t k = n->b; k < n->c; k++) {
                if (!build(a, t, inl, n->a, &cs, &ce, depth + 1) || !add_edge(a, at, cs, NE_EPS, 0, 0, 0) ||
                    !add_edge(a, at, *e, NE_EPS, 0, 0, 0))
                    return false;
                at = ce;
            }
        }
        return add_edge(a, at, *e, NE_EPS, 0, 0, 0);
    }
    case GN_REF: {
        if (inl[n->a] && depth < 2 * G_MAX_DEPTH) {
            int32_t cs, ce;
            if (!build(a, t, inl, t->rules[n->a].node, &cs, &ce, depth + 1)) return false;
            *e = new_state(a);
            return add_edge(a, *s, cs, NE_EPS, 0, 0, 0) && add_edge(a, ce, *e, NE_EPS, 0, 0, 0);
        }
        *e = new_state(a);
        if (!a->wanted[n->a]) {
            a->wanted[n->a] = 1;
            a->want[a->n_want++] = n->a;
        }
        return add_edge(a, *s, *e, NE_CALL, 0, 0, n->a);
    }
    }
    return false;
}

bool nfa_build_rule(struct nfa *a, const struct gtree *t, const uint8_t *inl, int32_t rule, int32_t *start,
                    int32_t *final) {
    return build(a, t, inl, t->rules[rule].node, start, final, 0);
}

void nfa_free(struct nfa *a) {
    free(a->first);
    free(a->edges);
    free(a->want);
    free(a->wanted);
    memset(a, 0, sizeof *a);
}
