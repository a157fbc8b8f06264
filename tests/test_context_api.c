/*
 * test_context_api.c - the promises of include/kiln.h about a context, on the
 * repository's model: each failure of kiln_decode has its own status and a
 * message, and leaves the cache and the next decode as they would have been;
 * kiln_set_n_threads refuses a bad count and keeps the old one; an abort
 * callback stops a decode (between splits and between nodes) with
 * KILN_ERR_ABORTED, and decoding goes on afterwards with the logits a context
 * that was never stopped gives, bit for bit.
 */
#include "kiln.h"
#include "testutil.h"

#define N_CTX 64
#define LEN 24

static struct kiln_context *new_ctx(const struct kiln_model *m, int n_threads) {
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_seq_max = 2;
    cp.n_threads = n_threads;
    char err[256];
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx != NULL, "context: %s", err);
    return ctx;
}

static struct kiln_batch prompt(const int32_t *ids, int n, int pos0, int seq) {
    struct kiln_batch b = kiln_batch_init(N_CTX + 1);
    for (int i = 0; i < n; i++) kiln_batch_add(&b, ids[i], pos0 + i, seq, i == n - 1);
    return b;
}

static bool has(const char *msg, const char *word) {
    if (strstr(msg, word)) return true;
    fprintf(stderr, "  message '%s' lacks '%s'\n", msg, word);
    return false;
}

/* Stops the decode at its n-th question; counts the questions. */
struct stopper {
    int asked, stop_at;
};
static bool stop_at(void *data) {
    struct stopper *s = data;
    return ++s->asked >= s->stop_at;
}

static void test_statuses(const struct kiln_model *m, const int32_t *ids) {
    struct kiln_context *ctx = new_ctx(m, 2);
    if (!ctx) return;
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    struct kiln_batch b = kiln_batch_init(N_CTX + 1);

    CHECK(kiln_decode(ctx, &b) == KILN_ERR_ARG && has(kiln_context_error(ctx), "empty")); /* no tokens */
    kiln_batch_add(&b, (int32_t)V, 0, 0, true);
    CHECK(kiln_decode(ctx, &b) == KILN_ERR_ARG && has(kiln_context_error(ctx), "vocabulary"));
    kiln_batch_clear(&b);
    kiln_batch_add(&b, ids[0], -1, 0, true);
    CHECK(kiln_decode(ctx, &b) == KILN_ERR_ARG && has(kiln_context_error(ctx), "position"));
    kiln_batch_clear(&b);
    kiln_batch_add(&b, ids[0], 0, 2, true);
    CHECK(kiln_decode(ctx, &b) == KILN_ERR_ARG && has(kiln_context_error(ctx), "sequence"));
    CHECK(kiln_get_logits_ith(ctx, -1) == NULL); /* a failed decode keeps no logits */
    CHECK(kiln_kv_seq_pos_max(ctx, 0) == -1);

    /* a full cache: NO_ROOM, and room again once a sequence is removed */
    struct kiln_batch full = prompt(ids, N_CTX - 8, 0, 0);
    CHECKF(kiln_decode(ctx, &full) == KILN_OK, "%s", kiln_context_error(ctx));
    struct kiln_batch more = prompt(ids, 16, 0, 1);
    CHECK(kiln_decode(ctx, &more) == KILN_ERR_NO_ROOM && has(kiln_context_error(ctx), "no room"));
    CHECK(kiln_kv_seq_pos_max(ctx, 1) == -1 && kiln_kv_seq_pos_max(ctx, 0) == N_CTX - 9);
    CHECK(kiln_kv_seq_rm(ctx, 0, -1, -1));
    CHECKF(kiln_decode(ctx, &more) == KILN_OK, "%s", kiln_context_error(ctx));
    kiln_batch_free(&full);
    kiln_batch_free(&more);

    /* each status has a name */
    const enum kiln_status all[] = {KILN_OK,          KILN_ERR_ARG,     KILN_ERR_NO_ROOM,
                                    KILN_ERR_COMPUTE, KILN_ERR_ABORTED, KILN_ERR_NO_MEMORY};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECKF(strcmp(kiln_status_name(all[i]), "unknown status") != 0, "status %d has no name", (int)all[i]);
    CHECK(strcmp(kiln_status_name((enum kiln_status)-99), "unknown status") == 0);

    /* thread counts: a bad one is refused with a message and the old one kept */
    CHECK(kiln_set_n_threads(ctx, 0) == KILN_ERR_ARG && has(kiln_context_error(ctx), "n_threads 0"));
    CHECK(kiln_set_n_threads(ctx, 513) == KILN_ERR_ARG);
    CHECK(kiln_set_n_threads(ctx, -4) == KILN_ERR_ARG);
    CHECK(kiln_set_n_threads(ctx, 1) == KILN_OK);
    kiln_batch_free(&b);
    kiln_context_free(ctx);
}

