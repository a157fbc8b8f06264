/*
 * sampling.c - the sampler chain: stages over a candidate list (grammar,
 * penalties, logit bias, top-k, typical-p, top-p, min-p, temperature, greedy,
 * dist) with llama.cpp's semantics, a seeded PRNG and exp/log of kiln's own so
 * that a seed reproduces the same tokens on every machine.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar_stage.h"
#include "kiln.h"
#include "sampling_math.h"

/* a*b+c must not become one fused multiply-add on machines that have it:
 * the rounding would differ from machines that do not, and so would the tokens */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ------------------------------------------------------------------ errors */

static _Thread_local char samp_err[256];

const char *kiln_sampler_last_error(void) {
    return samp_err;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void samp_set_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(samp_err, sizeof samp_err, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ stages */

enum stage_kind {
    ST_CHAIN,
    ST_GREEDY,
    ST_DIST,
    ST_TEMP,
    ST_TOP_K,
    ST_TOP_P,
    ST_MIN_P,
    ST_TYPICAL,
    ST_PENALTIES,
    ST_LOGIT_BIAS,
    ST_GRAMMAR,
};

struct kiln_sampler {
    enum stage_kind kind;
    /* parameters */
    float f;   /* temp, p */
    int32_t k; /* top-k */
    size_t min_keep;
    uint32_t seed; /* dist: the seed in use */
    struct samp_rng rng;
    /* penalties: a ring of the last last_n accepted tokens */
    int32_t last_n;
    float repeat, freq, present;
    int32_t *ring;
    int64_t ring_n, ring_head;
    int32_t *uniq; /* scratch: distinct tokens of the ring and their counts (2 * last_n) */
    /* logit bias */
    struct kiln_logit_bias *bias;
    size_t n_bias;
    /* grammar: its matcher, and why it failed (a refused token, a mask not computed) */
    struct kiln_grammar_matcher *gm;
    char gm_err[200];
    bool gm_prefiltered; /* this sample's candidates came from its mask */
    /* chain */
    struct kiln_sampler **stages;
    int n_stages, cap_stages;
    /* scratch of the object sample/apply was called on, grown, never shrunk */
    struct kiln_token_prob *cand;
    struct samp_work work;
    int64_t cap;
};

static struct kiln_sampler *stage_new(enum stage_kind kind) {
    struct kiln_sampler *s = calloc(1, sizeof *s);
    if (!s)
        samp_set_err("out of memory");
    else
        s->kind = kind;
    return s;
}

struct kiln_sampler *kiln_sampler_init_greedy(void) {
    return stage_new(ST_GREEDY);
}

static uint32_t clock_seed(void) {
    struct timespec ts;
    int local;
    uint64_t x = 0;
    if (timespec_get(&ts, TIME_UTC)) x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)(uintptr_t)&local; /* differs between processes started in the same tick */
    uint32_t s = (uint32_t)(samp_splitmix64(&x) >> 32);
    return s == KILN_SEED_RANDOM ? 0 : s;
}

struct kiln_sampler *kiln_sampler_init_dist(uint32_t seed) {
    struct kiln_sampler *s = stage_new(ST_DIST);
    if (!s) return NULL;
    s->seed = seed == KILN_SEED_RANDOM ? clock_seed() : seed;
    samp_rng_seed(&s->rng, s->seed);
    return s;
}

struct kiln_sampler *kiln_sampler_init_temp(float temp) {
    if (!(temp >= 0.0f) || isinf(temp)) {
        samp_set_err("temperature must be a finite number >= 0 (got %g)", (double)temp);
        return NULL;
    }
    struct kiln_sampler *s = stage_new(ST_TEMP);
    if (s) s->f = temp;
    return s;
}

struct kiln_sampler *kiln_sampler_init_top_k(int32_t k) {
    if (k < 0) {
        samp_set_err("top-k must be >= 0 (0: off), got %d", (int)k);
        return NULL;
    }
    struct kiln_sampler *s = stage_new(ST_TOP_K);
    if (s) s->k = k;
    return s;
}

static struct kiln_sampler *p_stage(enum stage_kind kind, const char *name, float p, size_t min_keep,
                                    bool zero_ok) {
    if (!(zero_ok ? p >= 0.0f : p > 0.0f) || !(p <= 1.0f)) {
        samp_set_err("%s must be in %s0, 1], got %g", name, zero_ok ? "[" : "(", (double)p);
        return NULL;
    }
    struct kiln_sampler *s = stage_new(kind);
    if (s) {
        s->f = p;
        s->min_keep = min_keep;
    }
    return s;
}

struct kiln_sampler *kiln_sampler_init_top_p(float p, size_t min_keep) {
    return p_stage(ST_TOP_P, "top-p", p, min_keep, false);
}
struct kiln_sampler *kiln_sampler_init_min_p(float p, size_t min_keep) {
    return p_stage(ST_MIN_P, "min-p", p, min_keep, true);
}
struct kiln_sampler *kiln_sampler_init_typical(float p, size_t min_keep) {
    return p_stage(ST_TYPICAL, "typical-p", p, min_keep, false);
}

struct kiln_sampler *kiln_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present) {
    if (last_n < 0 || last_n > PENALTY_LAST_N_MAX) {
        samp_set_err("penalty window (last_n) must be in [0, %d], got %d", PENALTY_LAST_N_MAX, (int)last_n);
        return NULL;
    }
    if (!(repeat > 0.0f) || isinf(repeat)) {
        samp_set_err("repeat penalty must be a finite number > 0 (1: off), got %g", (double)repeat);
        return NULL;
    }
    if (!isfinite(freq) || !isfinite(present)) {
        samp_set_err("frequency/presence penalties must be finite (got %g, %g)", (double)freq, (double)present);
        return NULL;
    }
    struct kiln_sampler *s = stage_new(ST_PENALTIES);
    if (!s) return NULL;
    s->last_n = last_n;
    s->repeat = repeat;
    s->freq = freq;
    s->present = present;
    if (last_n > 0) {
        s->ring = malloc((size_t)last_n * sizeof *s->ring);
        s->uniq = malloc((size_t)last_n * 2 * sizeof *s->uniq);
        if (!s->ring || !s->uniq) {
            kiln_sampler_free(s);
            samp_set_err("out of memory");
            return NULL;
        }
    }
    return s;
}

