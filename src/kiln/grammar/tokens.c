/*
 * tokens.c - a vocabulary's tokens as the grammar engine sees them: the bytes
 * of each text token, which ids end generation, and every text token in one
 * byte trie laid out in preorder (a node, then its subtree, then the end of the
 * subtree), so that a walk over the vocabulary skips a rejected prefix and all
 * tokens under it in one step.
 */
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar_impl.h"

struct sorted_tok {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
};

static int cmp_tok(const void *a, const void *b) {
    const struct sorted_tok *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void kiln_grammar_vocab_free(struct kiln_grammar_vocab *gv) {
    if (!gv) return;
    free(gv->off);
    free(gv->bytes);
    free(gv->kind);
    free(gv->eog);
    free(gv->nbyte);
    free(gv->ndepth);
    free(gv->nend);
    free(gv->ntok);
    free(gv->dups);
    gshare_free(gv->share);
    free(gv);
}

/* The index from each token's kind and bytes (get fills piece, returns its length, or
 * -1 for a token that is no text; eog marks end-of-generation ids). */
typedef int64_t (*piece_fn)(const void *src, int32_t id, uint8_t *piece, size_t cap, bool *eog);

static struct kiln_grammar_vocab *build(const void *src, int32_t n, piece_fn get, char *err, size_t errlen) {
    struct kiln_grammar_vocab *gv = calloc(1, sizeof *gv);
    struct sorted_tok *st = NULL;
    uint8_t piece[G_MAX_TOKEN];
    if (!gv || n <= 0) goto oom;
    gv->n_vocab = n;
    gv->n_words = ((size_t)n + 63) / 64;
    gv->off = malloc(sizeof *gv->off * ((size_t)n + 1));
    gv->kind = calloc((size_t)n, 1);
    gv->dups = malloc(sizeof *gv->dups * (size_t)n * 2);
    gv->eog = malloc(sizeof *gv->eog * (size_t)n);
    st = malloc(sizeof *st * (size_t)n);
    size_t cap = (size_t)n * 8, used = 0;
    gv->bytes = malloc(cap);
    gv->share = gshare_new();
    if (!gv->off || !gv->kind || !gv->dups || !gv->eog || !st || !gv->bytes || !gv->share) goto oom;
    for (int32_t id = 0; id < n; id++) {
        gv->off[id] = (uint32_t)used;
        bool eog = false;
        int64_t len = get(src, id, piece, sizeof piece, &eog);
        if (eog) {
            gv->kind[id] = GTOK_EOG;
            gv->eog[gv->n_eog++] = id;
            continue;
        }
        if (len <= 0) continue; /* no text, empty, or longer than G_MAX_TOKEN */
        if (used + (size_t)len > cap) {
            if (used + (size_t)len > UINT32_MAX) goto oom;
            while (used + (size_t)len > cap) cap *= 2;
            uint8_t *nb = realloc(gv->bytes, cap);
            if (!nb) goto oom;
            gv->bytes = nb;
        }
        memcpy(gv->bytes + used, piece, (size_t)len);
        used += (size_t)len;
        gv->kind[id] = GTOK_TEXT;
    }
    gv->off[n] = (uint32_t)used;
    /* sort the text tokens by bytes, then lay the trie out in preorder */
    int32_t n_text = 0;
    for (int32_t id = 0; id < n; id++)
        if (gv->kind[id] == GTOK_TEXT)
            st[n_text++] = (struct sorted_tok){gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id], id};
    qsort(st, (size_t)n_text, sizeof *st, cmp_tok);
    gv->nbyte = malloc(used ? used : 1);
    gv->ndepth = malloc(sizeof *gv->ndepth * (used ? used : 1));
    gv->nend = malloc(sizeof *gv->nend * (used ? used : 1));
    gv->ntok = malloc(sizeof *gv->ntok * (used ? used : 1));
    if (!gv->nbyte || !gv->ndepth || !gv->nend || !gv->ntok) goto oom;
    int32_t open[G_MAX_TOKEN + 1], depth = 0; /* open[d]: the node at depth d on the path */
    uint32_t nn = 0;
    for (int32_t k = 0; k < n_text; k++) {
        const struct sorted_tok *t = &st[k];
        uint32_t l = 0;
        if (k > 0) {
            const struct sorted_tok *p = &st[k - 1];
            while (l < p->len && l < t->len && p->p[l] == t->p[l]) l++;
            if (l == t->len && l == p->len) { /* the same bytes as the previous token: a list */
                int32_t *slot = &gv->ntok[open[depth]];
                if (*slot >= 0) {
                    gv->dups[gv->n_dups] = *slot;
                    *slot = -2 - gv->n_dups++;
                    gv->dups[gv->n_dups++] = -1;
                }
                gv->dups[gv->n_dups - 1] = t->id; /* over the list's end mark */
                gv->dups[gv->n_dups++] = -1;
                continue;
            }
        }
        for (; depth > (int32_t)l; depth--) gv->nend[open[depth]] = nn;
        for (uint32_t d = l + 1; d <= t->len; d++) {
            gv->nbyte[nn] = t->p[d - 1];
            gv->ndepth[nn] = (uint16_t)d;
            gv->ntok[nn] = -1;
            open[d] = (int32_t)nn++;
        }
        depth = (int32_t)t->len;
        gv->ntok[open[depth]] = t->id;
        if (depth > gv->max_depth) gv->max_depth = depth;
    }
    for (; depth > 0; depth--) gv->nend[open[depth]] = nn;
    gv->n_nodes = (int32_t)nn;
    free(st);
    return gv;
oom:
    free(st);
    kiln_grammar_vocab_free(gv);
    kiln_errf(err, errlen, "out of memory indexing the vocabulary for grammars");
    return NULL;
}

static int64_t vocab_piece(const void *src, int32_t id, uint8_t *piece, size_t cap, bool *eog) {
    const struct kiln_vocab *v = src;
    if ((*eog = kiln_vocab_is_eog(v, id))) return 0;
    /* never text: control tokens render as nothing */
    if (kiln_vocab_attr(v, id) & (KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_UNUSED)) return -1;
    return kiln_token_to_piece(v, id, (char *)piece, cap, false);
}

struct kiln_grammar_vocab *kiln_grammar_vocab_new(const struct kiln_vocab *v, char *err, size_t errlen) {
    if (!v) {
        kiln_errf(err, errlen, "no vocabulary");
        return NULL;
    }
    return build(v, kiln_vocab_n_tokens(v), vocab_piece, err, errlen);
}

struct pieces {
    const char *const *p;
    const size_t *len;
    int32_t eog;
};

static int64_t list_piece(const void *src, int32_t id, uint8_t *piece, size_t cap, bool *eog) {
    const struct pieces *ps = src;
    if ((*eog = id == ps->eog)) return 0;
    if (!ps->p[id] || ps->len[id] > cap) return -1;
    memcpy(piece, ps->p[id], ps->len[id]);
    return (int64_t)ps->len[id];
}

struct kiln_grammar_vocab *gvocab_from_pieces(const char *const *pieces, const size_t *lens, int32_t n, int32_t eog,
                                              char *err, size_t errlen) {
    struct pieces ps = {pieces, lens, eog};
    return build(&ps, n, list_piece, err, errlen);
}

int32_t kiln_grammar_vocab_n_tokens(const struct kiln_grammar_vocab *gv) { return gv ? gv->n_vocab : 0; }
