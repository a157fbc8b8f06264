/*
 * engine_impl.h - the engine's own types, shared by its files only: the slots
 * and the engine (engine.c: scheduling, steps, shared prefixes; publish.c:
 * sampling a slot's token and publishing it to its task).
 */
#ifndef KILN_ENGINE_IMPL_H
#define KILN_ENGINE_IMPL_H

#include "serve_impl.h"

struct srv_slot {
    int id;
    struct srv_task *task; /* NULL: idle */
    int32_t *cache;        /* the ids the KV cache holds for this sequence, positions 0 .. n_cache-1 */
    int32_t n_cache, cap_cache;
    bool generating; /* prompt done; next is sampled but not yet decoded */
    bool failed;     /* failed during this step: its cells are dropped afterwards */
    bool in_batch;   /* its prompt has a chunk in this step's batch */
    int32_t next;
    int32_t n_gen;
    int32_t n_lost;   /* prompt tokens already counted as recomputed for a sliding window's dropped cells */
    uint32_t tenant;  /* whose request decoded the cached cells */
    bool resumed;     /* its task ran before (preempted): its first start's figures stay */
    uint64_t last_used, order;
    atomic_int n_cache_pub; /* n_cache for other threads (GET /slots, metrics), set before a task sees its tokens */
};

struct srv_engine {
    const struct kiln_model *model;
    const struct kiln_vocab *v;
    struct kiln_context *ctx;
    struct kiln_server_params p;
    int64_t n_vocab;
    int32_t n_ctx_slot, n_batch;
    int n_slots;
    struct srv_slot *slots;
    struct kiln_batch batch;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* queue, stop, and the slots' public view */
    pthread_cond_t cv;
    struct srv_task **queue; /* waiting tasks in arrival order; taken by fairness (take_next) */
    int q_len, q_cap;
    bool stop;
    uint64_t tick, next_group;
    atomic_ullong steps; /* steps run (queue_steps of a task counts them) */
    struct srv_metrics *metrics; /* NULL: not counted */
    int n_busy_step;             /* slots with a task in this step */
    struct srv_prefix_cache *pcache; /* on the sequences past the slots' */
    int *n_run;                      /* per slot: its request's running tasks (step's scratch) */
    long long parked_pub;            /* its tokens as of the last step, under mu */
};

/* t failed with an HTTP status (its lock taken here). */
void srv_task_fail(struct srv_task *t, int status, const char *msg);
/* The slot's cache gains tok (position n_cache); false when out of memory. */
bool srv_slot_push(struct srv_slot *s, int32_t tok);
/* Detach the slot's task (the engine's reference goes); drop_cells when the cached tokens
 * must not be reused (cancelled, failed). */
void srv_slot_release(struct srv_engine *e, struct srv_slot *s, bool drop_cells);
/* Sample the slot's next token from logits, publish it, and finish the task when it
 * ends (end of generation, a stop string, its limit, the slot's context). */
void srv_slot_sample(struct srv_engine *e, struct srv_slot *s, const float *logits);

#endif
