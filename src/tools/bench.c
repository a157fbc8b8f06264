/*
 * bench.c - `kiln bench`: like llama-bench. Prompt processing (pp: n_prompt
 * random tokens in one batch) and generation (tg: n_gen tokens one at a time)
 * for every combination of the -p/-n/-d/-t lists, after -d tokens already in
 * the cache; tokens/s as mean and standard deviation over repetitions after a
 * warm-up (taken round-robin over the tests, so that every test sees the same
 * machine); plus the machine's memory read bandwidth per thread count, the
 * bound of tg. Output md, json (llama-bench's field names) or csv.
 */
#define _DEFAULT_SOURCE /* madvise, MAP_ANONYMOUS */
#include "model_args.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kt-cpu.h"

/* ---- memory read bandwidth: threads sum disjoint parts of a buffer far larger than
 * the caches; the best of several short passes (a pass taken while something else
 * ran is slower, never faster), so the figure is stable from run to run. The buffer
 * sits in transparent huge pages, as a large model's repacked weights do
 * (the CPU_REPACK buffer type): the bound is measured on the memory tg streams. */

#define BW_BYTES ((size_t)512 << 20)
#define BW_PASSES 12

struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
    bool sparse;
};

/* Odd passes sum one word of every 64-byte line (the memory moves whole lines): one
 * thread summing every word measured 21 GB/s here, its adds the limit, where the
 * lines alone came at 28-30. Even passes sum every word (with 2 threads, 34 against
 * 33). */
static void *bw_worker(void *arg) {
    struct bw_arg *a = arg;
    uint64_t s[8] = {0};
    if (a->sparse)
        for (size_t i = 0; i + 64 <= a->n; i += 64)
            for (int k = 0; k < 8; k++) s[k] += a->p[i + 8 * k];
    else
        for (size_t i = 0; i + 8 <= a->n; i += 8)
            for (int k = 0; k < 8; k++) s[k] += a->p[i + k];
    a->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

static double measure_bandwidth(int n_threads) {
    uint64_t *buf = mmap(NULL, BW_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 0;
#ifdef MADV_HUGEPAGE
    madvise(buf, BW_BYTES, MADV_HUGEPAGE);
#endif
    memset(buf, 1, BW_BYTES);
    const size_t n = BW_BYTES / sizeof(uint64_t);
    const int nt = n_threads < 64 ? n_threads : 64;
    double best = 0;
    for (int pass = 0; pass < BW_PASSES; pass++) {
        pthread_t th[64];
        struct bw_arg args[64];
        int started = 1;
        const double t0 = tool_now();
        for (int i = 0; i < nt; i++) {
            args[i] = (struct bw_arg){buf + n / (size_t)nt * (size_t)i, n / (size_t)nt, 0, pass % 2 == 1};
            if (i > 0 && pthread_create(&th[i], NULL, bw_worker, &args[i]) == 0) started = i + 1;
            else if (i > 0) break;
        }
        bw_worker(&args[0]);
        for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
        const double dt = tool_now() - t0;
        volatile uint64_t sink = 0;
        for (int i = 0; i < started; i++) sink += args[i].sum;
        (void)sink;
        const double gbs = (double)(n / (size_t)nt * (size_t)started * sizeof(uint64_t)) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    munmap(buf, BW_BYTES);
    return best;
}

/* ---- runs: the cache is cleared and filled with depth tokens (untimed) before each */

static bool fill_depth(const char *cmd, struct kiln_context *ctx, struct kiln_batch *b, const int32_t *toks,
                       int depth) {
    kiln_kv_clear(ctx);
    return depth == 0 || decode_prompt(cmd, ctx, NULL, b, toks, depth, 0, false, NULL, NULL);
}

/* n tokens after depth, in batches of the batch's capacity (-b), as llama-bench does */
static bool run_pp(struct kiln_context *ctx, struct kiln_batch *b, const int32_t *toks, int n, int depth) {
    for (int i0 = 0; i0 < n; i0 += b->capacity) {
        kiln_batch_clear(b);
        for (int i = i0; i < n && i < i0 + b->capacity; i++) kiln_batch_add(b, toks[i], depth + i, 0, i == n - 1);
        if (kiln_decode(ctx, b) != 0) return false;
    }
    return true;
}

static bool run_tg(struct kiln_context *ctx, struct kiln_batch *b, const int32_t *toks, int n, int depth) {
    for (int i = 0; i < n; i++) {
        kiln_batch_clear(b);
        kiln_batch_add(b, toks[i], depth + i, 0, true);
        if (kiln_decode(ctx, b) != 0) return false;
    }
    return true;
}

/* ---- options: comma-separated lists of counts, as llama-bench takes them */

#define MAX_LIST 16

struct list {
    int v[MAX_LIST];
    int n;
};

static bool parse_list(const char *cmd, const char *flag, const char *s, int lo, int hi, struct list *out) {
    out->n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,")) {
        tool_usage_error(cmd, "%s takes a number or a comma-separated list, not '%s'", flag, s);
        return false;
    }
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) {
            tool_usage_error(cmd, "%s: at most %d values", flag, MAX_LIST);
            return false;
        }
        if (!tool_parse_int(cmd, flag, tok, lo, hi, &out->v[out->n])) return false;
        out->n++;
    }
    if (out->n == 0) {
        tool_usage_error(cmd, "%s takes a number or a comma-separated list, not '%s'", flag, s);
        return false;
    }
    return true;
}