/* Logits of the last of ids[0, LEN) decoded in one batch by a context that runs to the end. */
static float *reference(const struct kiln_model *m, const int32_t *ids, int n_threads) {
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    struct kiln_context *ctx = new_ctx(m, n_threads);
    float *out = malloc(sizeof(float) * (size_t)V);
    struct kiln_batch b = prompt(ids, LEN, 0, 0);
    const bool ok = ctx && out && kiln_decode(ctx, &b) == KILN_OK;
    CHECKF(ok, "reference decode: %s", ctx ? kiln_context_error(ctx) : "no context");
    if (ok) memcpy(out, kiln_get_logits_ith(ctx, -1), sizeof(float) * (size_t)V);
    kiln_batch_free(&b);
    kiln_context_free(ctx);
    if (!ok) free(out);
    return ok ? out : NULL;
}

/* Stop at the stop_at-th question (1: before the graph starts, in the scheduler; later:
 * between the CPU's nodes), then decode the same batch to the end. */
static void test_abort(const struct kiln_model *m, const int32_t *ids, int n_threads, int stop, const float *want) {
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    struct kiln_context *ctx = new_ctx(m, n_threads);
    if (!ctx || !want) {
        kiln_context_free(ctx);
        return;
    }
    struct stopper st = {0, stop};
    kiln_set_abort_callback(ctx, stop_at, &st);
    struct kiln_batch b = prompt(ids, LEN, 0, 0);
    const enum kiln_status rc = kiln_decode(ctx, &b);
    CHECKF(rc == KILN_ERR_ABORTED, "%d threads, stop at question %d: status %d (%s), asked %d times", n_threads, stop,
           (int)rc, kiln_status_name(rc), st.asked);
    CHECK(has(kiln_context_error(ctx), "abort"));
    CHECKF(st.asked == stop, "asked %d times after saying stop at %d", st.asked, stop);
    CHECK(kiln_kv_seq_pos_max(ctx, 0) == -1 && kiln_get_logits_ith(ctx, -1) == NULL); /* as before */

    /* a callback that never stops is asked, and changes nothing */
    struct stopper never = {0, 1 << 30};
    kiln_set_abort_callback(ctx, stop_at, &never);
    CHECKF(kiln_decode(ctx, &b) == KILN_OK, "after the abort: %s", kiln_context_error(ctx));
    CHECKF(never.asked >= 2, "asked %d times in a whole decode (the scheduler, then between nodes)", never.asked);
    const float *got = kiln_get_logits_ith(ctx, -1);
    CHECKF(got && memcmp(got, want, sizeof(float) * (size_t)V) == 0,
           "%d threads, stop at %d: the logits after an aborted decode differ from a fresh context's", n_threads, stop);
    CHECK(kiln_kv_seq_pos_max(ctx, 0) == LEN - 1);
    kiln_set_abort_callback(ctx, NULL, NULL);
    kiln_batch_free(&b);
    kiln_context_free(ctx);
}

int main(void) {
    const char *src = getenv("KILN_SRC");
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/kjv-q4_0.gguf", src ? src : "..");
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return tu_finish("test_context_api");
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    int32_t ids[N_CTX];
    for (int i = 0; i < N_CTX; i++) ids[i] = 3 + (int32_t)((i * 7919 + 13) % (V - 3));
    test_statuses(m, ids);
    for (int threads = 1; threads <= 2; threads++) {
        float *want = reference(m, ids, threads);
        test_abort(m, ids, threads, 1, want);
        test_abort(m, ids, threads, 2, want);
        test_abort(m, ids, threads, 40, want);
        free(want);
    }
    kiln_model_free(m);
    return tu_finish("test_context_api");
}
