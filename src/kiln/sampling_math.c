/*
 * sampling_math.c - deterministic exp/log, the xoshiro256** PRNG, and sorting
 * of candidate lists (radix sort for whole vocabularies, a heap for top k):
 * the pieces that make a seed reproduce the same tokens everywhere.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_math.h"

/* a*b+c must not become one fused multiply-add on machines that have it:
 * the rounding would differ from machines that do not, and so would the tokens */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ------------------------------------------------------------------ exp / log
 * Only IEEE-754 +,-,*,/ (correctly rounded by the standard), floor, frexp and
 * ldexp (exact) in a fixed order, so every machine gets the same bits. The
 * constants are decimal literals the compiler rounds correctly. */

static const double LN2_HI = 6.93147180369123816490e-01; /* k * LN2_HI is exact for |k| < 2^11 */
static const double LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

double samp_exp(double x) {
    if (x != x) return x;
    if (x < -745.2) return 0.0;
    if (x > 709.7) return HUGE_VAL;
    double k = floor(x * INV_LN2 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO; /* |r| <= 0.35 */
    /* Taylor series to r^13/13!: the rest is below 1e-17 on that interval */
    static const double inv_fact[14] = {
        1.0,
        1.0,
        1.0 / 2,
        1.0 / 6,
        1.0 / 24,
        1.0 / 120,
        1.0 / 720,
        1.0 / 5040,
        1.0 / 40320,
        1.0 / 362880,
        1.0 / 3628800,
        1.0 / 39916800,
        1.0 / 479001600,
        1.0 / 6227020800.0,
    };
    double t = inv_fact[13];
    for (int i = 12; i >= 0; i--) t = t * r + inv_fact[i];
    if (k < -1000 || k > 1000) return ldexp(t, (int)k);  /* near the subnormal or overflow range */
    uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52; /* 2^k exactly: a plain multiply, no libm call */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return t * scale;
}

double samp_log(double x) {
    if (!(x > 0.0)) return x == 0.0 ? -HUGE_VAL : NAN;
    if (x == HUGE_VAL) return x;
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    /* log m = 2 atanh s = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1), |s| <= 0.172: to s^25 */
    static const double inv_odd[12] = {1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11, 1.0 / 13,
                                       1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23, 1.0 / 25};
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double t = 0.0;
    for (int i = 11; i >= 0; i--) t = (t + inv_odd[i]) * s2;
    return 2.0 * s * (1.0 + t) + (double)e * LN2_HI + (double)e * LN2_LO;
}

/* ------------------------------------------------------------------ PRNG */

uint64_t samp_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void samp_rng_seed(struct samp_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = samp_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t samp_rng_next(struct samp_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double samp_rng_uniform(struct samp_rng *r) {
    return (double)(samp_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------------ sorting */

struct samp_rec *samp_radix_sort(struct samp_rec *a, struct samp_rec *b, int64_t n) {
    static const int passes = 8;
    int64_t cnt[8][256];
    memset(cnt, 0, sizeof cnt);
    for (int64_t i = 0; i < n; i++)
        for (int p = 0; p < passes; p++) cnt[p][(a[i].key >> (8 * p)) & 255]++;
    for (int p = 0; p < passes; p++) {
        int64_t *c = cnt[p];
        if (n == 0 || c[(a[0].key >> (8 * p)) & 255] == n) continue; /* one digit value: nothing moves */
        int64_t pos = 0;
        for (int d = 0; d < 256; d++) {
            int64_t k = c[d];
            c[d] = pos;
            pos += k;
        }
        for (int64_t i = 0; i < n; i++) b[c[(a[i].key >> (8 * p)) & 255]++] = a[i];
        struct samp_rec *t = a;
        a = b;
        b = t;
    }
    return a;
}

/* Maps a logit to a key that sorts ascending in the total order: the float
 * bits made monotone (negative: flipped, positive: sign set), inverted for
 * "higher first", id below it for "lower id first". -0 is taken as +0, as the
 * comparison operators do. */
static uint64_t order_key(const struct kiln_token_prob *t) {
    float f = t->logit == 0.0f ? 0.0f : t->logit;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)~u << 32) | (uint32_t)t->id;
}

static int cmp_desc(const void *pa, const void *pb) {
    const struct kiln_token_prob *a = pa, *b = pb;
    return samp_better(a, b) ? -1 : samp_better(b, a) ? 1 : 0;
}

void samp_sort(struct kiln_candidates *c, struct samp_work *w) {
    if (c->sorted) return;
    if (c->size < 256) { /* radix passes cost more than they save */
        qsort(c->data, (size_t)c->size, sizeof *c->data, cmp_desc);
    } else {
        for (int64_t i = 0; i < c->size; i++) w->ra[i] = (struct samp_rec){order_key(&c->data[i]), i};
        const struct samp_rec *r = samp_radix_sort(w->ra, w->rb, c->size);
        for (int64_t i = 0; i < c->size; i++) w->tmp[i] = c->data[r[i].idx];
        memcpy(c->data, w->tmp, (size_t)c->size * sizeof *c->data);
    }
    c->sorted = true;
}

/* Min-heap in the total order (root = worst) over d[0 .. n). */
static void sift_down(struct kiln_token_prob *d, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, m = i;
        if (l < n && samp_better(&d[m], &d[l])) m = l;
        if (l + 1 < n && samp_better(&d[m], &d[l + 1])) m = l + 1;
        if (m == i) return;
        struct kiln_token_prob t = d[i];
        d[i] = d[m];
        d[m] = t;
        i = m;
    }
}

void samp_partial_sort(struct kiln_candidates *c, int64_t k, struct samp_work *w) {
    struct kiln_token_prob *d = c->data;
    if (c->sorted || k <= 0) return;
    if (k >= c->size / 8) { /* the heap's log k per element loses to a whole radix sort */
        samp_sort(c, w);
        return;
    }
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(d, k, i);
    for (int64_t i = k; i < c->size; i++) {
        if (samp_better(&d[i], &d[0])) {
            struct kiln_token_prob t = d[0];
            d[0] = d[i];
            d[i] = t;
            sift_down(d, k, 0);
        }
    }
    for (int64_t m = k - 1; m > 0; m--) { /* the worst goes last: descending */
        struct kiln_token_prob t = d[0];
        d[0] = d[m];
        d[m] = t;
        sift_down(d, m, 0);
    }
}

float samp_max_logit(const struct kiln_candidates *c) {
    if (c->sorted) return c->size > 0 ? c->data[0].logit : -INFINITY;
    float m = -INFINITY;
    for (int64_t i = 0; i < c->size; i++)
        if (c->data[i].logit > m) m = c->data[i].logit;
    return m;
}

void samp_softmax(struct kiln_candidates *c) {
    float m = samp_max_logit(c);
    if (isinf(m)) { /* all -inf: nothing to prefer; some +inf: they take everything */
        int64_t n = 0;
        for (int64_t i = 0; i < c->size; i++) n += m < 0 || c->data[i].logit == m;
        for (int64_t i = 0; i < c->size; i++)
            c->data[i].p = (m < 0 || c->data[i].logit == m) ? (float)(1.0 / (double)n) : 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < c->size; i++) {
        double e = samp_exp((double)c->data[i].logit - (double)m);
        c->data[i].p = (float)e;
        sum += e;
    }
    for (int64_t i = 0; i < c->size; i++) c->data[i].p = (float)((double)c->data[i].p / sum);
}