static int list_max(const struct list *l) {
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

struct result {
    int n_threads, n_prompt, n_gen, n_depth;
    double avg_ns, sd_ns, avg_ts, sd_ts;
    double *samples_ns; /* reps each, into one array owned by cmd_bench */
    double bw;          /* GB/s with n_threads */
};

enum output { OUT_MD, OUT_JSON, OUT_CSV };

static void print_samples(const double *ns, int reps, int n, bool ts) {
    printf("[");
    for (int r = 0; r < reps; r++) printf(ts ? "%s%.3f" : "%s%.0f", r ? ", " : "", ts ? n / (ns[r] * 1e-9) : ns[r]);
    printf("]");
}

/* the KV cache's bytes, and what it would take if every layer kept every position */
struct kv_info {
    uint32_t n_ctx;
    size_t bytes, full;
};

/* experts per layer and used per token (0: dense), and what one token reads */
struct moe_info {
    int64_t n_expert, n_used, n_params_active;
    size_t active;
};

static void print_results(enum output out, const struct result *res, int n_res, int reps, const char *path,
                          const char *desc, const char *backends, size_t msize, int64_t n_params, int n_batch,
                          const char *test_time, const struct kv_info *kv, const struct moe_info *moe) {
    if (out == OUT_MD) {
        printf("| model | size | params | backend | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | --- | ---: |\n");
        for (int i = 0; i < n_res; i++) {
            char test[48];
            const struct result *r = &res[i];
            int len = snprintf(test, sizeof test, "%s%d", r->n_prompt ? "pp" : "tg", r->n_prompt ? r->n_prompt : r->n_gen);
            if (r->n_depth) snprintf(test + len, sizeof test - (size_t)len, " @ d%d", r->n_depth);
            printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %.2f ± %.2f |\n", desc, (double)msize / 1048576.0,
                   (double)n_params / 1e6, backends, r->n_threads, test, r->avg_ts, r->sd_ts);
        }
        printf("\n");
        /* with layers on a GPU this is still the host's memory, so say so */
        const bool gpu = strstr(backends, "CUDA") != NULL;
        for (int i = 0; i < n_res; i++) {
            bool seen = false;
            for (int j = 0; j < i; j++) seen |= res[j].n_threads == res[i].n_threads;
            if (!seen)
                printf("%smemory read bandwidth: %.1f GB/s (%d threads, best of %d passes over %zu MiB); tg bound for "
                       "this model%s: %.1f t/s\n",
                       gpu ? "host " : "", res[i].bw, res[i].n_threads, BW_PASSES, BW_BYTES >> 20,
                       gpu ? " on the CPU alone" : "", res[i].bw * 1e9 / (double)msize);
        }
        /* a mixture of experts reads a token's experts only: its bound is on those bytes */
        if (moe->n_expert > 0)
            for (int i = 0; i < n_res; i++) {
                bool seen = false;
                for (int j = 0; j < i; j++) seen |= res[j].n_threads == res[i].n_threads;
                if (!seen)
                    printf("experts: %lld used of %lld; active bytes per token %.2f MiB (%.2f M parameters); tg bound "
                           "on them (%d threads): %.1f t/s\n",
                           (long long)moe->n_used, (long long)moe->n_expert, (double)moe->active / 1048576.0,
                           (double)moe->n_params_active / 1e6, res[i].n_threads,
                           res[i].bw * 1e9 / (double)moe->active);
            }
        /* sliding-window layers keep a window's cells, not the context's */
        printf("KV cache at n_ctx %u: %.2f MiB", kv->n_ctx, (double)kv->bytes / 1048576.0);
        if (kv->full != kv->bytes)
            printf(" (every layer over every position: %.2f MiB; %.1f%%)", (double)kv->full / 1048576.0,
                   100.0 * (double)kv->bytes / (double)kv->full);
        printf("\n");
        return;
    }
    if (out == OUT_CSV)
        printf("model_filename,model_type,model_size,model_n_params,n_batch,n_threads,n_prompt,n_gen,n_depth,"
               "test_time,avg_ns,stddev_ns,avg_ts,stddev_ts,mem_read_gbs\n");
    else
        printf("[\n");
    for (int i = 0; i < n_res; i++) {
        const struct result *r = &res[i];
        if (out == OUT_CSV) {
            printf("\"%s\",\"%s\",%zu,%lld,%d,%d,%d,%d,%d,\"%s\",%.0f,%.0f,%.3f,%.3f,%.2f\n", path, desc, msize,
                   (long long)n_params, n_batch, r->n_threads, r->n_prompt, r->n_gen, r->n_depth, test_time, r->avg_ns,
                   r->sd_ns, r->avg_ts, r->sd_ts, r->bw);
            continue;
        }
        printf("  {\"model_filename\": ");
        tool_json_str(stdout, path, strlen(path));
        printf(", \"model_type\": ");
        tool_json_str(stdout, desc, strlen(desc));
        printf(", \"model_size\": %zu, \"model_n_params\": %lld, \"backends\": \"%s\", \"cpu_info\": ", msize,
               (long long)n_params, backends);
        const char *feat = kt_cpu_features();
        tool_json_str(stdout, feat, strlen(feat));
        printf(", \"n_batch\": %d, \"n_threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
               "\"test_time\": \"%s\", \"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.3f, \"stddev_ts\": %.3f, "
               "\"samples_ns\": ",
               n_batch, r->n_threads, r->n_prompt, r->n_gen, r->n_depth, test_time, r->avg_ns, r->sd_ns, r->avg_ts,
               r->sd_ts);
        print_samples(r->samples_ns, reps, 0, false);
        printf(", \"samples_ts\": ");
        print_samples(r->samples_ns, reps, r->n_prompt + r->n_gen, true);
        printf(", \"mem_read_gbs\": %.2f, \"n_ctx\": %u, \"kv_bytes\": %zu, \"kv_full_bytes\": %zu, \"n_expert\": %lld, "
               "\"n_expert_used\": %lld, \"model_size_active\": %zu, \"model_n_params_active\": %lld}%s\n",
               r->bw, kv->n_ctx, kv->bytes, kv->full, (long long)moe->n_expert, (long long)moe->n_used, moe->active,
               (long long)moe->n_params_active, i + 1 < n_res ? "," : "");
    }
    if (out == OUT_JSON) printf("]\n");
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    struct model_args ma;
    model_args_init(&ma);
    struct list pp = {{128}, 1}, tg = {{64}, 1}, depth = {{0}, 1}, threads = {{ma.n_threads}, 1};
    int reps = 3;
    enum output out = OUT_MD;
    const char *grammar_path = NULL;
    bool grammar_schema = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        /* lists first: -t is also a shared model option, with one value */
        if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !parse_list(cmd, o, v, 1, 512, &threads))
                return EXIT_USAGE;
            continue;
        }
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln bench -m MODEL [-p 128] [-n 64] [-d 0] [-t 2] [-r 3] [-o md|json|csv]\n"
                   "       kiln bench -m MODEL (--json-schema FILE | --grammar-file FILE) [-n 64] [-t 2] [-r 3] [-o md|json]\n"
                   "pp: -p random tokens in one batch; tg: -n tokens one at a time; after -d tokens already in\n"
                   "the cache; -r repetitions after a warm-up; mean and standard deviation of tokens/s.\n"
                   "-p, -n, -d, -t take comma-separated lists (every combination runs); 0 skips pp or tg.\n"
                   "With a schema or grammar: tg sampled without and with it (llama.cpp's default sampler), the\n"
                   "schema's compile time and each token's mask time (median, p99, max).\n%s",
                   model_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "-p") || !strcmp(o, "--n-prompt")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !parse_list(cmd, o, v, 0, 1 << 20, &pp))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-n") || !strcmp(o, "--n-gen")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !parse_list(cmd, o, v, 0, 1 << 20, &tg))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-d") || !strcmp(o, "--n-depth")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !parse_list(cmd, o, v, 0, 1 << 20, &depth))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--json-schema") || !strcmp(o, "--grammar-file")) {
            if (grammar_path) return tool_usage_error(cmd, "give one of --json-schema and --grammar-file");
            if (!(grammar_path = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
            grammar_schema = !strcmp(o, "--json-schema");
        } else if (!strcmp(o, "-r") || !strcmp(o, "--repetitions")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 1000, &reps))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!strcmp(v, "json")) out = OUT_JSON;
            else if (!strcmp(v, "csv")) out = OUT_CSV;
            else if (!strcmp(v, "md")) out = OUT_MD;
            else return tool_usage_error(cmd, "-o takes md, json or csv, not '%s'", v);
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (grammar_path) {
        if (tg.n != 1 || tg.v[0] < 1 || threads.n != 1 || out == OUT_CSV)
            return tool_usage_error(cmd, "with a schema or grammar: one -n of at least 1, one -t, -o md or json");
        ma.n_threads = threads.v[0];
        int grc = bench_grammar(&ma, cmd, grammar_path, grammar_schema, tg.v[0], reps, out == OUT_JSON);
        model_args_free(&ma);
        return grc;
    }
    const int max_p = list_max(&pp), max_n = list_max(&tg), max_d = list_max(&depth);
    if (max_p == 0 && max_n == 0) return tool_usage_error(cmd, "nothing to do: -p 0 and -n 0");
    const int max_run = max_p > max_n ? max_p : max_n;
    if ((int64_t)max_d + max_run > (1 << 20)) return tool_usage_error(cmd, "-d plus -p or -n is over 1048576 tokens");
    const uint32_t need = (uint32_t)(max_d + max_run);
    if (ma.cparams.n_ctx == 0) ma.cparams.n_ctx = need + 16;
    if (ma.cparams.n_ctx < need)
        return tool_usage_error(cmd, "-c %u is smaller than the test (-d %d plus -p/-n %d): raise -c or leave it out",
                                ma.cparams.n_ctx, max_d, max_run);
    int n_batch = max_p > 0 ? max_p : max_d > 0 ? (max_d < 512 ? max_d : 512) : 1;
    if (ma.batch_set && ma.cparams.n_batch < (uint32_t)n_batch) n_batch = (int)ma.cparams.n_batch; /* -b */
    ma.cparams.n_batch = (uint32_t)n_batch;
    ma.n_threads = list_max(&threads);

    int rc = EXIT_RUNTIME;
    int32_t *toks = NULL;
    double *samples = NULL;
    struct result *res = NULL;
    struct kiln_batch batch = {0};
    if (!model_args_load(&ma, cmd, need)) goto done;
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    const int n_tok = max_d + max_run + 1;
    const int max_res = threads.n * depth.n * (pp.n + tg.n);
    toks = malloc(sizeof(int32_t) * (size_t)n_tok);
    samples = malloc(sizeof(double) * (size_t)reps * (size_t)max_res);
    res = calloc((size_t)max_res, sizeof *res);
    batch = kiln_batch_init(n_batch);
    if (!toks || !samples || !res || !batch.capacity) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        goto done;
    }
    uint64_t s = 1;
    for (int i = 0; i < n_tok; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    int n_res = 0, runs_done = 0, n_runs = 0;
    for (int i = 0; i < pp.n; i++) n_runs += pp.v[i] > 0;
    for (int i = 0; i < tg.n; i++) n_runs += tg.v[i] > 0;
    n_runs *= threads.n * depth.n * (reps + 1);
    struct tool_progress bar;
    tool_progress_init(&bar, "bench");
    /* the tests in llama-bench's order; their repetitions are taken round-robin
     * (every test's warm-up, then every test's first timed run, ...) so that a drift in
     * the machine's speed falls on all of them alike (depth 0 against 4096, say) */
    for (int ti = 0; ti < threads.n; ti++)
        for (int di = 0; di < depth.n; di++)
            for (int k = 0; k < pp.n + tg.n; k++) {
                const bool is_pp = k < pp.n;
                const int n = is_pp ? pp.v[k] : tg.v[k - pp.n];
                if (n == 0) continue;
                res[n_res] = (struct result){threads.v[ti], is_pp ? n : 0, is_pp ? 0 : n, depth.v[di], 0, 0, 0, 0,
                                             samples + (size_t)n_res * (size_t)reps, 0};
                n_res++;
            }
    int cur_threads = 0;
    for (int rep = -1; rep < reps; rep++) /* rep = -1: warm-up */
        for (int i = 0; i < n_res; i++) {
            struct result *r = &res[i];
            const bool is_pp = r->n_prompt > 0;
            const int n = is_pp ? r->n_prompt : r->n_gen, d = r->n_depth;
            if (r->n_threads != cur_threads) kiln_set_n_threads(ma.ctx, cur_threads = r->n_threads);
            tool_progress_update(&bar, (float)runs_done++ / (float)n_runs);
            bool ok = fill_depth(cmd, ma.ctx, &batch, toks + n, d);
            const double t0 = tool_now();
            ok = ok && (is_pp ? run_pp(ma.ctx, &batch, toks, n, d) : run_tg(ma.ctx, &batch, toks, n, d));
            const double dt = tool_now() - t0;
            if (!ok) {
                fprintf(stderr, "kiln %s: decode failed: %s\n", cmd, kiln_context_error(ma.ctx));
                goto done;
            }
            if (rep >= 0) r->samples_ns[rep] = dt * 1e9;
        }
    for (int i = 0; i < n_res; i++) {
        struct result *r = &res[i];
        const int n = r->n_prompt > 0 ? r->n_prompt : r->n_gen;
        double sum = 0, sq = 0, sum_ts = 0, sq_ts = 0;
        for (int rep = 0; rep < reps; rep++) sum += r->samples_ns[rep], sum_ts += n / (r->samples_ns[rep] * 1e-9);
        r->avg_ns = sum / reps;
        r->avg_ts = sum_ts / reps;
        for (int rep = 0; rep < reps; rep++) {
            const double ts = n / (r->samples_ns[rep] * 1e-9);
            sq += (r->samples_ns[rep] - r->avg_ns) * (r->samples_ns[rep] - r->avg_ns);
            sq_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
        }
        r->sd_ns = reps > 1 ? sqrt(sq / (reps - 1)) : 0;
        r->sd_ts = reps > 1 ? sqrt(sq_ts / (reps - 1)) : 0;
    }
    tool_progress_done(&bar);
    /* bandwidth after the runs (its buffer would otherwise compete with the model), per thread count */
    for (int ti = 0; ti < threads.n; ti++) {
        const double bw = measure_bandwidth(threads.v[ti]);
        for (int i = 0; i < n_res; i++)
            if (res[i].n_threads == threads.v[ti]) res[i].bw = bw;
    }
    char desc[128], test_time[32];
    kiln_model_desc(ma.model, desc, sizeof desc);
    const time_t now = time(NULL);
    strftime(test_time, sizeof test_time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const struct kv_info kv = {kiln_n_ctx(ma.ctx), kiln_kv_size_bytes(ma.ctx), kiln_kv_size_bytes_full(ma.ctx)};
    struct moe_info moe = {.active = kiln_model_size_active(ma.model),
                           .n_params_active = kiln_model_n_params_active(ma.model)};
    kiln_model_experts(ma.model, &moe.n_expert, &moe.n_used);
    print_results(out, res, n_res, reps, ma.model_path, desc, kiln_model_backends(ma.model), kiln_model_size(ma.model),
                  kiln_model_n_params(ma.model), n_batch, test_time, &kv, &moe);
    rc = EXIT_OK;
done:
    kiln_batch_free(&batch);
    free(res);
    free(samples);
    free(toks);
    model_args_free(&ma);
    return rc;
}
