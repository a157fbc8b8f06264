/*
 * bench.c - `kiln bench`: like llama-bench. Prompt processing (pp: n_prompt
 * random tokens in one batch) and generation (tg: n_gen tokens one at a time),
 * tokens/s as mean and standard deviation over repetitions after a warm-up;
 * plus the machine's measured memory read bandwidth, the bound of tg.
 */
#include "model_args.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory read bandwidth: threads sum disjoint parts of a large buffer */

struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *bw_worker(void *arg) {
    struct bw_arg *a = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= a->n; i += 4) {
        s0 += a->p[i];
        s1 += a->p[i + 1];
        s2 += a->p[i + 2];
        s3 += a->p[i + 3];
    }
    a->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double measure_bandwidth(int n_threads) {
    const size_t bytes = (size_t)512 << 20;
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    size_t n = bytes / sizeof(uint64_t);
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[64];
        struct bw_arg args[64];
        int nt = n_threads < 64 ? n_threads : 64;
        double t0 = tool_now();
        for (int i = 0; i < nt; i++) {
            args[i] = (struct bw_arg){buf + n / nt * i, n / nt, 0};
            if (i > 0) pthread_create(&th[i], NULL, bw_worker, &args[i]);
        }
        bw_worker(&args[0]);
        for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
        double dt = tool_now() - t0;
        volatile uint64_t sink = 0;
        for (int i = 0; i < nt; i++) sink += args[i].sum;
        (void)sink;
        double gbs = (double)bytes / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

/* ---- runs */

/* n tokens in batches of the batch's capacity (-b), as llama-bench does */
static bool run_pp(struct kiln_context *ctx, struct kiln_batch *b, const int32_t *toks, int n) {
    kiln_kv_clear(ctx);
    for (int i0 = 0; i0 < n; i0 += b->capacity) {
        kiln_batch_clear(b);
        for (int i = i0; i < n && i < i0 + b->capacity; i++) kiln_batch_add(b, toks[i], i, 0, i == n - 1);
        if (kiln_decode(ctx, b) != 0) return false;
    }
    return true;
}

static bool run_tg(struct kiln_context *ctx, struct kiln_batch *b, const int32_t *toks, int n) {
    kiln_kv_clear(ctx);
    for (int i = 0; i < n; i++) {
        kiln_batch_clear(b);
        kiln_batch_add(b, toks[i], i, 0, true);
        if (kiln_decode(ctx, b) != 0) return false;
    }
    return true;
}

struct result {
    int n_prompt, n_gen;
    double avg, sd;
};

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    struct model_args ma;
    model_args_init(&ma);
    int n_prompt = 128, n_gen = 64, reps = 3;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln bench -m MODEL [-p 128] [-n 64] [-r 3] [-t 2] [-o md|json]\n"
                   "pp: -p random tokens in one batch; tg: -n tokens one at a time; -r repetitions after a\n"
                   "warm-up; mean and standard deviation of tokens/s. 0 skips a test.\n%s",
                   model_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "-p") || !strcmp(o, "--n-prompt")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 0, 1 << 20, &n_prompt))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-n") || !strcmp(o, "--n-gen")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 0, 1 << 20, &n_gen))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-r") || !strcmp(o, "--repetitions")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 1000, &reps))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!strcmp(v, "json")) json = true;
            else if (strcmp(v, "md")) return tool_usage_error(cmd, "-o takes md or json, not '%s'", v);
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (n_prompt == 0 && n_gen == 0) return tool_usage_error(cmd, "nothing to do: -p 0 and -n 0");
    if (ma.cparams.n_ctx == 0) ma.cparams.n_ctx = (uint32_t)(n_prompt + n_gen + 16);
    if (ma.cparams.n_ctx < (uint32_t)(n_prompt > n_gen ? n_prompt : n_gen))
        return tool_usage_error(cmd, "-c %u is smaller than the test (-p %d, -n %d): raise -c or leave it out",
                                ma.cparams.n_ctx, n_prompt, n_gen);
    if (!ma.batch_set || ma.cparams.n_batch > (uint32_t)n_prompt)
        ma.cparams.n_batch = (uint32_t)(n_prompt > 0 ? n_prompt : 1);

    int rc = EXIT_RUNTIME;
    int32_t *toks = NULL;
    double *ts = NULL;
    struct kiln_batch batch = {0};
    if (!model_args_load(&ma, cmd, (uint32_t)(n_prompt + n_gen))) goto done;
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    int n_tok = (n_prompt > n_gen ? n_prompt : n_gen) + 1;
    toks = malloc(sizeof(int32_t) * (size_t)n_tok);
    ts = malloc(sizeof(double) * (size_t)reps);
    batch = kiln_batch_init(model_args_n_batch(&ma));
    if (!toks || !ts || !batch.capacity) goto done;
    uint64_t s = 1;
    for (int i = 0; i < n_tok; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    struct result res[2];
    int n_res = 0;
    struct tool_progress bar;
    tool_progress_init(&bar, "bench");
    const int n_runs = ((n_prompt > 0) + (n_gen > 0)) * (reps + 1);
    int runs_done = 0;
    for (int test = 0; test < 2; test++) {
        int n = test == 0 ? n_prompt : n_gen;
        if (n == 0) continue;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
            tool_progress_update(&bar, (float)runs_done++ / (float)n_runs);
            double t0 = tool_now();
            bool ok = test == 0 ? run_pp(ma.ctx, &batch, toks, n) : run_tg(ma.ctx, &batch, toks, n);
            double dt = tool_now() - t0;
            if (!ok) {
                fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ma.ctx));
                goto done;
            }
            if (r >= 0) ts[r] = n / dt;
        }
        double sum = 0, sq = 0;
        for (int r = 0; r < reps; r++) sum += ts[r];
        double avg = sum / reps;
        for (int r = 0; r < reps; r++) sq += (ts[r] - avg) * (ts[r] - avg);
        res[n_res++] = (struct result){test == 0 ? n : 0, test == 1 ? n : 0, avg, reps > 1 ? sqrt(sq / (reps - 1)) : 0};
    }
    tool_progress_done(&bar);
    char desc[128];
    kiln_model_desc(ma.model, desc, sizeof desc);
    size_t msize = kiln_model_size(ma.model);
    int64_t n_params = kiln_model_n_params(ma.model);
    double bw = measure_bandwidth(ma.n_threads);
    if (json) {
        printf("[\n");
        for (int i = 0; i < n_res; i++) {
            printf("  {\"model_type\": ");
            tool_json_str(stdout, desc, strlen(desc));
            printf(", \"model_size\": %zu, \"model_n_params\": %lld, \"n_threads\": %d, \"n_prompt\": %d, "
                   "\"n_gen\": %d, \"n_batch\": %d, \"avg_ts\": %.3f, \"stddev_ts\": %.3f, \"mem_read_gbs\": %.2f}%s\n",
                   msize, (long long)n_params, ma.n_threads, res[i].n_prompt, res[i].n_gen, batch.capacity,
                   res[i].avg, res[i].sd, bw, i + 1 < n_res ? "," : "");
        }
        printf("]\n");
    } else {
        printf("| model | size | params | backend | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | --- | ---: |\n");
        for (int i = 0; i < n_res; i++)
            printf("| %s | %.2f MiB | %.2f M | CPU | %d | %s%d | %.2f ± %.2f |\n", desc, (double)msize / 1048576.0,
                   (double)n_params / 1e6, ma.n_threads, res[i].n_prompt ? "pp" : "tg",
                   res[i].n_prompt ? res[i].n_prompt : res[i].n_gen, res[i].avg, res[i].sd);
        printf("\nmemory read bandwidth: %.1f GB/s (%d threads); tg bound for this model: %.1f t/s\n", bw,
               ma.n_threads, bw * 1e9 / (double)msize);
    }
    rc = EXIT_OK;
done:
    kiln_batch_free(&batch);
    free(ts);
    free(toks);
    model_args_free(&ma);
    return rc;
}
