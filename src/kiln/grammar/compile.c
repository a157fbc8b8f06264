/*
 * compile.c - a rule tree into a kiln_grammar: checks (root, undefined rules),
 * automata per rule (nfa.c), byte classes, determinization by subsets with call
 * edges as symbols, then the dead states trimmed, nullable rules found and left
 * recursion refused (a parser could loop on it without reading a byte).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "nfa.h"

/* ------------------------------------------------------------------ subset construction */

struct cedge {
    int32_t lo, hi, to; /* a byte edge: classes lo..hi lead to NFA state to */
};

struct dfa_build {
    const struct nfa *a;
    int32_t n_classes;
    uint8_t byte_class[256];
    /* DFA states: their NFA sets in a pool, found again by hash */
    int32_t *set_off, *set_n;
    int32_t *pool;
    int64_t n_pool, cap_pool;
    int32_t n_states, cap_states;
    int32_t *hash;
    int64_t hash_cap;
    int32_t *rule;      /* per state */
    uint8_t *accepting; /* per state */
    int32_t *trans;     /* n_states * n_classes */
    struct gcall *calls;
    int32_t *call_off, *call_n; /* per state into calls */
    int32_t n_calls, cap_calls;
    /* scratch, one entry per NFA state each */
    int32_t *mark; /* stamp of the last pass that met the state */
    int32_t stamp;
    int32_t *buf, *stack;
    struct cedge *e; /* the byte edges of one DFA state */
    int32_t *cut;    /* where their class ranges start and end */
    int32_t cap_e;
    bool too_big;
};

static uint64_t hash_set(const int32_t *s, int32_t n) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)s[i]) * 1099511628211ull;
    return h;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Epsilon closure of buf[0..n) in place (buf has room for every NFA state), sorted,
 * keeping only the states that matter for what comes next: those with a byte or call
 * edge, and the rule's final state (it makes the DFA state accepting). Junctions of
 * epsilon edges alone are left out, so that a loop's head is the same DFA state
 * before and after each turn (Thompson's construction reaches it through different
 * junctions). */
static int32_t closure(struct dfa_build *d, int32_t n, int32_t final) {
    const struct nfa *a = d->a;
    d->stamp++;
    int32_t sp = 0;
    for (int32_t i = 0; i < n; i++) {
        if (d->mark[d->buf[i]] == d->stamp) continue;
        d->mark[d->buf[i]] = d->stamp;
        d->stack[sp++] = d->buf[i];
    }
    n = 0;
    while (sp > 0) {
        int32_t s = d->stack[--sp];
        bool keep = s == final;
        for (int32_t e = a->first[s]; e >= 0; e = a->edges[e].next) {
            const struct nedge *ed = &a->edges[e];
            if (ed->kind != NE_EPS) {
                keep = true;
            } else if (d->mark[ed->to] != d->stamp) {
                d->mark[ed->to] = d->stamp;
                d->stack[sp++] = ed->to;
            }
        }
        if (keep) d->buf[n++] = s;
    }
    if (n > 1) qsort(d->buf, (size_t)n, sizeof *d->buf, cmp_i32);
    return n;
}

