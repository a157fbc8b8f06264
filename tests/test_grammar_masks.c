/*
 * test_grammar_masks.c - token masks on real vocabularies (../shared/vocab:
 * SentencePiece, byte-level BPE of GPT-2 and Qwen2, 32k to 152k tokens): along
 * random walks through several grammars, the mask from the cached token
 * classes equals the reference (every token's bytes run from the current
 * state); then the grammar as a sampler stage: every token drawn is allowed,
 * end of generation comes only where the grammar is complete, prompt tokens do
 * not move it, and a refused token makes the next draw fail with a reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "grammar/grammar_matcher.h"
#include "kiln.h"
#include "testutil.h"

static const char *const grammars[][2] = {
    {"schema", "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":"
               "\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\","
               "\"green\",\"blue\"]},\"maxItems\":3},\"when\":{\"type\":\"string\",\"format\":\"date\"},\"note\":{"
               "\"type\":\"string\"},\"score\":{\"type\":\"number\"}},\"required\":[\"name\",\"age\",\"tags\"]}"},
    {"schema", "{\"type\":\"object\"}"},
    {"gbnf", "root ::= expr \"\\n\"\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" ws expr ws \")\"\n"
             "ws ::= [ \\t]*"},
    {"gbnf", "root ::= [^\\n\"]{1,40} \"\\n\" [А-Яа-я😀-🙏 ]+ \"!\""},
    {"schema", "{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]+( [A-Z][a-z]+)*$\"}"},
};

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static int n_masks;

static void walk(const char *vname, const struct kiln_vocab *v, const struct kiln_grammar_vocab *gv,
                 const struct kiln_grammar *g, int steps, const char *gname) {
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(g, gv, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    const int32_t n = kiln_vocab_n_tokens(v);
    const size_t nw = ((size_t)n + 63) / 64;
    uint64_t *fast = malloc(nw * 8), *ref = malloc(nw * 8);
    int32_t *allowed = malloc(sizeof *allowed * (size_t)n);
    for (int step = 0; step < steps; step++) {
        CHECKF(kiln_grammar_matcher_fill_mask(m, fast, nw), "%s: %s", vname, kiln_grammar_matcher_error(m));
        CHECK(gmatcher_mask_reference(m, ref));
        n_masks++;
        int32_t na = 0, first_bad = -1;
        for (int32_t t = 0; t < n; t++) {
            bool a = fast[t >> 6] >> (t & 63) & 1, b = ref[t >> 6] >> (t & 63) & 1;
            if (a != b && first_bad < 0) first_bad = t;
            if (a && !kiln_vocab_is_eog(v, t)) allowed[na++] = t;
        }
        size_t len;
        const char *txt = first_bad >= 0 ? kiln_vocab_text(v, first_bad, &len) : "";
        CHECKF(first_bad < 0, "%s, %s, step %d: token %d ('%s') %s by the mask, %s by the reference", vname, gname,
               step, (int)first_bad, txt, fast[first_bad >> 6] >> (first_bad & 63) & 1 ? "allowed" : "refused",
               ref[first_bad >> 6] >> (first_bad & 63) & 1 ? "allowed" : "refused");
        if (first_bad >= 0 || na == 0) break;
        int32_t tok = allowed[next() % (uint64_t)na];
        CHECKF(kiln_grammar_matcher_accept_token(m, tok), "%s: allowed token %d refused: %s", vname, (int)tok,
               kiln_grammar_matcher_error(m));
    }
    free(fast), free(ref), free(allowed);
    kiln_grammar_matcher_free(m);
}

/* the grammar as a sampler stage, with greedy or dist after it, on random logits */
static void sampler(const struct kiln_vocab *v, const struct kiln_grammar_vocab *gv) {
    const char *gbnf = "root ::= \"yes\" | \"no\"";
    char err[256];
    struct kiln_grammar *g = kiln_grammar_parse(gbnf, strlen(gbnf), NULL, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    if (!g) return;
    const int32_t n = kiln_vocab_n_tokens(v);
    float *logits = malloc(sizeof *logits * (size_t)n);
    for (int round = 0; round < 20; round++) {
        struct kiln_sampler *s = kiln_sampler_chain_new();
        CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_grammar(g, gv)));
        CHECK(kiln_sampler_chain_add(s, round % 2 ? kiln_sampler_init_greedy() : kiln_sampler_init_dist(round)));
        for (int32_t t = 0; t < 50; t++) kiln_sampler_accept_prompt(s, t); /* not the grammar's */
        char text[64] = "";
        size_t tl = 0;
        for (int step = 0; step < 10; step++) {
            for (int32_t t = 0; t < n; t++) logits[t] = (float)(next() % 1000) / 100.0f;
            int32_t tok = kiln_sampler_sample(s, logits, n);
            CHECKF(tok >= 0, "round %d: %s", round, kiln_sampler_last_error());
            if (tok < 0) break;
            kiln_sampler_accept(s, tok);
            if (kiln_vocab_is_eog(v, tok)) break;
            char piece[64];
            int64_t pl = kiln_token_to_piece(v, tok, piece, sizeof piece, false);
            if (pl > 0 && tl + (size_t)pl < sizeof text) memcpy(text + tl, piece, (size_t)pl), tl += (size_t)pl;
            text[tl] = 0;
        }
        CHECKF(!strcmp(text, "yes") || !strcmp(text, "no"), "round %d: the grammar let '%s' through", round, text);
        /* a token the grammar refuses: the next draw fails and says why */
        kiln_sampler_reset(s);
        int32_t bad = kiln_vocab_find(v, "x", 1);
        if (bad < 0) bad = kiln_vocab_find(v, "\xe2\x96\x81x", 4);
        if (bad >= 0) {
            kiln_sampler_accept(s, bad);
            CHECK(kiln_sampler_sample(s, logits, n) == KILN_TOKEN_NULL);
            CHECKF(strstr(kiln_sampler_last_error(), "grammar"), "%s", kiln_sampler_last_error());
        }
        char desc[256];
        CHECK(kiln_sampler_describe(s, desc, sizeof desc) > 0 && strstr(desc, "grammar"));
        kiln_sampler_free(s);
    }
    /* lazy: anything goes until the trigger; from it on the grammar holds */
    const char *tool = "root ::= \"<tool>\" [0-9]+ \"</tool>\"";
    struct kiln_grammar *tg = kiln_grammar_parse(tool, strlen(tool), NULL, err, sizeof err);
    const char *trig[] = {"<tool>"};
    struct kiln_sampler *lz = kiln_sampler_chain_new();
    CHECK(tg && kiln_sampler_chain_add(lz, kiln_sampler_init_grammar_lazy(tg, gv, trig, 1)));
    CHECK(kiln_sampler_chain_add(lz, kiln_sampler_init_greedy()));
    for (int32_t t = 0; t < n; t++) logits[t] = (float)(next() % 1000) / 100.0f;
    int32_t free_tok = kiln_sampler_sample(lz, logits, n); /* unconstrained: the best logit */
    int32_t best = 0;
    for (int32_t t = 1; t < n; t++)
        if (logits[t] > logits[best]) best = t;
    CHECKF(free_tok == best, "inactive lazy grammar: %d, best %d", (int)free_tok, (int)best);
    int32_t ids[64];
    int64_t ni = kiln_tokenize(v, "Let me look <tool>", 18, ids, 64, false, false);
    for (int64_t k = 0; k < ni; k++) kiln_sampler_accept(lz, ids[k]);
    CHECK(kiln_grammar_matcher_is_active(kiln_sampler_grammar(lz)));
    char out[256] = "";
    size_t ol = 0;
    for (int step = 0; step < 4; step++) {
        for (int32_t t = 0; t < n; t++) logits[t] = (float)(next() % 1000) / 100.0f;
        int32_t tok = kiln_sampler_sample(lz, logits, n);
        CHECKF(tok >= 0, "%s", kiln_sampler_last_error());
        if (tok < 0 || kiln_vocab_is_eog(v, tok)) break;
        int64_t pl = kiln_token_to_piece(v, tok, out + ol, sizeof out - ol - 1, false);
        if (pl > 0) ol += (size_t)pl;
        out[ol] = 0;
        kiln_sampler_accept(lz, tok);
        /* what came after the trigger: digits, then a start of "</tool>" */
        size_t dg = strspn(out, "0123456789");
        CHECKF(dg > 0 && !strncmp(out + dg, "</tool>", strlen(out + dg)), "active lazy grammar wrote '%s'", out);
    }
    kiln_sampler_free(lz);
    kiln_grammar_free(tg);

    /* grammar after other stages: kiln_sampler_apply filters the list */
    struct kiln_sampler *s = kiln_sampler_chain_new();
    CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_top_k(n)));
    CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_grammar(g, gv)));
    struct kiln_token_prob *c = malloc(sizeof *c * (size_t)n);
    for (int32_t t = 0; t < n; t++) c[t] = (struct kiln_token_prob){t, (float)(next() % 100), 0};
    struct kiln_candidates cand = {c, n, -1, false};
    CHECK(kiln_sampler_apply(s, &cand));
    bool all_ok = cand.size > 0;
    for (int64_t i = 0; i < cand.size; i++) {
        char piece[64];
        int64_t pl = kiln_token_to_piece(v, cand.data[i].id, piece, sizeof piece, false);
        all_ok &= pl > 0 && (size_t)pl <= 3 && (!strncmp(piece, "yes", (size_t)pl) || !strncmp(piece, "no", (size_t)pl));
    }
    CHECKF(all_ok, "apply kept %lld candidates, not all a start of yes/no", (long long)cand.size);
    free(c);
    kiln_sampler_free(s);
    kiln_grammar_free(g);
    free(logits);
}

