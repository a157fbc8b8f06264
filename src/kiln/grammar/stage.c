/*
 * stage.c - the grammar's part of a sampler chain: the candidates reduced to
 * the tokens the matcher allows, either by filtering a list or, when the
 * grammar comes first, by building the list from the mask alone (the stages
 * after it then sort and draw among allowed tokens only).
 */
#include <math.h>

#include "grammar_matcher.h"
#include "grammar_stage.h"

bool gstage_filter(struct kiln_grammar_matcher *m, struct kiln_candidates *c) {
    const uint64_t *mask = gmatcher_mask(m);
    if (!mask) return !gmatcher_failed(m); /* inactive (lazy): nothing to do */
    const int64_t n_vocab = gmatcher_n_vocab(m);
    int64_t j = 0;
    for (int64_t i = 0; i < c->size; i++) {
        int32_t t = c->data[i].id;
        if (t >= 0 && t < n_vocab && (mask[t >> 6] >> (t & 63) & 1)) c->data[j++] = c->data[i];
    }
    c->size = j;
    return true;
}

int64_t gstage_fill(struct kiln_grammar_matcher *m, const float *logits, int64_t n_vocab,
                    struct kiln_token_prob *cand) {
    const uint64_t *mask = gmatcher_mask(m);
    if (!mask) return gmatcher_failed(m) ? -1 : -2;
    int64_t n = gmatcher_n_vocab(m) < n_vocab ? gmatcher_n_vocab(m) : n_vocab, k = 0;
    for (int64_t w = 0; w * 64 < n; w++)
        for (uint64_t b = mask[w]; b; b &= b - 1) {
            int64_t t = w * 64 + __builtin_ctzll(b);
            if (t >= n) break;
            cand[k].id = (int32_t)t;
            cand[k].logit = isnan(logits[t]) ? -INFINITY : logits[t];
            cand[k].p = 0.0f;
            k++;
        }
    return k;
}
