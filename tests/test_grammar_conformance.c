/*
 * test_grammar_conformance.c - llama.cpp's own grammar tests as facts
 * (tests/data/grammar_llama_cpp.txt, extracted by grammar_llama_cpp_gen.py from
 * the peer's test-grammar-integration.cpp, test-grammar-parser.cpp and
 * test-json-schema-to-grammar.cpp): every string llama.cpp accepts kiln accepts,
 * every one it rejects kiln rejects, grammars it refuses kiln refuses; for a
 * schema, the language of llama.cpp's converted grammar and of kiln's agree on
 * strings drawn at random from each. Where kiln deliberately differs (below,
 * with the reason) the case must give kiln's documented answer instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_gen.h"
#include "kiln.h"
#include "testutil.h"

/* ------------------------------------------------------------------ kiln's deliberate differences */

enum dev_kind {
    DEV_REFUSED,     /* kiln refuses the schema, naming what (expect) */
    DEV_ACCEPTED,    /* kiln compiles a grammar llama.cpp refuses */
    DEV_KILN_SUBSET, /* kiln's strings are llama.cpp's, not all the other way (kiln is stricter) */
    DEV_LLAMA_SUBSET,/* llama.cpp's strings are kiln's, not all the other way */
    DEV_DIFFERENT,   /* the languages differ: no comparison */
};

struct deviation {
    const char *name; /* case name */
    enum dev_kind kind;
    const char *expect; /* DEV_REFUSED: a part of kiln's message */
    const char *why;
};

static const struct deviation deviations[] = {
    /* llama.cpp caps a repetition count at 2000; kiln takes any count up to 100000 and
     * bounds the size of the whole grammar instead */
    {"parser: failure 3", DEV_ACCEPTED, NULL, "\"a\"{5000}: kiln honours the count"},
    {"parser: failure 4", DEV_ACCEPTED, NULL, "\"a\"{5000,}: kiln honours the count"},
    {"parser: failure 5", DEV_ACCEPTED, NULL, "\"a\"{5000,6000}: kiln honours the count"},
    /* kiln's grammars match text, not token ids */
    {"integration: simple grammar with tokens", DEV_REFUSED, "token references", "<[id]> terminals"},
    {"integration: complex grammar with tokens", DEV_REFUSED, "token references", "<[id]> terminals"},
    /* llama.cpp silently drops what it cannot convert; kiln refuses it, naming it */
    {"integration: required props", DEV_REFUSED, "uniqueItems", "uniqueItems is not enforced"},
    {"schema-to-grammar: unsupported regexp in a property", DEV_REFUSED, "lookaround", "lookaround is refused"},
    /* ECMAScript (what JSON Schema validators run) refuses \- outside a class in unicode mode */
    {"schema-to-grammar: regexp with escaped hyphen outside a character class", DEV_REFUSED, "not a valid escape",
     "as ajv would"},
    /* JSON Schema patterns are searches: kiln converts unanchored ones instead of accepting any string */
    {"schema-to-grammar: unanchored regexp", DEV_DIFFERENT, NULL, "unanchored: kiln searches"},
    {"schema-to-grammar: regexp with unsupported shorthand", DEV_DIFFERENT, NULL, "kiln supports \\w"},
    /* ^A|B|C|D$ is (^A)|B|C|(D$) to a regex engine: B and C anywhere */
    {"schema-to-grammar: regexp with top-level alternation", DEV_LLAMA_SUBSET, NULL, "top-level | splits the anchors"},
    /* llama.cpp writes pattern characters raw: a quote, a backslash or a control character
     * makes its string invalid JSON; kiln writes them as JSON escapes */
    {"schema-to-grammar: regexp quote", DEV_LLAMA_SUBSET, NULL, "a quote in a pattern"},
    {"schema-to-grammar: regexp", DEV_LLAMA_SUBSET, NULL, "'.' in a pattern"},
    /* a key's first character written as an escape ("\\\\"): llama.cpp's key rule takes it
     * as a raw backslash, so it cannot read such keys */
    {"schema-to-grammar: required + additional props", DEV_LLAMA_SUBSET, NULL, "escaped first key character"},
    {"schema-to-grammar: optional + additional props", DEV_LLAMA_SUBSET, NULL, "escaped first key character"},
    {"schema-to-grammar: required + optional + additional props", DEV_LLAMA_SUBSET, NULL, "escaped first key character"},
    {"schema-to-grammar: optional props with nested names", DEV_LLAMA_SUBSET, NULL, "escaped first key character"},
    {"schema-to-grammar: optional props with common prefix", DEV_LLAMA_SUBSET, NULL, "escaped first key character"},
    /* kiln's dates are calendar dates (no 02-30) */
    {"schema-to-grammar: exotic formats", DEV_KILN_SUBSET, NULL, "calendar dates"},
    {"integration: exotic formats (list)", DEV_KILN_SUBSET, NULL, "calendar dates"},
    /* llama.cpp names the rule of the property "" 'root', which replaces the start rule */
    {"schema-to-grammar: optional props with empty name", DEV_DIFFERENT, NULL, "llama.cpp's root is the property's"},
    {NULL, 0, NULL, NULL},
};