struct kiln_sampler *kiln_sampler_init_logit_bias(size_t n, const struct kiln_logit_bias *bias) {
    if (n > 0 && !bias) {
        samp_set_err("logit bias: %zu entries but no array", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (bias[i].token < 0) {
            samp_set_err("logit bias: token id %d is negative", (int)bias[i].token);
            return NULL;
        }
        if (isnan(bias[i].bias) || bias[i].bias == INFINITY) {
            samp_set_err("logit bias for token %d must be finite or -inf, got %g", (int)bias[i].token,
                    (double)bias[i].bias);
            return NULL;
        }
    }
    struct kiln_sampler *s = stage_new(ST_LOGIT_BIAS);
    if (!s) return NULL;
    if (n > 0) {
        s->bias = malloc(n * sizeof *s->bias);
        if (!s->bias) {
            kiln_sampler_free(s);
            samp_set_err("out of memory");
            return NULL;
        }
        memcpy(s->bias, bias, n * sizeof *bias);
    }
    s->n_bias = n;
    return s;
}

static struct kiln_sampler *grammar_stage(struct kiln_grammar_matcher *m, const char *err) {
    if (!m) {
        samp_set_err("grammar: %s", err);
        return NULL;
    }
    struct kiln_sampler *s = stage_new(ST_GRAMMAR);
    if (!s) kiln_grammar_matcher_free(m);
    else s->gm = m;
    return s;
}

struct kiln_sampler *kiln_sampler_init_grammar(const struct kiln_grammar *g, const struct kiln_grammar_vocab *gv) {
    char err[200];
    if (!gv) {
        samp_set_err("grammar: no vocabulary index (kiln_grammar_vocab_new)");
        return NULL;
    }
    return grammar_stage(kiln_grammar_matcher_new(g, gv, err, sizeof err), err);
}

struct kiln_sampler *kiln_sampler_init_grammar_lazy(const struct kiln_grammar *g, const struct kiln_grammar_vocab *gv,
                                                    const char *const *triggers, size_t n_triggers) {
    char err[200];
    if (!gv) {
        samp_set_err("grammar: no vocabulary index (kiln_grammar_vocab_new)");
        return NULL;
    }
    return grammar_stage(kiln_grammar_matcher_new_lazy(g, gv, triggers, n_triggers, err, sizeof err), err);
}

/* The first stage the candidates meet, if it is a grammar. */
static struct kiln_sampler *leading_grammar(struct kiln_sampler *s) {
    while (s && s->kind == ST_CHAIN) s = s->n_stages ? s->stages[0] : NULL;
    return s && s->kind == ST_GRAMMAR ? s : NULL;
}

/* The first grammar stage that failed, anywhere in s. */
static const struct kiln_sampler *failed_grammar(const struct kiln_sampler *s) {
    if (s->kind == ST_GRAMMAR) return s->gm_err[0] ? s : NULL;
    for (int i = 0; i < s->n_stages; i++) {
        const struct kiln_sampler *f = failed_grammar(s->stages[i]);
        if (f) return f;
    }
    return NULL;
}

struct kiln_grammar_matcher *kiln_sampler_grammar(struct kiln_sampler *s) {
    if (!s) return NULL;
    if (s->kind == ST_GRAMMAR) return s->gm;
    for (int i = 0; i < s->n_stages; i++) {
        struct kiln_grammar_matcher *m = kiln_sampler_grammar(s->stages[i]);
        if (m) return m;
    }
    return NULL;
}

struct kiln_sampler *kiln_sampler_chain_new(void) {
    return stage_new(ST_CHAIN);
}

bool kiln_sampler_chain_add(struct kiln_sampler *chain, struct kiln_sampler *stage) {
    if (!stage) return false; /* the failed init left its message */
    if (!chain || chain->kind != ST_CHAIN) {
        samp_set_err("kiln_sampler_chain_add: not a chain");
        kiln_sampler_free(stage);
        return false;
    }
    if (chain->n_stages == chain->cap_stages) {
        int cap = chain->cap_stages ? 2 * chain->cap_stages : 8;
        struct kiln_sampler **st = realloc(chain->stages, (size_t)cap * sizeof *st);
        if (!st) {
            samp_set_err("out of memory");
            kiln_sampler_free(stage);
            return false;
        }
        chain->stages = st;
        chain->cap_stages = cap;
    }
    chain->stages[chain->n_stages++] = stage;
    return true;
}

int kiln_sampler_chain_n(const struct kiln_sampler *s) {
    if (!s) return 0;
    return s->kind == ST_CHAIN ? s->n_stages : 1;
}

void kiln_sampler_free(struct kiln_sampler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++) kiln_sampler_free(s->stages[i]);
    free(s->stages);
    free(s->ring);
    free(s->uniq);
    free(s->bias);
    kiln_grammar_matcher_free(s->gm);
    free(s->cand);
    free(s->work.tmp);
    free(s->work.ra);
    free(s->work.rb);
    free(s);
}

