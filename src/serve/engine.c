/*
 * engine.c - continuous batching: one thread owns the context and runs steps.
 * Each step puts every generating slot's next token and chunks of waiting
 * prompts into one batch over the shared KV cache (sequence id = slot), decodes
 * it, samples, and publishes text to the tasks. A task goes to the idle slot
 * whose cached tokens share the longest prefix with its prompt.
 *
 * Fairness: waiting tasks are taken by request, the request with the fewest
 * running tasks first (then the oldest), so a list of 64 prompts does not hold
 * back a single prompt; when no slot is idle, a request with no running task
 * takes a slot from one that runs two or more (the task preempted waits again
 * and later continues from its own cells, parked, or recomputed).
 * Tenants: cells are continued from (own slot, other slots, parked prefixes)
 * only within one tenant, unless --prefix-share global.
 */
#include "engine_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ tasks (task.c) */

void srv_task_fail(struct srv_task *t, int status, const char *msg) {
    pthread_mutex_lock(&t->mu);
    srv_task_fail_locked(t, status, msg);
    pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ slots */

bool srv_slot_push(struct srv_slot *s, int32_t tok) {
    if (s->n_cache == s->cap_cache) {
        int32_t cap = s->cap_cache ? s->cap_cache * 2 : 256;
        int32_t *c = realloc(s->cache, sizeof *c * (size_t)cap);
        if (!c) return false;
        s->cache = c;
        s->cap_cache = cap;
    }
    s->cache[s->n_cache++] = tok;
    return true;
}

/* Detach the task (the engine's reference goes); drop_cells when the cached tokens
 * must not be reused (cancelled, failed). */
void srv_slot_release(struct srv_engine *e, struct srv_slot *s, bool drop_cells) {
    if (drop_cells) {
        kiln_kv_seq_rm(e->ctx, s->id, 0, -1);
        s->n_cache = 0;
    }
    pthread_mutex_lock(&e->mu);
    struct srv_task *t = s->task;
    s->task = NULL;
    s->generating = false;
    s->last_used = ++e->tick;
    pthread_mutex_unlock(&e->mu);
    srv_task_unref(t);
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* Cells decoded for tenant a may serve a prompt of tenant b. */
static bool may_share(const struct srv_engine *e, uint32_t a, uint32_t b) {
    return e->p.prefix_share == KILN_PREFIX_SHARE_GLOBAL || a == b;
}

/* The tenant a task's cells are filed under (one for all with --prefix-share global). */
static uint32_t cell_tenant(const struct srv_engine *e, const struct srv_task *t) {
    return e->p.prefix_share == KILN_PREFIX_SHARE_GLOBAL ? 0 : t->tenant;
}

/* The tokens of t a slot's cache s may already hold. */
static int32_t slot_lcp(const struct srv_engine *e, const struct srv_slot *s, const struct srv_task *t) {
    if (!t->cache_prompt || !may_share(e, s->tenant, t->tenant)) return 0;
    return common_prefix(s->cache, s->n_cache, t->seq, t->n_seq);
}

/* The idle slot sharing the longest prefix with t's tokens (the least recently used
 * among equals); NULL when none is idle. Called with e->mu held. */
static struct srv_slot *pick_slot(struct srv_engine *e, const struct srv_task *t, int32_t *lcp_out) {
    struct srv_slot *best = NULL;
    int32_t best_lcp = -1;
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        if (s->task) continue;
        int32_t lcp = slot_lcp(e, s, t);
        if (lcp > best_lcp || (lcp == best_lcp && s->last_used < best->last_used)) {
            best = s;
            best_lcp = lcp;
        }
    }
    /* a prefix under half the prompt is not worth evicting another conversation for
     * (llama-server's slot similarity): take the least recently used slot then */
    if (best && (int64_t)best_lcp * 2 < t->n_seq) {
        for (int i = 0; i < e->n_slots; i++) {
            struct srv_slot *s = &e->slots[i];
            if (!s->task && s->last_used < best->last_used) best = s;
        }
        best_lcp = slot_lcp(e, best, t);
    }
    *lcp_out = best_lcp;
    return best;
}

/* Called with e->mu held (the slot's public view changes). */
static void slot_start(struct srv_engine *e, struct srv_slot *s, struct srv_task *t, int32_t lcp) {
    /* at least the last token is decoded again: its logits are needed; and no more is
     * kept than the cache can resume from (a sliding window's cells before the cut may
     * be gone: those tokens are recomputed) */
    int32_t keep = lcp < t->n_seq ? lcp : t->n_seq - 1;
    const int32_t whole = kiln_kv_seq_resumable(e->ctx, s->id, keep);
    srv_metrics_window_lost(e->metrics, keep - whole);
    s->n_lost = keep;
    keep = whole;
    /* the slot's cells stay its last tenant's when they are parked */
    bool parked = srv_pcache_park(e->pcache, s->id, s->cache, s->n_cache, keep, t->seq, t->n_seq, s->tenant);
    if (!t->started)
        srv_metrics_request(e->metrics, keep, s->n_cache > keep && !parked ? s->n_cache - keep : 0,
                            t->n_predict > 0 ? t->n_prompt + t->n_predict : e->n_ctx_slot);
    kiln_kv_seq_rm(e->ctx, s->id, keep, -1);
    s->n_cache = keep;
    s->tenant = cell_tenant(e, t);
    s->task = t;
    s->generating = false;
    s->failed = false;
    s->resumed = t->started;
    s->n_gen = t->n_gen_resume;
    s->order = ++e->tick;
    if (!t->prompt_accepted)
        for (int32_t i = 0; i < t->n_prompt; i++) kiln_sampler_accept_prompt(t->smpl, t->prompt[i]); /* not the grammar's */
    t->prompt_accepted = true;
    pthread_mutex_lock(&t->mu);
    if (!t->started) {
        t->n_cached = keep;
        t->t_start = srv_now();
    }
    t->slot = s->id;
    pthread_mutex_unlock(&t->mu);
    t->started = true;
}

/* The request of t has this many tasks on slots. */
static int running(const struct srv_engine *e, uint64_t group) {
    int n = 0;
    for (int i = 0; i < e->n_slots; i++) n += e->slots[i].task && e->slots[i].task->group == group;
    return n;
}

/* A slot whose task may give way to t (none idle): its request runs at least two
 * more tasks than t's, so a move never makes the shares less even (no ping-pong);
 * of those the most recently started. NULL: none. Called with e->mu held. */
static struct srv_slot *pick_victim(struct srv_engine *e, const struct srv_task *t) {
    const int mine = running(e, t->group);
    struct srv_slot *best = NULL;
    int best_n = 0;
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        if (!s->task) continue;
        int n = running(e, s->task->group);
        if (n < mine + 2) continue;
        if (!best || n > best_n || (n == best_n && s->order > best->order)) {
            best = s;
            best_n = n;
        }
    }
    return best;
}

