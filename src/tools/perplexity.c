/*
 * perplexity.c - `kiln perplexity`: llama.cpp's method. The text is tokenized
 * once with BOS, cut into chunks of n_ctx tokens whose first token becomes BOS,
 * each chunk is evaluated from an empty cache, and the second half of every
 * chunk is scored: PPL = exp(mean negative log-likelihood).
 */
#include "model_args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log softmax(l)[tok] in double, as the reference computes it */
static double log_prob(const float *l, int64_t n, int32_t tok) {
    float mx = l[0];
    for (int64_t j = 1; j < n; j++)
        if (l[j] > mx) mx = l[j];
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += exp((double)(l[j] - mx));
    return (double)(l[tok] - mx) - log(s);
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity";
    struct model_args ma;
    model_args_init(&ma);
    ma.cparams.n_ctx = 512;
    const char *file = NULL;
    bool json = false;
    int max_chunks = 0;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln perplexity -m MODEL -f TEXT [-c N] [--chunks N] [--json] [options]\n"
                   "llama.cpp's method: chunks of N tokens (-c, default 512) each starting with BOS,\n"
                   "the second half of each chunk scored. Prints PPL = x +/- y; --json prints\n"
                   "{\"ppl\": x, \"ppl_uncertainty\": y, \"n_ctx\": N, \"n_batch\": B, \"n_chunks\": C, \"n_tokens\": T, \"scored\": S}.\n%s",
                   model_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "-f") || !strcmp(o, "--file")) {
            if (!(file = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--chunks")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 1 << 30, &max_chunks))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--json")) {
            json = true;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (!file) return tool_usage_error(cmd, "-f TEXT is required");
    if (ma.cparams.n_ctx < 4) return tool_usage_error(cmd, "-c must be at least 4");
    const int n_ctx = (int)ma.cparams.n_ctx;
    /* a chunk is decoded in batches of -b tokens (default: the whole chunk at once) */
    if (!ma.batch_set || ma.cparams.n_batch > (uint32_t)n_ctx) ma.cparams.n_batch = (uint32_t)n_ctx;
    const int n_batch = (int)ma.cparams.n_batch;

    int rc = EXIT_RUNTIME;
    int32_t *toks = NULL;
    struct kiln_batch batch = {0};
    size_t text_len;
    char *text = tool_read_file(cmd, file, TOOL_TEXT_MAX, &text_len);
    if (!text) return EXIT_RUNTIME;
    if (tool_text_has_nul(cmd, file, text, text_len)) goto done;
    if (!model_args_load(&ma, cmd, 0)) goto done;
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    int64_t n = model_tokenize(cmd, v, text, true, &toks);
    if (n < 0) goto done;
    int64_t n_chunk = n / n_ctx;
    if (max_chunks && n_chunk > max_chunks) n_chunk = max_chunks;
    if (n_chunk < 1) {
        fprintf(stderr, "kiln %s: the text has %lld tokens, fewer than one chunk of %d\n", cmd, (long long)n, n_ctx);
        goto done;
    }
    batch = kiln_batch_init(n_batch);
    if (!batch.capacity) goto done;
    const int first = n_ctx / 2;
    double nll = 0, nll2 = 0;
    long count = 0;
    struct tool_progress bar;
    tool_progress_init(&bar, "perplexity");
    for (int64_t k = 0; k < n_chunk; k++) {
        const int32_t *chunk = toks + k * n_ctx;
        kiln_kv_clear(ma.ctx);
        for (int i0 = 0; i0 < n_ctx; i0 += n_batch) {
            int i1 = i0 + n_batch < n_ctx ? i0 + n_batch : n_ctx;
            kiln_batch_clear(&batch);
            for (int i = i0; i < i1; i++) {
                int32_t tok = i == 0 && kiln_vocab_add_bos(v) ? kiln_vocab_bos(v) : chunk[i];
                kiln_batch_add(&batch, tok, i, 0, i >= first);
            }
            if (kiln_decode(ma.ctx, &batch) != 0) {
                fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ma.ctx));
                goto done;
            }
            for (int i = i0 > first ? i0 : first; i < i1 && i < n_ctx - 1; i++) {
                const float *l = kiln_get_logits_ith(ma.ctx, i - i0);
                /* NaN or uniform logits would score as 1/n_vocab: a plausible, wrong PPL */
                if (!tool_logits_ok(cmd, ma.model, l, n_vocab, "position %d of chunk %lld (token %lld of the text)",
                                    i, (long long)k + 1, (long long)(k * n_ctx + i)))
                    goto done;
                double lp = log_prob(l, n_vocab, chunk[i + 1]);
                nll -= lp;
                nll2 += lp * lp;
                count++;
            }
        }
        tool_progress_update(&bar, (float)(k + 1) / (float)n_chunk);
    }
    tool_progress_done(&bar);
    double mean = nll / count, mean2 = nll2 / count;
    double ppl = exp(mean);
    double var = mean2 - mean * mean; /* rounding can take equal scores a hair below 0 */
    double unc = count > 1 && var > 0 ? ppl * sqrt(var / (double)(count - 1)) : 0.0;
    if (!isfinite(ppl) || !isfinite(unc)) { /* finite logits so extreme that exp overflows: no number to print */
        fprintf(stderr, "kiln %s: the perplexity overflows a double (mean negative log-likelihood %g)\n", cmd, mean);
        goto done;
    }
    if (json)
        printf("{\"ppl\": %.6f, \"ppl_uncertainty\": %.6f, \"n_ctx\": %d, \"n_batch\": %d, \"n_chunks\": %lld, "
               "\"n_tokens\": %lld, \"scored\": %ld}\n",
               ppl, unc, n_ctx, n_batch, (long long)n_chunk, (long long)n, count);
    else
        printf("PPL = %.4f +/- %.4f (%lld chunks of %d tokens, %ld scored)\n", ppl, unc, (long long)n_chunk, n_ctx,
               count);
    rc = EXIT_OK;
done:
    kiln_batch_free(&batch);
    free(toks);
    free(text);
    model_args_free(&ma);
    return rc;
}
