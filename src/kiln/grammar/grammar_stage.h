/* grammar_stage.h - the grammar stage of the sampler chain (stage.c), for sampling.c. */
#ifndef KILN_GRAMMAR_STAGE_H
#define KILN_GRAMMAR_STAGE_H

#include "kiln.h"

/* Keep the candidates the matcher allows (in their order); false when the mask
 * cannot be had (kiln_grammar_matcher_error says why). */
bool gstage_filter(struct kiln_grammar_matcher *m, struct kiln_candidates *c);
/* The allowed tokens of logits[0 .. n_vocab) into cand, in id order: their count;
 * -2 when the matcher constrains nothing (a lazy one still waiting), -1 on failure. */
int64_t gstage_fill(struct kiln_grammar_matcher *m, const float *logits, int64_t n_vocab,
                    struct kiln_token_prob *cand);

#endif