/* Take s's task off it between steps: it waits again (ahead of its request's later
 * tasks) and continues from where it was, its cells left on s (the next task there
 * parks them) or recomputed. Called with e->mu held; false when out of memory. */
static bool slot_preempt(struct srv_engine *e, struct srv_slot *s) {
    struct srv_task *t = s->task;
    if (e->q_len == e->q_cap) return false;
    if (s->generating) { /* what the cache holds, then the sampled token not yet decoded */
        int32_t *seq = malloc(sizeof *seq * (size_t)(s->n_cache + 1));
        if (!seq) return false;
        memcpy(seq, s->cache, sizeof *seq * (size_t)s->n_cache);
        seq[s->n_cache] = s->next;
        if (t->seq != t->prompt) free(t->seq);
        t->seq = seq;
        t->n_seq = s->n_cache + 1;
        t->n_gen_resume = s->n_gen;
    }
    s->task = NULL;
    s->generating = false;
    s->last_used = ++e->tick;
    e->queue[e->q_len++] = t; /* the engine's reference moves with it */
    srv_metrics_preempted(e->metrics);
    return true;
}

/* ------------------------------------------------------------------ shared prefixes */

/* Every slot's cached tokens together are the prefix tree: a prompt may continue
 * from cells any other slot decoded (busy or idle), shared through the runtime's
 * sequence copy (a cell then belongs to both sequences; no K/V row is copied), so
 * N requests with one system prompt compute it once. Batch invariance makes a
 * shared cell's K/V identical to the one this slot would have computed. Only
 * cells of the same tenant are taken (may_share): a hit would tell one tenant
 * what another sent. */

