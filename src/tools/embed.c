/*
 * embed.c - `kiln embed`: embeddings of each line of a text (-p or -f), many lines
 * to a batch (each attending only to itself), pooled as the file or --pooling says,
 * normalized as llama-embedding does; JSON (an OpenAI-style list) or JSON lines.
 */
#include "model_args.h"

#include <stdlib.h>
#include <string.h>

#define CMD "embed"
#define SEQ_PER_BATCH 64

struct input {
    int32_t *ids;
    int64_t n;
};

static void usage(void) {
    printf("usage: kiln embed -m MODEL (-p TEXT | -f FILE) [options]\n"
           "One embedding per line of the text (special tokens added as the model says), many\n"
           "lines to a batch.\n"
           "  --pooling P          none, mean, cls, last, rank (default: the model's)\n"
           "  --embd-normalize N   -1 none, 0 max-abs to int16, 1 taxicab, 2 Euclidean (default),\n"
           "                       > 2 p-norm; rank scores are never normalized\n"
           "  -o, --output-format F  json (default: {\"object\": \"list\", \"data\": [...]}) or jsonl\n"
           "                       (one line per input: index, tokens, embedding)\n"
           "exit: 0 ok, 1 runtime error (a line longer than the context, a model without\n"
           "embeddings), 2 usage error\n%s",
           model_args_help());
}

static void print_vec(const float *v, int64_t n) {
    putchar('[');
    for (int64_t k = 0; k < n; k++) printf(k ? ", %.7g" : "%.7g", (double)v[k]);
    putchar(']');
}

static void print_one(bool jsonl, int64_t index, const struct input *in, const float *e, int64_t dim, bool per_token,
                      bool first) {
    if (jsonl) {
        printf("{\"index\": %lld, \"tokens\": ", (long long)index);
        print_ids_json(stdout, in->ids, in->n);
        printf(", \"embedding\": ");
    } else {
        printf("%s\n    {\"object\": \"embedding\", \"index\": %lld, \"embedding\": ", first ? "" : ",",
               (long long)index);
    }
    if (per_token) {
        putchar('[');
        for (int64_t t = 0; t < in->n; t++) {
            if (t) printf(", ");
            print_vec(e + t * dim, dim);
        }
        putchar(']');
    } else {
        print_vec(e, dim);
    }
    printf(jsonl ? "}\n" : "}");
}

/* Inputs [i0, i1) in one decode; prints them. */
static bool embed_batch(struct model_args *ma, struct kiln_batch *b, const struct input *ins, int64_t i0, int64_t i1,
                        int norm, bool jsonl, bool *first) {
    kiln_batch_clear(b);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t t = 0; t < ins[i].n; t++) kiln_batch_add(b, ins[i].ids[t], (int32_t)t, (int32_t)(i - i0), true);
    if (kiln_decode(ma->ctx, b) != KILN_OK) {
        fprintf(stderr, "kiln %s: decode failed: %s\n", CMD, kiln_context_error(ma->ctx));
        return false;
    }
    const enum kiln_pooling pool = kiln_context_pooling(ma->ctx);
    const int64_t dim = kiln_n_embd_out(ma->ctx);
    int64_t at = 0;
    for (int64_t i = i0; i < i1; i++) {
        const bool per_token = pool == KILN_POOLING_NONE;
        const int64_t rows = per_token ? ins[i].n : 1;
        float *e = malloc(sizeof(float) * (size_t)(rows * dim));
        if (!e) {
            fprintf(stderr, "kiln %s: out of memory\n", CMD);
            return false;
        }
        for (int64_t r = 0; r < rows; r++) {
            const float *src = per_token ? kiln_get_embeddings_ith(ma->ctx, (int32_t)(at + r))
                                         : kiln_get_embeddings_seq(ma->ctx, (int32_t)(i - i0));
            kiln_embd_normalize(src, e + r * dim, dim, pool == KILN_POOLING_RANK ? -1 : norm);
        }
        print_one(jsonl, i, &ins[i], e, dim, per_token, *first);
        *first = false;
        free(e);
        at += ins[i].n;
    }
    return true;
}

