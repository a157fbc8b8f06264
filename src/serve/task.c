/*
 * task.c - a generation task: the request's fields and what the engine
 * publishes to the connection thread under the task's lock (text, tokens, the
 * end or the error), shared by reference count between the two.
 */
#include "serve_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct srv_task *srv_task_new(void) {
    struct srv_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    atomic_init(&t->refs, 1);
    atomic_init(&t->cancel, false);
    t->n_predict = -1;
    t->cache_prompt = true;
    t->slot = -1;
    t->stop_word = -1;
    t->queue_steps = -1;
    t->t_queued = srv_now();
    return t;
}

void srv_task_unref(struct srv_task *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    if (t->seq != t->prompt) free(t->seq);
    free(t->prompt);
    kiln_sampler_free(t->smpl);
    for (int i = 0; i < t->n_stop; i++) free(t->stop[i]);
    free(t->text);
    free(t->toks);
    free(t->bias);
    srv_chat_out_free(&t->chat);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

void srv_task_fail_locked(struct srv_task *t, int status, const char *msg) {
    if (t->done) return;
    t->err_status = status;
    size_t n = strlen(msg) < sizeof t->err ? strlen(msg) : sizeof t->err - 1; /* cut long messages */
    memcpy(t->err, msg, n);
    t->err[n] = 0;
    t->done = true;
    t->t_end = srv_now();
    srv_task_notify_locked(t);
}

void srv_task_notify_locked(struct srv_task *t) {
    pthread_cond_broadcast(&t->cv);
    /* t->x is cleared under t->mu before its exchange goes; a whole-body answer waits for the end only */
    if (t->x && (t->done || t->x->stream)) srv_exchange_wake(t->x);
}