static bool sharing(const struct srv_engine *e, const struct srv_task *t) {
    return t->cache_prompt && e->p.prefix_share != KILN_PREFIX_SHARE_OFF;
}

/* Take the longest run of t's tokens past s->n_cache that another slot has decoded. */
static void share_prefix(struct srv_engine *e, struct srv_slot *s) {
    struct srv_task *t = s->task;
    int32_t limit = t->n_seq - 1; /* the last token is decoded here: its logits are needed */
    if (!sharing(e, t) || s->n_cache >= limit) return;
    struct srv_slot *from = NULL;
    int32_t best = s->n_cache, raw = s->n_cache, lost = 0;
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *o = &e->slots[i];
        if (o == s || o->n_cache <= best || !may_share(e, o->tenant, t->tenant)) continue;
        int32_t lcp = common_prefix(o->cache, o->n_cache, t->seq, limit);
        if (lcp > raw) raw = lcp;
        /* as far as the other slot's cells let a sequence resume (a sliding window's) */
        if (lcp > best) lcp = kiln_kv_seq_resumable(e->ctx, o->id, lcp);
        if (lcp > best) {
            best = lcp;
            from = o;
        }
    }
    int32_t from_seq = from ? from->id : -1, pseq = -1;
    int32_t plcp = srv_pcache_best(e->pcache, t->seq, limit, cell_tenant(e, t), &pseq, &lost);
    if (plcp + lost > raw) raw = plcp + lost;
    if (plcp > best) {
        best = plcp;
        from_seq = pseq;
    }
    int32_t n0 = s->n_cache;
    if (from_seq >= 0 && !kiln_kv_seq_cp(e->ctx, from_seq, s->id, n0, best)) from_seq = -1;
    if (from_seq >= 0) { /* the slot's own cells below n0 and the copied ones must make a whole window */
        const int32_t whole = kiln_kv_seq_resumable(e->ctx, s->id, best);
        if (whole < best) kiln_kv_seq_rm(e->ctx, s->id, whole > n0 ? whole : n0, -1);
        best = whole > n0 ? whole : n0;
    }
    /* counted once: a parked copy of the slot's own conversation loses what slot_start counted */
    const int32_t counted = from_seq >= 0 && best > s->n_lost ? best : s->n_lost > n0 ? s->n_lost : n0;
    if (raw > counted) {
        srv_metrics_window_lost(e->metrics, raw - counted);
        s->n_lost = raw;
    }
    if (from_seq < 0 || best == n0) return;
    for (int32_t p = n0; p < best; p++)
        if (!srv_slot_push(s, t->seq[p])) { /* out of memory: give back what was taken */
            kiln_kv_seq_rm(e->ctx, s->id, n0, -1);
            s->n_cache = n0;
            return;
        }
    if (s->resumed) return; /* its request's figures were its first start's */
    srv_metrics_shared(e->metrics, best - n0, n0 == 0 && t->n_cached == 0);
    pthread_mutex_lock(&t->mu);
    t->n_cached = best;
    pthread_mutex_unlock(&t->mu);
}

/* An earlier prompt still being decoded will compute t's next tokens: wait for it
 * rather than compute them twice (only on earlier ones: no cycle, and it never
 * waits on a slot that waits). */
static bool should_wait(struct srv_engine *e, const struct srv_slot *s) {
    const struct srv_task *t = s->task;
    if (!sharing(e, t)) return false;
    for (int i = 0; i < e->n_slots; i++) {
        const struct srv_slot *o = &e->slots[i];
        if (o == s || !o->task || o->generating || o->order > s->order || o->n_cache >= o->task->n_seq ||
            !may_share(e, o->tenant, t->tenant))
            continue;
        int32_t lcp = common_prefix(o->task->seq, o->task->n_seq, t->seq, t->n_seq - 1);
        if (lcp > s->n_cache) return true;
    }
    return false;
}

