/*
 * eval.c - `kiln eval` (a prompt in one batch: its tokens, and optionally every
 * position's logits as float32) and `kiln run` (generation from a prompt).
 */
#include "model_args.h"

#include <stdlib.h>
#include <string.h>

static void print_ids_json(FILE *f, const int32_t *ids, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", ids[i]);
    fputc(']', f);
}

/* Decode ids[0..n) of sequence 0 from position pos0 in batches of n_batch; logits for
 * every position when all, else for the last. */
static bool decode_prompt(const char *cmd, struct kiln_context *ctx, struct kiln_batch *batch, const int32_t *ids,
                          int64_t n, int32_t pos0, bool all, FILE *logits_out, int64_t n_vocab) {
    for (int64_t i0 = 0; i0 < n; i0 += batch->capacity) {
        int64_t i1 = i0 + batch->capacity < n ? i0 + batch->capacity : n;
        kiln_batch_clear(batch);
        for (int64_t i = i0; i < i1; i++) kiln_batch_add(batch, ids[i], pos0 + (int32_t)i, 0, all || i == n - 1);
        if (kiln_decode(ctx, batch) != 0) {
            fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ctx));
            return false;
        }
        if (logits_out)
            for (int64_t i = i0; i < i1; i++) {
                const float *l = kiln_get_logits_ith(ctx, (int32_t)(i - i0));
                if (fwrite(l, sizeof(float), (size_t)n_vocab, logits_out) != (size_t)n_vocab) {
                    fprintf(stderr, "kiln %s: cannot write logits\n", cmd);
                    return false;
                }
            }
    }
    return true;
}

static const char *read_prompt(const char *cmd, const char *prompt, const char *file, char **owned) {
    *owned = NULL;
    if (file) {
        *owned = tool_read_file(cmd, file, NULL);
        return *owned;
    }
    return prompt;
}

