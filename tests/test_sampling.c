/*
 * test_sampling.c - the sampler chain on small fixed logits whose results are
 * worked out by hand in the comments, large random lists against a naive
 * double-precision reference, the seeded draw against an independent
 * xoshiro256** reference (Python, from the published algorithm) and against
 * the softmax it should follow, every stage against llama.cpp's own samplers
 * on the same logits (tests/data/sampling_llama_cpp.txt), and rejection of
 * invalid parameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "sampling_math.h"
#include "testutil.h"

/* candidates from logits, in vocabulary order */
static struct kiln_candidates cands(struct kiln_token_prob *buf, const float *logits, int64_t n) {
    for (int64_t i = 0; i < n; i++) buf[i] = (struct kiln_token_prob){(int32_t)i, logits[i], 0.0f};
    return (struct kiln_candidates){buf, n, -1, false};
}

/* apply one stage (freed after) to logits; the kept ids in list order go to ids */
static int64_t run_stage(struct kiln_sampler *s, const float *logits, int64_t n, int32_t *ids,
                         struct kiln_token_prob *keep) {
    struct kiln_token_prob buf[16];
    struct kiln_candidates c = cands(buf, logits, n);
    CHECKF(s != NULL, "%s", kiln_sampler_last_error());
    if (!s) return -1;
    CHECK(kiln_sampler_apply(s, &c));
    for (int64_t i = 0; i < c.size; i++) {
        ids[i] = c.data[i].id;
        if (keep) keep[i] = c.data[i];
    }
    kiln_sampler_free(s);
    return c.size;
}

/* kept ids as a set equal to want[0 .. n)? */
static bool same_set(const int32_t *got, int64_t ngot, const int32_t *want, int64_t n) {
    if (ngot != n) return false;
    for (int64_t i = 0; i < n; i++) {
        bool found = false;
        for (int64_t j = 0; j < n; j++) found = found || got[j] == want[i];
        if (!found) return false;
    }
    return true;
}

static const float L4[4] = {1, 2, 3, 4};
/* softmax(L4) = e^(i-4) / sum = [0.0320586, 0.0871443, 0.2368828, 0.6439142] */