static const struct deviation *deviation_of(const char *name) {
    for (const struct deviation *d = deviations; d->name; d++)
        if (!strcmp(d->name, name)) return d;
    return NULL;
}

/* ------------------------------------------------------------------ the data file */

static char *unescape(const char *s, size_t *len) {
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            *o++ = s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'n') *o++ = '\n';
        else if (c == 't') *o++ = '\t';
        else if (c == '\\') *o++ = '\\';
        else if (c == 'x' && i + 2 < n) {
            char h[3] = {s[i + 1], s[i + 2], 0};
            *o++ = (char)strtol(h, NULL, 16);
            i += 2;
        } else *o++ = c;
    }
    *o = 0;
    *len = (size_t)(o - out);
    return out;
}

struct kase {
    char name[256];
    char root[64];
    char *grammar, *schema, *expect;
    size_t grammar_len, schema_len, expect_len;
    bool build_fails, refused;
    char **pass, **fail;
    size_t *pass_len, *fail_len;
    int n_pass, n_fail;
};

static void kase_free(struct kase *k) {
    free(k->grammar), free(k->schema), free(k->expect);
    for (int i = 0; i < k->n_pass; i++) free(k->pass[i]);
    for (int i = 0; i < k->n_fail; i++) free(k->fail[i]);
    free(k->pass), free(k->fail), free(k->pass_len), free(k->fail_len);
    memset(k, 0, sizeof *k);
}

static bool matches(const struct kiln_grammar *g, const struct kiln_grammar_vocab *gv, const char *s, size_t n) {
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(g, gv, err, sizeof err);
    if (!m) return false;
    bool ok = kiln_grammar_matcher_accept_text(m, s, n) && kiln_grammar_matcher_can_end(m);
    kiln_grammar_matcher_free(m);
    return ok;
}

static int n_cases, n_strings, n_lang;

