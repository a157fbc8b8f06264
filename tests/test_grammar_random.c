/*
 * test_grammar_random.c - 200 random JSON Schemas from a seeded generator
 * (objects, arrays, tuples, strings with lengths, patterns and formats,
 * bounded integers and numbers, enums, consts, anyOf/oneOf of distinct types,
 * type lists, $refs), each sampled at temperature 1.0 from the KJV model
 * (../shared/models/kjv-q4_0.gguf, else models/kjv-q4_0.gguf) until the
 * grammar ends it; every output must then parse and validate against its
 * schema with ajv (npm, draft 2020-12, ajv-formats), a validator that is not
 * kiln's code (tests/grammar_validate.mjs). Skipped, saying why, without the
 * model, node or ajv (scripts/deps.sh test installs ajv into tests/node/node_modules,
 * or point KILN_NODE_MODULES at a node_modules holding ajv and ajv-formats).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "testutil.h"

#define N_SCHEMAS 200 /* 40 under the sanitizers (KILN_SANITIZED): the same kinds, less time */
#define MAX_TOKENS 1000

/* ------------------------------------------------------------------ the generator */

struct buf {
    char s[16384];
    size_t n;
};

static uint64_t rs = 20240611;
static uint32_t rnd(uint32_t n) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs % n);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(struct buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n += (size_t)k < sizeof b->s - b->n ? (size_t)k : sizeof b->s - b->n - 1;
}

static const char *const words[] = {"name", "id", "city", "kind", "value", "list", "ok", "note", "x", "tag2"};

static void gen(struct buf *b, int depth, bool defs);

static void gen_string(struct buf *b) {
    static const char *const patterns[] = {"^[a-z]{1,5}$", "^[A-Z][a-z]{0,4}( [0-9]{2})?$", "^(yes|no|maybe)$",
                                           "^\\\\d{3}-\\\\d{2}$", "^[^\\\"\\\\\\\\]{0,4}$", "^.{2}[xyz]?$"};
    static const char *const formats[] = {"date", "time", "date-time", "uuid", "ipv4"};
    switch (rnd(4)) {
    case 0: put(b, "{\"type\":\"string\",\"maxLength\":%u}", rnd(9)); break;
    case 1: put(b, "{\"type\":\"string\",\"minLength\":%u,\"maxLength\":%u}", 1 + rnd(2), 3 + rnd(5)); break;
    case 2: put(b, "{\"type\":\"string\",\"pattern\":\"%s\"}", patterns[rnd(6)]); break;
    default: put(b, "{\"type\":\"string\",\"format\":\"%s\"}", formats[rnd(5)]); break;
    }
}

static void gen_number(struct buf *b) {
    switch (rnd(5)) {
    case 0: put(b, "{\"type\":\"integer\"}"); break;
    case 1: put(b, "{\"type\":\"integer\",\"minimum\":%d,\"maximum\":%d}", (int)rnd(200) - 100, 100 + (int)rnd(900)); break;
    case 2: put(b, "{\"type\":\"integer\",\"exclusiveMinimum\":%d}", (int)rnd(50) - 25); break;
    case 3: put(b, "{\"type\":\"number\"}"); break;
    default: put(b, "{\"type\":\"number\",\"minimum\":%d,\"exclusiveMaximum\":%d}", -(int)rnd(10), 1 + (int)rnd(100)); break;
    }
}

static void gen_object(struct buf *b, int depth, bool defs) {
    int n = 1 + (int)rnd(3);
    bool used[10] = {0};
    put(b, "{\"type\":\"object\",\"properties\":{");
    int req[4], nreq = 0;
    for (int i = 0; i < n; i++) {
        int w;
        do w = (int)rnd(10);
        while (used[w]);
        used[w] = true;
        put(b, "%s\"%s\":", i ? "," : "", words[w]);
        gen(b, depth + 1, defs);
        if (rnd(3)) req[nreq++] = w;
    }
    put(b, "}");
    if (nreq) {
        put(b, ",\"required\":[");
        for (int i = 0; i < nreq; i++) put(b, "%s\"%s\"", i ? "," : "", words[req[i]]);
        put(b, "]");
    }
    if (rnd(4) == 0) put(b, ",\"additionalProperties\":false");
    put(b, "}");
}