static void test_filters(void) {
    int32_t ids[16];
    struct kiln_token_prob kept[16];
    int64_t n;

    /* top-k 2 keeps the two highest logits {4, 3}: ids {3, 2}, best first */
    n = run_stage(kiln_sampler_init_top_k(2), L4, 4, ids, NULL);
    CHECK(n == 2 && ids[0] == 3 && ids[1] == 2);
    n = run_stage(kiln_sampler_init_top_k(0), L4, 4, ids, NULL); /* off */
    CHECK(n == 4);
    n = run_stage(kiln_sampler_init_top_k(10), L4, 4, ids, NULL); /* k > n: all, sorted */
    CHECK(n == 4 && ids[0] == 3 && ids[3] == 0);

    /* top-p 0.5: 0.644 >= 0.5 already: {3} */
    n = run_stage(kiln_sampler_init_top_p(0.5f, 0), L4, 4, ids, kept);
    CHECK(n == 1 && ids[0] == 3);
    /* top-p 0.7: 0.644 < 0.7, 0.644 + 0.237 = 0.881 >= 0.7: {3, 2} */
    n = run_stage(kiln_sampler_init_top_p(0.7f, 0), L4, 4, ids, kept);
    CHECK(n == 2 && ids[0] == 3 && ids[1] == 2);
    /* probabilities are the softmax over all four (computed before cutting) */
    CHECKF(fabsf(kept[0].p - 0.6439142f) < 1e-6f && fabsf(kept[1].p - 0.2368828f) < 1e-6f, "p %g %g",
           (double)kept[0].p, (double)kept[1].p);
    /* top-p 0.9: 0.881 < 0.9, + 0.087 = 0.968: {3, 2, 1} */
    n = run_stage(kiln_sampler_init_top_p(0.9f, 0), L4, 4, ids, NULL);
    CHECK(n == 3 && ids[2] == 1);
    /* min_keep 2 overrides p = 0.5: {3, 2} */
    n = run_stage(kiln_sampler_init_top_p(0.5f, 2), L4, 4, ids, NULL);
    CHECK(n == 2);
    n = run_stage(kiln_sampler_init_top_p(1.0f, 0), L4, 4, ids, NULL); /* off */
    CHECK(n == 4);

    /* min-p 0.3: threshold 0.3 * 0.644 = 0.193: 0.644 and 0.237 pass, 0.087 not: {3, 2} */
    static const int32_t w32[] = {3, 2}, w321[] = {3, 2, 1};
    n = run_stage(kiln_sampler_init_min_p(0.3f, 0), L4, 4, ids, NULL);
    CHECK(same_set(ids, n, w32, 2));
    /* unsorted input keeps vocabulary order */
    CHECK(n == 2 && ids[0] == 2 && ids[1] == 3);
    /* min-p 0.1: threshold 0.0644: 0.087 passes, 0.032 not: {3, 2, 1} */
    n = run_stage(kiln_sampler_init_min_p(0.1f, 0), L4, 4, ids, NULL);
    CHECK(same_set(ids, n, w321, 3));
    /* min-p 0.3 with min_keep 3: the best three, {3, 2, 1} */
    n = run_stage(kiln_sampler_init_min_p(0.3f, 3), L4, 4, ids, NULL);
    CHECK(same_set(ids, n, w321, 3));
    /* min-p 1: only tokens as likely as the best: {3}; with a tie {2, 3} */
    n = run_stage(kiln_sampler_init_min_p(1.0f, 0), L4, 4, ids, NULL);
    CHECK(n == 1 && ids[0] == 3);
    static const float tie[4] = {1, 2, 4, 4};
    n = run_stage(kiln_sampler_init_min_p(1.0f, 0), tie, 4, ids, NULL);
    CHECK(n == 2 && ids[0] == 2 && ids[1] == 3);

    /* typical-p. -ln p = [3.4402, 2.4402, 1.4402, 0.4402];
     * entropy H = sum p (-ln p) = 0.1103 + 0.2127 + 0.3412 + 0.2835 = 0.9476;
     * |-ln p - H| = [2.4926, 1.4926, 0.4926, 0.5074]: order 2, 3, 1, 0.
     * p = 0.5: 0.237 (id 2) not > 0.5, + 0.644 (id 3) = 0.881 > 0.5: {2, 3} in that order */
    n = run_stage(kiln_sampler_init_typical(0.5f, 0), L4, 4, ids, NULL);
    CHECK(n == 2 && ids[0] == 2 && ids[1] == 3);
    /* p = 0.2: 0.237 > 0.2 at once: {2}; the most likely token is not the most typical */
    n = run_stage(kiln_sampler_init_typical(0.2f, 0), L4, 4, ids, NULL);
    CHECK(n == 1 && ids[0] == 2);
    /* min_keep 3: {2, 3, 1} */
    n = run_stage(kiln_sampler_init_typical(0.2f, 3), L4, 4, ids, NULL);
    CHECK(n == 3 && ids[0] == 2 && ids[1] == 3 && ids[2] == 1);

    /* temperature 0.5 doubles logits (and gaps): [2, 4, 6, 8]; 2 halves them */
    n = run_stage(kiln_sampler_init_temp(0.5f), L4, 4, ids, kept);
    CHECK(n == 4 && kept[0].logit == 2.0f && kept[1].logit == 4.0f && kept[2].logit == 6.0f &&
          kept[3].logit == 8.0f);
    n = run_stage(kiln_sampler_init_temp(2.0f), L4, 4, ids, kept);
    CHECK(kept[0].logit == 0.5f && kept[3].logit == 2.0f);
    /* temperature 0 keeps the best at its logit and sets the others to -inf */
    n = run_stage(kiln_sampler_init_temp(0.0f), L4, 4, ids, kept);
    CHECK(kept[3].logit == 4.0f && isinf(kept[0].logit) && kept[0].logit < 0 && isinf(kept[2].logit));
}

