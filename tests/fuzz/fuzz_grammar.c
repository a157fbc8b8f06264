/*
 * fuzz_grammar.c - libFuzzer harness for the grammar module: the input's first
 * byte says GBNF text or JSON Schema, the text runs to the first NUL, and the
 * bytes after it drive a matcher (each picks one of the allowed tokens of a
 * small vocabulary of single bytes and JSON-ish pieces). Any input either fails
 * with a message or compiles; then every mask must equal the token-by-token
 * reference, an allowed token must be accepted, and a mask is empty only where
 * the grammar is done. Built by scripts/fuzz.sh (clang); tests/test_grammar_fuzz.c
 * runs the same function over its seeds and their mutations in every build.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "grammar/grammar_matcher.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kiln_grammar_vocab *fuzz_vocab(void) {
    static struct kiln_grammar_vocab *gv;
    if (gv) return gv;
    static const char *const extra[] = {"{", "}", "[", "]", "\":", "\",", ",\"", "{\"", "\"}", "true", "null", "false",
                                        "  ", "\n", " \"", "ab", "abc", "12", "-1", ".5", "e+", "\\\"", "\\u00",
                                        "\xc3\xa9", "\xe2\x82", "\xac", "\xf0\x9f\x98\x80", "a\"", "\"\n", "root"};
    enum { N_EXTRA = sizeof extra / sizeof extra[0], N = 256 + N_EXTRA + 1 };
    static char bytes[256];
    static const char *pieces[N];
    static size_t lens[N];
    for (int b = 0; b < 256; b++) bytes[b] = (char)b, pieces[b] = &bytes[b], lens[b] = 1;
    for (int k = 0; k < N_EXTRA; k++) pieces[256 + k] = extra[k], lens[256 + k] = strlen(extra[k]);
    pieces[N - 1] = NULL; /* the end-of-generation token */
    char err[128];
    gv = gvocab_from_pieces(pieces, lens, N, N - 1, err, sizeof err);
    if (!gv) abort();
    return gv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const bool schema = data[0] & 1;
    const uint8_t *text = data + 1, *end = memchr(text, 0, size - 1);
    size_t len = end ? (size_t)(end - text) : size - 1;
    const uint8_t *script = end ? end + 1 : data + size;
    size_t n_script = (size_t)(data + size - script);
    char err[512];
    struct kiln_grammar *g = schema ? kiln_grammar_from_json_schema((const char *)text, len, err, sizeof err)
                                    : kiln_grammar_parse((const char *)text, len, NULL, err, sizeof err);
    if (!g) {
        if (!err[0]) abort(); /* a failure always says why */
        return 0;
    }
    if (schema) { /* the converted text compiles again on its own */
        int64_t need = kiln_json_schema_to_gbnf((const char *)text, len, "p-", NULL, 0, err, sizeof err);
        if (need == KILN_ERR_INVALID) abort();
    }
    struct kiln_grammar_vocab *gv = fuzz_vocab();
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(g, gv, err, sizeof err);
    kiln_grammar_free(g);
    if (!m) return 0;
    uint64_t *ref = malloc(gv->n_words * sizeof *ref);
    int32_t allowed[512];
    for (size_t k = 0; k < n_script && k < 64; k++) {
        const uint64_t *mask = gmatcher_mask(m);
        if (!mask) break; /* a limit of the machine: an error, not a crash */
        if (!gmatcher_mask_reference(m, ref)) break; /* the machine's limits: an error, not a crash */
        if (memcmp(mask, ref, gv->n_words * sizeof *ref)) abort();
        int32_t na = 0;
        for (int32_t t = 0; t < gv->n_vocab && na < 512; t++)
            if (mask[t >> 6] >> (t & 63) & 1) allowed[na++] = t;
        if (na == 0) {
            if (!kiln_grammar_matcher_is_done(m)) abort(); /* stuck before the end */
            break;
        }
        int32_t tok = allowed[script[k] % na];
        if (!kiln_grammar_matcher_accept_token(m, tok)) abort();
    }
    free(ref);
    kiln_grammar_matcher_free(m);
    return 0;
}
