/*
 * grammar_impl.h - what the grammar module's files share: the rule tree a GBNF
 * text parses into, the compiled grammar (one byte-level automaton per rule,
 * with call edges between rules), the stack machine that runs it, the token
 * index of a vocabulary and the per-state token classes. Public API: kiln.h.
 */
#ifndef KILN_GRAMMAR_IMPL_H
#define KILN_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

/* ------------------------------------------------------------------ limits (untrusted grammars) */

#define G_MAX_TEXT ((size_t)4 << 20) /* grammar or schema text */
#define G_MAX_REP 100000              /* a {m,n} bound */
#define G_MAX_NFA (1 << 20)           /* automaton states before determinization, all rules */
#define G_MAX_DFA (1 << 17)           /* states after it */
#define G_MAX_DEPTH 256               /* nesting of groups / JSON values */
#define G_MAX_TOKEN 1024              /* longest token kept in the index (bytes) */

/* ------------------------------------------------------------------ rule tree (gbnf.c) */

enum gn_kind {
    GN_EMPTY, /* matches "" */
    GN_LIT,   /* bytes: a = offset into bytes, b = length */
    GN_CLASS, /* code points: a = offset into ranges (lo, hi pairs, sorted, disjoint), b = pairs */
    GN_SEQ,   /* a = offset into kids, b = count */
    GN_ALT,   /* a = offset into kids, b = count */
    GN_REP,   /* a = child node, b = min, c = max (-1: no max) */
    GN_REF,   /* a = rule index */
};

struct gn {
    int32_t kind, a, b, c;
};

struct grule {
    char *name;
    int32_t node;      /* -1 until defined */
    int32_t line, col; /* where it is defined, or first used while undefined */
};

struct gtree {
    struct gn *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *kids;
    int32_t n_kids, cap_kids;
    uint8_t *bytes;
    int32_t n_bytes, cap_bytes;
    uint32_t *ranges; /* lo, hi, lo, hi ... */
    int32_t n_ranges, cap_ranges;
    struct grule *rules;
    int32_t n_rules, cap_rules;
};

void gtree_free(struct gtree *t);
/* Parse GBNF text into t; false with "line L, column C: ..." in err. */
bool gbnf_parse(const char *text, size_t len, struct gtree *t, char *err, size_t errlen);
int32_t gtree_find_rule(const struct gtree *t, const char *name);

/* ------------------------------------------------------------------ code points to UTF-8 (utf8.c) */

/* One UTF-8 byte-sequence pattern: n bytes, byte i in [lo[i], hi[i]]. */
struct gutf8_seq {
    int n;
    uint8_t lo[4], hi[4];
};
/* The sequences that together match exactly the code points in [lo, hi] (surrogates
 * excluded); calls fn for each, stops early when fn returns false. */
bool gutf8_ranges(uint32_t lo, uint32_t hi, bool (*fn)(const struct gutf8_seq *s, void *data), void *data);
/* Encodes cp (<= 0x10FFFF) into out; returns the byte count. */
int gutf8_encode(uint32_t cp, uint8_t out[4]);
/* Decodes one code point at s[0..n): its length, or 0 for invalid UTF-8 (overlong, surrogate, cut). */
int gutf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* ------------------------------------------------------------------ compiled grammar (compile.c) */

struct gcall {
    int32_t rule, target; /* call rule, continue at target when it returns */
};

/* A state of one rule's automaton: deterministic on bytes (by class), with call edges. */
struct gstate {
    int32_t rule;
    int32_t calls, n_calls; /* into kiln_grammar.calls */
    uint8_t accepting;      /* the rule may end here */
    uint8_t consuming;      /* has at least one byte transition */
};

struct gcache;

struct kiln_grammar {
    atomic_int refs;
    int32_t n_rules;
    char **rule_names;
    int32_t *rule_start; /* start state per rule (-1: inlined, no automaton of its own) */
    int32_t root;        /* root rule */
    uint8_t byte_class[256];
    int32_t n_classes;
    int32_t n_states;
    struct gstate *states;
    int32_t *trans; /* n_states * n_classes: next state, -1 none */
    struct gcall *calls;
    int32_t n_calls;
    char *gbnf; /* the source text (a schema's converted grammar), NUL-terminated */
    /* per (grammar, token index) caches of token classes: created on first use */
    pthread_mutex_t mu;
    struct gcache *caches;
};