static void test_penalties(void) {
    struct kiln_token_prob buf[8];
    /* window 3, frequency 0.5, presence 0.25. After accepting 1, 1, 2:
     * token 1 seen twice: 2 - (2 * 0.5 + 0.25) = 0.75; token 2 once: 3 - 0.75 = 2.25 */
    struct kiln_sampler *s = kiln_sampler_init_penalties(3, 1.0f, 0.5f, 0.25f);
    CHECK(s != NULL);
    kiln_sampler_accept(s, 1);
    kiln_sampler_accept(s, 1);
    kiln_sampler_accept(s, 2);
    struct kiln_candidates c = cands(buf, L4, 4);
    CHECK(kiln_sampler_apply(s, &c));
    CHECKF(c.data[0].logit == 1.0f && c.data[1].logit == 0.75f && c.data[2].logit == 2.25f &&
               c.data[3].logit == 4.0f,
           "%g %g %g %g", (double)c.data[0].logit, (double)c.data[1].logit, (double)c.data[2].logit,
           (double)c.data[3].logit);
    /* accepting 3 pushes the first 1 out of the window: 1, 2, 3 once each: each drops by 0.75 */
    kiln_sampler_accept(s, 3);
    c = cands(buf, L4, 4);
    CHECK(kiln_sampler_apply(s, &c));
    CHECK(c.data[0].logit == 1.0f && c.data[1].logit == 1.25f && c.data[2].logit == 2.25f &&
          c.data[3].logit == 3.25f);
    /* the same on a shuffled list: penalties follow the ids, not the positions */
    static const int32_t order[4] = {3, 1, 0, 2};
    for (int i = 0; i < 4; i++) buf[i] = (struct kiln_token_prob){order[i], L4[order[i]], 0.0f};
    c = (struct kiln_candidates){buf, 4, -1, false};
    CHECK(kiln_sampler_apply(s, &c));
    CHECK(buf[0].logit == 3.25f && buf[1].logit == 1.25f && buf[2].logit == 1.0f && buf[3].logit == 2.25f);
    /* reset forgets the history */
    kiln_sampler_reset(s);
    c = cands(buf, L4, 4);
    CHECK(kiln_sampler_apply(s, &c));
    CHECK(c.data[1].logit == 2.0f && c.data[3].logit == 4.0f);
    kiln_sampler_free(s);

    /* repetition penalty 2 divides positive logits and multiplies negative ones:
     * [-1, 2, 3, 4] with 0 and 1 seen -> [-2, 1, 3, 4] */
    static const float lneg[4] = {-1, 2, 3, 4};
    s = kiln_sampler_init_penalties(64, 2.0f, 0.0f, 0.0f);
    kiln_sampler_accept(s, 0);
    kiln_sampler_accept(s, 1);
    kiln_sampler_accept(s, 1);  /* count does not matter for the repetition penalty */
    kiln_sampler_accept(s, 99); /* not in this vocabulary: ignored */
    c = cands(buf, lneg, 4);
    CHECK(kiln_sampler_apply(s, &c));
    CHECK(c.data[0].logit == -2.0f && c.data[1].logit == 1.0f && c.data[2].logit == 3.0f &&
          c.data[3].logit == 4.0f);
    kiln_sampler_free(s);

    /* in a chain, greedy after penalties: token 3 seen, repeat 1.5 -> 4/1.5 = 2.67 < 3: picks 2 */
    struct kiln_sampler *ch = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(ch, kiln_sampler_init_penalties(8, 1.5f, 0.0f, 0.0f)));
    CHECK(kiln_sampler_chain_add(ch, kiln_sampler_init_greedy()));
    CHECK(kiln_sampler_sample(ch, L4, 4) == 3);
    kiln_sampler_accept(ch, 3);
    CHECK(kiln_sampler_sample(ch, L4, 4) == 2);
    kiln_sampler_reset(ch);
    CHECK(kiln_sampler_sample(ch, L4, 4) == 3);
    kiln_sampler_free(ch);
}

static void test_greedy_bias(void) {
    struct kiln_sampler *g = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_greedy()));
    CHECK(kiln_sampler_sample(g, L4, 4) == 3);
    static const float ties[5] = {0, 7, 2, 7, 7};
    CHECK(kiln_sampler_sample(g, ties, 5) == 1); /* ties: lowest id */
    static const float withnan[3] = {NAN, 1, NAN};
    CHECK(kiln_sampler_sample(g, withnan, 3) == 1); /* NaN counts as -inf */
    CHECK(kiln_sampler_sample(g, L4, 0) == KILN_TOKEN_NULL);
    CHECK(kiln_sampler_sample(g, NULL, 4) == KILN_TOKEN_NULL);
    kiln_sampler_free(g);

    /* logit bias +10 on token 0 (1 + 10 = 11 > 4) then greedy: 0; -inf on 3 bans it: 2 */
    struct kiln_logit_bias b1[] = {{0, 10.0f}}, b2[] = {{3, -INFINITY}, {1000, 5.0f}};
    g = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_logit_bias(1, b1)));
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_greedy()));
    CHECK(kiln_sampler_sample(g, L4, 4) == 0);
    kiln_sampler_free(g);
    g = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_logit_bias(2, b2))); /* 1000 >= n_vocab: ignored */
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_dist(5)));
    for (int i = 0; i < 200; i++) CHECK(kiln_sampler_sample(g, L4, 4) != 3);
    kiln_sampler_free(g);

    /* a tiny temperature is the near-greedy limit: logits / 1e-45 overflowed to +-inf and
     * the softmax became NaN, a uniform draw; now the best token, every draw */
    static const float wide[5] = {-3.5f, 2.0f, 1.75f, -40.0f, 0.5f};
    g = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_temp(1e-45f)));
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_dist(11)));
    int hits = 0;
    for (int i = 0; i < 200; i++) hits += kiln_sampler_sample(g, wide, 5) == 1;
    CHECKF(hits == 200, "temp 1e-45: the best token %d times of 200", hits);
    kiln_sampler_free(g);

    /* a chain that never selects is an error with a message */
    g = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(g, kiln_sampler_init_top_k(2)));
    CHECK(kiln_sampler_sample(g, L4, 4) == KILN_TOKEN_NULL);
    CHECK(strstr(kiln_sampler_last_error(), "greedy or dist") != NULL);
    kiln_sampler_free(g);
}

