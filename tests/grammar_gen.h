/*
 * grammar_gen.h - strings drawn at random from a GBNF grammar (for the grammar
 * tests): a derivation of the rule tree that takes random alternatives and
 * repetition counts while it is shallow and the shortest ones once it is deep,
 * so that every draw ends. gen_same_language checks that two grammars accept
 * each other's strings.
 */
#ifndef KILN_GRAMMAR_GEN_H
#define KILN_GRAMMAR_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "grammar/json.h"
#include "kiln.h"

struct gen {
    struct gtree t;
    int64_t *minlen; /* per node: shortest match in bytes (saturating) */
    uint64_t rng;
    char *out;
    size_t n, cap;
    int depth_soft; /* deeper than this: shortest choices */
};

static inline uint64_t gen_rand(struct gen *g) {
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

#define GEN_INF ((int64_t)1 << 40)

static int64_t gen_node_min(const struct gtree *t, int32_t id, const int64_t *rule_min) {
    const struct gn *n = &t->nodes[id];
    int64_t s, m;
    switch (n->kind) {
    case GN_EMPTY: return 0;
    case GN_LIT: return n->b;
    case GN_CLASS: return 1;
    case GN_SEQ:
        s = 0;
        for (int32_t i = 0; i < n->b; i++) s += gen_node_min(t, t->kids[n->a + i], rule_min);
        return s < GEN_INF ? s : GEN_INF;
    case GN_ALT:
        m = GEN_INF;
        for (int32_t i = 0; i < n->b; i++) {
            int64_t k = gen_node_min(t, t->kids[n->a + i], rule_min);
            if (k < m) m = k;
        }
        return m;
    case GN_REP: s = gen_node_min(t, n->a, rule_min) * n->b; return s < GEN_INF ? s : GEN_INF;
    case GN_REF: return rule_min[n->a];
    }
    return GEN_INF;
}

static void gen_put(struct gen *g, const void *p, size_t k) {
    if (g->n + k + 1 > g->cap) {
        g->cap = (g->n + k + 1) * 2;
        g->out = realloc(g->out, g->cap);
    }
    memcpy(g->out + g->n, p, k);
    g->n += k;
    g->out[g->n] = 0;
}

static void gen_node(struct gen *g, int32_t id, int depth, const int64_t *rule_min) {
    const struct gtree *t = &g->t;
    const struct gn *n = &t->nodes[id];
    bool deep = depth > g->depth_soft || g->n > 400;
    switch (n->kind) {
    case GN_EMPTY: return;
    case GN_LIT: gen_put(g, t->bytes + n->a, (size_t)n->b); return;
    case GN_CLASS: {
        int32_t r = (int32_t)(gen_rand(g) % (uint64_t)n->b);
        uint32_t lo = t->ranges[n->a + 2 * r], hi = t->ranges[n->a + 2 * r + 1];
        /* mostly near the start of the range: printable ASCII where the range has it */
        uint32_t span = hi - lo + 1, cp;
        do {
            cp = lo + (uint32_t)(gen_rand(g) % (gen_rand(g) % 4 ? (span < 96 ? span : 96) : span));
        } while (cp >= 0xD800 && cp <= 0xDFFF);
        uint8_t b[4];
        gen_put(g, b, (size_t)gutf8_encode(cp, b));
        return;
    }
    case GN_SEQ:
        for (int32_t i = 0; i < n->b; i++) gen_node(g, t->kids[n->a + i], depth + 1, rule_min);
        return;
    case GN_ALT: {
        int32_t pick = -1;
        if (deep) {
            int64_t best = GEN_INF + 1;
            for (int32_t i = 0; i < n->b; i++) {
                int64_t k = gen_node_min(t, t->kids[n->a + i], rule_min);
                if (k < best) best = k, pick = i;
            }
        } else {
            do pick = (int32_t)(gen_rand(g) % (uint64_t)n->b);
            while (gen_node_min(t, t->kids[n->a + pick], rule_min) >= GEN_INF);
        }
        gen_node(g, t->kids[n->a + pick], depth + 1, rule_min);
        return;
    }
    case GN_REP: {
        int32_t count = n->b;
        if (!deep) {
            int32_t extra = n->c < 0 ? 3 : n->c - n->b;
            if (extra > 3) extra = 3;
            count += (int32_t)(gen_rand(g) % (uint64_t)(extra + 1));
        }
        for (int32_t i = 0; i < count; i++) gen_node(g, n->a, depth + 1, rule_min);
        return;
    }
    case GN_REF: gen_node(g, t->rules[n->a].node, depth + 1, rule_min); return;
    }
}

/* Draw n strings from the GBNF text; each is passed to fn (false stops). */
static inline bool gen_strings(const char *gbnf, const char *root, int n, uint64_t seed,
                               bool (*fn)(const char *s, size_t len, void *data), void *data) {
    struct gen g = {0};
    char err[256];
    if (!gbnf_parse(gbnf, strlen(gbnf), &g.t, err, sizeof err)) return false;
    int32_t r = gtree_find_rule(&g.t, root ? root : "root");
    int64_t *rule_min = malloc(sizeof *rule_min * (size_t)g.t.n_rules);
    for (int32_t i = 0; i < g.t.n_rules; i++) rule_min[i] = GEN_INF;
    for (bool changed = true; changed;) { /* shortest derivations, to a fixpoint */
        changed = false;
        for (int32_t i = 0; i < g.t.n_rules; i++) {
            int64_t m = g.t.rules[i].node >= 0 ? gen_node_min(&g.t, g.t.rules[i].node, rule_min) : GEN_INF;
            if (m < rule_min[i]) rule_min[i] = m, changed = true;
        }
    }
    bool ok = r >= 0;
    g.rng = seed * 2654435761u + 1;
    g.depth_soft = 12;
    for (int k = 0; ok && k < n; k++) {
        g.n = 0;
        gen_put(&g, "", 0);
        gen_node(&g, g.t.rules[r].node, 0, rule_min);
        ok = fn(g.out, g.n, data);
    }
    free(rule_min);
    free(g.out);
    gtree_free(&g.t);
    return ok;
}

struct gen_check {
    const struct kiln_grammar *other;
    char *why;
    size_t whylen;
    bool json_only; /* strings that are not JSON (a grammar's mistake) are skipped */
    int n_checked;
};

/* JSON escapes of surrogates (\uD800 .. \uDFFF): kiln's JSON grammars leave them out */
static inline bool gen_has_surrogate_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 3 < n; i++)
        if (s[i] == '\\' && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D') && s[i + 3] &&
            strchr("89abcdefABCDEF", s[i + 3]))
            return true;
    return false;
}

