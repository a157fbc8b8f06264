/*
 * run.c - `kiln run`: generate text after a prompt with the sampler chain,
 * streaming to stdout; --json prints the generated part as one object; -v adds
 * load time and prompt / generation speeds on stderr.
 */
#include "model_args.h"

#include <stdlib.h>
#include <string.h>

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    struct model_args ma;
    struct gen_args ga;
    model_args_init(&ma);
    gen_args_init(&ga);
    ga.n_predict = 64;
    struct prompt_args pa = {0};
    bool json = false, verbose = false;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r == 0) r = prompt_args_parse(&pa, cmd, argc, argv, &i);
        if (r == 0) r = gen_args_parse(&ga, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln run -m MODEL (-p PROMPT | -f FILE) [-n N] [sampling options] [--json] [-v]\n"
                   "Generates up to N tokens (default 64) after the prompt (BOS per the model), streaming\n"
                   "them to stdout; stops at an end-of-generation token (with a grammar or a JSON schema:\n"
                   "only where the output is complete). --json prints\n"
                   "{\"tokens\": [...], \"text\": \"...\"} of the generated part only; -v prints load time\n"
                   "and prompt/generation tokens per second on stderr.\n%s%s",
                   model_args_help(), gen_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "--json")) {
            json = true;
        } else if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) {
            verbose = true;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    int rc;
    const char *text = prompt_args_text(&pa, cmd, &rc);
    if (!text) return rc;
    if ((rc = gen_args_prepare(&ga, cmd)) != EXIT_OK) {
        prompt_args_free(&pa);
        return rc;
    }
    rc = EXIT_RUNTIME;
    int32_t *ids = NULL;
    char *all = NULL;
    struct kiln_batch batch = {0};
    struct kiln_sampler *smpl = NULL;
    struct gen_out out = {0};
    double t0 = tool_now();
    if (!model_args_load(&ma, cmd, 0)) goto done;
    double t_load = tool_now() - t0;
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    if (!(smpl = gen_args_sampler(&ga, cmd, v))) goto done;
    int64_t n = model_tokenize(cmd, v, text, kiln_vocab_add_bos(v), &ids);
    if (n < 0) goto done;
    if (n == 0) {
        fprintf(stderr, "kiln %s: the prompt has no tokens\n", cmd);
        goto done;
    }
    if (n >= kiln_n_ctx(ma.ctx)) {
        fprintf(stderr, "kiln %s: the prompt has %lld tokens, the context only %u (raise -c)\n", cmd, (long long)n,
                kiln_n_ctx(ma.ctx));
        goto done;
    }
    batch = kiln_batch_init(model_args_n_batch(&ma)); /* a longer prompt is decoded in chunks */
    if (!batch.capacity) goto done;
    t0 = tool_now();
    if (!decode_prompt(cmd, ma.ctx, ma.model, &batch, ids, n, 0, false, NULL, NULL)) goto done;
    double t_prompt = tool_now() - t0;
    for (int64_t i = 0; i < n; i++) kiln_sampler_accept_prompt(smpl, ids[i]); /* the prompt counts for penalties */
    t0 = tool_now();
    int64_t n_gen = generate(cmd, ma.ctx, ma.model, smpl, (int32_t)n, ga.n_predict, json ? NULL : stdout, &out);
    double t_gen = tool_now() - t0;
    if (n_gen < 0) goto done;
    if (json) {
        size_t size = (size_t)out.n * 32 + 64;
        all = malloc(size);
        int64_t len = all ? kiln_detokenize(v, out.ids, out.n, all, size, false, false) : -1;
        if (len < 0 && len != KILN_ERR_INVALID && all) {
            size = (size_t)-len + 1;
            char *bigger = realloc(all, size);
            if (bigger) all = bigger;
            len = bigger ? kiln_detokenize(v, out.ids, out.n, all, size, false, false) : -1;
        }
        if (len < 0) len = 0;
        printf("{\"tokens\": ");
        print_ids_json(stdout, out.ids, out.n);
        printf(", \"text\": ");
        tool_json_str(stdout, all ? all : "", (size_t)len);
        printf("}\n");
    } else {
        printf("\n");
    }
    gen_note_ctx_full(cmd, ma.ctx, &out, n_gen, ga.n_predict);
    if (verbose)
        fprintf(stderr, "load %.1f ms; prompt %lld tokens %.1f t/s; generation %lld tokens %.1f t/s\n",
                t_load * 1e3, (long long)n, n / t_prompt, (long long)n_gen, n_gen > 0 ? n_gen / t_gen : 0.0);
    rc = EXIT_OK;
done:
    gen_out_free(&out);
    kiln_sampler_free(smpl);
    free(all);
    kiln_batch_free(&batch);
    free(ids);
    prompt_args_free(&pa);
    gen_args_free(&ga);
    model_args_free(&ma);
    return rc;
}