/* ------------------------------------------------------------------ apply */

static void apply_greedy(struct kiln_candidates *c) {
    if (c->size <= 0) return;
    int64_t best = 0;
    for (int64_t i = 1; i < c->size; i++)
        if (samp_better(&c->data[i], &c->data[best])) best = i;
    c->selected = best;
}

static void apply_dist(struct kiln_sampler *s, struct kiln_candidates *c) {
    /* one PRNG output per sample whatever the list, so later draws stay aligned */
    double u = samp_rng_uniform(&s->rng);
    if (c->size <= 0) return;
    samp_softmax(c);
    double target = u, cum = 0.0;
    /* the first candidate whose cumulative probability passes u; a token with
     * p = 0 can never be it, as cum does not grow there */
    c->selected = -1;
    for (int64_t i = 0; i < c->size; i++) {
        if (c->data[i].p <= 0.0f) continue;
        cum += (double)c->data[i].p;
        c->selected = i;
        if (cum > target) break;
    }
    if (c->selected < 0) c->selected = 0;
}

static void apply_temp(float temp, struct kiln_candidates *c) {
    if (c->size <= 0) return;
    if (temp <= 0.0f) { /* keep the best logit only, as llama.cpp does for temp 0 */
        int64_t best = 0;
        for (int64_t i = 1; i < c->size; i++)
            if (samp_better(&c->data[i], &c->data[best])) best = i;
        for (int64_t i = 0; i < c->size; i++)
            if (i != best) c->data[i].logit = -INFINITY;
        c->sorted = false;
        return;
    }
    /* a tiny temperature (1e-45) would turn every logit into +-inf and the softmax into
     * NaN (a uniform draw); measured from the best logit the ratios stay finite or -inf,
     * which is the near-greedy limit. Only then: the plain division is llama.cpp's. */
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < c->size; i++) {
        float l = c->data[i].logit;
        if (!isfinite(l)) continue; /* -inf from a bias stays -inf either way */
        if (l > hi) hi = l;
        if (l < lo) lo = l;
    }
    float big = fabsf(hi) > fabsf(lo) ? fabsf(hi) : fabsf(lo);
    if (isfinite(big) && big / temp > FLT_MAX / 2) {
        for (int64_t i = 0; i < c->size; i++) c->data[i].logit = (c->data[i].logit - hi) / temp;
        return;
    }
    for (int64_t i = 0; i < c->size; i++) c->data[i].logit /= temp;
}