static bool gen_check_one(const char *s, size_t len, void *data) {
    struct gen_check *c = data;
    if (c->json_only) {
        struct jdoc d;
        char e[64];
        if (gen_has_surrogate_escape(s, len) || !json_parse(s, len, 64, &d, e, sizeof e)) return true;
        json_free(&d);
    }
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(c->other, NULL, err, sizeof err);
    size_t at = 0; /* byte by byte, to say where it stops */
    while (m && at < len && kiln_grammar_matcher_accept_text(m, s + at, 1)) at++;
    bool ok = m && at == len && kiln_grammar_matcher_can_end(m);
    kiln_grammar_matcher_free(m);
    c->n_checked++;
    if (!ok) {
        int w = snprintf(c->why, c->whylen, "the other grammar stops at byte %zu of ", at);
        for (size_t i = 0; i < len && w > 0 && (size_t)w + 8 < c->whylen; i++) {
            unsigned char ch = (unsigned char)s[i];
            w += snprintf(c->why + w, c->whylen - (size_t)w, ch >= 0x20 && ch < 0x7F && ch != '\\' ? "%c" : "\\x%02x", ch);
        }
    }
    return ok;
}

/* Strings drawn from a (dirs bit 0) are accepted by b, and from b (bit 1) by a; strings
 * a draws that are not JSON are skipped (a is llama.cpp's: its patterns can write a raw
 * quote or control character). */
static inline bool gen_same_language(const struct kiln_grammar *a, const struct kiln_grammar *b, int dirs, int n,
                                     uint64_t seed, char *why, size_t whylen) {
    struct gen_check c = {b, why, whylen, true, 0};
    snprintf(why, whylen, "cannot draw strings");
    if ((dirs & 1) && !gen_strings(kiln_grammar_text(a), NULL, n, seed, gen_check_one, &c)) return false;
    c.other = a;
    c.json_only = false;
    return !(dirs & 2) || gen_strings(kiln_grammar_text(b), NULL, n, seed + 1, gen_check_one, &c);
}

#endif