/* The draw's PRNG against an independent reference. With 65536 equal logits
 * every p is exactly 2^-16 and the cumulative sums are exact, so the token is
 * floor(u * 65536) = the top 16 bits of each xoshiro256** output. Expected
 * values from a Python xoshiro256** seeded by splitmix64 (checked against
 * splitmix64's published vector: seed 1234567 -> 6457827717110365317,
 * 3203168211198807973): seed 42 gives outputs >> 48 =
 * 5496, 24836, 44567, 60600, 64998, 50445, 47137, 55706. */
static void test_seed(void) {
    static const int32_t want[8] = {5496, 24836, 44567, 60600, 64998, 50445, 47137, 55706};
    const int64_t n = 65536;
    float *z = calloc((size_t)n, sizeof *z);
    struct kiln_sampler *d = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(d, kiln_sampler_init_dist(42)));
    CHECK(kiln_sampler_seed(d) == 42);
    for (int i = 0; i < 8; i++) {
        int32_t t = kiln_sampler_sample(d, z, n);
        CHECKF(t == want[i], "draw %d: got %d want %d", i, (int)t, (int)want[i]);
    }
    kiln_sampler_reset(d); /* back to the start of the sequence */
    CHECK(kiln_sampler_sample(d, z, n) == want[0]);
    kiln_sampler_free(d);
    free(z);

    /* same seed, same sequence through a full chain; another seed differs */
    struct kiln_sampling_params p = kiln_sampling_default_params();
    p.seed = 1234;
    p.top_k = 0;
    p.min_p = 0.0f;
    p.temp = 1.5f;
    float logits[64];
    uint64_t rs = 99;
    for (int i = 0; i < 64; i++) logits[i] = 2.0f * tu_rand_f(&rs);
    struct kiln_sampler *a = kiln_sampler_from_params(&p), *b = kiln_sampler_from_params(&p);
    p.seed = 1235;
    struct kiln_sampler *c = kiln_sampler_from_params(&p);
    int same = 1, differ = 0;
    for (int i = 0; i < 100; i++) {
        int32_t ta = kiln_sampler_sample(a, logits, 64), tb = kiln_sampler_sample(b, logits, 64);
        int32_t tc = kiln_sampler_sample(c, logits, 64);
        same &= ta == tb;
        differ += ta != tc;
    }
    CHECK(same);
    CHECK(differ > 50);
    kiln_sampler_free(a);
    kiln_sampler_free(b);
    kiln_sampler_free(c);

    /* KILN_SEED_RANDOM picks a concrete seed, reported by kiln_sampler_seed */
    d = kiln_sampler_init_dist(KILN_SEED_RANDOM);
    CHECK(kiln_sampler_seed(d) != KILN_SEED_RANDOM);
    kiln_sampler_free(d);
}

/* Many draws follow the softmax (computed here in double with libm) within
 * 5 standard deviations per token. */
static void check_distribution(struct kiln_sampler *s, const float *logits, int n, const double *want,
                               int draws, const char *label) {
    int counts[16] = {0}, bad = 0;
    for (int i = 0; i < draws; i++) {
        int32_t t = kiln_sampler_sample(s, logits, n);
        if (t >= 0 && t < n)
            counts[t]++;
        else
            bad++;
    }
    CHECKF(bad == 0, "%s: %d draws out of range", label, bad);
    for (int i = 0; i < n; i++) {
        double f = (double)counts[i] / draws, sd = sqrt(want[i] * (1 - want[i]) / draws);
        CHECKF(fabs(f - want[i]) <= 5 * sd + 1e-12, "%s: token %d frequency %.5f want %.5f (sd %.5f)", label,
               i, f, want[i], sd);
    }
}

static void test_distribution(void) {
    const int draws = 200000;
    /* plain dist over [1, 2, 3, 4] */
    double want[16], sum = 0;
    for (int i = 0; i < 4; i++) sum += exp((double)L4[i]);
    for (int i = 0; i < 4; i++) want[i] = exp((double)L4[i]) / sum;
    struct kiln_sampler *s = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_dist(7)));
    check_distribution(s, L4, 4, want, draws, "dist");
    kiln_sampler_free(s);

    /* default chain with top-k 3 and temp 0.5 on 6 logits: top-k keeps ids
     * 5, 2, 4 (logits 1.5, 1.2, 0.9); top-p 0.95 over them: softmax
     * [0.437, 0.324, 0.240], cumulative 0.760 < 0.95 after two: all three stay;
     * min-p 0.05: e^(0.9 - 1.5) = 0.55 >= 0.05: all stay; then the draw
     * follows softmax(logit / 0.5) over the three */
    static const float l6[6] = {0.1f, -0.5f, 1.2f, 0.0f, 0.9f, 1.5f};
    struct kiln_sampling_params p = kiln_sampling_default_params();
    p.seed = 11;
    p.top_k = 3;
    p.temp = 0.5f;
    s = kiln_sampler_from_params(&p);
    CHECK(s != NULL);
    memset(want, 0, sizeof want);
    sum = exp(1.5 / 0.5) + exp(1.2 / 0.5) + exp(0.9 / 0.5);
    want[5] = exp(1.5 / 0.5) / sum;
    want[2] = exp(1.2 / 0.5) / sum;
    want[4] = exp(0.9 / 0.5) / sum;
    check_distribution(s, l6, 6, want, draws, "top-k 3, temp 0.5");
    kiln_sampler_free(s);
}