static void gen(struct buf *b, int depth, bool defs) {
    int k = depth >= 3 ? (int)rnd(6) : (int)rnd(12);
    switch (k) {
    case 0: gen_string(b); break;
    case 1: gen_number(b); break;
    case 2: put(b, "{\"type\":\"boolean\"}"); break;
    case 3: put(b, "{\"enum\":[\"red\",\"green\",%d,null,true]}", (int)rnd(100)); break;
    case 4: put(b, "{\"const\":{\"v\":[%u,\"k\"]}}", rnd(10)); break;
    case 5: put(b, "{\"type\":[\"string\",\"null\"],\"maxLength\":%u}", rnd(6)); break;
    case 6:
    case 7: gen_object(b, depth, defs); break;
    case 8:
        put(b, "{\"type\":\"array\",\"items\":");
        gen(b, depth + 1, defs);
        put(b, ",\"minItems\":%u,\"maxItems\":%u}", rnd(2), 2 + rnd(2));
        break;
    case 9:
        put(b, "{\"type\":\"array\",\"prefixItems\":[");
        gen_string(b);
        put(b, ",");
        gen_number(b);
        put(b, "],\"items\":false}");
        break;
    case 10: /* branches of different types, so that oneOf holds exactly one */
        put(b, "{\"%s\":[", rnd(2) ? "anyOf" : "oneOf");
        gen_string(b);
        put(b, ",{\"type\":\"boolean\"},");
        gen_object(b, depth + 1, defs);
        put(b, "]}");
        break;
    default:
        if (defs) put(b, "{\"$ref\":\"#/$defs/item\"}");
        else gen_number(b);
        break;
    }
}

static void gen_schema(struct buf *b) {
    b->n = 0;
    bool defs = rnd(3) == 0;
    if (defs) {
        put(b, "{\"$defs\":{\"item\":");
        gen_object(b, 2, false);
        put(b, "},\"type\":\"object\",\"properties\":{\"first\":{\"$ref\":\"#/$defs/item\"},\"more\":");
        gen(b, 1, true);
        put(b, "},\"required\":[\"first\",\"more\"]}");
    } else {
        gen(b, 0, false);
    }
}

/* ------------------------------------------------------------------ sampling */

static void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