static void apply_top_k(int32_t k, struct kiln_candidates *c, struct samp_work *w) {
    if (k <= 0 || c->size <= 0) return;
    int64_t kk = k < c->size ? k : c->size;
    samp_partial_sort(c, kk, w);
    c->size = kk;
    c->sorted = true;
}

static void apply_top_p(const struct kiln_sampler *s, struct kiln_candidates *c, struct samp_work *w) {
    if (s->f >= 1.0f || c->size <= 0) return;
    samp_softmax(c);
    /* most of the mass sits in a few hundred tokens: sort those first and the
     * rest only when they do not reach p */
    int64_t k = c->size;
    if (!c->sorted && c->size > 1024) {
        k = 256;
        samp_partial_sort(c, k, w);
    } else {
        samp_sort(c, w);
    }
    double cum = 0.0;
    int64_t last = c->size;
    for (int64_t i = 0; i < c->size; i++) {
        cum += (double)c->data[i].p;
        if (cum >= (double)s->f && (size_t)(i + 1) >= s->min_keep) {
            last = i + 1;
            break;
        }
        if (i == k - 1 && !c->sorted) samp_sort(c, w); /* the best k stay where they are */
    }
    c->size = last;
    c->sorted = true;
}

static void apply_min_p(const struct kiln_sampler *s, struct kiln_candidates *c, struct samp_work *w) {
    if (s->f <= 0.0f || c->size <= 0) return;
    /* p_i >= p * p_max  <=>  logit_i >= logit_max + log p */
    double lim = (double)samp_max_logit(c) + samp_log((double)s->f);
    size_t need = s->min_keep > 1 ? s->min_keep : 1;
    if (!c->sorted) {
        int64_t n = 0;
        for (int64_t i = 0; i < c->size; i++) n += (double)c->data[i].logit >= lim;
        if ((size_t)n >= need) { /* keep them in place, in their order */
            int64_t j = 0;
            for (int64_t i = 0; i < c->size; i++)
                if ((double)c->data[i].logit >= lim) c->data[j++] = c->data[i];
            c->size = j;
            return;
        }
        samp_sort(c, w);
    }
    int64_t i = 1;
    while (i < c->size && ((double)c->data[i].logit >= lim || (size_t)i < need)) i++;
    c->size = i;
}

static void apply_typical(const struct kiln_sampler *s, struct kiln_candidates *c, struct samp_work *w) {
    if (s->f >= 1.0f || c->size <= 0) return;
    samp_sort(c, w);
    samp_softmax(c);
    /* entropy H = -sum p log p (0 log 0 = 0); a token is typical when its
     * surprise -log p is close to H */
    double h = 0.0;
    for (int64_t i = 0; i < c->size; i++) {
        double p = c->data[i].p;
        if (p > 0.0) h -= p * samp_log(p);
    }
    for (int64_t i = 0; i < c->size; i++) {
        double p = c->data[i].p;
        double score = p > 0.0 ? fabs(-samp_log(p) - h) : HUGE_VAL;
        uint64_t bits; /* a double >= 0 sorts as its bits; the stable sort keeps list order on ties */
        memcpy(&bits, &score, sizeof bits);
        w->ra[i] = (struct samp_rec){bits, i};
    }
    const struct samp_rec *order = samp_radix_sort(w->ra, w->rb, c->size);
    double cum = 0.0;
    int64_t last = c->size;
    for (int64_t i = 0; i < c->size; i++) {
        cum += (double)c->data[order[i].idx].p;
        if (cum > (double)s->f && (size_t)(i + 1) >= s->min_keep) {
            last = i + 1;
            break;
        }
    }
    for (int64_t i = 0; i < last; i++) w->tmp[i] = c->data[order[i].idx];
    memcpy(c->data, w->tmp, (size_t)last * sizeof *c->data);
    c->size = last;
    c->sorted = false;
}

