/*
 * eval.c - `kiln eval`: a prompt in one batch; its tokens, and optionally every
 * position's logits as float32.
 */
#include "model_args.h"

#include "gguf.h"
#include "kiln-offline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void print_ids_json(FILE *f, const int32_t *ids, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", ids[i]);
    fputc(']', f);
}

bool decode_prompt(const char *cmd, struct kiln_context *ctx, const struct kiln_model *model,
                   struct kiln_batch *batch, const int32_t *ids, int64_t n, int32_t pos0, bool all, FILE *logits_out,
                   const char *logits_name) {
    const int64_t n_vocab = model ? kiln_model_hparams(model)->n_vocab : 0;
    for (int64_t i0 = 0; i0 < n; i0 += batch->capacity) {
        int64_t i1 = i0 + batch->capacity < n ? i0 + batch->capacity : n;
        kiln_batch_clear(batch);
        for (int64_t i = i0; i < i1; i++) kiln_batch_add(batch, ids[i], pos0 + (int32_t)i, 0, all || i == n - 1);
        if (kiln_decode(ctx, batch) != 0) {
            fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ctx));
            return false;
        }
        for (int64_t i = all ? i0 : n - 1; model && i < i1; i++) {
            const float *l = kiln_get_logits_ith(ctx, (int32_t)(i - i0));
            if (!tool_logits_ok(cmd, model, l, n_vocab, "position %lld", (long long)(pos0 + i))) return false;
            errno = 0;
            if (logits_out && fwrite(l, sizeof(float), (size_t)n_vocab, logits_out) != (size_t)n_vocab) {
                fprintf(stderr, "kiln %s: cannot write the logits to %s: %s\n", cmd, logits_name ? logits_name : "?",
                        errno ? strerror(errno) : "write error");
                return false;
            }
        }
    }
    return true;
}

int cmd_eval(int argc, char **argv) {
    const char *cmd = "eval";
    struct model_args ma;
    model_args_init(&ma);
    struct prompt_args pa = {0};
    const char *logits_path = NULL;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r == 0) r = prompt_args_parse(&pa, cmd, argc, argv, &i);
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
        } else if (!strcmp(o, "--logits")) {
            if (!(logits_path = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    int rc;
    const char *text = prompt_args_text(&pa, cmd, &rc);
    if (!text) return rc;
    rc = EXIT_RUNTIME;
    int32_t *ids = NULL;
    struct gguf_outfile lf = {.slot = -1}; /* --logits, replaced only when complete */
    struct kiln_batch batch = {0};
    char err[1024];
    /* tokenize first so the context can be sized for the whole prompt in one batch */
    struct kiln_model_params vp = kiln_model_default_params();
    vp.vocab_only = true;
    struct kiln_model *vm = kiln_model_load(ma.model_path, vp, err, sizeof err);
    if (!vm) {
        tool_file_error(cmd, ma.model_path, err);
        goto done;
    }
    const struct kiln_vocab *vv = kiln_model_vocab(vm);
    int64_t n = model_tokenize(cmd, vv, text, kiln_vocab_add_bos(vv), &ids);
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", kiln_model_arch(vm));
    int64_t n_ctx_train = 0;
    if (!gguf_get_int(kiln_model_gguf(vm), key, &n_ctx_train)) n_ctx_train = 0;
    kiln_model_free(vm);
    if (n < 0) goto done;
    if (n == 0) {
        fprintf(stderr, "kiln %s: the prompt has no tokens\n", cmd);
        goto done;
    }
    /* the whole prompt is one context: past the trained length only on request (-c), so a
     * long text gets this message instead of a context too large for memory */
    if (ma.cparams.n_ctx == 0 && n_ctx_train > 0 && n > n_ctx_train) {
        fprintf(stderr,
                "kiln %s: the prompt has %lld tokens, more than the model's context length (%lld): eval takes "
                "the whole prompt in one context; shorten it (or pass -c %lld to go past the trained length)\n",
                cmd, (long long)n, (long long)n_ctx_train, (long long)n);
        goto done;
    }
    if (ma.cparams.n_batch < (uint32_t)n) ma.cparams.n_batch = (uint32_t)n;
    if (!model_args_load(&ma, cmd, (uint32_t)n)) goto done;
    if ((uint32_t)n > kiln_n_ctx(ma.ctx)) {
        fprintf(stderr, "kiln %s: the prompt has %lld tokens, more than the context (%u)\n", cmd, (long long)n,
                kiln_n_ctx(ma.ctx));
        goto done;
    }
    /* every file eval reads is an input the logits must not replace */
    const char *inputs[] = {ma.model_path, pa.file};
    if (logits_path && (!gguf_outfile_check_inputs(logits_path, inputs, 2, err, sizeof err) ||
                        !gguf_outfile_open(&lf, logits_path, NULL, err, sizeof err))) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        goto done;
    }
    batch = kiln_batch_init((int32_t)n);
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    if (!batch.capacity || !decode_prompt(cmd, ma.ctx, ma.model, &batch, ids, n, 0, logits_path != NULL, lf.f,
                                          logits_path))
        goto done;
    if (logits_path && !gguf_outfile_commit(&lf, err, sizeof err)) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        goto done;
    }
    printf("{\"tokens\": ");
    print_ids_json(stdout, ids, n);
    printf(", \"n_vocab\": %lld}\n", (long long)n_vocab);
    rc = EXIT_OK;
done:
    gguf_outfile_abort(&lf);
    kiln_batch_free(&batch);
    free(ids);
    prompt_args_free(&pa);
    model_args_free(&ma);
    return rc;
}
