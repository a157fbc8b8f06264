/*
 * matcher.c - one sequence through a grammar: its configuration, advanced by
 * tokens or text, and the mask of the tokens allowed next. A mask is the union,
 * over the configuration's stacks, of the top state's accepted tokens (cached
 * per state, classify.c) and of its uncertain tokens that the rest of that stack
 * takes; masks are kept for the configurations met recently. A lazy matcher
 * waits for a trigger string before the grammar holds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar_impl.h"
#include "grammar_matcher.h"

#define MASK_CACHE 8
#define LIMITS "the grammar's state grew past its limits (too ambiguous: more than 4096 parses at once, or too many states)"
#define RUN_MAX_NODES (1 << 22)
#define RUN_MAX_CFGS (1 << 17)
#define RUN_COMPACT_NODES (1 << 20) /* past these the machine is rebuilt around the current state */
#define RUN_COMPACT_CFGS (1 << 15)

struct mask_slot {
    int32_t cfg; /* -1: empty */
    uint64_t used;
    uint64_t *bits;
};

struct kiln_grammar_matcher {
    struct kiln_grammar *g;
    const struct kiln_grammar_vocab *gv;
    struct gsm m;
    int32_t cur;
    bool ended;  /* an end-of-generation token was accepted */
    struct mask_slot cache[MASK_CACHE];
    uint64_t tick;
    char err[256];
    /* lazy: the triggers and the recent text they are looked for in */
    bool lazy, active;
    char **triggers;
    size_t n_triggers, max_trigger;
    char *recent;
    size_t n_recent, cap_recent;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
merr(struct kiln_grammar_matcher *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return false;
}

static void cache_clear(struct kiln_grammar_matcher *m) {
    for (int i = 0; i < MASK_CACHE; i++) m->cache[i].cfg = -1;
}

static bool start(struct kiln_grammar_matcher *m) {
    gsm_clear(&m->m);
    cache_clear(m);
    m->ended = false;
    m->cur = gsm_cfg_start(&m->m, m->g->root);
    m->active = !m->lazy;
    m->n_recent = 0;
    return m->cur > GC_DEAD || merr(m, "out of memory starting the grammar");
}

static struct kiln_grammar_matcher *make(const struct kiln_grammar *cg, const struct kiln_grammar_vocab *gv,
                                         char *err, size_t errlen) {
    struct kiln_grammar *g = (struct kiln_grammar *)cg; /* the caches inside are locked */
    if (!g) {
        kiln_errf(err, errlen, "a grammar matcher needs a grammar");
        return NULL;
    }
    struct kiln_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m || !gsm_init(&m->m, g, RUN_MAX_NODES, RUN_MAX_CFGS)) {
        free(m);
        kiln_errf(err, errlen, "out of memory");
        return NULL;
    }
    atomic_fetch_add(&g->refs, 1);
    m->g = g;
    m->gv = gv;
    for (int i = 0; gv && i < MASK_CACHE; i++) {
        m->cache[i].bits = malloc(sizeof *m->cache[i].bits * gv->n_words);
        if (!m->cache[i].bits) {
            kiln_grammar_matcher_free(m);
            kiln_errf(err, errlen, "out of memory");
            return NULL;
        }
    }
    return m;
}

struct kiln_grammar_matcher *kiln_grammar_matcher_new(const struct kiln_grammar *g,
                                                      const struct kiln_grammar_vocab *gv, char *err,
                                                      size_t errlen) {
    struct kiln_grammar_matcher *m = make(g, gv, err, errlen);
    if (m && !start(m)) {
        kiln_errf(err, errlen, "%s", m->err);
        kiln_grammar_matcher_free(m);
        return NULL;
    }
    return m;
}

