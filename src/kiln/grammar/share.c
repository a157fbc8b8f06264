/*
 * share.c - token classes shared between grammars on one vocabulary. A state's
 * classes depend only on the automaton reachable from it (its rule from there,
 * and the rules it calls), so two grammars with the same `string` rule (every
 * JSON Schema has it) walk the vocabulary for its states once: the classes of
 * small sub-automata are kept in the vocabulary index under a canonical key.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

#define KEY_MAX_STATES 64             /* larger sub-automata are not shared (a schema's own object rules) */
#define SHARE_MAX_BYTES ((size_t)256 << 20)

struct share_entry {
    uint64_t hash;
    uint32_t *key;
    size_t len;
    struct gclass *cls;
};

struct gshare {
    pthread_mutex_t mu;
    struct share_entry *e;
    size_t n, cap, bytes;
};

struct gshare *gshare_new(void) {
    struct gshare *s = calloc(1, sizeof *s);
    if (s) pthread_mutex_init(&s->mu, NULL);
    return s;
}

void gshare_free(struct gshare *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->e[i].key);
        gclass_free(s->e[i].cls);
    }
    free(s->e);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

struct keyb {
    uint32_t *v;
    size_t n, cap;
    bool oom;
};

static void put(struct keyb *k, uint32_t x) {
    if (k->oom) return;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        uint32_t *nv = realloc(k->v, sizeof *nv * cap);
        if (!nv) {
            k->oom = true;
            return;
        }
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = x;
}

/* The canonical id of state s (discovery order), adding it to the list; -1 past the limit. */
static int32_t canon(int32_t *ids, int32_t *order, int32_t *n, int32_t s) {
    for (int32_t i = 0; i < *n; i++)
        if (ids[i] == s) return i;
    if (*n == KEY_MAX_STATES) return -1;
    ids[*n] = s;
    order[*n] = s;
    return (*n)++;
}

/* The key of state q: every state reachable from it (transitions by byte run, calls,
 * accepting), numbered in the order met. false when the sub-automaton is too large. */
static bool make_key(const struct kiln_grammar *g, int32_t q, struct keyb *k) {
    int32_t ids[KEY_MAX_STATES], order[KEY_MAX_STATES], n = 0;
    /* first only count, by byte class (cheap): most states of a schema's object rule
     * reach far more than the limit, and bail out here */
    canon(ids, order, &n, q);
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = order[i];
        for (int32_t c = 0; c < g->n_classes; c++) {
            int32_t t = g->trans[(size_t)s * (size_t)g->n_classes + (size_t)c];
            if (t >= 0 && canon(ids, order, &n, t) < 0) return false;
        }
        for (int32_t j = 0; j < g->states[s].n_calls; j++) {
            const struct gcall *cl = &g->calls[g->states[s].calls + j];
            if (canon(ids, order, &n, g->rule_start[cl->rule]) < 0 || canon(ids, order, &n, cl->target) < 0)
                return false;
        }
    }
    n = 0;
    canon(ids, order, &n, q);
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = order[i];
        const struct gstate *st = &g->states[s];
        put(k, 0xFFFFFFF0u | st->accepting);
        /* byte runs with one target: (first byte, target) */
        int32_t prev = -2;
        for (int b = 0; b < 256; b++) {
            int32_t t = g_next(g, s, (uint8_t)b), c = t < 0 ? -1 : canon(ids, order, &n, t);
            if (t >= 0 && c < 0) return false;
            if (c != prev) put(k, (uint32_t)b << 16 | (uint32_t)(c + 1)), prev = c;
        }
        put(k, 0xFFFFFFF2u);
        for (int32_t j = 0; j < st->n_calls; j++) {
            const struct gcall *cl = &g->calls[st->calls + j];
            int32_t a = canon(ids, order, &n, g->rule_start[cl->rule]), b = canon(ids, order, &n, cl->target);
            if (a < 0 || b < 0) return false;
            put(k, (uint32_t)a), put(k, (uint32_t)b);
        }
        put(k, 0xFFFFFFF3u);
    }
    return !k->oom;
}

static uint64_t hash_key(const uint32_t *v, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 1099511628211ull;
    return h;
}

struct gclass *gshare_find(struct gshare *s, const struct kiln_grammar *g, int32_t q, uint32_t **key, size_t *len) {
    struct keyb k = {0};
    *key = NULL;
    if (!s || !make_key(g, q, &k)) {
        free(k.v);
        return NULL;
    }
    uint64_t h = hash_key(k.v, k.n);
    struct gclass *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n && !found; i++)
        if (s->e[i].hash == h && s->e[i].len == k.n && !memcmp(s->e[i].key, k.v, sizeof *k.v * k.n)) found = s->e[i].cls;
    pthread_mutex_unlock(&s->mu);
    if (found) {
        free(k.v);
        return found;
    }
    *key = k.v;
    *len = k.n;
    return NULL;
}

bool gshare_put(struct gshare *s, uint32_t *key, size_t len, struct gclass *cls, size_t bytes) {
    bool ok = false;
    pthread_mutex_lock(&s->mu);
    if (s->bytes + bytes <= SHARE_MAX_BYTES) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            struct share_entry *ne = realloc(s->e, sizeof *ne * cap);
            if (ne) s->e = ne, s->cap = cap;
        }
        if (s->n < s->cap) {
            s->e[s->n++] = (struct share_entry){hash_key(key, len), key, len, cls};
            s->bytes += bytes;
            ok = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}