/* ------------------------------------------------------------------ the step */

/* Decode batch entries [lo, hi); when the cache has no contiguous room for them all,
 * halves (batch invariance makes the split invisible in the results). */
static void decode_range(struct srv_engine *e, int32_t lo, int32_t hi) {
    struct kiln_batch *b = &e->batch;
    struct kiln_batch view = {.n_tokens = hi - lo, .capacity = hi - lo, .token = b->token + lo, .pos = b->pos + lo,
                              .seq_id = b->seq_id + lo, .logits = b->logits + lo};
    double t0 = srv_now();
    enum kiln_status rc = kiln_decode(e->ctx, &view);
    int calls = 1;
    /* no room: parked prefixes give way to running sequences first (the cache is unchanged on error) */
    while (rc == KILN_ERR_NO_ROOM && srv_pcache_evict_lru(e->pcache)) {
        rc = kiln_decode(e->ctx, &view);
        calls++;
    }
    /* counted before any token of it is published: a client that got its answer reads
     * /metrics with it */
    int32_t n_prompt = 0, n_gen = 0;
    for (int32_t i = lo; rc == KILN_OK && i < hi; i++) {
        if (e->slots[b->seq_id[i]].generating) n_gen++;
        else n_prompt++;
    }
    srv_metrics_step(e->metrics, n_prompt, n_gen, e->n_busy_step, calls, srv_now() - t0);
    if (rc == KILN_ERR_NO_ROOM && hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        decode_range(e, lo, mid);
        decode_range(e, mid, hi);
        return;
    }
    for (int32_t i = lo; i < hi; i++) {
        struct srv_slot *s = &e->slots[b->seq_id[i]];
        if (!s->task || s->failed) continue;
        if (rc != KILN_OK) {
            char msg[300];
            snprintf(msg, sizeof msg, "decode failed: %s", kiln_context_error(e->ctx));
            srv_task_fail(s->task, rc == KILN_ERR_NO_ROOM ? 503 : 500, msg);
            s->failed = true;
            srv_slot_release(e, s, true);
            continue;
        }
        if (!srv_slot_push(s, b->token[i])) {
            srv_task_fail(s->task, 500, "out of memory");
            s->failed = true;
            srv_slot_release(e, s, true);
            continue;
        }
        atomic_store(&s->n_cache_pub, s->n_cache);
        if (b->logits[i]) srv_slot_sample(e, s, kiln_get_logits_ith(e->ctx, i - lo));
    }
}