struct kiln_grammar_matcher *kiln_grammar_matcher_new_lazy(const struct kiln_grammar *g,
                                                           const struct kiln_grammar_vocab *gv,
                                                           const char *const *triggers, size_t n_triggers,
                                                           char *err, size_t errlen) {
    if (n_triggers == 0 || !triggers || n_triggers > 1024) {
        kiln_errf(err, errlen, "a lazy grammar needs 1 to 1024 trigger strings");
        return NULL;
    }
    for (size_t i = 0; i < n_triggers; i++)
        if (!triggers[i] || !triggers[i][0] || strlen(triggers[i]) > 4096) {
            kiln_errf(err, errlen, "trigger %zu is empty or longer than 4096 bytes", i);
            return NULL;
        }
    struct kiln_grammar_matcher *m = make(g, gv, err, errlen);
    if (!m) return NULL;
    m->lazy = true;
    m->triggers = calloc(n_triggers, sizeof *m->triggers);
    bool ok = m->triggers != NULL;
    for (size_t i = 0; ok && i < n_triggers; i++) {
        ok = (m->triggers[i] = strdup(triggers[i])) != NULL;
        m->n_triggers = i + 1;
        size_t l = strlen(triggers[i]);
        if (l > m->max_trigger) m->max_trigger = l;
    }
    if (!ok || !start(m)) {
        kiln_errf(err, errlen, "%s", ok ? m->err : "out of memory");
        kiln_grammar_matcher_free(m);
        return NULL;
    }
    return m;
}

void kiln_grammar_matcher_free(struct kiln_grammar_matcher *m) {
    if (!m) return;
    gsm_free(&m->m);
    for (int i = 0; i < MASK_CACHE; i++) free(m->cache[i].bits);
    for (size_t i = 0; i < m->n_triggers; i++) free(m->triggers[i]);
    free(m->triggers);
    free(m->recent);
    kiln_grammar_unref(m->g);
    free(m);
}

void kiln_grammar_matcher_reset(struct kiln_grammar_matcher *m) {
    if (m) start(m);
}

/* A machine that grew past its soft limits is rebuilt around the current state
 * (long generations through recursive grammars meet ever new stacks). */
static bool maybe_compact(struct kiln_grammar_matcher *m) {
    if (m->m.n_nodes < RUN_COMPACT_NODES && m->m.n_cfgs < RUN_COMPACT_CFGS && !m->m.failed) return true;
    struct gsm fresh;
    if (!gsm_init(&fresh, m->g, RUN_MAX_NODES, RUN_MAX_CFGS)) return merr(m, "out of memory");
    int32_t cur = gsm_import(&fresh, &m->m, m->cur); /* what was interned before a failure is sound */
    if (cur < 0) {
        gsm_free(&fresh);
        return merr(m, LIMITS);
    }
    gsm_free(&m->m);
    m->m = fresh;
    m->cur = cur;
    cache_clear(m);
    return true;
}

static bool advance_bytes(struct kiln_grammar_matcher *m, const uint8_t *s, size_t n) {
    if (!maybe_compact(m)) return false;
    int32_t c = gsm_run(&m->m, m->cur, s, n);
    if (c < 0) return merr(m, LIMITS);
    if (c == GC_DEAD) return false;
    m->cur = c;
    return true;
}

/* Lazy: text generated while waiting; on a trigger, the grammar takes the text from it. */
static bool lazy_text(struct kiln_grammar_matcher *m, const uint8_t *s, size_t n) {
    if (m->n_recent + n + 1 > m->cap_recent) {
        size_t cap = (m->n_recent + n + 1) * 2;
        char *r = realloc(m->recent, cap);
        if (!r) return merr(m, "out of memory");
        m->recent = r;
        m->cap_recent = cap;
    }
    memcpy(m->recent + m->n_recent, s, n);
    m->n_recent += n;
    m->recent[m->n_recent] = 0;
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < m->n_triggers; i++) {
        const char *hit = memmem(m->recent, m->n_recent, m->triggers[i], strlen(m->triggers[i]));
        if (hit && (size_t)(hit - m->recent) < at) at = (size_t)(hit - m->recent);
    }
    if (at == SIZE_MAX) { /* keep only what could still begin a trigger */
        if (m->n_recent >= m->max_trigger) {
            size_t keep = m->max_trigger - 1;
            memmove(m->recent, m->recent + m->n_recent - keep, keep);
            m->n_recent = keep;
        }
        return true;
    }
    m->active = true;
    cache_clear(m);
    if (!advance_bytes(m, (const uint8_t *)m->recent + at, m->n_recent - at))
        return m->err[0] ? false : merr(m, "the text from the trigger on is not allowed by the grammar");
    return true;
}