static bool grow_hash(struct dfa_build *d) {
    int64_t cap = d->hash_cap ? d->hash_cap * 2 : 1024;
    int32_t *h = malloc(sizeof *h * (size_t)cap);
    if (!h) return false;
    for (int64_t i = 0; i < cap; i++) h[i] = -1;
    for (int32_t s = 0; s < d->n_states; s++) {
        uint64_t k = hash_set(d->pool + d->set_off[s], d->set_n[s]) & (uint64_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
        h[k] = s;
    }
    free(d->hash);
    d->hash = h;
    d->hash_cap = cap;
    return true;
}

/* the DFA state of NFA set buf[0..n) (closed, sorted), made if new; -1 on failure */
static int32_t intern_set(struct dfa_build *d, int32_t n, int32_t rule, int32_t final) {
    if ((int64_t)(d->n_states + 1) * 2 > d->hash_cap && !grow_hash(d)) return -1;
    uint64_t k = hash_set(d->buf, n) & (uint64_t)(d->hash_cap - 1);
    for (; d->hash[k] >= 0; k = (k + 1) & (uint64_t)(d->hash_cap - 1)) {
        int32_t s = d->hash[k];
        if (d->set_n[s] == n && !memcmp(d->pool + d->set_off[s], d->buf, sizeof *d->buf * (size_t)n)) return s;
    }
    if (d->n_states >= G_MAX_DFA) {
        d->too_big = true;
        return -1;
    }
    if (d->n_states == d->cap_states) {
        int32_t cap = d->cap_states ? d->cap_states * 2 : 256;
        int32_t *so = realloc(d->set_off, sizeof *so * (size_t)cap);
        if (so) d->set_off = so;
        int32_t *sn = realloc(d->set_n, sizeof *sn * (size_t)cap);
        if (sn) d->set_n = sn;
        int32_t *ru = realloc(d->rule, sizeof *ru * (size_t)cap);
        if (ru) d->rule = ru;
        uint8_t *ac = realloc(d->accepting, (size_t)cap);
        if (ac) d->accepting = ac;
        int32_t *co = realloc(d->call_off, sizeof *co * (size_t)cap);
        if (co) d->call_off = co;
        int32_t *cn = realloc(d->call_n, sizeof *cn * (size_t)cap);
        if (cn) d->call_n = cn;
        int32_t *tr = realloc(d->trans, sizeof *tr * (size_t)cap * (size_t)d->n_classes);
        if (tr) d->trans = tr;
        if (!so || !sn || !ru || !ac || !co || !cn || !tr) return -1;
        d->cap_states = cap;
    }
    if (d->n_pool + n > d->cap_pool) {
        int64_t cap = d->cap_pool ? d->cap_pool * 2 : 4096;
        while (cap < d->n_pool + n) cap *= 2;
        int32_t *p = realloc(d->pool, sizeof *p * (size_t)cap);
        if (!p) return -1;
        d->pool = p;
        d->cap_pool = cap;
    }
    int32_t s = d->n_states++;
    memcpy(d->pool + d->n_pool, d->buf, sizeof *d->buf * (size_t)n);
    d->set_off[s] = (int32_t)d->n_pool;
    d->set_n[s] = n;
    d->n_pool += n;
    d->rule[s] = rule;
    d->accepting[s] = 0;
    for (int32_t i = 0; i < n; i++)
        if (d->buf[i] == final) d->accepting[s] = 1;
    d->call_off[s] = d->call_n[s] = 0;
    for (int32_t c = 0; c < d->n_classes; c++) d->trans[(size_t)s * (size_t)d->n_classes + (size_t)c] = -1;
    d->hash[k] = s;
    return s;
}

static bool add_call(struct dfa_build *d, int32_t rule, int32_t target) {
    if (d->n_calls == d->cap_calls) {
        int32_t cap = d->cap_calls ? d->cap_calls * 2 : 256;
        struct gcall *c = realloc(d->calls, sizeof *c * (size_t)cap);
        if (!c) return false;
        d->calls = c;
        d->cap_calls = cap;
    }
    d->calls[d->n_calls++] = (struct gcall){rule, target};
    return true;
}

/* determinize the rule whose NFA runs start..final; returns its start state */
static int32_t determinize(struct dfa_build *d, int32_t rule, int32_t start, int32_t final) {
    const struct nfa *a = d->a;
    d->buf[0] = start;
    int32_t first = d->n_states;
    int32_t s0 = intern_set(d, closure(d, 1, final), rule, final);
    if (s0 < 0) return -1;
    for (int32_t s = first; s < d->n_states; s++) {
        /* the byte edges of the set, in class units; the set of targets changes only at
         * a class where an edge starts or ends, so each stretch between two such classes
         * is determinized once (wide character classes are one stretch, not dozens) */
        const int32_t off = d->set_off[s], cnt = d->set_n[s];
        int32_t n_e = 0, n_cut = 0;
        for (int32_t i = 0; i < cnt; i++)
            for (int32_t e = a->first[d->pool[off + i]]; e >= 0; e = a->edges[e].next) {
                const struct nedge *ed = &a->edges[e];
                if (ed->kind != NE_BYTE) continue;
                if (n_e == d->cap_e) {
                    int32_t cap = d->cap_e ? d->cap_e * 2 : 256;
                    struct cedge *ne = realloc(d->e, sizeof *ne * (size_t)cap);
                    int32_t *nc = realloc(d->cut, sizeof *nc * (size_t)(2 * cap + 2));
                    if (ne) d->e = ne;
                    if (nc) d->cut = nc;
                    if (!ne || !nc) return -1;
                    d->cap_e = cap;
                }
                d->e[n_e++] = (struct cedge){d->byte_class[ed->lo], d->byte_class[ed->hi], ed->to};
                d->cut[n_cut++] = d->byte_class[ed->lo];
                d->cut[n_cut++] = d->byte_class[ed->hi] + 1;
            }
        if (n_cut > 1) qsort(d->cut, (size_t)n_cut, sizeof *d->cut, cmp_i32);
        for (int32_t k = 0; k + 1 < n_cut; k++) {
            const int32_t c0 = d->cut[k], c1 = d->cut[k + 1];
            if (c0 == c1) continue;
            int32_t n = 0;
            d->stamp++; /* each target once */
            for (int32_t i = 0; i < n_e; i++)
                if (d->e[i].lo <= c0 && c0 <= d->e[i].hi && d->mark[d->e[i].to] != d->stamp) {
                    d->mark[d->e[i].to] = d->stamp;
                    d->buf[n++] = d->e[i].to;
                }
            if (n == 0) continue;
            int32_t t = intern_set(d, closure(d, n, final), rule, final);
            if (t < 0) return -1;
            for (int32_t c = c0; c < c1; c++) d->trans[(size_t)s * (size_t)d->n_classes + (size_t)c] = t;
        }
        /* calls: one edge per called rule, to the set its returns reach */
        d->call_off[s] = d->n_calls;
        for (int32_t i = 0; i < cnt; i++) {
            for (int32_t e = a->first[d->pool[off + i]]; e >= 0; e = a->edges[e].next) {
                const struct nedge *ed = &a->edges[e];
                if (ed->kind != NE_CALL) continue;
                bool done = false;
                for (int32_t k = d->call_off[s]; k < d->n_calls; k++) done |= d->calls[k].rule == ed->rule;
                if (done) continue;
                int32_t n = 0;
                d->stamp++;
                for (int32_t j = 0; j < cnt; j++)
                    for (int32_t e2 = a->first[d->pool[off + j]]; e2 >= 0; e2 = a->edges[e2].next)
                        if (a->edges[e2].kind == NE_CALL && a->edges[e2].rule == ed->rule &&
                            d->mark[a->edges[e2].to] != d->stamp)
                            d->mark[a->edges[e2].to] = d->stamp, d->buf[n++] = a->edges[e2].to;
                int32_t t = intern_set(d, closure(d, n, final), rule, final);
                if (t < 0 || !add_call(d, ed->rule, t)) return -1;
            }
        }
        d->call_n[s] = d->n_calls - d->call_off[s];
    }
    return s0;
}

static void dfa_free(struct dfa_build *d) {
    free(d->set_off);
    free(d->set_n);
    free(d->pool);
    free(d->hash);
    free(d->rule);
    free(d->accepting);
    free(d->trans);
    free(d->calls);
    free(d->call_off);
    free(d->call_n);
    free(d->mark);
    free(d->buf);
    free(d->stack);
    free(d->e);
    free(d->cut);
}

/* ------------------------------------------------------------------ checks on the automata */

/* Live states (the rule can still finish from them, through calls to rules that can
 * finish), by a worklist over reverse edges. */
static bool find_live(const struct kiln_grammar *g, uint8_t *live) {
    const int32_t ns = g->n_states, nc = g->n_classes;
    /* reverse lists: for byte edges q -> t, t lists q; a call (R, t) at q is listed by
     * t and by start(R) as "call k" (encoded -k-1) */
    int32_t *cnt = calloc((size_t)ns + 1, sizeof *cnt);
    int64_t total = 0;
    if (!cnt) return false;
    for (int32_t q = 0; q < ns; q++) {
        for (int32_t c = 0; c < nc; c++) {
            int32_t t = g->trans[(size_t)q * (size_t)nc + (size_t)c];
            if (t >= 0) cnt[t + 1]++, total++;
        }
        for (int32_t k = 0; k < g->states[q].n_calls; k++) {
            const struct gcall *cl = &g->calls[g->states[q].calls + k];
            cnt[cl->target + 1]++;
            cnt[g->rule_start[cl->rule] + 1]++;
            total += 2;
        }
    }
    for (int32_t q = 0; q < ns; q++) cnt[q + 1] += cnt[q];
    int32_t *rev = malloc(sizeof *rev * (size_t)(total > 0 ? total : 1));
    int32_t *pos = malloc(sizeof *pos * (size_t)ns), *work = malloc(sizeof *work * (size_t)ns);
    int32_t *call_from = malloc(sizeof *call_from * (size_t)(g->n_calls > 0 ? g->n_calls : 1));
    if (!rev || !pos || !work || !call_from) {
        free(cnt), free(rev), free(pos), free(work), free(call_from);
        return false;
    }
    memcpy(pos, cnt, sizeof *pos * (size_t)ns);
    for (int32_t q = 0; q < ns; q++) {
        for (int32_t c = 0; c < nc; c++) {
            int32_t t = g->trans[(size_t)q * (size_t)nc + (size_t)c];
            if (t >= 0) rev[pos[t]++] = q;
        }
        for (int32_t k = 0; k < g->states[q].n_calls; k++) {
            int32_t ci = g->states[q].calls + k;
            const struct gcall *cl = &g->calls[ci];
            call_from[ci] = q;
            rev[pos[cl->target]++] = -ci - 1;
            rev[pos[g->rule_start[cl->rule]]++] = -ci - 1;
        }
    }
    int32_t n_work = 0;
    memset(live, 0, (size_t)ns);
    for (int32_t q = 0; q < ns; q++)
        if (g->states[q].accepting) live[q] = 1, work[n_work++] = q;
    while (n_work > 0) {
        int32_t t = work[--n_work];
        for (int32_t i = cnt[t]; i < cnt[t + 1]; i++) {
            int32_t q = rev[i];
            if (q < 0) { /* a call: live when both its target and its rule's start are */
                const struct gcall *cl = &g->calls[-q - 1];
                if (!live[cl->target] || !live[g->rule_start[cl->rule]]) continue;
                q = call_from[-q - 1];
            }
            if (!live[q]) live[q] = 1, work[n_work++] = q;
        }
    }
    free(cnt), free(rev), free(pos), free(work), free(call_from);
    return true;
}

/* Whether rule r can finish without reading a byte: the states its start reaches
 * through calls to nullable rules (marked with stamp) hold an accepting one. With
 * out, the rules called from those states are listed there once (seen[] marks them;
 * the caller clears it). */
static bool nullable_rule(const struct kiln_grammar *g, int32_t r, const uint8_t *nullable, int32_t *mark,
                          int32_t stamp, int32_t *stack, uint8_t *seen, int32_t *out, int32_t *n_out) {
    int32_t sp = 0;
    bool acc = false;
    stack[sp++] = g->rule_start[r];
    mark[g->rule_start[r]] = stamp;
    while (sp > 0) {
        int32_t q = stack[--sp];
        acc |= g->states[q].accepting != 0;
        for (int32_t k = 0; k < g->states[q].n_calls; k++) {
            const struct gcall *cl = &g->calls[g->states[q].calls + k];
            if (out && !seen[cl->rule]) seen[cl->rule] = 1, out[(*n_out)++] = cl->rule;
            if (nullable[cl->rule] && mark[cl->target] != stamp) {
                mark[cl->target] = stamp;
                stack[sp++] = cl->target;
            }
        }
    }
    return acc;
}

/* Left recursion: a rule that can call itself (through other rules) before reading a
 * byte. Returns such a rule, -1 when there is none, -2 when out of memory. */
static int32_t find_left_recursion(const struct kiln_grammar *g, const uint8_t *nullable) {
    const int32_t nr = g->n_rules, ns = g->n_states;
    int32_t *mark = calloc((size_t)ns, sizeof *mark), *stack = malloc(sizeof *stack * (size_t)ns);
    int32_t *first = malloc(sizeof *first * (size_t)(nr + 1)), *adj = NULL;
    uint8_t *row = calloc((size_t)nr, 1), *color = calloc((size_t)nr, 1);
    int32_t *vs = malloc(sizeof *vs * (size_t)nr), *es = malloc(sizeof *es * (size_t)nr);
    int64_t n_adj = 0, cap_adj = 0;
    int32_t bad = -2, stamp = 0;
    if (!mark || !stack || !first || !row || !color || !vs || !es) goto done;
    /* edges r -> s: s is called from a state r reaches without a byte */
    for (int32_t r = 0; r < nr; r++) {
        first[r] = (int32_t)n_adj;
        if (g->rule_start[r] < 0) continue;
        int32_t n_out = 0;
        nullable_rule(g, r, nullable, mark, ++stamp, stack, row, vs, &n_out);
        for (int32_t i = 0; i < n_out; i++) {
            int32_t s = vs[i];
            row[s] = 0;
            if (n_adj == cap_adj) {
                cap_adj = cap_adj ? cap_adj * 2 : 256;
                int32_t *na = realloc(adj, sizeof *na * (size_t)cap_adj);
                if (!na) goto done;
                adj = na;
            }
            adj[n_adj++] = s;
        }
    }
    first[nr] = (int32_t)n_adj;
    /* a cycle in that graph, by depth-first search without recursion (1: on the path, 2: done) */
    bad = -1;
    for (int32_t r0 = 0; r0 < nr && bad < 0; r0++) {
        if (color[r0]) continue;
        int32_t sp = 0;
        vs[sp] = r0, es[sp++] = first[r0], color[r0] = 1;
        while (sp > 0 && bad < 0) {
            int32_t v = vs[sp - 1];
            if (es[sp - 1] == first[v + 1]) {
                color[v] = 2;
                sp--;
                continue;
            }
            int32_t w = adj[es[sp - 1]++];
            if (color[w] == 1) bad = w;
            else if (!color[w]) vs[sp] = w, es[sp++] = first[w], color[w] = 1;
        }
    }
done:
    free(mark), free(stack), free(first), free(adj), free(row), free(color), free(vs), free(es);
    return bad;
}

/* ------------------------------------------------------------------ the whole */

static bool byte_classes(const struct nfa *a, uint8_t *cls, int32_t *n_classes) {
    uint8_t cut[257] = {0}; /* cut[b]: a class starts at b */
    cut[0] = 1;
    for (int32_t e = 0; e < a->n_edges; e++) {
        if (a->edges[e].kind != NE_BYTE) continue;
        cut[a->edges[e].lo] = 1;
        cut[a->edges[e].hi + 1] = 1;
    }
    int32_t c = -1;
    for (int b = 0; b < 256; b++) {
        if (cut[b]) c++;
        cls[b] = (uint8_t)c;
    }
    *n_classes = c + 1;
    return true;
}

struct kiln_grammar *gcompile(const struct gtree *t, const char *root_name, char *err, size_t errlen) {
    int32_t root = gtree_find_rule(t, root_name);
    if (root < 0 || t->rules[root].node < 0) {
        kiln_errf(err, errlen, "the grammar has no rule '%s' (the start rule)", root_name);
        return NULL;
    }
    for (int32_t i = 0; i < t->n_rules; i++)
        if (t->rules[i].node < 0) {
            kiln_errf(err, errlen, "grammar line %d, column %d: rule '%s' is used but never defined",
                      (int)t->rules[i].line, (int)t->rules[i].col, t->rules[i].name);
            return NULL;
        }
    const int32_t nr = t->n_rules;
    struct kiln_grammar *g = calloc(1, sizeof *g);
    uint8_t *inl = calloc((size_t)nr, 1), *live = NULL, *nullable = NULL;
    int32_t *nfa_start = malloc(sizeof *nfa_start * (size_t)nr), *nfa_final = malloc(sizeof *nfa_final * (size_t)nr);
    struct nfa a = {0};
    struct dfa_build d = {0};
    a.want = malloc(sizeof *a.want * (size_t)nr);
    a.wanted = calloc((size_t)nr, 1);
    if (g) {
        atomic_init(&g->refs, 1);
        pthread_mutex_init(&g->mu, NULL);
        g->n_rules = nr;
        g->root = root;
        g->rule_names = calloc((size_t)nr, sizeof *g->rule_names);
        g->rule_start = malloc(sizeof *g->rule_start * (size_t)nr);
    }
    if (!g || !inl || !nfa_start || !nfa_final || !a.want || !a.wanted || !g->rule_names || !g->rule_start) goto oom;
    for (int32_t i = 0; i < nr; i++) {
        if (!(g->rule_names[i] = strdup(t->rules[i].name))) goto oom;
        g->rule_start[i] = -1;
    }
    if (!nfa_plan(t, root, inl, err, errlen)) goto fail;
    /* automata for the root and every rule called (not inlined) */
    a.want[a.n_want++] = root;
    a.wanted[root] = 1;
    for (int32_t w = 0; w < a.n_want; w++) {
        int32_t r = a.want[w];
        if (!nfa_build_rule(&a, t, inl, r, &nfa_start[r], &nfa_final[r])) goto nfa_fail;
    }
    byte_classes(&a, g->byte_class, &g->n_classes);
    memcpy(d.byte_class, g->byte_class, 256);
    d.a = &a;
    d.n_classes = g->n_classes;
    d.mark = calloc((size_t)a.n_states, sizeof *d.mark);
    d.buf = malloc(sizeof *d.buf * (size_t)a.n_states);
    d.stack = malloc(sizeof *d.stack * (size_t)a.n_states);
    if (!d.mark || !d.buf || !d.stack) goto oom;
    for (int32_t w = 0; w < a.n_want; w++) {
        int32_t r = a.want[w];
        g->rule_start[r] = determinize(&d, r, nfa_start[r], nfa_final[r]);
        if (g->rule_start[r] < 0) {
            if (d.too_big) goto too_big;
            goto oom;
        }
    }
    /* the automata into the grammar */
    g->n_states = d.n_states;
    g->states = calloc((size_t)d.n_states, sizeof *g->states);
    g->trans = d.trans;
    d.trans = NULL;
    g->calls = d.calls;
    g->n_calls = d.n_calls;
    d.calls = NULL;
    if (!g->states) goto oom;
    for (int32_t s = 0; s < d.n_states; s++)
        g->states[s] = (struct gstate){d.rule[s], d.call_off[s], d.call_n[s], d.accepting[s], 0};
    /* trim what can never finish */
    live = malloc((size_t)g->n_states);
    nullable = calloc((size_t)nr, 1);
    if (!live || !nullable || !find_live(g, live)) goto oom;
    if (!live[g->rule_start[root]]) {
        kiln_errf(err, errlen, "rule '%s' can never be complete (every way through it needs itself again)",
                  root_name);
        goto fail;
    }
    for (int32_t s = 0; s < g->n_states; s++) {
        int32_t *tr = g->trans + (size_t)s * (size_t)g->n_classes;
        for (int32_t c = 0; c < g->n_classes; c++) {
            if (tr[c] >= 0 && !live[tr[c]]) tr[c] = -1;
            if (tr[c] >= 0) g->states[s].consuming = 1;
        }
        int32_t k0 = g->states[s].calls, kept = 0;
        for (int32_t k = 0; k < g->states[s].n_calls; k++) {
            struct gcall cl = g->calls[k0 + k];
            if (live[cl.target] && live[g->rule_start[cl.rule]]) g->calls[k0 + kept++] = cl;
        }
        g->states[s].n_calls = kept;
    }
    /* nullable rules (finish without a byte), then left recursion */
    int32_t *mark = calloc((size_t)g->n_states, sizeof *mark), *stack = malloc(sizeof *stack * (size_t)g->n_states);
    if (!mark || !stack) {
        free(mark), free(stack);
        goto oom;
    }
    /* passes in the order automata were built (callers first), backwards: callees are
     * settled before their callers, so a grammar without recursion needs one pass */
    int32_t stamp = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t w = a.n_want - 1; w >= 0; w--) {
            int32_t r = a.want[w];
            if (!nullable[r] && nullable_rule(g, r, nullable, mark, ++stamp, stack, NULL, NULL, NULL))
                nullable[r] = changed = true;
        }
    }
    free(mark), free(stack);
    int32_t lr = find_left_recursion(g, nullable);
    if (lr == -2) goto oom;
    if (lr >= 0) {
        kiln_errf(err, errlen, "rule '%s' is left-recursive (it can reach itself before matching a character)",
                  t->rules[lr].name);
        goto fail;
    }
    free(inl), free(live), free(nullable), free(nfa_start), free(nfa_final);
    nfa_free(&a);
    dfa_free(&d);
    return g;
nfa_fail:
    if (!a.too_big) goto oom;
too_big:
    kiln_errf(err, errlen, "the grammar is too large: its automata need more than %d states (huge repetition counts?)",
              a.too_big ? G_MAX_NFA : G_MAX_DFA);
    goto fail;
oom:
    kiln_errf(err, errlen, "out of memory compiling the grammar");
fail:
    free(inl), free(live), free(nullable), free(nfa_start), free(nfa_final);
    nfa_free(&a);
    dfa_free(&d);
    kiln_grammar_unref(g);
    return NULL;
}

void kiln_grammar_unref(struct kiln_grammar *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    for (int32_t i = 0; g->rule_names && i < g->n_rules; i++) free(g->rule_names[i]);
    free(g->rule_names);
    free(g->rule_start);
    free(g->states);
    free(g->trans);
    free(g->calls);
    free(g->gbnf);
    for (struct gcache *c = g->caches, *next; c; c = next) {
        next = c->next;
        gcache_free(c);
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
}
