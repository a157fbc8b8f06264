/*
 * test_runtime.c - the model runtime against llama.cpp's own results
 * (every json of ../shared/reference with its .logits): prompt tokens, logits at the kept
 * positions (normalized MSE), top tokens where the reference's lead is clear,
 * and greedy continuations up to the first near-tie. Then the runtime's own
 * promises: batching and thread count do not change results, KV cache
 * sequence operations, and bad batches rejected without touching the cache.
 */
#include "kiln.h"
#include "kiln-offline.h"
#include "refjson.h"
#include "kt-backend.h"
#include "testutil.h"

#include <dirent.h>
#include <unistd.h>

#define MAX_TOK 512

static const char *shared;

static struct kiln_context *new_ctx(struct kiln_model *m, int threads, uint32_t n_batch) {
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_threads = threads;
    char err[256];
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx != NULL, "context: %s", err);
    return ctx;
}

/* decode ids in batches of `step`, logits kept for every token; rows copied to out */
static bool run_prompt(struct kiln_context *ctx, const int32_t *ids, int n, int step, float *out, int64_t n_vocab) {
    struct kiln_batch b = kiln_batch_init(step);
    bool ok = b.capacity == step;
    for (int i0 = 0; ok && i0 < n; i0 += step) {
        kiln_batch_clear(&b);
        for (int i = i0; i < n && i < i0 + step; i++) kiln_batch_add(&b, ids[i], i, 0, true);
        ok = kiln_decode(ctx, &b) == 0;
        CHECKF(ok, "decode: %s", kiln_context_error(ctx));
        for (int i = i0; ok && i < n && i < i0 + step; i++)
            memcpy(out + (size_t)i * n_vocab, kiln_get_logits_ith(ctx, i - i0), sizeof(float) * n_vocab);
    }
    kiln_batch_free(&b);
    return ok;
}

static int argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

static double margin(const float *x, int64_t n) {
    int a = argmax(x, n);
    double second = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (i != a && x[i] > second) second = x[i];
    return x[a] - second;
}

/* KILN_TEST_NGL=N: the reference checks with N layers on the GPU (ctest's test_runtime_gpu*) */
static int g_ngl;