static void run_case(struct kase *k, const struct kiln_grammar_vocab *gv) {
    if (!k->name[0]) return;
    n_cases++;
    const struct deviation *dev = deviation_of(k->name);
    char err[512] = "";
    struct kiln_grammar *g = NULL;
    if (k->grammar) {
        g = kiln_grammar_parse(k->grammar, k->grammar_len, k->root[0] ? k->root : NULL, err, sizeof err);
        if (dev && dev->kind == DEV_REFUSED) {
            CHECKF(!g && strstr(err, dev->expect), "%s: kiln should refuse it naming '%s' (%s); got: %s", k->name,
                   dev->expect, dev->why, g ? "a grammar" : err);
            kiln_grammar_free(g);
            return;
        } else if (k->build_fails && !(dev && dev->kind == DEV_ACCEPTED)) {
            CHECKF(!g, "%s: llama.cpp refuses this grammar, kiln compiled it", k->name);
        } else {
            CHECKF(g != NULL, "%s: %s", k->name, err);
        }
    } else if (k->schema) {
        g = kiln_grammar_from_json_schema(k->schema, k->schema_len, err, sizeof err);
        if (dev && dev->kind == DEV_REFUSED) {
            CHECKF(!g && strstr(err, dev->expect), "%s: kiln should refuse it naming '%s' (%s); got: %s", k->name,
                   dev->expect, dev->why, g ? "a grammar" : err);
            kiln_grammar_free(g);
            return;
        }
        if (k->refused) {
            CHECKF(!g, "%s: llama.cpp refuses this schema, kiln converted it", k->name);
        } else {
            CHECKF(g != NULL, "%s: %s", k->name, err);
        }
    }
    if (!g) return;
    for (int i = 0; i < k->n_pass; i++, n_strings++)
        CHECKF(matches(g, gv, k->pass[i], k->pass_len[i]), "%s: rejects '%s' (llama.cpp accepts it)", k->name,
               k->pass[i]);
    for (int i = 0; i < k->n_fail; i++, n_strings++)
        CHECKF(!matches(g, gv, k->fail[i], k->fail_len[i]), "%s: accepts '%s' (llama.cpp rejects it)", k->name,
               k->fail[i]);
    if (k->expect && !(dev && dev->kind == DEV_DIFFERENT)) {
        /* the two conversions of the schema must describe the same strings */
        struct kiln_grammar *want = kiln_grammar_parse(k->expect, k->expect_len, NULL, err, sizeof err);
        CHECKF(want != NULL, "%s: llama.cpp's grammar does not compile in kiln: %s", k->name, err);
        if (want) {
            char why[512];
            int dirs = !dev ? 3 : dev->kind == DEV_KILN_SUBSET ? 2 : dev->kind == DEV_LLAMA_SUBSET ? 1 : 3;
            const char *seed = getenv("KILN_TEST_SEED"); /* another draw of strings */
            bool same = gen_same_language(want, g, dirs, 40, seed ? strtoull(seed, NULL, 10) : 1234, why, sizeof why);
            CHECKF(same, "%s: %s\nllama.cpp's grammar:\n%s\nkiln's grammar:\n%s", k->name, why, k->expect,
                   kiln_grammar_text(g));
            n_lang++;
        }
        kiln_grammar_free(want);
    }
    kiln_grammar_free(g);
}

static void add_str(char ***v, size_t **lens, int *n, char *s, size_t len) {
    *v = realloc(*v, sizeof **v * (size_t)(*n + 1));
    *lens = realloc(*lens, sizeof **lens * (size_t)(*n + 1));
    (*v)[*n] = s;
    (*lens)[(*n)++] = len;
}

int main(void) {
    const char *src = getenv("KILN_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar_llama_cpp.txt", src ? src : "..");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("SKIP: %s is missing\n", path);
        return 77;
    }
    const struct kiln_grammar_vocab *gv = NULL; /* text only */
    static char line[1 << 20];
    struct kase k = {0};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || !line[0]) continue;
        char *tab = strchr(line, '\t');
        const char *arg = tab ? tab + 1 : "";
        if (tab) *tab = 0;
        size_t len;
        if (!strcmp(line, "case")) {
            run_case(&k, gv);
            kase_free(&k);
            snprintf(k.name, sizeof k.name, "%s", arg);
        } else if (!strcmp(line, "grammar")) {
            k.grammar = unescape(arg, &k.grammar_len);
        } else if (!strcmp(line, "build-fails")) {
            k.grammar = unescape(arg, &k.grammar_len);
            k.build_fails = true;
        } else if (!strcmp(line, "schema")) {
            k.schema = unescape(arg, &k.schema_len);
        } else if (!strcmp(line, "expect")) {
            k.expect = unescape(arg, &k.expect_len);
        } else if (!strcmp(line, "refused")) {
            k.refused = true;
        } else if (!strcmp(line, "root")) {
            snprintf(k.root, sizeof k.root, "%s", arg);
        } else if (!strcmp(line, "pass")) {
            char *s = unescape(arg, &len);
            add_str(&k.pass, &k.pass_len, &k.n_pass, s, len);
        } else if (!strcmp(line, "fail")) {
            char *s = unescape(arg, &len);
            add_str(&k.fail, &k.fail_len, &k.n_fail, s, len);
        } else {
            CHECKF(false, "unknown record '%s' in %s", line, path);
        }
    }
    run_case(&k, gv);
    kase_free(&k);
    fclose(f);
    printf("%d cases, %d strings, %d schema conversions compared by language\n", n_cases, n_strings, n_lang);
    CHECK(n_cases > 100);
    return tu_finish("test_grammar_conformance");
}