/* Large random lists against a naive reference: full sort by (logit desc, id asc). */
static const float *ref_logits;
static int cmp_ref(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (ref_logits[a] != ref_logits[b]) return ref_logits[a] > ref_logits[b] ? -1 : 1;
    return a < b ? -1 : 1;
}

static void test_large(void) {
    const int64_t n = 50000;
    float *logits = malloc((size_t)n * sizeof *logits);
    int32_t *order = malloc((size_t)n * sizeof *order);
    struct kiln_token_prob *buf = malloc((size_t)n * sizeof *buf);
    uint64_t rs = 12345;
    /* a peaked distribution like a model's: a few large logits, a long tail;
     * values on a grid of 1/64 so that ties occur */
    for (int64_t i = 0; i < n; i++) {
        float u = tu_rand_f(&rs);
        logits[i] = floorf(64.0f * (i % 97 == 0 ? 8.0f + 4.0f * u : 3.0f * u)) / 64.0f;
        order[i] = (int32_t)i;
    }
    ref_logits = logits;
    qsort(order, (size_t)n, sizeof *order, cmp_ref);

    /* top-k 100: exactly the reference's first 100, in order */
    struct kiln_candidates c = cands(buf, logits, n);
    struct kiln_sampler *s = kiln_sampler_init_top_k(100);
    CHECK(kiln_sampler_apply(s, &c));
    kiln_sampler_free(s);
    bool ok = c.size == 100;
    for (int64_t i = 0; ok && i < 100; i++) ok = c.data[i].id == order[i];
    CHECK(ok);

    /* top-p on the whole list (the 256-first path, then the tail): p halfway
     * between the reference's cumulative probabilities after the best idx and
     * idx + 1 tokens keeps idx + 1 of them (the half-step margin absorbs the
     * float rounding of the probabilities) */
    double m = logits[order[0]], sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] - m);
    const int64_t idxs[] = {3, 100, 400};
    for (size_t k = 0; k < sizeof idxs / sizeof *idxs; k++) {
        double cum = 0, prev = 0;
        for (int64_t i = 0; i <= idxs[k]; i++) {
            prev = cum;
            cum += exp((double)logits[order[i]] - m) / sum;
        }
        float pk = (float)((prev + cum) / 2);
        int64_t want = idxs[k] + 1;
        CHECKF(cum - prev > 1e-5, "test data: step at %lld too small (%g)", (long long)idxs[k], cum - prev);
        c = cands(buf, logits, n);
        s = kiln_sampler_init_top_p(pk, 0);
        CHECK(kiln_sampler_apply(s, &c));
        kiln_sampler_free(s);
        ok = c.size == want;
        for (int64_t i = 0; ok && i < want; i++) ok = c.data[i].id == order[i];
        CHECKF(ok, "top-p %.9g: kept %lld want %lld", (double)pk, (long long)c.size, (long long)want);
    }

    /* typical-p on the whole list against the same computation in double with
     * libm: surprise -log p vs entropy, stable order by |difference|, p set
     * halfway between two cumulative sums so float rounding cannot move the cut */
    {
        double h = 0;
        double *score = malloc((size_t)n * sizeof *score);
        int64_t *by = malloc((size_t)n * sizeof *by);
        for (int64_t i = 0; i < n; i++) {
            double pi = exp((double)logits[order[i]] - m) / sum;
            h -= pi * log(pi);
        }
        for (int64_t i = 0; i < n; i++) {
            double pi = exp((double)logits[order[i]] - m) / sum;
            score[i] = fabs(-log(pi) - h);
            by[i] = i;
        }
        for (int64_t i = 1; i < n;
             i++) { /* stable insertion sort: scores fall then rise along order, so it is quick */
            int64_t t = by[i], j = i;
            for (; j > 0 && score[by[j - 1]] > score[t]; j--) by[j] = by[j - 1];
            by[j] = t;
        }
        double cum = 0, prev = 0;
        const int64_t cut = 700;
        for (int64_t i = 0; i <= cut; i++) {
            prev = cum;
            cum += exp((double)logits[order[by[i]]] - m) / sum;
        }
        CHECKF(cum - prev > 1e-6, "test data: typical step too small (%g)", cum - prev);
        c = cands(buf, logits, n);
        s = kiln_sampler_init_typical((float)((prev + cum) / 2), 0);
        CHECK(kiln_sampler_apply(s, &c));
        kiln_sampler_free(s);
        ok = c.size == cut + 1;
        for (int64_t i = 0; ok && i <= cut; i++) ok = c.data[i].id == order[by[i]];
        CHECKF(ok, "typical: kept %lld want %lld", (long long)c.size, (long long)cut + 1);
        free(score);
        free(by);
    }

    /* min-p 0.02 unsorted: the tokens with logit >= max + ln 0.02, in vocabulary order */
    c = cands(buf, logits, n);
    s = kiln_sampler_init_min_p(0.02f, 0);
    CHECK(kiln_sampler_apply(s, &c));
    kiln_sampler_free(s);
    int64_t j = 0;
    ok = true;
    for (int64_t i = 0; i < n; i++) {
        if ((double)logits[i] >= m + log(0.02)) {
            ok = ok && j < c.size && c.data[j].id == (int32_t)i;
            j++;
        }
    }
    CHECK(ok && j == c.size);

    /* the default chain picks among the reference's top 40 only */
    struct kiln_sampling_params p = kiln_sampling_default_params();
    p.seed = 3;
    s = kiln_sampler_from_params(&p);
    for (int r = 0; r < 50; r++) {
        int32_t t = kiln_sampler_sample(s, logits, n);
        bool in = false;
        for (int i = 0; i < 40; i++) in = in || order[i] == t;
        CHECK(in);
        kiln_sampler_accept(s, t);
    }
    kiln_sampler_free(s);
    free(logits);
    free(order);
    free(buf);
}

