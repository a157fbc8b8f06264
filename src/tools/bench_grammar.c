/*
 * bench_grammar.c - `kiln bench --json-schema FILE` (or --grammar-file): the
 * cost of structured output. The schema's compile time, then generation of -n
 * tokens sampled with llama.cpp's default chain, without and with the grammar
 * (round-robin, after a warm-up run), on the same prompt: tokens per second of
 * each, and the time of each token's mask (median, 99th percentile, maximum).
 * When the grammar completes (an end-of-generation token), it starts over.
 */
#include "model_args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT 16 /* tokens decoded before generation */

static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_f64);
    int k = (int)ceil(p * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* One run of n tokens after the prompt; mask times (seconds) appended to *mt when the
 * sampler holds a grammar. Returns the run's seconds, < 0 on failure. */
static double run(const char *cmd, struct kiln_context *ctx, const struct kiln_vocab *v, struct kiln_sampler *s,
                  struct kiln_batch *b, const int32_t *prompt, int n, int64_t n_vocab, uint64_t *mask,
                  size_t n_words, double *mt, int *n_mt) {
    kiln_kv_clear(ctx);
    kiln_sampler_reset(s);
    if (!decode_prompt(cmd, ctx, NULL, b, prompt, PROMPT, 0, false, NULL, NULL)) return -1;
    struct kiln_grammar_matcher *gm = kiln_sampler_grammar(s);
    struct kiln_batch one = kiln_batch_init(1);
    if (!one.capacity) return -1;
    double t0 = tool_now();
    for (int i = 0; i < n; i++) {
        if (gm) {
            double m0 = tool_now();
            if (!kiln_grammar_matcher_fill_mask(gm, mask, n_words)) {
                fprintf(stderr, "kiln %s: grammar: %s\n", cmd, kiln_grammar_matcher_error(gm));
                kiln_batch_free(&one);
                return -1;
            }
            mt[(*n_mt)++] = tool_now() - m0;
        }
        int32_t tok = kiln_sampler_sample(s, kiln_get_logits_ith(ctx, -1), n_vocab);
        if (tok < 0) {
            fprintf(stderr, "kiln %s: sampling failed: %s\n", cmd, kiln_sampler_last_error());
            kiln_batch_free(&one);
            return -1;
        }
        kiln_sampler_accept(s, tok);
        if (gm && (kiln_vocab_is_eog(v, tok) || kiln_grammar_matcher_is_done(gm))) kiln_grammar_matcher_reset(gm);
        kiln_batch_clear(&one);
        kiln_batch_add(&one, tok, PROMPT + i, 0, true);
        if (kiln_decode(ctx, &one) != 0) {
            fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ctx));
            kiln_batch_free(&one);
            return -1;
        }
    }
    double dt = tool_now() - t0;
    kiln_batch_free(&one);
    return dt;
}