/* families: "" for the files of reference/ and models/, "families/" for theirs */
static void check_reference(const char *families, const char *json_name) {
    char path[1024], model_name[256];
    snprintf(path, sizeof path, "%s/reference/%s%s", shared, families, json_name);
    char *json = tu_read_file(path, NULL);
    CHECKF(json != NULL, "cannot read %s", path);
    if (!json) return;
    /* MODEL-K.json -> models/MODEL.gguf */
    snprintf(model_name, sizeof model_name, "%s", json_name);
    *strrchr(model_name, '-') = 0;
    snprintf(path, sizeof path, "%s/models/%s%s.gguf", shared, families, model_name);
    char err[512];
    struct kiln_model_params mp = kiln_model_default_params();
    mp.n_gpu_layers = g_ngl;
    struct kiln_model *m = kiln_model_load(path, mp, err, sizeof err);
    CHECKF(m != NULL, "%s: %s", path, err);
    if (!m) {
        free(json);
        return;
    }
    if (g_ngl) {
        CHECKF(!strcmp(kiln_model_backends(m), "CUDA"), "%s: -ngl %d: %s", path, g_ngl, kiln_model_gpu_note(m));
        printf("%s: %s\n", json_name, kiln_model_gpu_note(m));
    }
    const int64_t n_vocab = kiln_model_hparams(m)->n_vocab;
    const bool quantized = strstr(model_name, "f16") == NULL;
    const double tol = quantized ? 5e-4 : 1e-4;

    static struct rj_prompt_ref r; /* (13 KiB: off the stack) */
    CHECK(rj_prompt_ref_read(json, &r));
    const char *prompt = r.prompt;
    const double *want_d = r.tokens, *pos_d = r.positions, *greedy_d = r.greedy, *margins = r.margins;
    const int64_t n_want = r.n_tokens, n_pos = r.n_positions, n_greedy = r.n_greedy;

    int32_t ids[MAX_TOK];
    const struct kiln_vocab *v = kiln_model_vocab(m);
    int64_t n = kiln_tokenize(v, prompt, strlen(prompt), ids, MAX_TOK, true, false);
    bool same = n == n_want;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == (int32_t)want_d[i];
    CHECKF(same, "%s: prompt tokens differ (%lld vs %lld tokens)", json_name, (long long)n, (long long)n_want);

    /* logits of the whole prompt in one batch */
    n = n_want;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)want_d[i];
    float *logits = malloc(sizeof(float) * (size_t)n * n_vocab);
    size_t ref_len = 0;
    char *lpath = path;
    snprintf(lpath, sizeof path, "%s/reference/%s%.*s.logits", shared, families, (int)(strlen(json_name) - 5),
             json_name);
    float *ref = (float *)tu_read_file(lpath, &ref_len);
    CHECKF(ref && ref_len == sizeof(float) * (size_t)n_pos * n_vocab, "%s: logits file", lpath);
    struct kiln_context *ctx = new_ctx(m, 2, 64);
    if (ctx && ref && logits && run_prompt(ctx, ids, (int)n, (int)n, logits, n_vocab)) {
        for (int64_t k = 0; k < n_pos; k++) {
            const float *got = logits + (size_t)pos_d[k] * n_vocab, *want = ref + (size_t)k * n_vocab;
            double e = tu_nmse(got, want, n_vocab);
            CHECKF(e <= tol, "%s: position %d: nmse %.3g > %.1g", json_name, (int)pos_d[k], e, tol);
            if (margin(want, n_vocab) > 0.05)
                CHECKF(argmax(got, n_vocab) == argmax(want, n_vocab), "%s: position %d: top token %d, reference %d",
                       json_name, (int)pos_d[k], argmax(got, n_vocab), argmax(want, n_vocab));
        }
        /* greedy continuation, one token per decode */
        struct kiln_batch b = kiln_batch_init(1);
        int tok = argmax(logits + (size_t)(n - 1) * n_vocab, n_vocab);
        int matched = 0;
        for (int64_t s = 0; s < n_greedy && margins[s] >= 0.02; s++) {
            CHECKF(tok == (int)greedy_d[s], "%s: greedy step %lld: %d, reference %d", json_name, (long long)s, tok,
                   (int)greedy_d[s]);
            if (tok != (int)greedy_d[s]) break;
            matched++;
            kiln_batch_clear(&b);
            kiln_batch_add(&b, tok, (int32_t)(n + s), 0, true);
            if (kiln_decode(ctx, &b) != 0) break;
            tok = argmax(kiln_get_logits_ith(ctx, 0), n_vocab);
        }
        printf("%s: prompt %lld tokens, %lld positions checked, %d greedy tokens match\n", json_name, (long long)n,
               (long long)n_pos, matched);
        kiln_batch_free(&b);
    }
    kiln_context_free(ctx);
    free(ref);
    free(logits);
    kiln_model_free(m);
    free(json);
}

