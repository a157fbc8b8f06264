/*
 * bench_tokenize.c - tokenizer throughput (not a test): 1 MB of English made
 * by repeating ../shared/text/kjv_test_a.txt, tokenized with the KJV model's
 * 32k SPM vocabulary and llama.cpp's 50k GPT-2 BPE vocabulary (and the other
 * BPE kinds of ../shared/vocab for comparison). Prints MB/s; the target is
 * under 0.5 s per MB.
 *   bench_tokenize [SHARED_DIR] [REPS]
 */
#include "gguf.h"
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void bench(const char *label, const char *path, const char *text, size_t len, int reps) {
    char err[256];
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    struct kiln_vocab *v = g ? kiln_vocab_load(g, err, sizeof err) : NULL;
    if (!v) {
        printf("%-28s cannot load: %s\n", label, err);
        gguf_close(g);
        return;
    }
    int64_t cap = (int64_t)len + 16;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    double best = 1e30;
    int64_t n = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        n = kiln_tokenize(v, text, len, ids, cap, false, false);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    double mb = (double)len / (1024.0 * 1024.0);
    printf("%-28s %-6s %8lld tokens  %.3f s/MB  %6.2f MB/s\n", label, kiln_vocab_type_name(kiln_vocab_type(v)),
           (long long)n, best / mb, mb / best);
    free(ids);
    kiln_vocab_free(v);
    gguf_close(g);
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : (getenv("KILN_SHARED") ? getenv("KILN_SHARED") : "../shared");
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (reps < 1) reps = 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/text/kjv_test_a.txt", shared);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    static char chunk[1 << 20];
    size_t cn = fread(chunk, 1, sizeof chunk, f);
    fclose(f);
    if (cn == 0) return 1;
    size_t len = 1 << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = chunk[i % cn];
    printf("1 MiB of %s repeated, best of %d\n", path, reps);
    snprintf(path, sizeof path, "%s/models/kjv-q4_0.gguf", shared);
    bench("kjv (llama SPM 32k)", path, text, len, reps);
    static const char *vocabs[] = {"gpt-2", "llama-spm", "llama-bpe", "qwen2", "falcon", "deepseek-llm", "bert-bge"};
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, vocabs[i]);
        bench(vocabs[i], path, text, len, reps);
    }
    free(text);
    return 0;
}