int main(void) {
    const char *shared = tu_shared(), *src = getenv("KILN_SRC");
    char model[1024], mods[1024], script[1100], cmd[4096];
    snprintf(model, sizeof model, "%s/models/kjv-q4_0.gguf", shared ? shared : "../shared");
    if (!file_exists(model)) snprintf(model, sizeof model, "%s/models/kjv-q4_0.gguf", src ? src : "..");
    if (!file_exists(model)) {
        printf("SKIP: no kjv-q4_0.gguf in ../shared/models or models/\n");
        return 77;
    }
    const char *nm = getenv("KILN_NODE_MODULES");
    snprintf(mods, sizeof mods, "%s", nm ? nm : "");
    if (!nm) snprintf(mods, sizeof mods, "%s/tests/node/node_modules", src ? src : "..");
    snprintf(script, sizeof script, "%s/ajv/package.json", mods);
    if (system("node --version >/dev/null 2>&1") != 0 || !file_exists(script)) {
        printf("SKIP: node or ajv is missing (%s/ajv): scripts/deps.sh test installs it\n", mods);
        return 77;
    }
    snprintf(script, sizeof script, "%s/tests/grammar_validate.mjs", src ? src : "..");

    char err[512];
    struct kiln_model_params mp = kiln_model_default_params();
    struct kiln_model *m = kiln_model_load(model, mp, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return tu_finish("test_grammar_random");
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = MAX_TOKENS + 64;
    cp.n_batch = 64;
    cp.n_threads = 1; /* a 20M model: one thread, no waiting at barriers on a busy machine */
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    const struct kiln_vocab *v = kiln_model_vocab(m);
    struct kiln_grammar_vocab *gv = kiln_grammar_vocab_new(v, err, sizeof err);
    CHECKF(ctx && gv, "%s", err);
    if (!ctx || !gv) return tu_finish("test_grammar_random");
    const int64_t n_vocab = kiln_model_hparams(m)->n_vocab;
    /* one prompt, decoded once: every schema starts from its logits */
    int32_t prompt[64];
    int64_t np = kiln_tokenize(v, "And the LORD spake unto Moses, saying,", 38, prompt, 64, true, false);
    struct kiln_batch b = kiln_batch_init(64);
    for (int64_t i = 0; i < np; i++) kiln_batch_add(&b, prompt[i], (int32_t)i, 0, i == np - 1);
    CHECK(kiln_decode(ctx, &b) == 0);
    float *first = malloc(sizeof *first * (size_t)n_vocab);
    memcpy(first, kiln_get_logits_ith(ctx, -1), sizeof *first * (size_t)n_vocab);

    const int n_schemas = getenv("KILN_SANITIZED") ? 40 : N_SCHEMAS;
    char path[256];
    snprintf(path, sizeof path, "grammar_random_%d.jsonl", (int)getpid());
    FILE *out = fopen(path, "w");
    static struct buf schema;
    static char text[1 << 16];
    int finished = 0, distinct = 0, n_tokens = 0;
    char last[64] = "";
    for (int k = 0; k < n_schemas; k++) {
        gen_schema(&schema);
        struct kiln_grammar *g = kiln_grammar_from_json_schema(schema.s, schema.n, err, sizeof err);
        CHECKF(g != NULL, "schema %d: %s\n%s", k, err, schema.s);
        if (!g) continue;
        struct kiln_sampler *s = kiln_sampler_chain_new();
        CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_grammar(g, gv)));
        CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_temp(1.0f)));
        CHECK(kiln_sampler_chain_add(s, kiln_sampler_init_dist(1000 + (uint32_t)k)));
        kiln_grammar_free(g);
        kiln_kv_seq_rm(ctx, 0, (int32_t)np, -1);
        const float *logits = first;
        size_t tl = 0;
        bool done = false;
        for (int t = 0; t < MAX_TOKENS; t++) {
            int32_t tok = kiln_sampler_sample(s, logits, n_vocab);
            CHECKF(tok >= 0, "schema %d: %s", k, kiln_sampler_last_error());
            if (tok < 0) break;
            kiln_sampler_accept(s, tok);
            n_tokens++;
            if (kiln_vocab_is_eog(v, tok)) {
                done = kiln_grammar_matcher_is_done(kiln_sampler_grammar(s));
                break;
            }
            char piece[256];
            int64_t pl = kiln_token_to_piece(v, tok, piece, sizeof piece, false);
            if (pl > 0 && tl + (size_t)pl < sizeof text) memcpy(text + tl, piece, (size_t)pl), tl += (size_t)pl;
            kiln_batch_clear(&b);
            kiln_batch_add(&b, tok, (int32_t)(np + t), 0, true);
            if (kiln_decode(ctx, &b) != 0) break;
            logits = kiln_get_logits_ith(ctx, -1);
        }
        CHECKF(done, "schema %d: no end of generation within %d tokens\n%s\n%.*s", k, MAX_TOKENS, schema.s, (int)tl,
               text);
        finished += done;
        if (strncmp(last, text, tl < sizeof last ? tl : sizeof last)) distinct++;
        snprintf(last, sizeof last, "%.*s", (int)tl, text);
        fprintf(out, "{\"schema\":%s,\"output\":", schema.s);
        json_str(out, text, tl);
        fprintf(out, "}\n");
        kiln_sampler_free(s);
    }
    fclose(out);
    printf("%d of %d outputs complete (%d tokens), %d differ from the one before\n", finished, n_schemas, n_tokens,
           distinct);
    CHECK(finished == n_schemas);
    CHECK(distinct > n_schemas / 2); /* temperature 1.0: not one fixed answer */
    snprintf(cmd, sizeof cmd, "NODE_PATH='%s' node '%s' '%s' '%s'", mods, script, path, mods);
    int rc = system(cmd);
    CHECKF(rc == 0, "ajv refused outputs (above)");
    remove(path);
    free(first);
    kiln_batch_free(&b);
    kiln_grammar_vocab_free(gv);
    kiln_context_free(ctx);
    kiln_model_free(m);
    return tu_finish("test_grammar_random");
}
