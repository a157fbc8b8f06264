/*
 * rows_par.c - run a row function over contiguous shares of a row range on
 * short-lived threads: each row's result is independent of the split, so the
 * bytes the writers produce do not depend on the thread count.
 */
#include "quant_mix.h"

#include <pthread.h>
#include <stdio.h>

enum { ROWS_MAX_THREADS = 256 };

struct share {
    kiln_rows_fn fn;
    void *ctx;
    int64_t r0, r1;
    bool ok;
    char err[256];
};

static void *run_share(void *arg) {
    struct share *s = arg;
    s->ok = s->fn(s->ctx, s->r0, s->r1, s->err, sizeof s->err);
    return NULL;
}

bool kiln_rows_parallel(int n_threads, int64_t r0, int64_t r1, kiln_rows_fn fn, void *ctx, char *err, size_t errlen) {
    const int64_t n = r1 - r0;
    if (n <= 0) return true;
    int nt = n_threads < 1 ? 1 : n_threads > ROWS_MAX_THREADS ? ROWS_MAX_THREADS : n_threads;
    if (nt > n) nt = (int)n;
    if (nt == 1) return fn(ctx, r0, r1, err, errlen);
    struct share sh[ROWS_MAX_THREADS];
    pthread_t tid[ROWS_MAX_THREADS];
    bool started[ROWS_MAX_THREADS];
    for (int i = 0; i < nt; i++)
        sh[i] = (struct share){.fn = fn, .ctx = ctx, .r0 = r0 + n * i / nt, .r1 = r0 + n * (i + 1) / nt};
    for (int i = 1; i < nt; i++) started[i] = pthread_create(&tid[i], NULL, run_share, &sh[i]) == 0;
    run_share(&sh[0]);
    for (int i = 1; i < nt; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else run_share(&sh[i]); /* no thread to be had: do its share here */
    }
    for (int i = 0; i < nt; i++)
        if (!sh[i].ok) {
            snprintf(err, errlen, "%s", sh[i].err);
            return false;
        }
    return true;
}
