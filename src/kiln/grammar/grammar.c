/*
 * grammar.c - the public entry points for GBNF grammars: text in, compiled
 * grammar out (parse, then compile), and its lifetime.
 */
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar_impl.h"

struct kiln_grammar *kiln_grammar_parse(const char *gbnf, size_t len, const char *root, char *err, size_t errlen) {
    if (!gbnf) {
        kiln_errf(err, errlen, "no grammar text");
        return NULL;
    }
    struct gtree t;
    if (!gbnf_parse(gbnf, len, &t, err, errlen)) return NULL;
    struct kiln_grammar *g = gcompile(&t, root && *root ? root : "root", err, errlen);
    gtree_free(&t);
    if (g && !(g->gbnf = malloc(len + 1))) {
        kiln_grammar_unref(g);
        kiln_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (g) {
        memcpy(g->gbnf, gbnf, len);
        g->gbnf[len] = 0;
    }
    return g;
}

const char *kiln_grammar_text(const struct kiln_grammar *g) { return g && g->gbnf ? g->gbnf : ""; }

void kiln_grammar_free(struct kiln_grammar *g) { kiln_grammar_unref(g); }
