/*
 * sampling_params.c - the sampler chain from one set of parameters, with
 * llama.cpp's defaults and order, every parameter checked by its stage's own
 * rule so that the message names the first bad one.
 */
#include <stdlib.h>

#include "kiln.h"
#include "sampling_math.h"

struct kiln_sampling_params kiln_sampling_default_params(void) {
    struct kiln_sampling_params p = {
        .seed = KILN_SEED_RANDOM,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .typical_p = 1.0f,
        .temp = 0.8f,
        .min_keep = 0,
        .penalty_last_n = 64,
        .penalty_repeat = 1.0f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
        .logit_bias = NULL,
        .n_logit_bias = 0,
    };
    return p;
}

/* Every parameter through its stage's own check, in field order, so the
 * message names the first bad one even for stages the chain leaves out. */
static bool check_params(const struct kiln_sampling_params *p) {
    struct kiln_sampler *t[] = {NULL};
#define CHECK_STAGE(expr)                                                                                    \
    do {                                                                                                     \
        if (!(t[0] = (expr))) return false;                                                                  \
        kiln_sampler_free(t[0]);                                                                             \
    } while (0)
    CHECK_STAGE(kiln_sampler_init_top_k(p->top_k));
    CHECK_STAGE(kiln_sampler_init_top_p(p->top_p, p->min_keep));
    CHECK_STAGE(kiln_sampler_init_min_p(p->min_p, p->min_keep));
    CHECK_STAGE(kiln_sampler_init_typical(p->typical_p, p->min_keep));
    CHECK_STAGE(kiln_sampler_init_temp(p->temp));
    CHECK_STAGE(kiln_sampler_init_penalties(0, p->penalty_repeat, p->penalty_freq, p->penalty_present));
    CHECK_STAGE(kiln_sampler_init_logit_bias(p->n_logit_bias, p->logit_bias));
#undef CHECK_STAGE
    if (p->penalty_last_n < 0 || p->penalty_last_n > PENALTY_LAST_N_MAX) {
        samp_set_err("penalty window (last_n) must be in [0, %d], got %d", PENALTY_LAST_N_MAX,
                (int)p->penalty_last_n);
        return false;
    }
    return true;
}

struct kiln_sampler *kiln_sampler_from_params(const struct kiln_sampling_params *p) {
    if (!p) {
        samp_set_err("kiln_sampler_from_params: no parameters");
        return NULL;
    }
    if (!check_params(p)) return NULL;
    struct kiln_sampler *c = kiln_sampler_chain_new();
    if (!c) return NULL;
    bool penalties_on = p->penalty_last_n != 0 &&
                        (p->penalty_repeat != 1.0f || p->penalty_freq != 0.0f || p->penalty_present != 0.0f);
    bool ok = true;
    if (p->n_logit_bias)
        ok = kiln_sampler_chain_add(c, kiln_sampler_init_logit_bias(p->n_logit_bias, p->logit_bias));
    if (ok && penalties_on)
        ok = kiln_sampler_chain_add(c, kiln_sampler_init_penalties(p->penalty_last_n, p->penalty_repeat,
                                                                   p->penalty_freq, p->penalty_present));
    if (ok && p->temp == 0.0f) {
        ok = kiln_sampler_chain_add(c, kiln_sampler_init_greedy());
    } else if (ok) {
        if (ok && p->top_k > 0) ok = kiln_sampler_chain_add(c, kiln_sampler_init_top_k(p->top_k));
        if (ok && p->typical_p < 1.0f)
            ok = kiln_sampler_chain_add(c, kiln_sampler_init_typical(p->typical_p, p->min_keep));
        if (ok && p->top_p < 1.0f)
            ok = kiln_sampler_chain_add(c, kiln_sampler_init_top_p(p->top_p, p->min_keep));
        if (ok && p->min_p > 0.0f)
            ok = kiln_sampler_chain_add(c, kiln_sampler_init_min_p(p->min_p, p->min_keep));
        if (ok) ok = kiln_sampler_chain_add(c, kiln_sampler_init_temp(p->temp));
        if (ok) ok = kiln_sampler_chain_add(c, kiln_sampler_init_dist(p->seed));
    }
    if (!ok) {
        kiln_sampler_free(c);
        return NULL;
    }
    return c;
}