/* Stages against llama.cpp's own samplers on the same logits
 * (tests/data/sampling_llama_cpp.txt, made by sampling_llama_cpp_gen.c beside it):
 * the same candidates in the same order with the same logits. */
static struct kiln_sampler *peer_stage(const char *stage, double a, double b, double c, double d) {
    if (!strcmp(stage, "top_k")) return kiln_sampler_init_top_k((int32_t)a);
    if (!strcmp(stage, "top_p")) return kiln_sampler_init_top_p((float)a, (size_t)b);
    if (!strcmp(stage, "min_p")) return kiln_sampler_init_min_p((float)a, (size_t)b);
    if (!strcmp(stage, "typical")) return kiln_sampler_init_typical((float)a, (size_t)b);
    if (!strcmp(stage, "temp")) return kiln_sampler_init_temp((float)a);
    if (!strcmp(stage, "penalties"))
        return kiln_sampler_init_penalties((int32_t)a, (float)b, (float)c, (float)d);
    if (!strcmp(stage, "chain")) {
        struct kiln_sampler *ch = kiln_sampler_chain_new();
        kiln_sampler_chain_add(ch, kiln_sampler_init_penalties(64, (float)a, (float)b, (float)c));
        kiln_sampler_chain_add(ch, kiln_sampler_init_top_k((int32_t)d));
        kiln_sampler_chain_add(ch, kiln_sampler_init_typical(0.9f, 0));
        kiln_sampler_chain_add(ch, kiln_sampler_init_top_p(0.9f, 0));
        kiln_sampler_chain_add(ch, kiln_sampler_init_min_p(0.05f, 0));
        kiln_sampler_chain_add(ch, kiln_sampler_init_temp(0.7f));
        return ch;
    }
    return NULL;
}

static void test_llama_cpp_stages(void) {
    const char *src = getenv("KILN_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/sampling_llama_cpp.txt", src ? src : "..");
    char *text = tu_read_file(path, NULL);
    CHECKF(text != NULL, "cannot read %s (set KILN_SRC)", path);
    if (!text) return;
    float *logits = NULL;
    struct kiln_token_prob *buf = NULL;
    int64_t n = 0;
    int cases = 0, bad = 0;
    char *p = text;
    for (;;) {
        char stage[16];
        int used = 0;
        if (sscanf(p, "%15s%n", stage, &used) != 1) break;
        p += used;
        if (!strcmp(stage, "logits")) {
            n = strtol(p, &p, 10);
            CHECK(n > 0 && n <= 100000);
            if (n <= 0 || n > 100000) break;
            free(logits);
            free(buf);
            logits = malloc((size_t)n * sizeof *logits);
            buf = malloc((size_t)n * sizeof *buf);
            for (int64_t i = 0; i < n; i++) logits[i] = (float)strtod(p, &p);
            continue;
        }
        double a = strtod(p, &p), b = strtod(p, &p), c = strtod(p, &p), d = strtod(p, &p);
        struct kiln_sampler *s = peer_stage(stage, a, b, c, d);
        CHECKF(s != NULL && logits != NULL, "case %d: stage %s: %s", cases, stage, kiln_sampler_last_error());
        if (!s || !logits) break;
        long nhist = strtol(p, &p, 10);
        for (long i = 0; i < nhist; i++) kiln_sampler_accept(s, (int32_t)strtol(p, &p, 10));
        long m = strtol(p, &p, 10);
        struct kiln_candidates cand = cands(buf, logits, n);
        CHECK(kiln_sampler_apply(s, &cand));
        bool ok = cand.size == m;
        int64_t first = -1;
        for (long i = 0; i < m; i++) {
            long id = strtol(p, &p, 10);
            if (ok && cand.data[i].id != id && first < 0) first = i;
        }
        for (long i = 0; i < m; i++) {
            float want = (float)strtod(p, &p);
            if (ok && first < 0 && i < cand.size) {
                float got = cand.data[i].logit;
                if (!(got == want || fabsf(got - want) <= 1e-6f * fabsf(want))) first = i;
            }
        }
        if (!ok || first >= 0) {
            bad++;
            fprintf(
                stderr,
                "llama.cpp case %d (%s %g %g %g %g, n %lld): kept %lld want %ld, first difference at %lld\n",
                cases, stage, a, b, c, d, (long long)n, (long long)cand.size, m, (long long)first);
        }
        kiln_sampler_free(s);
        cases++;
    }
    CHECKF(bad == 0, "%d of %d llama.cpp cases differ", bad, cases);
    CHECKF(cases == 132, "%d cases read", cases);
    free(logits);
    free(buf);
    free(text);
}

