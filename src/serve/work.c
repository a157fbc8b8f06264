/*
 * work.c - a few threads that run the routes with a body (parse, validate,
 * tokenize, submit) so that the threads polling the sockets only move bytes:
 * a 4 MiB body or a long prompt never delays /health or another client.
 */
#include "serve_impl.h"

#include <stdlib.h>

struct srv_work {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct srv_exchange **q; /* a ring */
    size_t head, len, cap;
    bool stop;
    void (*fn)(struct srv_exchange *x);
    pthread_t *threads;
    int n_threads;
};

static void *run(void *arg) {
    struct srv_work *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->len && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->len) break; /* stopping, and nothing left */
        struct srv_exchange *x = w->q[w->head];
        w->head = (w->head + 1) % w->cap;
        w->len--;
        pthread_mutex_unlock(&w->mu);
        w->fn(x);
        srv_exchange_unref(x);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

struct srv_work *srv_work_new(int n_threads, void (*fn)(struct srv_exchange *x)) {
    struct srv_work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->fn = fn;
    w->cap = 64;
    w->q = malloc(sizeof *w->q * w->cap);
    w->threads = calloc((size_t)n_threads, sizeof *w->threads);
    if (!w->q || !w->threads) {
        srv_work_free(w);
        return NULL;
    }
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&w->threads[i], NULL, run, w) != 0) break;
        w->n_threads++;
    }
    if (w->n_threads == 0) {
        srv_work_free(w);
        return NULL;
    }
    return w;
}

bool srv_work_submit(struct srv_work *w, struct srv_exchange *x) {
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
        pthread_mutex_unlock(&w->mu);
        return false;
    }
    if (w->len == w->cap) { /* grow the ring, unrolled from head */
        struct srv_exchange **q = malloc(sizeof *q * w->cap * 2);
        if (!q) {
            pthread_mutex_unlock(&w->mu);
            return false;
        }
        for (size_t i = 0; i < w->len; i++) q[i] = w->q[(w->head + i) % w->cap];
        free(w->q);
        w->q = q;
        w->head = 0;
        w->cap *= 2;
    }
    srv_exchange_ref(x);
    w->q[(w->head + w->len++) % w->cap] = x;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return true;
}

void srv_work_stop(struct srv_work *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_threads; i++) pthread_join(w->threads[i], NULL);
    w->n_threads = 0;
}

void srv_work_free(struct srv_work *w) {
    if (!w) return;
    srv_work_stop(w);
    free(w->threads);
    free(w->q);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