bool kiln_grammar_matcher_accept_token(struct kiln_grammar_matcher *m, int32_t token) {
    if (!m) return false;
    m->err[0] = 0;
    const struct kiln_grammar_vocab *gv = m->gv;
    if (!gv) return merr(m, "this matcher has no vocabulary: it takes text only");
    if (token < 0 || token >= gv->n_vocab) return merr(m, "token %d is outside the vocabulary", (int)token);
    if (m->ended) return merr(m, "the grammar is complete: nothing may follow the end of generation");
    const uint8_t *b = gv->bytes + gv->off[token];
    size_t n = gv->off[token + 1] - gv->off[token];
    if (m->lazy && !m->active) {
        if (gv->kind[token] == GTOK_EOG) m->ended = true;
        return gv->kind[token] != GTOK_TEXT || lazy_text(m, b, n);
    }
    if (gv->kind[token] == GTOK_EOG) {
        if (!m->m.cfgs[m->cur].has_empty) return merr(m, "end of generation before the grammar is complete");
        m->ended = true;
        return true;
    }
    if (gv->kind[token] != GTOK_TEXT) return merr(m, "token %d is not text the grammar can match", (int)token);
    if (!advance_bytes(m, b, n))
        return m->err[0] ? false : merr(m, "token %d does not fit the grammar here", (int)token);
    return true;
}

bool kiln_grammar_matcher_accept_text(struct kiln_grammar_matcher *m, const char *text, size_t len) {
    if (!m) return false;
    m->err[0] = 0;
    if (m->ended) return merr(m, "the grammar is complete: nothing may follow the end of generation");
    if (m->lazy && !m->active) return lazy_text(m, (const uint8_t *)text, len);
    if (!advance_bytes(m, (const uint8_t *)text, len))
        return m->err[0] ? false : merr(m, "the text does not fit the grammar here");
    return true;
}

/* ------------------------------------------------------------------ masks */

static bool compute_mask(struct kiln_grammar_matcher *m, uint64_t *bits) {
    const struct kiln_grammar_vocab *gv = m->gv;
    struct gsm *sm = &m->m;
    memset(bits, 0, sizeof *bits * gv->n_words);
    const int32_t cfg = m->cur;
    const int32_t n = sm->cfgs[cfg].n;
    for (int32_t k = 0; k < n; k++) {
        const int32_t node = sm->items[sm->cfgs[cfg].off + k];
        if (node == GS_EMPTY) {
            for (int32_t e = 0; e < gv->n_eog; e++) bits[gv->eog[e] >> 6] |= 1ull << (gv->eog[e] & 63);
            continue;
        }
        const struct gsm_node nd = sm->nodes[node];
        const struct gclass *cls = gclass_get(m->g, gv, nd.state, m->err, sizeof m->err);
        if (!cls) return false;
        if (cls->bits) {
            for (size_t w = 0; w < gv->n_words; w++) bits[w] |= cls->bits[w];
        } else {
            for (int32_t i = 0; i < cls->n_acc; i++) bits[cls->acc[i] >> 6] |= 1ull << (cls->acc[i] & 63);
        }
        if (cls->n_unc == 0) continue;
        /* the uncertain tokens: their rest after the rule ends, from the rest of this stack */
        const int32_t rest = gsm_cfg_of_stack(sm, nd.parent);
        int32_t whole = -1; /* this stack alone, for tokens whose rule ends too deep to note */
        if (rest < 0) return merr(m, LIMITS);
        for (int32_t i = 0; i < cls->n_unc; i++) {
            const int32_t t = cls->unc[i];
            if (bits[t >> 6] & (1ull << (t & 63))) continue;
            const uint8_t *b = gv->bytes + gv->off[t];
            const size_t len = gv->off[t + 1] - gv->off[t];
            uint64_t em = cls->exits[i];
            bool ok = false;
            for (uint64_t e = em & ~(1ull << 63); e && !ok; e &= e - 1) {
                size_t d = (size_t)__builtin_ctzll(e);
                int32_t r = gsm_run(sm, rest, b + d, len - d);
                if (r < 0) return merr(m, LIMITS);
                ok = r > GC_DEAD;
            }
            if (!ok && (em >> 63)) {
                if (whole < 0 && (whole = gsm_cfg_single(sm, node)) < 0) return merr(m, "out of memory");
                int32_t r = gsm_run(sm, whole, b, len);
                if (r < 0) return merr(m, LIMITS);
                ok = r > GC_DEAD;
            }
            if (ok) bits[t >> 6] |= 1ull << (t & 63);
        }
    }
    return true;
}