static void step(struct srv_engine *e) {
    struct kiln_batch *b = &e->batch;
    kiln_batch_clear(b);
    int n_gen = 0;
    double t0 = srv_now();
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        s->failed = false;
        s->in_batch = false;
        if (!s->task) continue;
        if (atomic_load(&s->task->cancel)) {
            srv_task_fail(s->task, 499, "the client closed the connection");
            srv_slot_release(e, s, true);
            continue;
        }
        if (s->task->deadline > 0 && t0 > s->task->deadline) {
            /* the cache holds only decoded tokens: it stays valid for a later prefix */
            srv_task_fail(s->task, 504, "the request ran past the server's --request-timeout");
            srv_metrics_timeout(e->metrics);
            srv_slot_release(e, s, false);
            continue;
        }
        if (s->generating) {
            kiln_batch_add(b, s->next, s->n_cache, s->id, true);
            n_gen++;
        }
    }
    int32_t budget = e->n_batch - b->n_tokens;
    if (n_gen > 0 && budget > e->p.prefill_chunk) budget = e->p.prefill_chunk;
    /* prompts of the requests with the fewest running tasks first (a single prompt is
     * not held back by a list's), then in arrival order, so an early long prompt is not
     * overtaken forever */
    int *n_run = e->n_run;
    for (int i = 0; i < e->n_slots; i++) n_run[i] = e->slots[i].task ? running(e, e->slots[i].task->group) : 0;
    const uint64_t now_step = atomic_load(&e->steps);
    for (;;) {
        struct srv_slot *next = NULL;
        for (int i = 0; i < e->n_slots; i++) {
            struct srv_slot *s = &e->slots[i];
            if (!s->task || s->generating || s->n_cache >= s->task->n_seq || s->in_batch) continue;
            if (!next || n_run[i] < n_run[next->id] || (n_run[i] == n_run[next->id] && s->order < next->order))
                next = s;
        }
        if (!next || budget <= 0) break;
        share_prefix(e, next);
        if (should_wait(e, next)) {
            next->in_batch = true; /* handled this step: nothing to decode */
            continue;
        }
        struct srv_task *t = next->task;
        int32_t n = t->n_seq - next->n_cache;
        if (n > budget) n = budget;
        for (int32_t k = 0; k < n; k++) {
            int32_t pos = next->n_cache + k;
            kiln_batch_add(b, t->seq[pos], pos, next->id, pos == t->n_seq - 1);
        }
        if (t->queue_steps < 0) t->queue_steps = (int32_t)(now_step - t->step_submit);
        budget -= n;
        next->in_batch = true;
    }
    e->n_busy_step = 0;
    for (int i = 0; i < e->n_slots; i++) e->n_busy_step += e->slots[i].task != NULL;
    if (b->n_tokens > 0) decode_range(e, 0, b->n_tokens);
    atomic_fetch_add(&e->steps, 1);
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].failed) kiln_kv_seq_rm(e->ctx, i, 0, -1); /* cells its later tokens took */
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_slots; i++) atomic_store(&e->slots[i].n_cache_pub, e->slots[i].n_cache);
    e->parked_pub = srv_pcache_tokens(e->pcache);
    pthread_mutex_unlock(&e->mu);
}

/* Fail the queued tasks whose deadline passed (e->mu held); the rest keep their order. */
static void expire_queued(struct srv_engine *e) {
    double now = srv_now();
    int kept = 0;
    for (int k = 0; k < e->q_len; k++) {
        struct srv_task *t = e->queue[k];
        if (t->deadline > 0 && now > t->deadline) {
            srv_task_fail(t, 504, "the request waited past the server's --request-timeout");
            srv_metrics_timeout(e->metrics);
            srv_task_unref(t);
            continue;
        }
        e->queue[kept++] = t;
    }
    e->q_len = kept;
}

/* The waiting task to start next: of the request with the fewest running tasks, then
 * the oldest request, then its first prompt; -1 when none waits (e->mu held). */
static int take_next(const struct srv_engine *e) {
    int best = -1, best_run = 0;
    for (int k = 0; k < e->q_len; k++) {
        const struct srv_task *t = e->queue[k], *b = best >= 0 ? e->queue[best] : NULL;
        int run = running(e, t->group);
        if (!b || run < best_run || (run == best_run && (t->group < b->group ||
                                                          (t->group == b->group && t->index < b->index)))) {
            best = k;
            best_run = run;
        }
    }
    return best;
}

static void queue_remove(struct srv_engine *e, int k) {
    memmove(e->queue + k, e->queue + k + 1, sizeof *e->queue * (size_t)(e->q_len - k - 1));
    e->q_len--;
}

static bool any_active(const struct srv_engine *e) {
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].task) return true;
    return false;
}

static void *loop(void *arg) {
    struct srv_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && e->q_len == 0 && !any_active(e)) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        expire_queued(e);
        for (int k; (k = take_next(e)) >= 0;) {
            struct srv_task *t = e->queue[k];
            if (atomic_load(&t->cancel)) { /* cancelled while waiting: done, for whoever still looks */
                queue_remove(e, k);
                srv_task_fail(t, 499, "the request was cancelled");
                srv_task_unref(t);
                continue;
            }
            int32_t lcp = 0;
            struct srv_slot *s = pick_slot(e, t, &lcp);
            if (!s) { /* none idle: a request running several tasks may give one slot up */
                struct srv_slot *v = pick_victim(e, t);
                if (!v || !slot_preempt(e, v)) break;
                s = pick_slot(e, t, &lcp);
                if (!s) break;
            }
            queue_remove(e, k);
            slot_start(e, s, t, lcp);
        }
        pthread_mutex_unlock(&e->mu);
        step(e);
    }
    return NULL;
}