int cmd_embed(int argc, char **argv) {
    struct model_args ma;
    model_args_init(&ma);
    struct prompt_args pa = {0};
    int norm = 2;
    bool jsonl = false;
    const char *v;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, CMD, argc, argv, &i);
        if (r == 0) r = prompt_args_parse(&pa, CMD, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage();
            return EXIT_OK;
        } else if (!strcmp(o, "--pooling")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
            if (!kiln_pooling_from_name(v, &ma.cparams.pooling))
                return tool_usage_error(CMD, "unknown --pooling '%s' (none, mean, cls, last, rank)", v);
        } else if (!strcmp(o, "--embd-normalize")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i)) || !tool_parse_int(CMD, o, v, -1, 64, &norm))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output-format")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
            if (strcmp(v, "json") && strcmp(v, "jsonl"))
                return tool_usage_error(CMD, "unknown output format '%s' (json, jsonl)", v);
            jsonl = !strcmp(v, "jsonl");
        } else {
            return tool_usage_error(CMD, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(CMD, "-m MODEL is required");
    int rc;
    const char *text = prompt_args_text(&pa, CMD, &rc);
    if (!text) return rc;
    rc = EXIT_RUNTIME;
    struct input *ins = NULL;
    int64_t n_in = 0;
    struct kiln_batch batch = {0};
    ma.cparams.embeddings = true;
    ma.cparams.n_seq_max = SEQ_PER_BATCH;
    /* the cache lives one decode: F32 keeps attention's inputs as the graph made them */
    ma.cparams.type_k = ma.cparams.type_v = KT_TYPE_F32;
    if (!model_args_load(&ma, CMD, 0)) goto done;
    const struct kiln_vocab *vocab = kiln_model_vocab(ma.model);
    const uint32_t n_ctx = kiln_n_ctx(ma.ctx);
    /* one input per line; a final newline ends the last line, it does not start another */
    size_t cap = 16;
    ins = calloc(cap, sizeof *ins);
    if (!ins) goto oom;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = malloc(len + 1);
        if (!line) goto oom;
        memcpy(line, p, len);
        line[len] = 0;
        if ((size_t)n_in == cap) {
            struct input *g = realloc(ins, sizeof *ins * cap * 2);
            if (!g) {
                free(line);
                goto oom;
            }
            ins = g, cap *= 2;
        }
        const int64_t n = model_tokenize(CMD, vocab, line, true, &ins[n_in].ids);
        free(line);
        if (n < 0) goto done;
        ins[n_in].n = n;
        if (n == 0 || (uint64_t)n > n_ctx) {
            fprintf(stderr, "kiln %s: line %lld has %lld tokens; %s\n", CMD, (long long)n_in + 1, (long long)n,
                    n ? "more than the context (-c)" : "an input needs at least one");
            n_in++;
            goto done;
        }
        n_in++;
        p = nl ? nl + 1 : p + len;
    }
    if (n_in == 0) {
        fprintf(stderr, "kiln %s: the text has no lines\n", CMD);
        goto done;
    }
    batch = kiln_batch_init((int32_t)n_ctx);
    if (!batch.capacity) goto oom;
    bool first = true;
    if (!jsonl) printf("{\"object\": \"list\", \"data\": [");
    for (int64_t i0 = 0; i0 < n_in;) {
        int64_t i1 = i0, tokens = 0;
        while (i1 < n_in && i1 - i0 < SEQ_PER_BATCH && tokens + ins[i1].n <= (int64_t)n_ctx) tokens += ins[i1++].n;
        if (!embed_batch(&ma, &batch, ins, i0, i1, norm, jsonl, &first)) goto done;
        i0 = i1;
    }
    if (!jsonl) printf("\n]}\n");
    rc = EXIT_OK;
    goto done;
oom:
    fprintf(stderr, "kiln %s: out of memory\n", CMD);
done:
    for (int64_t i = 0; i < n_in; i++) free(ins[i].ids);
    free(ins);
    kiln_batch_free(&batch);
    prompt_args_free(&pa);
    model_args_free(&ma);
    return rc;
}