/* Batching and threads must not change a sequence's results (bit for bit). */
static void check_invariance(const char *model_file) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s%s%s", model_file[0] == '/' ? "" : shared, model_file[0] == '/' ? "" : "/models/",
             model_file);
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    const char *text = "And God said, Let there be light: and there was light.";
    int32_t ids[64];
    int n = (int)kiln_tokenize(kiln_model_vocab(m), text, strlen(text), ids, 64, true, false);
    CHECK(n > 4);
    float *a = malloc(sizeof(float) * n * V), *b = malloc(sizeof(float) * n * V), *c = malloc(sizeof(float) * n * V);
    struct kiln_context *c1 = new_ctx(m, 1, 64), *c2 = new_ctx(m, 2, 64);
    if (c1 && c2) {
        run_prompt(c1, ids, n, n, a, V); /* one batch, 1 thread */
        run_prompt(c2, ids, n, 1, b, V); /* n batches of one, 2 threads */
        CHECKF(!memcmp(a, b, sizeof(float) * n * V), "%s: one batch x1 thread differs from single tokens x2 threads",
               model_file);
        kiln_kv_clear(c2);
        run_prompt(c2, ids, n, 3, c, V); /* batches of three */
        CHECKF(!memcmp(a, c, sizeof(float) * n * V), "%s: batches of 3 differ", model_file);

        /* drop the last 3 positions and decode them again: same logits */
        CHECK(kiln_kv_seq_rm(c2, 0, n - 3, -1));
        CHECK(kiln_kv_seq_pos_max(c2, 0) == n - 4);
        struct kiln_batch bt = kiln_batch_init(3);
        for (int i = n - 3; i < n; i++) kiln_batch_add(&bt, ids[i], i, 0, true);
        CHECK(kiln_decode(c2, &bt) == 0);
        CHECK(!memcmp(kiln_get_logits_ith(c2, 2), a + (size_t)(n - 1) * V, sizeof(float) * V));

        /* copy sequence 0 into 1 is refused beyond n_seq_max; a bad token is an error and leaves the cache */
        CHECK(!kiln_kv_seq_cp(c2, 0, 1, 0, -1));
        kiln_batch_clear(&bt);
        kiln_batch_add(&bt, (int32_t)V, n, 0, true);
        CHECK(kiln_decode(c2, &bt) < 0);
        CHECK(strstr(kiln_context_error(c2), "not in the vocabulary") != NULL);
        kiln_batch_clear(&bt);
        kiln_batch_add(&bt, ids[0], n, 5, true);
        CHECK(kiln_decode(c2, &bt) < 0);
        CHECK(kiln_kv_seq_pos_max(c2, 0) == n - 1);
        kiln_batch_free(&bt);
    }
    kiln_context_free(c1);
    kiln_context_free(c2);
    free(a);
    free(b);
    free(c);
    kiln_model_free(m);
}

/* Two sequences in one batch, or a sequence whose cells are out of order, give the
 * logits each has alone, bit for bit. */