/* ------------------------------------------------------------------ public */

struct srv_engine *srv_engine_new(const struct kiln_model *model, struct kiln_context *ctx,
                                  const struct kiln_server_params *p, char *err, size_t errlen) {
    if (p->n_parallel < 1 || (uint32_t)p->n_parallel > kiln_n_seq_max(ctx)) {
        snprintf(err, errlen, "%d slots need a context with as many sequences (it has %u)", p->n_parallel,
                 kiln_n_seq_max(ctx));
        return NULL;
    }
    if (kiln_n_batch(ctx) < (uint32_t)p->n_parallel) {
        snprintf(err, errlen, "a batch of %u tokens cannot hold one token of each of %d slots (raise -b)",
                 kiln_n_batch(ctx), p->n_parallel);
        return NULL;
    }
    struct srv_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->model = model;
    e->v = kiln_model_vocab(model);
    e->ctx = ctx;
    e->p = *p;
    if (e->p.queue_max < 1) e->p.queue_max = 1;
    if (e->p.prefill_chunk < 1) e->p.prefill_chunk = 1;
    e->n_vocab = kiln_model_hparams(model)->n_vocab;
    e->n_slots = p->n_parallel;
    e->n_ctx_slot = (int32_t)(kiln_n_ctx(ctx) / (uint32_t)p->n_parallel);
    e->n_batch = (int32_t)kiln_n_batch(ctx);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    /* room for every slot's task besides: a preempted task waits again */
    e->q_cap = e->p.queue_max + e->n_slots;
    e->queue = calloc((size_t)e->q_cap, sizeof *e->queue);
    e->n_run = calloc((size_t)e->n_slots, sizeof *e->n_run);
    e->batch = kiln_batch_init(e->n_batch);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (!e->slots || !e->queue || !e->n_run || !e->batch.capacity) {
        snprintf(err, errlen, "out of memory");
        srv_engine_free(e);
        return NULL;
    }
    for (int i = 0; i < e->n_slots; i++) e->slots[i].id = i;
    /* the context's sequences past the slots hold the prefix cache */
    int n_park = p->cache_ram_mib != 0 && p->prefix_share != KILN_PREFIX_SHARE_OFF
                     ? (int)kiln_n_seq_max(ctx) - e->n_slots
                     : 0;
    e->pcache = n_park > 0 ? srv_pcache_new(ctx, e->n_slots, n_park, p->cache_ram_mib, NULL) : NULL;
    if (n_park > 0 && !e->pcache) {
        snprintf(err, errlen, "out of memory");
        srv_engine_free(e);
        return NULL;
    }
    kiln_kv_clear(ctx);
    if (pthread_create(&e->thread, NULL, loop, e) != 0) {
        snprintf(err, errlen, "cannot start the decode thread");
        srv_engine_free(e);
        return NULL;
    }
    e->started = true;
    return e;
}

int32_t srv_engine_n_ctx_slot(const struct srv_engine *e) { return e->n_ctx_slot; }

bool srv_engine_submit(struct srv_engine *e, struct srv_task *const *t, int n) {
    pthread_mutex_lock(&e->mu);
    bool ok = !e->stop && e->q_len + n <= e->p.queue_max;
    const uint64_t group = ++e->next_group, step_now = atomic_load(&e->steps);
    for (int i = 0; ok && i < n; i++) {
        atomic_fetch_add(&t[i]->refs, 1);
        t[i]->group = group;
        t[i]->step_submit = step_now;
        if (!t[i]->seq) {
            t[i]->seq = t[i]->prompt;
            t[i]->n_seq = t[i]->n_prompt;
        }
        e->queue[e->q_len++] = t[i];
    }
    if (ok) pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return ok;
}

