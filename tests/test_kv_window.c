/*
 * test_kv_window.c - the windowed KV cache on shared/models/families/gemma3-kjv-q4_0.gguf
 * (window 8 on layers 0-4, layer 5 global): the row's pattern gives those kinds;
 * the windowed layers' cache is sized to the window and a batch, not the context;
 * a sequence several times longer than that cache (its cells taken again and
 * again) gives bit for bit the logits of a context whose windowed cache never
 * lets a cell go; and what a sequence cut back can resume from: where its window
 * is still whole (the same logits as the first time), and not where the window's
 * cells were taken (kiln_kv_seq_resumable says 0 there).
 */
#include "kiln.h"
#include "runtime.h"
#include "testutil.h"

static const char *shared;

static struct kiln_context *new_ctx(struct kiln_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq) {
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = n_ctx, cp.n_batch = n_batch, cp.n_seq_max = n_seq;
    char err[256];
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx != NULL, "context: %s", err);
    return ctx;
}

/* positions [p0, p1) of ids in batches of step, every row's logits into out (row p - p0) */
static bool decode(struct kiln_context *ctx, int32_t seq, const int32_t *ids, int p0, int p1, int step, float *out,
                   int64_t V) {
    struct kiln_batch b = kiln_batch_init(step);
    bool ok = b.capacity == step;
    for (int i0 = p0; ok && i0 < p1; i0 += step) {
        kiln_batch_clear(&b);
        for (int i = i0; i < p1 && i < i0 + step; i++) kiln_batch_add(&b, ids[i], i, seq, true);
        ok = kiln_decode(ctx, &b) == 0;
        CHECKF(ok, "decode at %d: %s", i0, kiln_context_error(ctx));
        for (int i = i0; ok && i < p1 && i < i0 + step; i++)
            memcpy(out + (size_t)(i - p0) * V, kiln_get_logits_ith(ctx, i - i0), sizeof(float) * V);
    }
    kiln_batch_free(&b);
    return ok;
}

int main(void) {
    shared = tu_shared_or_skip("test_kv_window");
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/families/gemma3-kjv-q4_0.gguf", shared);
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "%s: %s", path, err);
    if (!m) return tu_finish("test_kv_window");

    /* no pattern key: llama.cpp's default of 6 (five local layers, then a global one) */
    CHECK(m->n_swa == 8 && m->hp.n_layer == 6);
    for (int il = 0; il < 6; il++)
        CHECKF(m->lhp[il].kind == (il == 5 ? KILN_LAYER_ATTN : KILN_LAYER_ATTN_WINDOW), "layer %d's kind", il);
    CHECK(m->lhp[0].rope_freq_base == 10000.0f && m->lhp[5].rope_freq_base == 1000000.0f);

    const int64_t V = kiln_model_hparams(m)->n_vocab;
    /* the text: Ruth, tokenized; 400 positions */
    snprintf(path, sizeof path, "%s/text/kjv_test_a.txt", shared);
    char *text = tu_read_file(path, NULL);
    CHECK(text != NULL);
    enum { N = 400, STEP = 32 };
    int32_t *ids = malloc(sizeof(int32_t) * 4096);
    const int64_t n_ids = text ? kiln_tokenize(kiln_model_vocab(m), text, strlen(text), ids, 4096, true, false) : 0;
    CHECK(n_ids >= N);
    free(text);
    if (n_ids < N) goto out;

    /* windowed layers keep 8 cells a sequence and a batch of 32, padded to 256: the
     * cache of 6 layers x 512 cells becomes 5 x 256 + 512 */
    struct kiln_context *a = new_ctx(m, 512, STEP, 1);
    struct kiln_context *big = new_ctx(m, 512, STEP, 64); /* 8 x 64 + 32 cells: as large as the context */
    if (!a || !big) goto out2;
    CHECKF(kiln_kv_size_bytes(a) * (6 * 512) == kiln_kv_size_bytes(big) * (5 * 256 + 512),
           "KV bytes %zu (windowed) vs %zu (full)", kiln_kv_size_bytes(a), kiln_kv_size_bytes(big));

    float *la = malloc(sizeof(float) * (size_t)N * V), *lb = malloc(sizeof(float) * (size_t)N * V);
    float *again = malloc(sizeof(float) * 20 * (size_t)V);
    CHECK(decode(a, 0, ids, 0, N, STEP, la, V) && decode(big, 0, ids, 0, N, STEP, lb, V));
    /* positions 0..255 filled the 256 windowed cells; every later batch took stale ones */
    CHECK(!memcmp(la, lb, sizeof(float) * (size_t)N * V));
    CHECK(kiln_kv_seq_pos_max(a, 0) == N - 1);
    CHECKF(kiln_kv_seq_pos_min(a, 0) > 0 && kiln_kv_seq_pos_min(big, 0) == 0, "pos_min %d (windowed), %d",
           kiln_kv_seq_pos_min(a, 0), kiln_kv_seq_pos_min(big, 0));

    /* resuming: the whole sequence, a cut inside the cells still held, one past them */
    CHECK(kiln_kv_seq_resumable(a, 0, N) == N);
    CHECK(kiln_kv_seq_resumable(big, 0, 100) == 100);
    const int32_t held = kiln_kv_seq_pos_min(a, 0); /* the windowed cells hold [held, N) */
    CHECK(kiln_kv_seq_resumable(a, 0, held + 8) == held + 8);
    CHECKF(kiln_kv_seq_resumable(a, 0, held + 3) == 0, "resumable at %d: %d", held + 3,
           kiln_kv_seq_resumable(a, 0, held + 3));
    CHECK(kiln_kv_seq_resumable(a, 0, 50) == 0);
    /* cut back to N - 40 and decode again: the same bits as the first time */
    CHECK(kiln_kv_seq_rm(a, 0, N - 40, -1) && kiln_kv_seq_resumable(a, 0, N - 40) == N - 40);
    CHECK(decode(a, 0, ids, N - 40, N - 20, 5, again, V));
    CHECK(!memcmp(again, la + (size_t)(N - 40) * V, sizeof(float) * 20 * (size_t)V));
    /* copied to another sequence (a context of two), the window comes along: sequence 1
     * goes on from position 300 with sequence 0's logits */
    struct kiln_context *two = new_ctx(m, 512, STEP, 2);
    CHECK(two && decode(two, 0, ids, 0, 300, STEP, lb, V) && kiln_kv_seq_cp(two, 0, 1, 0, 300));
    CHECK(kiln_kv_seq_resumable(two, 1, 300) == 300 && kiln_kv_seq_rm(two, 0, 0, -1));
    CHECK(two && decode(two, 1, ids, 300, 320, 7, again, V));
    CHECK(!memcmp(again, la + (size_t)300 * V, sizeof(float) * 20 * (size_t)V));
    kiln_context_free(two);
    free(la), free(lb), free(again);
out2:
    kiln_context_free(a);
    kiln_context_free(big);
out:
    free(ids);
    kiln_model_free(m);
    return tu_finish("test_kv_window");
}