/* Compile a parsed tree with the given root rule; NULL with a message. */
struct kiln_grammar *gcompile(const struct gtree *t, const char *root, char *err, size_t errlen);
void kiln_grammar_unref(struct kiln_grammar *g);

static inline int32_t g_next(const struct kiln_grammar *g, int32_t state, uint8_t byte) {
    return g->trans[(size_t)state * (size_t)g->n_classes + g->byte_class[byte]];
}

/* ------------------------------------------------------------------ stack machine (stacks.c) */

/* A stack is a node: (parent node, state on top). Node 0 is the empty stack (the
 * grammar is complete); node 1 is EXIT, the bottom of a stack that runs one rule
 * on its own (what comes after the rule is unknown). A configuration (cfg) is a
 * sorted set of normalized stacks: each top state consumes bytes (calls are
 * pushed, finished rules popped, eagerly). Stacks and configurations are
 * interned, and each configuration's transitions by byte class are memoized, so
 * that after warm-up a byte costs one table lookup. */
#define GSM_MAX_STACKS 4096 /* parses alive at once (a configuration's stacks) */
#define GS_EMPTY 0
#define GS_EXIT 1
#define GC_DEAD 0 /* the configuration with no stack */

struct gsm_node {
    int32_t parent, state;
};

struct gsm_cfg {
    int64_t off;       /* stacks: gsm.items[off .. off+n) */
    int32_t n;
    int32_t *next;     /* n_classes entries, -1: not computed yet; NULL until first needed */
    uint8_t has_empty; /* holds the empty stack: the grammar may end here */
    uint8_t has_exit;  /* holds EXIT: the rule run alone ended after the last byte */
    uint8_t live;      /* holds a stack that can consume */
};

struct gsm {
    const struct kiln_grammar *g;
    struct gsm_node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *node_hash; /* open addressing: node ids, -1 empty */
    int32_t node_hash_cap;
    struct gsm_cfg *cfgs;
    int32_t n_cfgs, cap_cfgs;
    int32_t *cfg_hash;
    int32_t cfg_hash_cap;
    int32_t *items;
    int64_t n_items, cap_items;
    /* scratch for one step */
    int32_t *work; /* the stacks of the configuration being built */
    int32_t n_work, cap_work;
    int32_t *todo; /* nodes waiting to be normalized */
    int32_t cap_todo;
    uint32_t *seen; /* per node: stamp of the step that normalized it */
    uint32_t stamp;
    int64_t max_nodes, max_cfgs;
    bool failed; /* a limit or memory ran out; every later step answers -1 */
};

bool gsm_init(struct gsm *m, const struct kiln_grammar *g, int64_t max_nodes, int64_t max_cfgs);
void gsm_free(struct gsm *m);
/* Drop everything (keeps the memory). */
void gsm_clear(struct gsm *m);
int32_t gsm_node(struct gsm *m, int32_t parent, int32_t state); /* -1 on failure */
/* The configuration of the normalized stacks of node n (n itself normalized). */
int32_t gsm_cfg_of_stack(struct gsm *m, int32_t n);
/* The configuration holding exactly stack n, unnormalized (n's top consumes). */
int32_t gsm_cfg_single(struct gsm *m, int32_t n);
/* The start configuration of rule `rule` on an empty stack. */
int32_t gsm_cfg_start(struct gsm *m, int32_t rule);
/* The configuration after byte b; GC_DEAD when no stack takes it; -1 on failure. */
int32_t gsm_step_slow(struct gsm *m, int32_t cfg, uint8_t b);
static inline int32_t gsm_step(struct gsm *m, int32_t cfg, uint8_t b) {
    const struct gsm_cfg *c = &m->cfgs[cfg];
    if (c->next) {
        int32_t r = c->next[m->g->byte_class[b]];
        if (r >= 0) return r;
    }
    return gsm_step_slow(m, cfg, b);
}
/* Run bytes from cfg: the final configuration, GC_DEAD, or -1 on failure. */
int32_t gsm_run(struct gsm *m, int32_t cfg, const uint8_t *s, size_t n);
/* Re-intern the stacks of cfg from `from` into m (used to compact a machine). */
int32_t gsm_import(struct gsm *m, const struct gsm *from, int32_t cfg);

