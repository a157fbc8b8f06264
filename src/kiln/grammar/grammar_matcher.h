/* grammar_matcher.h - what the sampler's grammar stage asks a matcher
 * (matcher.c) beyond the public API: the mask without a copy. */
#ifndef KILN_GRAMMAR_MATCHER_H
#define KILN_GRAMMAR_MATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

/* The allowed tokens (n_words words, valid until the matcher's next call), or NULL:
 * no constraint (a lazy matcher still waiting) when gmatcher_failed is false, an
 * error (kiln_grammar_matcher_error) when it is true. */
const uint64_t *gmatcher_mask(struct kiln_grammar_matcher *m);
bool gmatcher_failed(const struct kiln_grammar_matcher *m);
size_t gmatcher_n_words(const struct kiln_grammar_matcher *m);
int32_t gmatcher_n_vocab(const struct kiln_grammar_matcher *m);
/* The same mask computed the slow way (every token run from the current state): the
 * reference for tests. */
bool gmatcher_mask_reference(struct kiln_grammar_matcher *m, uint64_t *bits);

#endif