static void check_sequences(const char *model_file) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/%s", shared, model_file);
    FILE *probe = fopen(path, "rb");
    if (!probe) { /* absent: say so, do not pass having checked nothing */
        tu_skip_part("check_sequences: %s is absent", path);
        return;
    }
    fclose(probe);
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "check_sequences: %s does not load: %s", path, err);
    if (!m) return;
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq_max = 2;
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx != NULL, "%s", err);
    int32_t s0[] = {1, 512, 278, 6763}, s1[] = {1, 1126, 4177, 1497, 29892};
    struct kiln_batch b = kiln_batch_init(16);
    float *alone0 = malloc(sizeof(float) * V), *alone1 = malloc(sizeof(float) * V);
    for (int i = 0; i < 4; i++) kiln_batch_add(&b, s0[i], i, 0, i == 3);
    CHECK(ctx && kiln_decode(ctx, &b) == 0);
    memcpy(alone0, kiln_get_logits_ith(ctx, 3), sizeof(float) * V);
    kiln_kv_clear(ctx);
    kiln_batch_clear(&b);
    for (int i = 0; i < 5; i++) kiln_batch_add(&b, s1[i], i, 1, i == 4);
    CHECK(kiln_decode(ctx, &b) == 0);
    memcpy(alone1, kiln_get_logits_ith(ctx, 4), sizeof(float) * V);
    kiln_kv_clear(ctx);
    kiln_batch_clear(&b);
    for (int i = 0; i < 5; i++) {
        if (i < 4) kiln_batch_add(&b, s0[i], i, 0, i == 3);
        kiln_batch_add(&b, s1[i], i, 1, i == 4);
    }
    CHECK(kiln_decode(ctx, &b) == 0);
    CHECK(kiln_get_logits_ith(ctx, 0) == NULL);
    /* other cells (interleaved with the other sequence's), the same bits: attention
     * takes a sequence's cells by position, wherever they sit */
    CHECK(!memcmp(kiln_get_logits_ith(ctx, 6), alone0, sizeof(float) * V));
    CHECK(!memcmp(kiln_get_logits_ith(ctx, 8), alone1, sizeof(float) * V));
    /* out of order: a 24-token sequence alone, then again with sequence 1 in cells
     * 0-7 and its first 16 tokens in cells 8-23; sequence 1 leaves, so its last 8
     * tokens, one at a time, land in cells 0-7, below their prefix. The same bits. */
    const char *text = "In the beginning God created the heaven and the earth. And the earth was without form, and "
                       "void; and darkness was upon the face of the deep. And the Spirit of God moved upon the waters.";
    int32_t ids[64];
    const int n = (int)kiln_tokenize(kiln_model_vocab(m), text, strlen(text), ids, 64, true, false);
    CHECK(n >= 24);
    float *in_order = malloc(sizeof(float) * V);
    kiln_kv_clear(ctx);
    kiln_batch_clear(&b);
    for (int i = 0; i < 16; i++) kiln_batch_add(&b, ids[i], i, 0, false);
    CHECK(kiln_decode(ctx, &b) == 0);
    for (int i = 16; i < 24; i++) {
        kiln_batch_clear(&b);
        kiln_batch_add(&b, ids[i], i, 0, true);
        CHECK(kiln_decode(ctx, &b) == 0);
    }
    memcpy(in_order, kiln_get_logits_ith(ctx, 0), sizeof(float) * V);
    kiln_kv_clear(ctx);
    kiln_batch_clear(&b);
    for (int i = 0; i < 8; i++) kiln_batch_add(&b, s1[i % 5], i, 1, false);
    CHECK(kiln_decode(ctx, &b) == 0);
    kiln_batch_clear(&b);
    for (int i = 0; i < 16; i++) kiln_batch_add(&b, ids[i], i, 0, false);
    CHECK(kiln_decode(ctx, &b) == 0);
    CHECK(kiln_kv_seq_rm(ctx, 1, 0, -1));
    for (int i = 16; i < 24; i++) {
        kiln_batch_clear(&b);
        kiln_batch_add(&b, ids[i], i, 0, true);
        CHECK(kiln_decode(ctx, &b) == 0);
    }
    CHECK(kiln_get_logits_ith(ctx, 0) && !memcmp(kiln_get_logits_ith(ctx, 0), in_order, sizeof(float) * V));
    free(in_order);
    free(alone0);
    free(alone1);
    kiln_batch_free(&b);
    kiln_context_free(ctx);
    kiln_model_free(m);
}

/* Other KV cache types stay close to llama.cpp's F16-cache logits (model MODEL.gguf,
 * reference MODEL-0). */
static void check_kv_types(const char *model, double tol) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    snprintf(path, sizeof path, "%s/reference/%s-0.json", shared, model);
    char *json = tu_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/reference/%s-0.logits", shared, model);
    float *ref = (float *)tu_read_file(path, NULL);
    CHECK(m && json && ref);
    if (!m || !json || !ref) goto out;
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    double tok_d[64], pos_d[64];
    int n = (int)rj_num_array(json, "prompt_tokens", tok_d, 64), np = (int)rj_num_array(json, "logits_positions", pos_d, 64);
    int32_t ids[64];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)tok_d[i];
    const enum kt_type types[] = {KT_TYPE_F32, KT_TYPE_BF16, KT_TYPE_Q8_0};
    float *logits = malloc(sizeof(float) * (size_t)n * V);
    for (size_t t = 0; t < 3; t++) {
        struct kiln_context_params cp = kiln_context_default_params();
        cp.n_ctx = 256;
        cp.type_k = cp.type_v = types[t];
        struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
        CHECKF(ctx != NULL, "%s: %s KV cache: %s", model, kt_type_name(types[t]), err);
        if (ctx && run_prompt(ctx, ids, n, n, logits, V))
            for (int k = 0; k < np; k++) {
                double e = tu_nmse(logits + (size_t)pos_d[k] * V, ref + (size_t)k * V, V);
                CHECKF(e < tol, "%s: %s KV cache: position %d nmse %.3g", model, kt_type_name(types[t]),
                       (int)pos_d[k], e);
            }
        kiln_context_free(ctx);
    }
    free(logits);