/* ------------------------------------------------------------------ token index (tokens.c) */

enum { GTOK_NONE = 0, GTOK_TEXT = 1, GTOK_EOG = 2 };

struct kiln_grammar_vocab {
    int32_t n_vocab;  /* ids 0 .. n_vocab-1 */
    uint32_t *off;    /* n_vocab + 1: token bytes at bytes[off[i] .. off[i+1]) */
    uint8_t *bytes;
    uint8_t *kind;    /* GTOK_* */
    int32_t *eog;     /* end-of-generation ids */
    int32_t n_eog;
    /* the text tokens as a trie in preorder: node i adds byte nbyte[i] at depth
     * ndepth[i] (1-based); its subtree ends before nend[i]; ntok[i] is the token
     * whose bytes end there (>= 0), -1 for none, or -2 - k when several tokens have
     * those bytes: they are dups[k], dups[k+1] ... up to a -1 */
    int32_t n_nodes;
    uint8_t *nbyte;
    uint16_t *ndepth;
    uint32_t *nend;
    int32_t *ntok;
    int32_t *dups;
    int32_t n_dups;
    struct gshare *share; /* token classes several grammars have in common (share.c) */
    int32_t max_depth;
    size_t n_words; /* mask words: (n_vocab + 63) / 64 */
};

/* An index over given token bytes (tests, fuzzing): token i is pieces[i] (lens[i] bytes;
 * NULL: not text), token eog ends generation (-1: none). */
struct kiln_grammar_vocab *gvocab_from_pieces(const char *const *pieces, const size_t *lens, int32_t n, int32_t eog,
                                              char *err, size_t errlen);

/* ------------------------------------------------------------------ token classes (classify.c) */

/* What tokens do from one state when its rule runs alone: accepted (the token
 * ends inside the rule or where it ends), rejected, or uncertain (the rule ends
 * before the token does: the rest belongs to the caller; exits has bit d set
 * when it can end after d bytes, bit 63 for d >= 63). */
struct gclass {
    uint64_t *bits;  /* accepted, as a mask (n_words), or NULL when the list is shorter */
    int32_t *acc;    /* accepted ids (when bits is NULL) */
    int32_t n_acc;
    int32_t *unc;    /* uncertain ids */
    uint64_t *exits; /* per uncertain id */
    int32_t n_unc;
};

/* Per (grammar, token index): the classes of the states met so far, filled lazily
 * under g->mu, and the machine the walks run on. */
struct gcache {
    struct gcache *next;
    const struct kiln_grammar_vocab *gv;
    struct gclass **cls; /* per state, NULL until computed */
    uint8_t *shared;     /* per state: its class belongs to the vocabulary's shared ones */
    int32_t n_cls;
    size_t bytes; /* what the classes take */
    struct gsm local;
    bool local_ok;
};

/* The class of state q (computing it on first use); NULL on failure (message in err). */
const struct gclass *gclass_get(struct kiln_grammar *g, const struct kiln_grammar_vocab *gv, int32_t q, char *err,
                                size_t errlen);
void gcache_free(struct gcache *c);
void gclass_free(struct gclass *c);

/* Classes shared between grammars on one vocabulary (share.c), keyed by the automaton
 * reachable from a state. gshare_find: the shared class of q, or NULL and (when q's
 * automaton is small enough to share) its key in *key; gshare_put takes the key and
 * the class when it keeps them. */
struct gshare;
struct gshare *gshare_new(void);
void gshare_free(struct gshare *s);
struct gclass *gshare_find(struct gshare *s, const struct kiln_grammar *g, int32_t q, uint32_t **key, size_t *len);
bool gshare_put(struct gshare *s, uint32_t *key, size_t len, struct gclass *cls, size_t bytes);

#endif