/* Finds candidate id t: position t when the list is still in vocabulary order
 * (the usual case, O(1)), else a scan. */
static int64_t find_id(const struct kiln_candidates *c, int32_t t) {
    if (t < c->size && c->data[t].id == t) return t;
    for (int64_t i = 0; i < c->size; i++)
        if (c->data[i].id == t) return i;
    return -1;
}

static int cmp_i32(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

static void penalize(const struct kiln_sampler *s, float *l, int32_t count) {
    if (*l <= 0.0f)
        *l *= s->repeat;
    else
        *l /= s->repeat;
    *l -= (float)count * s->freq + s->present;
}

static void apply_penalties(struct kiln_sampler *s, struct kiln_candidates *c) {
    if (s->ring_n == 0 || (s->repeat == 1.0f && s->freq == 0.0f && s->present == 0.0f)) return;
    /* distinct tokens of the window with their counts, sorted by id */
    int32_t *ids = s->uniq, *cnt = s->uniq + s->last_n;
    memcpy(ids, s->ring, (size_t)s->ring_n * sizeof *ids);
    qsort(ids, (size_t)s->ring_n, sizeof *ids, cmp_i32);
    int64_t nu = 0;
    for (int64_t i = 0; i < s->ring_n; i++) {
        if (nu > 0 && ids[nu - 1] == ids[i]) {
            cnt[nu - 1]++;
        } else {
            ids[nu] = ids[i];
            cnt[nu++] = 1;
        }
    }
    /* hits at their vocabulary position are the usual case (penalties run
     * first); the rest (misses) are found in one pass over the candidates */
    int64_t nmiss = 0;
    for (int64_t u = 0; u < nu; u++) {
        int32_t t = ids[u];
        if (t < c->size && c->data[t].id == t) {
            penalize(s, &c->data[t].logit, cnt[u]);
        } else {
            ids[nmiss] = t;
            cnt[nmiss++] = cnt[u];
        }
    }
    for (int64_t i = 0; nmiss > 0 && i < c->size; i++) {
        const int32_t *hit = bsearch(&c->data[i].id, ids, (size_t)nmiss, sizeof *ids, cmp_i32);
        if (hit) penalize(s, &c->data[i].logit, cnt[hit - ids]);
    }
    c->sorted = false;
}

static void apply_logit_bias(const struct kiln_sampler *s, struct kiln_candidates *c) {
    for (size_t b = 0; b < s->n_bias; b++) {
        int64_t i = find_id(c, s->bias[b].token);
        if (i >= 0) c->data[i].logit += s->bias[b].bias;
    }
    if (s->n_bias) c->sorted = false;
}

static void apply_stage(struct kiln_sampler *s, struct kiln_candidates *c, struct samp_work *w) {
    switch (s->kind) {
    case ST_CHAIN:
        for (int i = 0; i < s->n_stages; i++) apply_stage(s->stages[i], c, w);
        break;
    case ST_GREEDY:
        apply_greedy(c);
        break;
    case ST_DIST:
        apply_dist(s, c);
        break;
    case ST_TEMP:
        apply_temp(s->f, c);
        break;
    case ST_TOP_K:
        apply_top_k(s->k, c, w);
        break;
    case ST_TOP_P:
        apply_top_p(s, c, w);
        break;
    case ST_MIN_P:
        apply_min_p(s, c, w);
        break;
    case ST_TYPICAL:
        apply_typical(s, c, w);
        break;
    case ST_PENALTIES:
        apply_penalties(s, c);
        break;
    case ST_LOGIT_BIAS:
        apply_logit_bias(s, c);
        break;
    case ST_GRAMMAR:
        if (s->gm_err[0] || s->gm_prefiltered) break;
        if (!gstage_filter(s->gm, c)) {
            snprintf(s->gm_err, sizeof s->gm_err, "%s", kiln_grammar_matcher_error(s->gm));
            c->size = 0;
        }
        break;
    }
}

/* Scratch for n candidates on s, grown when needed. */
static bool reserve(struct kiln_sampler *s, int64_t n) {
    if (n <= s->cap) return true;
    if ((uint64_t)n > SIZE_MAX / sizeof(struct samp_rec)) {
        samp_set_err("too many candidates (%lld)", (long long)n);
        return false;
    }
    struct kiln_token_prob *cand = malloc((size_t)n * sizeof *cand);
    struct kiln_token_prob *tmp = malloc((size_t)n * sizeof *tmp);
    struct samp_rec *ra = malloc((size_t)n * sizeof *ra), *rb = malloc((size_t)n * sizeof *rb);
    if (!cand || !tmp || !ra || !rb) {
        free(cand);
        free(tmp);
        free(ra);
        free(rb);
        samp_set_err("out of memory for %lld candidates", (long long)n);
        return false;
    }
    free(s->cand);
    free(s->work.tmp);
    free(s->work.ra);
    free(s->work.rb);
    s->cand = cand;
    s->work = (struct samp_work){tmp, ra, rb};
    s->cap = n;
    return true;
}

bool kiln_sampler_apply(struct kiln_sampler *s, struct kiln_candidates *cand) {
    if (!s || !cand || (cand->size > 0 && !cand->data) || cand->size < 0) {
        samp_set_err("kiln_sampler_apply: bad arguments");
        return false;
    }
    if (!reserve(s, cand->size > 0 ? cand->size : 1)) return false;
    for (int64_t i = 0; i < cand->size; i++) /* NaN would break the total order */
        if (isnan(cand->data[i].logit)) cand->data[i].logit = -INFINITY;
    struct samp_work w = s->work;
    const struct kiln_sampler *gf = failed_grammar(s);
    if (!gf) apply_stage(s, cand, &w);
    if (gf || (gf = failed_grammar(s))) {
        samp_set_err("grammar: %s", gf->gm_err);
        return false;
    }
    return true;
}

int32_t kiln_sampler_sample(struct kiln_sampler *s, const float *logits, int64_t n_vocab) {
    if (!s || !logits) {
        samp_set_err("kiln_sampler_sample: no sampler or logits");
        return KILN_TOKEN_NULL;
    }
    if (n_vocab < 1 || n_vocab > INT32_MAX) {
        samp_set_err("kiln_sampler_sample: n_vocab %lld out of range", (long long)n_vocab);
        return KILN_TOKEN_NULL;
    }
    if (!reserve(s, n_vocab)) return KILN_TOKEN_NULL;
    struct kiln_sampler *gs = leading_grammar(s);
    int64_t n = -2;
    if (gs && !gs->gm_err[0]) { /* the grammar first: the list holds its allowed tokens only */
        n = gstage_fill(gs->gm, logits, n_vocab, s->cand);
        if (n == -1) snprintf(gs->gm_err, sizeof gs->gm_err, "%s", kiln_grammar_matcher_error(gs->gm));
        gs->gm_prefiltered = n >= 0;
    }
    if (n < 0) {
        n = n_vocab;
        for (int64_t i = 0; i < n_vocab; i++) {
            s->cand[i].id = (int32_t)i;
            s->cand[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
            s->cand[i].p = 0.0f;
        }
    }
    struct kiln_candidates c = {s->cand, n, -1, false};
    struct samp_work w = s->work;
    const struct kiln_sampler *gf = failed_grammar(s);
    if (!gf) apply_stage(s, &c, &w);
    if (gs) gs->gm_prefiltered = false;
    if (!gf) gf = failed_grammar(s);
    if (gf) {
        samp_set_err("grammar: %s", gf->gm_err);
        return KILN_TOKEN_NULL;
    }
    if (c.size == 0) {
        samp_set_err("the grammar allows no token here");
        return KILN_TOKEN_NULL;
    }
    if (c.selected < 0 || c.selected >= c.size) {
        samp_set_err("no token selected: the sampler chain must end with greedy or dist");
        return KILN_TOKEN_NULL;
    }
    return c.data[c.selected].id;
}

static void accept(struct kiln_sampler *s, int32_t token, bool prompt) {
    if (!s || token < 0) return;
    if (s->kind == ST_CHAIN) {
        for (int i = 0; i < s->n_stages; i++) accept(s->stages[i], token, prompt);
    } else if (s->kind == ST_PENALTIES && s->last_n > 0) {
        s->ring[s->ring_head] = token;
        s->ring_head = (s->ring_head + 1) % s->last_n;
        if (s->ring_n < s->last_n) s->ring_n++;
    } else if (s->kind == ST_GRAMMAR && !prompt && !s->gm_err[0] && !kiln_grammar_matcher_accept_token(s->gm, token)) {
        snprintf(s->gm_err, sizeof s->gm_err, "%s", kiln_grammar_matcher_error(s->gm));
    }
}

void kiln_sampler_accept(struct kiln_sampler *s, int32_t token) { accept(s, token, false); }
void kiln_sampler_accept_prompt(struct kiln_sampler *s, int32_t token) { accept(s, token, true); }

void kiln_sampler_reset(struct kiln_sampler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++) kiln_sampler_reset(s->stages[i]);
    s->ring_n = s->ring_head = 0;
    if (s->kind == ST_DIST) samp_rng_seed(&s->rng, s->seed);
    if (s->kind == ST_GRAMMAR) {
        kiln_grammar_matcher_reset(s->gm);
        s->gm_err[0] = 0;
    }
}

uint32_t kiln_sampler_seed(const struct kiln_sampler *s) {
    if (!s) return KILN_SEED_RANDOM;
    if (s->kind == ST_DIST) return s->seed;
    for (int i = 0; i < s->n_stages; i++) {
        uint32_t seed = kiln_sampler_seed(s->stages[i]);
        if (seed != KILN_SEED_RANDOM) return seed;
    }
    return KILN_SEED_RANDOM;
}

/* ------------------------------------------------------------------ describe */

struct sbuf {
    char *buf;
    size_t size, len;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(struct sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = b->len < b->size ? b->buf + b->len : NULL;
    int n = vsnprintf(at, at ? b->size - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

static void describe(const struct kiln_sampler *s, struct sbuf *b) {
    switch (s->kind) {
    case ST_CHAIN:
        for (int i = 0; i < s->n_stages; i++) {
            if (i) sb_printf(b, " -> ");
            describe(s->stages[i], b);
        }
        break;
    case ST_GREEDY:
        sb_printf(b, "greedy");
        break;
    case ST_DIST:
        sb_printf(b, "dist(seed=%u)", (unsigned)s->seed);
        break;
    case ST_TEMP:
        sb_printf(b, "temp(%.3f)", (double)s->f);
        break;
    case ST_TOP_K:
        sb_printf(b, "top-k(%d)", (int)s->k);
        break;
    case ST_TOP_P:
        sb_printf(b, "top-p(%.3f)", (double)s->f);
        break;
    case ST_MIN_P:
        sb_printf(b, "min-p(%.3f)", (double)s->f);
        break;
    case ST_TYPICAL:
        sb_printf(b, "typical(%.3f)", (double)s->f);
        break;
    case ST_PENALTIES:
        sb_printf(b, "penalties(last_n=%d repeat=%.3f freq=%.3f present=%.3f)", (int)s->last_n,
                  (double)s->repeat, (double)s->freq, (double)s->present);
        break;
    case ST_LOGIT_BIAS:
        sb_printf(b, "logit-bias(%zu)", s->n_bias);
        break;
    case ST_GRAMMAR:
        sb_printf(b, "grammar");
        break;
    }
}

int64_t kiln_sampler_describe(const struct kiln_sampler *s, char *buf, size_t size) {
    struct sbuf b = {buf, buf ? size : 0, 0};
    if (b.size) buf[0] = '\0';
    if (s) describe(s, &b);
    if (b.len + 1 > b.size) return -(int64_t)(b.len + 1);
    return (int64_t)b.len;
}