void srv_engine_poke(struct srv_engine *e) {
    pthread_mutex_lock(&e->mu);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* GET /slots beyond llama-server's fields: state, cached tokens, the current request
 * (e->mu held; the task's published fields under its own lock, e->mu before t->mu);
 * what a slot holds for another tenant is not shown to one (hide). */
static void slot_json_more(const struct srv_slot *s, cJSON *o, bool hide) {
    struct srv_task *t = s->task;
    cJSON_AddStringToObject(o, "state", !t ? "idle" : s->generating ? "generating" : "prompt");
    if (hide) return;
    cJSON_AddNumberToObject(o, "n_cached", atomic_load(&s->n_cache_pub));
    if (!t) return;
    cJSON *task = cJSON_AddObjectToObject(o, "task");
    if (!task) return;
    pthread_mutex_lock(&t->mu);
    cJSON_AddStringToObject(task, "id", t->id);
    cJSON_AddNumberToObject(task, "n_prompt", t->n_prompt);
    cJSON_AddNumberToObject(task, "n_prompt_cached", t->n_cached);
    cJSON_AddNumberToObject(task, "n_decoded", t->n_gen);
    cJSON_AddNumberToObject(task, "n_predict", t->n_predict);
    cJSON_AddBoolToObject(task, "stream", t->stream);
    pthread_mutex_unlock(&t->mu);
}

void srv_engine_set_metrics(struct srv_engine *e, struct srv_metrics *m) {
    e->metrics = m;
    srv_pcache_set_metrics(e->pcache, m);
}

void srv_engine_stats(struct srv_engine *e, struct srv_engine_stats *out) {
    *out = (struct srv_engine_stats){.n_slots = e->n_slots, .queue_max = e->p.queue_max,
                                     .kv_total = kiln_n_ctx(e->ctx)};
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_slots; i++) {
        out->processing += e->slots[i].task != NULL;
        out->kv_used += atomic_load(&e->slots[i].n_cache_pub);
    }
    out->deferred = e->q_len;
    out->parked = e->parked_pub;
    pthread_mutex_unlock(&e->mu);
}

cJSON *srv_engine_slots_json(struct srv_engine *e, uint32_t tenant, bool isolate) {
    cJSON *arr = cJSON_CreateArray();
    pthread_mutex_lock(&e->mu);
    for (int i = 0; arr && i < e->n_slots; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddNumberToObject(o, "n_ctx", e->n_ctx_slot);
        cJSON_AddBoolToObject(o, "is_processing", e->slots[i].task != NULL);
        /* the tenant of the cells: the task's (set at its start) or the last one's */
        slot_json_more(&e->slots[i], o, isolate && e->slots[i].tenant != tenant);
        cJSON_AddItemToArray(arr, o);
    }
    pthread_mutex_unlock(&e->mu);
    return arr;
}

void srv_engine_shutdown(struct srv_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->started) pthread_join(e->thread, NULL);
    e->started = false;
    /* the loop is gone: the tasks are touched by this thread and their waiters only */
    for (int i = 0; e->slots && i < e->n_slots; i++) {
        struct srv_task *t = e->slots[i].task;
        if (!t) continue;
        e->slots[i].task = NULL;
        srv_task_fail(t, 503, "the server is shutting down");
        srv_task_unref(t);
    }
    pthread_mutex_lock(&e->mu);
    for (int k = 0; e->queue && k < e->q_len; k++) {
        srv_task_fail(e->queue[k], 503, "the server is shutting down");
        srv_task_unref(e->queue[k]);
    }
    e->q_len = 0;
    pthread_mutex_unlock(&e->mu);
}

void srv_engine_free(struct srv_engine *e) {
    if (!e) return;
    srv_engine_shutdown(e);
    for (int i = 0; e->slots && i < e->n_slots; i++) free(e->slots[i].cache);
    srv_pcache_free(e->pcache);
    free(e->slots);
    free(e->queue);
    free(e->n_run);
    kiln_batch_free(&e->batch);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
