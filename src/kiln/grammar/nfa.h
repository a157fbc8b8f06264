/* nfa.h - the nondeterministic automata the compiler builds from the rule tree
 * (nfa.c) before determinizing them (compile.c). */
#ifndef KILN_GRAMMAR_NFA_H
#define KILN_GRAMMAR_NFA_H

#include "grammar_impl.h"

enum { NE_EPS = 0, NE_BYTE = 1, NE_CALL = 2 };

struct nedge {
    int32_t to, next; /* next edge of the same state, -1 */
    int32_t rule;     /* NE_CALL */
    uint8_t kind, lo, hi;
};

struct nfa {
    int32_t *first; /* per state: its first edge, -1 */
    int32_t n_states, cap_states;
    struct nedge *edges;
    int32_t n_edges, cap_edges;
    bool too_big;
    /* rules that need an automaton of their own (called, not inlined), in the order met */
    int32_t *want;
    int32_t n_want;
    uint8_t *wanted; /* per rule */
};

/* Which rules are inlined (inl[r] = 1) into their callers; false with a message. */
bool nfa_plan(const struct gtree *t, int32_t root, uint8_t *inl, char *err, size_t errlen);
/* The automaton of one rule: false when out of memory or past G_MAX_NFA (too_big).
 * Rules it calls are added to want. */
bool nfa_build_rule(struct nfa *a, const struct gtree *t, const uint8_t *inl, int32_t rule, int32_t *start,
                    int32_t *final);
void nfa_free(struct nfa *a);

#endif
