/*
 * test_kv_defrag.c - a KV cache fragmented by sequences that come and go still
 * takes a batch as large as its free cells: kiln_decode closes the holes (cells
 * and their K/V data move together), and the sequences that stayed continue
 * with the logits they would have had, as does the new one (each against a
 * fresh context running that sequence alone). Both KV layouts: F16 (V
 * transposed) and Q8_0 (V by rows).
 */
#include "kiln.h"
#include "testutil.h"

#define N_CTX 64
#define LEN 16

static struct kiln_context *new_ctx(struct kiln_model *m, uint32_t n_seq, enum kt_type kv_type) {
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_seq_max = n_seq;
    cp.type_k = cp.type_v = kv_type;
    char err[256];
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx != NULL, "context: %s", err);
    return ctx;
}

/* decode ids[0, n) of seq from position pos0 in one batch; logits of the last token, or NULL */
static const float *decode(struct kiln_context *ctx, const int32_t *ids, int n, int pos0, int seq) {
    struct kiln_batch b = kiln_batch_init(n);
    for (int i = 0; i < n; i++) kiln_batch_add(&b, ids[i], pos0 + i, seq, i == n - 1);
    int rc = kiln_decode(ctx, &b);
    kiln_batch_free(&b);
    CHECKF(rc == 0, "decode of %d tokens for sequence %d: %s", n, seq, kiln_context_error(ctx));
    return rc == 0 ? kiln_get_logits_ith(ctx, -1) : NULL;
}

/* the logits sequence ids[0, n) ends with, alone in a fresh context */
static float *alone(struct kiln_model *m, const int32_t *ids, int n, enum kt_type kv_type, int64_t V) {
    struct kiln_context *ctx = new_ctx(m, 1, kv_type);
    float *out = malloc(sizeof(float) * (size_t)V);
    const float *l = ctx ? decode(ctx, ids, n, 0, 0) : NULL;
    if (l) memcpy(out, l, sizeof(float) * (size_t)V);
    else {
        free(out);
        out = NULL;
    }
    kiln_context_free(ctx);
    return out;
}

static void run(struct kiln_model *m, enum kt_type kv_type) {
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    int32_t seqs[4][LEN + 1], fresh[LEN + 4];
    for (int s = 0; s < 4; s++)
        for (int i = 0; i <= LEN; i++) seqs[s][i] = 3 + (int32_t)((s * 7919 + i * 104729) % (V - 3));
    for (int i = 0; i < LEN + 4; i++) fresh[i] = 3 + (int32_t)((i * 15485863 + 11) % (V - 3));

    struct kiln_context *ctx = new_ctx(m, 4, kv_type);
    if (!ctx) return;
    for (int s = 0; s < 4; s++) decode(ctx, seqs[s], LEN, 0, s); /* the cache is full */
    /* sequences 1 and 3 leave: 32 free cells in two holes of 16 */
    CHECK(kiln_kv_seq_rm(ctx, 1, 0, -1) && kiln_kv_seq_rm(ctx, 3, 0, -1));

    /* 20 tokens fit only once the holes are closed */
    const float *got = decode(ctx, fresh, LEN + 4, 0, 1);
    float *want = alone(m, fresh, LEN + 4, kv_type, V);
    CHECK(got && want && tu_close("new sequence after defrag", got, want, V, 1e-3, 1e-3));
    free(want);
    /* the sequences that stayed kept their positions and their K/V data */
    for (int s = 0; s <= 2; s += 2) {
        CHECK(kiln_kv_seq_pos_max(ctx, s) == LEN - 1);
        got = decode(ctx, &seqs[s][LEN], 1, LEN, s);
        want = alone(m, seqs[s], LEN + 1, kv_type, V);
        CHECKF(got && want && tu_close("kept sequence after defrag", got, want, V, 1e-3, 1e-3),
               "sequence %d (KV %s) after defrag", s, kt_type_name(kv_type));
        free(want);
    }
    /* full now (16 + 17 + 20 + 1 ... cells): a batch larger than the free cells is refused */
    int32_t more[16] = {5};
    struct kiln_batch b = kiln_batch_init(16);
    for (int i = 0; i < 16; i++) kiln_batch_add(&b, more[0], LEN + 1 + i, 0, false);
    CHECK(kiln_decode(ctx, &b) == -2 && strstr(kiln_context_error(ctx), "no room") != NULL);
    CHECK(kiln_kv_seq_pos_max(ctx, 0) == LEN);
    kiln_batch_free(&b);
    kiln_context_free(ctx);
}

int main(void) {
    const char *shared = tu_shared();
    const char *src = getenv("KILN_SRC");
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/kjv-q8_0.gguf", shared ? shared : "");
    struct stat st;
    if (!shared || stat(path, &st) != 0) snprintf(path, sizeof path, "%s/models/kjv-q4_0.gguf", src ? src : "..");
    if (stat(path, &st) != 0) {
        printf("SKIP test_kv_defrag: no model (../shared/models/kjv-q8_0.gguf or models/kjv-q4_0.gguf)\n");
        return 77;
    }
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (m) {
        run(m, KT_TYPE_F16);
        run(m, KT_TYPE_Q8_0);
    }
    kiln_model_free(m);
    return tu_finish("test_kv_defrag");
}