out:
    free(ref);
    free(json);
    kiln_model_free(m);
}

int main(void) {
    shared = tu_shared_or_skip("test_runtime");
    if (getenv("KILN_TEST_NGL")) {
        g_ngl = atoi(getenv("KILN_TEST_NGL"));
        const char *why = kt_dev_unavailable(KT_DEVICE_TYPE_GPU);
        if (why) {
            printf("SKIP test_runtime -ngl %d: %s\n", g_ngl, why);
            return 77;
        }
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference", shared);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n_ref = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json") && strncmp(e->d_name, "perplexity", 10)) {
            check_reference("", e->d_name);
            n_ref++;
        }
    }
    if (d) closedir(d);
    /* the families kiln runs among those shared/models/families holds (the others are
     * not expected to load yet) */
    static const char *const families[] = {"gemma3-kjv-q4_0", "qwen3moe-kjv-q4_0"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (int k = 0; k < 4; k++) {
            char name[128];
            snprintf(name, sizeof name, "%s-%d.json", families[f], k);
            check_reference("families/", name);
            n_ref++;
        }
    if (g_ngl) { /* the GPU machine gets a few of the models */
        CHECK(n_ref >= 4);
        return tu_finish("test_runtime (GPU)");
    }
    CHECK(n_ref >= 28);
    check_invariance("kjv-q4_0.gguf");
    check_invariance("kjv-f16.gguf");
    /* Llama 3's rope factors, qwen3's q/k norms and phi3's fused views in decode too */
    check_invariance("llama3-kjv-q4_0.gguf");
    check_invariance("qwen3-kjv-q4_0.gguf");
    check_invariance("phi3-kjv-q4_0.gguf");
    /* gemma3: windowed layers in a cache of their own, two RoPE bases, soft-capped logits */
    check_invariance("families/gemma3-kjv-q4_0.gguf");
    /* qwen3moe: routed experts (a batch's tokens grouped by expert) in every batch shape */
    check_invariance("families/qwen3moe-kjv-q4_0.gguf");
    /* gpt-oss (synthetic): sinks, windows on alternate layers, biased experts, MXFP4 */
    {
        char oss[256], serr[512];
        snprintf(oss, sizeof oss, "/tmp/kiln-test-runtime-oss-%d.gguf", (int)getpid());
        struct kiln_synth_params sp = kiln_synth_default_params();
        sp.arch = "gpt-oss";
        sp.type = KT_TYPE_MXFP4;
        CHECKF(kiln_synth(&sp, oss, serr, sizeof serr), "synth gpt-oss: %s", serr);
        check_invariance(oss);
        unlink(oss);
    }
    check_sequences("kjv-q8_0.gguf");
    check_sequences("kjv-f16.gguf");
    check_sequences("qwen2-kjv-q8_0.gguf");
    check_sequences("families/gemma3-kjv-q4_0.gguf");
    check_sequences("families/qwen3moe-kjv-q4_0.gguf");
    check_kv_types("kjv-f16", 1e-4);
    check_kv_types("llama3-kjv-q4_0", 5e-4);
    check_kv_types("qwen3-kjv-q4_0", 5e-4);
    check_kv_types("phi3-kjv-q4_0", 5e-4);
    check_kv_types("families/gemma3-kjv-q4_0", 5e-4);
    check_kv_types("families/qwen3moe-kjv-q4_0", 5e-4);
    return tu_finish("test_runtime");
}