static void expect_reject(struct kiln_sampler *s, const char *what, const char *label) {
    CHECKF(s == NULL, "%s accepted", label);
    CHECKF(strstr(kiln_sampler_last_error(), what) != NULL, "%s: message \"%s\" does not name %s", label,
           kiln_sampler_last_error(), what);
    kiln_sampler_free(s);
}

static void test_invalid(void) {
    expect_reject(kiln_sampler_init_top_k(-1), "top-k", "top_k -1");
    expect_reject(kiln_sampler_init_top_p(0.0f, 0), "top-p", "top_p 0");
    expect_reject(kiln_sampler_init_top_p(1.5f, 0), "top-p", "top_p 1.5");
    expect_reject(kiln_sampler_init_top_p(NAN, 0), "top-p", "top_p NaN");
    expect_reject(kiln_sampler_init_min_p(-0.1f, 0), "min-p", "min_p -0.1");
    expect_reject(kiln_sampler_init_min_p(1.1f, 0), "min-p", "min_p 1.1");
    expect_reject(kiln_sampler_init_typical(0.0f, 0), "typical", "typical 0");
    expect_reject(kiln_sampler_init_temp(-1.0f), "temperature", "temp -1");
    expect_reject(kiln_sampler_init_temp(NAN), "temperature", "temp NaN");
    expect_reject(kiln_sampler_init_temp(INFINITY), "temperature", "temp inf");
    expect_reject(kiln_sampler_init_penalties(-1, 1.0f, 0, 0), "last_n", "last_n -1");
    expect_reject(kiln_sampler_init_penalties(64, 0.0f, 0, 0), "repeat", "repeat 0");
    expect_reject(kiln_sampler_init_penalties(64, 1.0f, NAN, 0), "frequency", "freq NaN");
    struct kiln_logit_bias bad1[] = {{-3, 1.0f}}, bad2[] = {{3, NAN}}, bad3[] = {{3, INFINITY}};
    expect_reject(kiln_sampler_init_logit_bias(1, bad1), "negative", "bias token -3");
    expect_reject(kiln_sampler_init_logit_bias(1, bad2), "bias", "bias NaN");
    expect_reject(kiln_sampler_init_logit_bias(1, bad3), "bias", "bias +inf");
    expect_reject(kiln_sampler_init_logit_bias(2, NULL), "no array", "bias NULL");

    /* from_params names the first bad field, even for stages greedy leaves out */
    struct kiln_sampling_params p = kiln_sampling_default_params();
    p.top_k = -5;
    expect_reject(kiln_sampler_from_params(&p), "top-k", "params top_k");
    p = kiln_sampling_default_params();
    p.top_p = 0.0f;
    p.temp = 0.0f;
    expect_reject(kiln_sampler_from_params(&p), "top-p", "params top_p with greedy");
    p = kiln_sampling_default_params();
    p.temp = -0.5f;
    expect_reject(kiln_sampler_from_params(&p), "temperature", "params temp");
    p = kiln_sampling_default_params();
    p.penalty_last_n = -1;
    expect_reject(kiln_sampler_from_params(&p), "last_n", "params last_n");
    p = kiln_sampling_default_params();
    p.penalty_repeat = -1.0f;
    expect_reject(kiln_sampler_from_params(&p), "repeat", "params repeat");
    expect_reject(kiln_sampler_from_params(NULL), "parameters", "params NULL");

    /* a failed init passed to chain_add: false, the init's message kept */
    struct kiln_sampler *c = kiln_sampler_chain_new();
    CHECK(!kiln_sampler_chain_add(c, kiln_sampler_init_top_p(2.0f, 0)));
    CHECK(strstr(kiln_sampler_last_error(), "top-p") != NULL);
    CHECK(kiln_sampler_chain_n(c) == 0);
    CHECK(!kiln_sampler_chain_add(NULL, kiln_sampler_init_greedy())); /* freed, no leak under ASan */
    kiln_sampler_free(c);
}