int cmd_eval(int argc, char **argv) {
    const char *cmd = "eval";
    struct model_args ma;
    model_args_init(&ma);
    const char *prompt = NULL, *prompt_file = NULL, *logits_path = NULL;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln eval -m MODEL (-p PROMPT | -f FILE) [--logits OUT.f32] [options]\n"
                   "Evaluates the prompt (BOS per the model) in one batch and prints\n"
                   "{\"tokens\": [...], \"n_vocab\": N}; --logits writes float32 logits of every\n"
                   "prompt position (n_tokens x n_vocab, row-major).\n%s",
                   model_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) {
            if (!(prompt = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "-f") || !strcmp(o, "--file")) {
            if (!(prompt_file = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--logits")) {
            if (!(logits_path = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (!prompt == !prompt_file) return tool_usage_error(cmd, "give exactly one of -p PROMPT or -f FILE");

    char *owned;
    const char *text = read_prompt(cmd, prompt, prompt_file, &owned);
    if (!text) return EXIT_RUNTIME;
    int rc = EXIT_RUNTIME;
    int32_t *ids = NULL;
    FILE *lf = NULL;
    struct kiln_batch batch = {0};
    char err[256];
    /* tokenize first so the context can be sized for the whole prompt in one batch */
    struct kiln_model_params vp = kiln_model_default_params();
    vp.vocab_only = true;
    struct kiln_model *vm = kiln_model_load(ma.model_path, vp, err, sizeof err);
    if (!vm) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        goto done;
    }
    const struct kiln_vocab *vv = kiln_model_vocab(vm);
    int64_t n = model_tokenize(cmd, vv, text, kiln_vocab_add_bos(vv), &ids);
    kiln_model_free(vm);
    if (n < 0) goto done;
    if (n == 0) {
        fprintf(stderr, "kiln %s: the prompt has no tokens\n", cmd);
        goto done;
    }
    if (ma.cparams.n_batch < (uint32_t)n) ma.cparams.n_batch = (uint32_t)n;
    if (!model_args_load(&ma, cmd, (uint32_t)n)) goto done;
    if ((uint32_t)n > kiln_n_ctx(ma.ctx)) {
        fprintf(stderr, "kiln %s: the prompt has %lld tokens, more than the context (%u)\n", cmd, (long long)n,
                kiln_n_ctx(ma.ctx));
        goto done;
    }
    if (logits_path && !(lf = fopen(logits_path, "wb"))) {
        fprintf(stderr, "kiln %s: cannot create %s\n", cmd, logits_path);
        goto done;
    }
    batch = kiln_batch_init((int32_t)n);
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    if (!batch.capacity || !decode_prompt(cmd, ma.ctx, &batch, ids, n, 0, lf != NULL, lf, n_vocab)) goto done;
    if (lf && fclose(lf) != 0) {
        lf = NULL;
        fprintf(stderr, "kiln %s: cannot write %s\n", cmd, logits_path);
        goto done;
    }
    lf = NULL;
    printf("{\"tokens\": ");
    print_ids_json(stdout, ids, n);
    printf(", \"n_vocab\": %lld}\n", (long long)n_vocab);
    rc = EXIT_OK;
done:
    if (lf) fclose(lf);
    kiln_batch_free(&batch);
    free(ids);
    free(owned);
    model_args_free(&ma);
    return rc;
}

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    struct model_args ma;
    model_args_init(&ma);
    const char *prompt = NULL, *prompt_file = NULL;
    int n_predict = 64;
    float temp = 0.0f;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln run -m MODEL (-p PROMPT | -f FILE) [-n N] [--temp 0] [--json] [options]\n"
                   "Generates up to N tokens (default 64) after the prompt, streaming them to stdout;\n"
                   "stops at an end-of-generation token. --json prints {\"tokens\": [...], \"text\": \"...\"}\n"
                   "of the generated part only.\n%s",
                   model_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) {
            if (!(prompt = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "-f") || !strcmp(o, "--file")) {
            if (!(prompt_file = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 0, 1 << 24, &n_predict))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--temp")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_f32(cmd, o, v, 0.0f, 100.0f, &temp))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--json")) {
            json = true;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (!prompt == !prompt_file) return tool_usage_error(cmd, "give exactly one of -p PROMPT or -f FILE");
    if (temp != 0.0f) return tool_usage_error(cmd, "only --temp 0 (greedy) is supported so far");

    char *owned;
    const char *text = read_prompt(cmd, prompt, prompt_file, &owned);
    if (!text) return EXIT_RUNTIME;
    int rc = EXIT_RUNTIME;
    int32_t *ids = NULL, *out = NULL;
    struct kiln_batch batch = {0};
    char *piece = NULL, *all = NULL;
    if (!model_args_load(&ma, cmd, 0)) goto done;
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    int64_t n = model_tokenize(cmd, v, text, kiln_vocab_add_bos(v), &ids);
    if (n < 0) goto done;
    if (n == 0) {
        fprintf(stderr, "kiln %s: the prompt has no tokens\n", cmd);
        goto done;
    }
    if (n + n_predict > kiln_n_ctx(ma.ctx)) {
        int64_t room = (int64_t)kiln_n_ctx(ma.ctx) - n;
        if (room <= 0) {
            fprintf(stderr, "kiln %s: the prompt has %lld tokens, the context %u\n", cmd, (long long)n,
                    kiln_n_ctx(ma.ctx));
            goto done;
        }
        n_predict = (int)room;
    }
    batch = kiln_batch_init(512);
    out = malloc(sizeof(int32_t) * (size_t)(n_predict + 1));
    piece = malloc(256);
    if (!batch.capacity || !out || !piece) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        goto done;
    }
    if (!decode_prompt(cmd, ma.ctx, &batch, ids, n, 0, false, NULL, n_vocab)) goto done;
    int n_out = 0;
    for (int i = 0; i < n_predict; i++) {
        int32_t tok = argmax(kiln_get_logits_ith(ma.ctx, -1), n_vocab);
        if (kiln_vocab_is_eog(v, tok)) break;
        out[n_out++] = tok;
        if (!json) {
            int64_t len = kiln_token_to_piece(v, tok, piece, 256, false);
            if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
        }
        if (i + 1 == n_predict) break;
        kiln_batch_clear(&batch);
        kiln_batch_add(&batch, tok, (int32_t)(n + i), 0, true);
        if (kiln_decode(ma.ctx, &batch) != 0) {
            fprintf(stderr, "\nkiln %s: decode failed: %s\n", cmd, kiln_context_error(ma.ctx));
            goto done;
        }
    }
    if (json) {
        size_t size = (size_t)n_out * 32 + 64;
        all = malloc(size);
        int64_t len = all ? kiln_detokenize(v, out, n_out, all, size, false, false) : -1;
        if (len < 0 && len != KILN_ERR_INVALID && all) {
            size = (size_t)-len + 1;
            char *bigger = realloc(all, size);
            if (bigger) all = bigger;
            len = bigger ? kiln_detokenize(v, out, n_out, all, size, false, false) : -1;
        }
        if (len < 0) len = 0;
        printf("{\"tokens\": ");
        print_ids_json(stdout, out, n_out);
        printf(", \"text\": ");
        tool_json_str(stdout, all ? all : "", (size_t)len);
        printf("}\n");
    } else {
        printf("\n");
    }
    rc = EXIT_OK;
done:
    free(all);
    free(piece);
    free(out);
    kiln_batch_free(&batch);
    free(ids);
    free(owned);
    model_args_free(&ma);
    return rc;
}
