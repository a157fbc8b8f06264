/*
 * sampling_math.h - what the sampler stages compute with (private to
 * sampling*.c): exp/log and a PRNG that give the same bits on every IEEE-754
 * machine, and sorting of candidate lists in one total order.
 */
#ifndef KILN_SAMPLING_MATH_H
#define KILN_SAMPLING_MATH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln.h"

/* exp and natural log from +,-,*,/ and frexp/ldexp only (libm's may differ in
 * the last bit between platforms); ~1e-15 relative error. */
double samp_exp(double x);
double samp_log(double x);

/* xoshiro256** (Blackman & Vigna 2018), state filled by splitmix64 from the seed. */
struct samp_rng {
    uint64_t s[4];
};
uint64_t samp_splitmix64(uint64_t *x);
void samp_rng_seed(struct samp_rng *r, uint64_t seed);
uint64_t samp_rng_next(struct samp_rng *r);
double samp_rng_uniform(struct samp_rng *r); /* [0, 1) from the top 53 bits of one output */

/* Scratch for n candidates (owned by the sampler, reused across calls). */
struct samp_rec {
    uint64_t key;
    int64_t idx;
};
struct samp_work {
    struct kiln_token_prob *tmp;
    struct samp_rec *ra, *rb;
};

/* The total order: higher logit first, then lower id; no two candidates tie. */
static inline bool samp_better(const struct kiln_token_prob *a, const struct kiln_token_prob *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Stable LSD radix sort of a[0 .. n) by key (b: scratch of n); returns a or b,
 * whichever holds the result. */
struct samp_rec *samp_radix_sort(struct samp_rec *a, struct samp_rec *b, int64_t n);
/* Whole list in the total order (sets c->sorted). */
void samp_sort(struct kiln_candidates *c, struct samp_work *w);
/* The k best to the front in the total order, the rest after them in no order. */
void samp_partial_sort(struct kiln_candidates *c, int64_t k, struct samp_work *w);
float samp_max_logit(const struct kiln_candidates *c);
/* p = softmax of the logits (sums in double, in list order). All -inf: uniform;
 * +inf logits share the whole mass. */
void samp_softmax(struct kiln_candidates *c);

#define PENALTY_LAST_N_MAX (1 << 24) /* the longest penalty window */

/* The message kiln_sampler_last_error gives (sampling.c), for the stages' files. */
void samp_set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
