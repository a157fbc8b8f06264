/*
 * classify.c - the token classes of one automaton state: which tokens its rule,
 * run alone from that state, accepts, rejects, or cannot decide (the rule ends
 * inside the token, and the rest depends on the caller). One walk over the
 * vocabulary's trie per state, cached for the grammar's lifetime: a mask then
 * needs only the uncertain tokens checked against the actual stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar_impl.h"

#define LOCAL_MAX_NODES (1 << 22)
#define LOCAL_MAX_CFGS (1 << 18)
#define CLASS_MAX_BYTES ((size_t)512 << 20) /* the token classes one grammar may hold for one vocabulary */

struct walk_out {
    uint64_t *bits;
    int32_t n_acc;
    int32_t *unc;
    uint64_t *exits;
    int32_t n_unc, cap_unc;
};

static bool add_unc(struct walk_out *o, int32_t tok, uint64_t em) {
    if (o->n_unc == o->cap_unc) {
        int32_t cap = o->cap_unc ? o->cap_unc * 2 : 64;
        int32_t *u = realloc(o->unc, sizeof *u * (size_t)cap);
        if (u) o->unc = u;
        uint64_t *e = realloc(o->exits, sizeof *e * (size_t)cap);
        if (e) o->exits = e;
        if (!u || !e) return false;
        o->cap_unc = cap;
    }
    o->unc[o->n_unc] = tok;
    o->exits[o->n_unc++] = em;
    return true;
}

static inline uint64_t exit_bit(int32_t d) { return d >= 63 ? 1ull << 63 : 1ull << d; }

/* Walk the trie from the single stack (EXIT, q). The hot loop reads each node's
 * transition from the memo table of its parent's configuration (nxt[d]); the
 * machine is asked only for transitions not seen yet. */
static bool walk(struct gsm *m, const struct kiln_grammar_vocab *gv, int32_t q, struct walk_out *o) {
    int32_t cfg[G_MAX_TOKEN + 1];
    const int32_t *nxt[G_MAX_TOKEN + 1];
    uint64_t exits[G_MAX_TOKEN + 1];
    cfg[0] = gsm_cfg_single(m, gsm_node(m, GS_EXIT, q));
    exits[0] = 0;
    if (cfg[0] < 0 || gsm_step_slow(m, cfg[0], 0) < 0) return false; /* allocates its memo table */
    nxt[0] = m->cfgs[cfg[0]].next;
    const uint8_t *nbyte = gv->nbyte, *cls = m->g->byte_class;
    const uint16_t *ndepth = gv->ndepth;
    const uint32_t *nend = gv->nend;
    const int32_t *ntok = gv->ntok;
    uint64_t *bits = o->bits;
    const int32_t sink = gv->n_vocab; /* a bit past the vocabulary: where "no token here" is written */
    int32_t n_acc = 0;
    for (int32_t i = 0; i < gv->n_nodes;) {
        const int32_t d = ndepth[i];
        int32_t c = nxt[d - 1][cls[nbyte[i]]];
        if (c < 0) {
            c = gsm_step_slow(m, cfg[d - 1], nbyte[i]);
            if (c < 0) return false;
            nxt[d - 1] = m->cfgs[cfg[d - 1]].next;
        }
        const struct gsm_cfg *C = &m->cfgs[c];
        const bool live = C->live, accept = live | C->has_exit;
        const int32_t tk = ntok[i];
        /* the usual node: no token or one, in a configuration that goes on; written
         * without a branch on whether a token ends here (half the nodes, at random) */
        const int32_t t = tk >= 0 ? tk : sink;
        bits[t >> 6] |= (uint64_t)accept << (t & 63);
        n_acc += accept & (tk >= 0);
        if (__builtin_expect(!accept && tk >= 0 && exits[d - 1], 0) && !add_unc(o, tk, exits[d - 1])) return false;
        if (__builtin_expect(tk < -1, 0)) /* several tokens with these bytes */
            for (const int32_t *u = gv->dups + (-2 - tk); *u >= 0; u++) {
                if (accept) bits[*u >> 6] |= 1ull << (*u & 63), n_acc++;
                else if (exits[d - 1] && !add_unc(o, *u, exits[d - 1])) return false;
            }
        const uint64_t em = exits[d - 1] | (C->has_exit ? exit_bit(d) : 0);
        if (__builtin_expect(!live, 0)) {
            /* nothing goes on inside the rule: every longer token here is uncertain or rejected */
            if (em)
                for (uint32_t j = (uint32_t)i + 1; j < nend[i]; j++) {
                    if (ntok[j] >= 0 && !add_unc(o, ntok[j], em)) return false;
                    for (const int32_t *u = ntok[j] < -1 ? gv->dups + (-2 - ntok[j]) : NULL; u && *u >= 0; u++)
                        if (!add_unc(o, *u, em)) return false;
                }
            i = (int32_t)nend[i];
            continue;
        }
        if (__builtin_expect(!C->next, 0)) { /* give c its memo table */
            if (gsm_step_slow(m, c, nbyte[i]) < 0) return false;
            C = &m->cfgs[c];
        }
        cfg[d] = c;
        nxt[d] = C->next;
        exits[d] = em;
        i++;
    }
    bits[sink >> 6] &= ~(1ull << (sink & 63));
    o->n_acc += n_acc;
    return true;
}