int bench_grammar(struct model_args *ma, const char *cmd, const char *path, bool schema, int n, int reps, bool json) {
    size_t len;
    char *text = tool_read_file(cmd, path, TOOL_TEXT_MAX, &len), err[512];
    if (!text) return EXIT_RUNTIME;
    /* compile: the median of 5 */
    double ct[5];
    struct kiln_grammar *g = NULL;
    for (int k = 0; k < 5; k++) {
        kiln_grammar_free(g);
        double t0 = tool_now();
        g = schema ? kiln_grammar_from_json_schema(text, len, err, sizeof err) : kiln_grammar_parse(text, len, NULL, err, sizeof err);
        ct[k] = tool_now() - t0;
        if (!g) {
            fprintf(stderr, "kiln %s: %s: %s\n", cmd, path, err);
            free(text);
            return EXIT_USAGE;
        }
    }
    free(text);
    int rc = EXIT_RUNTIME;
    struct kiln_grammar_vocab *gv = NULL;
    struct kiln_sampler *plain = NULL, *held = NULL;
    struct kiln_batch b = {0};
    double *mt = NULL, *tg[2] = {NULL, NULL};
    uint64_t *mask = NULL;
    int32_t prompt[PROMPT];
    if (ma->cparams.n_ctx == 0) ma->cparams.n_ctx = (uint32_t)(PROMPT + n + 16);
    if (!ma->batch_set) ma->cparams.n_batch = PROMPT;
    if (!model_args_load(ma, cmd, (uint32_t)(PROMPT + n))) goto done;
    const struct kiln_vocab *v = kiln_model_vocab(ma->model);
    const int64_t n_vocab = kiln_model_hparams(ma->model)->n_vocab;
    double t0 = tool_now();
    if (!(gv = kiln_grammar_vocab_new(v, err, sizeof err))) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        goto done;
    }
    double t_index = tool_now() - t0;
    struct kiln_sampling_params sp = kiln_sampling_default_params();
    sp.seed = 1;
    plain = kiln_sampler_from_params(&sp);
    held = kiln_sampler_chain_new();
    if (!plain || !held || !kiln_sampler_chain_add(held, kiln_sampler_init_grammar(g, gv)) ||
        !kiln_sampler_chain_add(held, kiln_sampler_from_params(&sp))) {
        fprintf(stderr, "kiln %s: %s\n", cmd, kiln_sampler_last_error());
        goto done;
    }
    size_t n_words = ((size_t)kiln_grammar_vocab_n_tokens(gv) + 63) / 64;
    mt = malloc(sizeof *mt * (size_t)n * (size_t)(reps + 1));
    tg[0] = malloc(sizeof *tg[0] * (size_t)reps);
    tg[1] = malloc(sizeof *tg[1] * (size_t)reps);
    mask = malloc(sizeof *mask * n_words);
    b = kiln_batch_init(PROMPT);
    if (!mt || !tg[0] || !tg[1] || !mask || !b.capacity) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        goto done;
    }
    uint64_t s = 7;
    for (int i = 0; i < PROMPT; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((s >> 33) % (uint64_t)kiln_vocab_n_tokens(v));
    }
    /* the warm-up (rep -1) fills the grammar's caches: its masks are the cold ones */
    int n_mt = 0, n_cold = 0;
    for (int rep = -1; rep < reps; rep++)
        for (int k = 0; k < 2; k++) {
            double dt = run(cmd, ma->ctx, v, k ? held : plain, &b, prompt, n, n_vocab, mask, n_words, mt, &n_mt);
            if (dt < 0) goto done;
            if (rep < 0 && k) n_cold = n_mt;
            if (rep >= 0) tg[k][rep] = n / dt;
        }
    double cold_max = 0, cold_p99 = pct(mt, n_cold, 0.99);
    for (int i = 0; i < n_cold; i++) cold_max = mt[i] > cold_max ? mt[i] : cold_max;
    double *warm = mt + n_cold;
    int n_warm = n_mt - n_cold;
    double med = pct(warm, n_warm, 0.5), p99 = pct(warm, n_warm, 0.99), mx = pct(warm, n_warm, 1.0);
    double avg[2], sd[2];
    for (int k = 0; k < 2; k++) {
        double sum = 0, sq = 0;
        for (int r = 0; r < reps; r++) sum += tg[k][r];
        avg[k] = sum / reps;
        for (int r = 0; r < reps; r++) sq += (tg[k][r] - avg[k]) * (tg[k][r] - avg[k]);
        sd[k] = reps > 1 ? sqrt(sq / (reps - 1)) : 0;
    }
    double cmed = pct(ct, 5, 0.5);
    char desc[128];
    kiln_model_desc(ma->model, desc, sizeof desc);
    if (json) {
        printf("{\"model_filename\": ");
        tool_json_str(stdout, ma->model_path, strlen(ma->model_path));
        printf(", \"model_type\": ");
        tool_json_str(stdout, desc, strlen(desc));
        printf(", \"grammar_file\": ");
        tool_json_str(stdout, path, strlen(path));
        printf(", \"n_vocab\": %lld, \"n_threads\": %d, \"n_gen\": %d, \"reps\": %d, \"compile_ms\": %.3f, "
               "\"vocab_index_ms\": %.1f, \"mask_us_median\": %.2f, \"mask_us_p99\": %.2f, \"mask_us_max\": %.2f, "
               "\"mask_us_cold_p99\": %.2f, \"mask_us_cold_max\": %.2f, \"tg_ts\": %.3f, \"tg_sd\": %.3f, "
               "\"tg_grammar_ts\": %.3f, \"tg_grammar_sd\": %.3f, \"ratio\": %.4f}\n",
               (long long)n_vocab, ma->n_threads, n, reps, cmed * 1e3, t_index * 1e3, med * 1e6, p99 * 1e6, mx * 1e6,
               cold_p99 * 1e6, cold_max * 1e6, avg[0], sd[0], avg[1], sd[1], avg[1] / avg[0]);
    } else {
        printf("| model | n_vocab | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: |\n");
        printf("| %s | %lld | %d | tg%d | %.2f ± %.2f |\n", desc, (long long)n_vocab, ma->n_threads, n, avg[0], sd[0]);
        printf("| %s | %lld | %d | tg%d + grammar | %.2f ± %.2f |\n\n", desc, (long long)n_vocab, ma->n_threads, n,
               avg[1], sd[1]);
        printf("grammar %s: compile %.2f ms (median of 5), vocabulary index %.1f ms\n", path, cmed * 1e3,
               t_index * 1e3);
        printf("mask per token: median %.1f us, p99 %.1f us, max %.1f us (%d masks after the warm-up run; "
               "warm-up p99 %.1f us, max %.1f us)\n",
               med * 1e6, p99 * 1e6, mx * 1e6, n_warm, cold_p99 * 1e6, cold_max * 1e6);
        printf("constrained / unconstrained tg: %.3f\n", avg[1] / avg[0]);
    }
    rc = EXIT_OK;
done:
    kiln_batch_free(&b);
    kiln_sampler_free(plain);
    kiln_sampler_free(held);
    kiln_grammar_free(g);
    kiln_grammar_vocab_free(gv);
    free(mt), free(tg[0]), free(tg[1]), free(mask);
    return rc;
}