const uint64_t *gmatcher_mask(struct kiln_grammar_matcher *m) {
    if (!m) return NULL;
    m->err[0] = 0;
    if (!m->gv) return merr(m, "this matcher has no vocabulary: it takes text only"), NULL;
    if (m->lazy && !m->active) return NULL;
    if (m->ended) { /* nothing more: an empty mask */
        struct mask_slot *s = &m->cache[0];
        memset(s->bits, 0, sizeof *s->bits * m->gv->n_words);
        s->cfg = -1;
        return s->bits;
    }
    if (!maybe_compact(m)) return NULL;
    struct mask_slot *lru = &m->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        struct mask_slot *s = &m->cache[i];
        if (s->cfg == m->cur) {
            s->used = ++m->tick;
            return s->bits;
        }
        if (s->cfg < 0 || s->used < lru->used) lru = s;
    }
    lru->cfg = -1;
    if (!compute_mask(m, lru->bits)) {
        if (!m->err[0]) merr(m, "cannot compute the grammar's mask");
        return NULL;
    }
    lru->cfg = m->cur;
    lru->used = ++m->tick;
    return lru->bits;
}

bool gmatcher_failed(const struct kiln_grammar_matcher *m) { return m->err[0] != 0; }
size_t gmatcher_n_words(const struct kiln_grammar_matcher *m) { return m->gv ? m->gv->n_words : 0; }
int32_t gmatcher_n_vocab(const struct kiln_grammar_matcher *m) { return m->gv ? m->gv->n_vocab : 0; }

bool kiln_grammar_matcher_fill_mask(struct kiln_grammar_matcher *m, uint64_t *bits, size_t n_words) {
    if (m && !m->gv) return merr(m, "this matcher has no vocabulary: it takes text only");
    if (!m || !bits || n_words < m->gv->n_words) return m ? merr(m, "the mask needs %zu words", m->gv->n_words) : false;
    const uint64_t *mask = gmatcher_mask(m);
    memset(bits, 0, sizeof *bits * n_words);
    if (!mask) {
        if (m->err[0]) return false;
        for (int32_t t = 0; t < m->gv->n_vocab; t++) bits[t >> 6] |= 1ull << (t & 63); /* inactive: all */
        return true;
    }
    memcpy(bits, mask, sizeof *bits * m->gv->n_words);
    return true;
}

bool kiln_grammar_matcher_can_end(const struct kiln_grammar_matcher *m) {
    return m && (!m->active || m->m.cfgs[m->cur].has_empty);
}

bool kiln_grammar_matcher_is_done(const struct kiln_grammar_matcher *m) {
    return m && (m->ended || (m->active && m->m.cfgs[m->cur].has_empty && !m->m.cfgs[m->cur].live));
}

bool kiln_grammar_matcher_is_active(const struct kiln_grammar_matcher *m) { return m && m->active; }

const char *kiln_grammar_matcher_error(const struct kiln_grammar_matcher *m) { return m ? m->err : "no matcher"; }

/* The reference the cached masks are tested against: every token's bytes run
 * from the current configuration, one by one. */
bool gmatcher_mask_reference(struct kiln_grammar_matcher *m, uint64_t *bits) {
    const struct kiln_grammar_vocab *gv = m->gv;
    if (!gv) return false;
    memset(bits, 0, sizeof *bits * gv->n_words);
    if (m->ended) return true;
    for (int32_t t = 0; t < gv->n_vocab; t++) {
        bool ok;
        if (m->lazy && !m->active) {
            ok = true;
        } else if (gv->kind[t] == GTOK_EOG) {
            ok = m->m.cfgs[m->cur].has_empty;
        } else if (gv->kind[t] == GTOK_TEXT) {
            int32_t r = gsm_run(&m->m, m->cur, gv->bytes + gv->off[t], gv->off[t + 1] - gv->off[t]);
            if (r < 0) return merr(m, LIMITS);
            ok = r > GC_DEAD;
        } else {
            ok = false;
        }
        if (ok) bits[t >> 6] |= 1ull << (t & 63);
    }
    return true;
}