static struct gclass *classify(struct gcache *c, const struct kiln_grammar_vocab *gv, int32_t q) {
    struct walk_out o = {0};
    o.bits = calloc(gv->n_words + 1, sizeof *o.bits); /* + the word of the sink bit */
    if (!o.bits) return NULL;
    bool ok = false;
    for (int attempt = 0; attempt < 2 && !ok; attempt++) {
        /* a machine grown large (or out of room) starts over: memory stays bounded */
        if (c->local.failed || c->local.n_cfgs > LOCAL_MAX_CFGS / 2 || c->local.n_nodes > LOCAL_MAX_NODES / 2)
            gsm_clear(&c->local);
        memset(o.bits, 0, (gv->n_words + 1) * sizeof *o.bits);
        o.n_acc = o.n_unc = 0;
        ok = walk(&c->local, gv, q, &o);
    }
    struct gclass *cls = ok ? calloc(1, sizeof *cls) : NULL;
    if (!cls) {
        free(o.bits), free(o.unc), free(o.exits);
        return NULL;
    }
    cls->n_acc = o.n_acc;
    if ((size_t)o.n_acc * 4 < gv->n_words * 8) { /* few: a list */
        cls->acc = malloc(sizeof *cls->acc * (size_t)(o.n_acc > 0 ? o.n_acc : 1));
        if (!cls->acc) {
            free(cls), free(o.bits), free(o.unc), free(o.exits);
            return NULL;
        }
        int32_t k = 0;
        for (size_t w = 0; w < gv->n_words; w++)
            for (uint64_t b = o.bits[w]; b; b &= b - 1) cls->acc[k++] = (int32_t)(w * 64 + (size_t)__builtin_ctzll(b));
        free(o.bits);
    } else {
        cls->bits = o.bits;
    }
    cls->unc = o.unc;
    cls->exits = o.exits;
    cls->n_unc = o.n_unc;
    return cls;
}

void gclass_free(struct gclass *c) {
    if (!c) return;
    free(c->bits);
    free(c->acc);
    free(c->unc);
    free(c->exits);
    free(c);
}

void gcache_free(struct gcache *c) {
    if (!c) return;
    for (int32_t i = 0; c->cls && i < c->n_cls; i++)
        if (!c->shared[i]) gclass_free(c->cls[i]);
    free(c->cls);
    free(c->shared);
    if (c->local_ok) gsm_free(&c->local);
    free(c);
}

const struct gclass *gclass_get(struct kiln_grammar *g, const struct kiln_grammar_vocab *gv, int32_t q, char *err,
                                size_t errlen) {
    pthread_mutex_lock(&g->mu);
    struct gcache *c = g->caches;
    while (c && c->gv != gv) c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c) {
            c->gv = gv;
            c->n_cls = g->n_states;
            c->cls = calloc((size_t)g->n_states, sizeof *c->cls);
            c->shared = calloc((size_t)g->n_states, 1);
            c->local_ok = gsm_init(&c->local, g, LOCAL_MAX_NODES, LOCAL_MAX_CFGS);
        }
        if (!c || !c->cls || !c->shared || !c->local_ok) {
            gcache_free(c);
            pthread_mutex_unlock(&g->mu);
            kiln_errf(err, errlen, "out of memory for the grammar's token classes");
            return NULL;
        }
        c->next = g->caches;
        g->caches = c;
    }
    struct gclass *cls = c->cls[q];
    if (!cls && c->bytes > CLASS_MAX_BYTES) {
        /* a grammar with very many states that each take much of the vocabulary (a huge
         * count of wide characters) stops here rather than take all memory */
        kiln_errf(err, errlen, "the grammar's token classes passed %zu MiB (too many distinct states)",
                  CLASS_MAX_BYTES >> 20);
    } else if (!cls) {
        uint32_t *key = NULL;
        size_t klen = 0;
        if ((cls = gshare_find(gv->share, g, q, &key, &klen))) { /* another grammar walked it */
            c->cls[q] = cls;
            c->shared[q] = 1;
        } else if (!(cls = c->cls[q] = classify(c, gv, q))) {
            kiln_errf(err, errlen, "the grammar is too complex to index the vocabulary against (state %d)", (int)q);
        } else {
            size_t bytes = sizeof *cls + (cls->bits ? (gv->n_words + 1) * 8 : (size_t)cls->n_acc * 4) +
                           (size_t)cls->n_unc * 12;
            if (key && gshare_put(gv->share, key, klen, cls, bytes)) c->shared[q] = 1, key = NULL;
            else c->bytes += bytes;
        }
        free(key);
    }
    pthread_mutex_unlock(&g->mu);
    return cls;
}