int main(void) {
    const char *shared = tu_shared();
    if (!shared) {
        printf("SKIP: ../shared is missing (vocabularies)\n");
        return 77;
    }
    static const struct {
        const char *file;
        int steps;
    } vocabs[] = {
        {"vocab/ggml-vocab-llama-spm.gguf", 30},
        {"vocab/ggml-vocab-gpt-2.gguf", 20},
        {"vocab/ggml-vocab-qwen2.gguf", 8},
    };
    int loaded = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", shared, vocabs[i].file);
        struct gguf_file *f = gguf_open(path, err, sizeof err);
        if (!f) {
            printf("note: %s: %s\n", path, err);
            continue;
        }
        struct kiln_vocab *v = kiln_vocab_load(f, err, sizeof err);
        gguf_close(f);
        CHECKF(v != NULL, "%s: %s", path, err);
        if (!v) continue;
        struct kiln_grammar_vocab *gv = kiln_grammar_vocab_new(v, err, sizeof err);
        CHECKF(gv != NULL, "%s: %s", path, err);
        for (size_t k = 0; gv && k < sizeof grammars / sizeof grammars[0]; k++) {
            const char *kind = grammars[k][0], *text = grammars[k][1];
            struct kiln_grammar *g = !strcmp(kind, "schema") ? kiln_grammar_from_json_schema(text, strlen(text), err, sizeof err)
                                                            : kiln_grammar_parse(text, strlen(text), NULL, err, sizeof err);
            CHECKF(g != NULL, "grammar %zu: %s", k, err);
            for (int w = 0; g && w < 2; w++) walk(vocabs[i].file, v, gv, g, vocabs[i].steps, text);
            kiln_grammar_free(g);
        }
        if (gv && i == 0) sampler(v, gv);
        kiln_grammar_vocab_free(gv);
        kiln_vocab_free(v);
        loaded++;
    }
    if (!loaded) {
        printf("SKIP: no vocabulary under %s/vocab\n", shared);
        return 77;
    }
    printf("%d masks compared with the reference\n", n_masks);
    return tu_finish("test_grammar_masks");
}