static void test_from_params(void) {
    char buf[256];
    struct kiln_sampling_params p = kiln_sampling_default_params();
    CHECK(p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f && p.temp == 0.8f &&
          p.penalty_repeat == 1.0f && p.penalty_last_n == 64 && p.typical_p == 1.0f &&
          p.seed == KILN_SEED_RANDOM);
    p.seed = 42;
    struct kiln_sampler *s = kiln_sampler_from_params(&p);
    CHECK(kiln_sampler_describe(s, buf, sizeof buf) > 0);
    CHECKF(strcmp(buf, "top-k(40) -> top-p(0.950) -> min-p(0.050) -> temp(0.800) -> dist(seed=42)") == 0,
           "%s", buf);
    CHECK(kiln_sampler_seed(s) == 42);
    int64_t need = kiln_sampler_describe(s, buf, 10);
    CHECK(need ==
          -(int64_t)strlen("top-k(40) -> top-p(0.950) -> min-p(0.050) -> temp(0.800) -> dist(seed=42)") - 1);
    kiln_sampler_free(s);

    struct kiln_logit_bias b[] = {{1, 1.0f}};
    p.temp = 0.0f;
    p.penalty_repeat = 1.1f;
    p.logit_bias = b;
    p.n_logit_bias = 1;
    s = kiln_sampler_from_params(&p);
    kiln_sampler_describe(s, buf, sizeof buf);
    CHECKF(strcmp(buf,
                  "logit-bias(1) -> penalties(last_n=64 repeat=1.100 freq=0.000 present=0.000) -> greedy") ==
               0,
           "%s", buf);
    CHECK(kiln_sampler_chain_n(s) == 3);
    kiln_sampler_free(s);

    p = kiln_sampling_default_params();
    p.seed = 1;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.typical_p = 0.5f;
    s = kiln_sampler_from_params(&p);
    kiln_sampler_describe(s, buf, sizeof buf);
    CHECKF(strcmp(buf, "typical(0.500) -> temp(0.800) -> dist(seed=1)") == 0, "%s", buf);
    kiln_sampler_free(s);
}

/* kiln's own exp/log against libm's (an independent implementation) */
static void test_math(void) {
    double worst_e = 0, worst_l = 0;
    uint64_t rs = 5;
    for (int i = 0; i < 200000; i++) {
        double x = 1400.0 * ((double)(tu_rand_u64(&rs) >> 11) * 0x1.0p-53) - 745.0; /* [-745, 655) */
        double e = samp_exp(x), r = exp(x);
        if (r > 1e-300) worst_e = fmax(worst_e, fabs(e - r) / r);
        double y = exp(x / 2), l = samp_log(y), rl = log(y);
        worst_l = fmax(worst_l, fabs(l - rl) / fmax(fabs(rl), 1e-300));
    }
    CHECKF(worst_e < 1e-14, "samp_exp: worst relative error %g", worst_e);
    CHECKF(worst_l < 1e-14, "samp_log: worst relative error %g", worst_l);
    CHECK(samp_exp(0.0) == 1.0 && samp_exp(-INFINITY) == 0.0 && samp_exp(1000.0) == HUGE_VAL);
    CHECK(samp_exp(709.5) < HUGE_VAL && fabs(samp_exp(709.5) / exp(709.5) - 1) < 1e-14);
    CHECK(samp_log(1.0) == 0.0 && samp_log(0.0) == -HUGE_VAL && isnan(samp_log(-1.0)));

    /* radix sort: stable, against a plain insertion sort */
    enum { N = 3000 };
    static struct samp_rec a[N], b[N], want[N];
    for (int i = 0; i < N; i++)
        a[i] = want[i] = (struct samp_rec){tu_rand_u64(&rs) % 500 * 0x0101010101ull, i};
    for (int i = 1; i < N; i++) {
        struct samp_rec t = want[i];
        int j = i;
        for (; j > 0 && want[j - 1].key > t.key; j--) want[j] = want[j - 1];
        want[j] = t;
    }
    const struct samp_rec *r = samp_radix_sort(a, b, N);
    bool ok = true;
    for (int i = 0; i < N; i++) ok = ok && r[i].key == want[i].key && r[i].idx == want[i].idx;
    CHECK(ok);
}

int main(void) {
    test_math();
    test_filters();
    test_penalties();
    test_greedy_bias();
    test_seed();
    test_distribution();
    test_large();
    test_llama_cpp_stages();
    test_invalid();
    test_from_params();
    return tu_finish("test_sampling");
}
