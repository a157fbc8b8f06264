/*
 * engine.c - continuous batching: one thread owns the context and runs steps.
 * Each step puts every generating slot's next token and chunks of waiting
 * prompts into one batch over the shared KV cache (sequence id = slot), decodes
 * it, samples, and publishes text to the tasks. A task goes to the idle slot
 * whose cached tokens share the longest prefix with its prompt.
 */
#include "serve_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    struct srv_task **queue;
    int q_head, q_len;
    bool stop;
    uint64_t tick;
    struct srv_metrics *metrics; /* NULL: not counted */
    int n_busy_step;             /* slots with a task in this step */
    struct srv_prefix_cache *pcache; /* on the sequences past the slots' */
    long long parked_pub;            /* its tokens as of the last step, under mu */
};

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ tasks */

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
    t->t_queued = srv_now();
    return t;
}

void srv_task_unref(struct srv_task *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    free(t->prompt);
    kiln_sampler_free(t->smpl);
    for (int i = 0; i < t->n_stop; i++) free(t->stop[i]);
    free(t->text);
    free(t->toks);
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
    pthread_cond_broadcast(&t->cv);
}

static void task_fail(struct srv_task *t, int status, const char *msg) {
    pthread_mutex_lock(&t->mu);
    srv_task_fail_locked(t, status, msg);
    pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ slots */

static bool cache_push(struct srv_slot *s, int32_t tok) {
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
static void slot_release(struct srv_engine *e, struct srv_slot *s, bool drop_cells) {
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

/* The idle slot sharing the longest prefix with t's prompt (the least recently used
 * among equals); NULL when none is idle. Called with e->mu held. */
static struct srv_slot *pick_slot(struct srv_engine *e, const struct srv_task *t, int32_t *lcp_out) {
    struct srv_slot *best = NULL;
    int32_t best_lcp = -1;
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *s = &e->slots[i];
        if (s->task) continue;
        int32_t lcp = t->cache_prompt ? common_prefix(s->cache, s->n_cache, t->prompt, t->n_prompt) : 0;
        if (lcp > best_lcp || (lcp == best_lcp && s->last_used < best->last_used)) {
            best = s;
            best_lcp = lcp;
        }
    }
    /* a prefix under half the prompt is not worth evicting another conversation for
     * (llama-server's slot similarity): take the least recently used slot then */
    if (best && (int64_t)best_lcp * 2 < t->n_prompt) {
        for (int i = 0; i < e->n_slots; i++) {
            struct srv_slot *s = &e->slots[i];
            if (!s->task && s->last_used < best->last_used) best = s;
        }
        best_lcp = t->cache_prompt ? common_prefix(best->cache, best->n_cache, t->prompt, t->n_prompt) : 0;
    }
    *lcp_out = best_lcp;
    return best;
}

/* Called with e->mu held (the slot's public view changes). */
static void slot_start(struct srv_engine *e, struct srv_slot *s, struct srv_task *t, int32_t lcp) {
    /* at least the prompt's last token is decoded again: its logits are needed */
    int32_t keep = lcp < t->n_prompt ? lcp : t->n_prompt - 1;
    bool parked = srv_pcache_park(e->pcache, s->id, s->cache, s->n_cache, keep, t->prompt, t->n_prompt);
    srv_metrics_request(e->metrics, keep, s->n_cache > keep && !parked ? s->n_cache - keep : 0,
                        t->n_predict > 0 ? t->n_prompt + t->n_predict : e->n_ctx_slot);
    kiln_kv_seq_rm(e->ctx, s->id, keep, -1);
    s->n_cache = keep;
    s->task = t;
    s->generating = false;
    s->failed = false;
    s->n_gen = 0;
    s->order = ++e->tick;
    for (int32_t i = 0; i < t->n_prompt; i++) kiln_sampler_accept_prompt(t->smpl, t->prompt[i]); /* not the grammar's */
    pthread_mutex_lock(&t->mu);
    t->n_cached = keep;
    t->slot = s->id;
    t->t_start = srv_now();
    pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ publishing */

static size_t max_stop_len(const struct srv_task *t) {
    size_t m = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t l = strlen(t->stop[i]);
        if (l > m) m = l;
    }
    return m;
}

/* How much of the text can be shown: not a suffix that may start a stop string,
 * not an incomplete UTF-8 sequence. */
static size_t safe_len(const struct srv_task *t) {
    size_t len = t->len, hold = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(t->text + len - k, t->stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t h = len - hold;
    /* back off over a lead byte whose sequence is not complete before h */
    for (size_t back = 1; back <= 4 && back <= h; back++) {
        unsigned char c = (unsigned char)t->text[h - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back) h -= back;
        break;
    }
    return h > t->safe ? h : t->safe;
}

static void logprobs(const float *logits, int64_t n_vocab, int32_t tok, int n_top, struct srv_tok *rec) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > -INFINITY) sum += exp((double)logits[i] - mx);
    double lse = (double)mx + log(sum);
    rec->logprob = (float)((double)logits[tok] - lse);
    rec->n_top = 0;
    for (int64_t i = 0; i < n_vocab && n_top > 0; i++) {
        float l = logits[i];
        if (!(l > -INFINITY)) continue;
        int k = rec->n_top;
        if (k == n_top && l <= rec->top[k - 1].logprob) continue;
        if (k < n_top) rec->n_top++;
        else k--;
        while (k > 0 && rec->top[k - 1].logprob < l) {
            rec->top[k] = rec->top[k - 1];
            k--;
        }
        rec->top[k].id = (int32_t)i;
        rec->top[k].logprob = l;
    }
    for (int k = 0; k < rec->n_top; k++) rec->top[k].logprob = (float)((double)rec->top[k].logprob - lse);
}

/* Sample the slot's next token from logits, publish it, and finish the task when it
 * ends (end of generation, a stop string, its limit, the slot's context). */
static void slot_sample(struct srv_engine *e, struct srv_slot *s, const float *logits) {
    struct srv_task *t = s->task;
    if (t->n_predict == 0) {
        pthread_mutex_lock(&t->mu);
        t->finish = "length";
        t->done = true;
        t->t_first = t->t_end = srv_now();
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        slot_release(e, s, false);
        return;
    }
    int32_t tok = logits ? kiln_sampler_sample(t->smpl, logits, e->n_vocab) : KILN_TOKEN_NULL;
    if (tok < 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "sampling failed: %s", kiln_sampler_last_error());
        task_fail(t, 500, msg);
        s->failed = true;
        slot_release(e, s, true);
        return;
    }
    kiln_sampler_accept(t->smpl, tok);
    s->n_gen++;
    srv_metrics_sampled(e->metrics); /* before the client can see the token */
    struct srv_tok rec = {.id = tok};
    if (t->want_logprobs || t->n_probs > 0) logprobs(logits, e->n_vocab, tok, t->n_probs, &rec);
    bool eog = kiln_vocab_is_eog(e->v, tok);
    char piece[256];
    int64_t pl = eog ? 0 : kiln_token_to_piece(e->v, tok, piece, sizeof piece, false);
    if (pl < 0) pl = 0;

    pthread_mutex_lock(&t->mu);
    double now = srv_now();
    if (!s->generating) {
        t->t_first = now;
        srv_metrics_ttft(e->metrics, now - t->t_queued);
    }
    t->n_gen = s->n_gen;
    const char *finish = NULL;
    bool oom = false;
    if (eog) {
        finish = "stop";
    } else {
        size_t old = t->len;
        rec.off = (uint32_t)old;
        rec.len = (uint32_t)pl;
        if (t->n_toks == t->cap_toks) {
            int32_t cap = t->cap_toks ? t->cap_toks * 2 : 64;
            struct srv_tok *p = realloc(t->toks, sizeof *p * (size_t)cap);
            if (p) {
                t->toks = p;
                t->cap_toks = cap;
            }
        }
        oom = t->n_toks == t->cap_toks || !srv_bytes_append(&t->text, &t->len, &t->cap, piece, (size_t)pl);
        if (!oom) t->toks[t->n_toks++] = rec;
        /* a stop string can only end in the new piece */
        size_t ms = max_stop_len(t), from = old + 1 > ms ? old + 1 - ms : 0, cut = t->len;
        for (int i = 0; i < t->n_stop && !oom; i++) {
            const char *hit = memmem(t->text + from, t->len - from, t->stop[i], strlen(t->stop[i]));
            if (hit && (size_t)(hit - t->text) < cut) {
                cut = (size_t)(hit - t->text);
                t->stop_word = i;
            }
        }
        if (cut < t->len) {
            t->len = cut;
            t->text[cut] = 0;
            while (t->n_toks > 0 && t->toks[t->n_toks - 1].off >= cut) t->n_toks--;
            if (t->n_toks > 0) {
                struct srv_tok *last = &t->toks[t->n_toks - 1];
                if (last->off + last->len > cut) last->len = (uint32_t)(cut - last->off);
            }
            finish = "stop";
        } else if (t->n_predict > 0 && s->n_gen >= t->n_predict) {
            finish = "length";
        } else if (s->n_cache >= e->n_ctx_slot) {
            finish = "length"; /* no cell left in this slot for the token */
        }
    }
    if (oom) {
        srv_task_fail_locked(t, 500, "out of memory");
        pthread_mutex_unlock(&t->mu);
        s->failed = true;
        slot_release(e, s, true);
        return;
    }
    if (finish) {
        t->finish = finish;
        t->safe = t->len;
        t->done = true;
        t->t_end = now;
    } else {
        t->safe = safe_len(t);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (finish) {
        slot_release(e, s, false);
    } else {
        s->generating = true;
        s->next = tok;
    }
}

/* ------------------------------------------------------------------ shared prefixes */

/* Every slot's cached tokens together are the prefix tree: a prompt may continue
 * from cells any other slot decoded (busy or idle), shared through the runtime's
 * sequence copy (a cell then belongs to both sequences; no K/V row is copied), so
 * N requests with one system prompt compute it once. Batch invariance makes a
 * shared cell's K/V identical to the one this slot would have computed. */

/* Take the longest run of t's prompt past s->n_cache that another slot has decoded. */
static void share_prefix(struct srv_engine *e, struct srv_slot *s) {
    struct srv_task *t = s->task;
    int32_t limit = t->n_prompt - 1; /* the last prompt token is decoded here: its logits are needed */
    if (!t->cache_prompt || !e->p.prefix_share || s->n_cache >= limit) return;
    struct srv_slot *from = NULL;
    int32_t best = s->n_cache;
    for (int i = 0; i < e->n_slots; i++) {
        struct srv_slot *o = &e->slots[i];
        if (o == s || o->n_cache <= best) continue;
        int32_t lcp = common_prefix(o->cache, o->n_cache, t->prompt, limit);
        if (lcp > best) {
            best = lcp;
            from = o;
        }
    }
    int32_t from_seq = from ? from->id : -1, pseq = -1;
    int32_t plcp = srv_pcache_best(e->pcache, t->prompt, limit, &pseq);
    if (plcp > best) {
        best = plcp;
        from_seq = pseq;
    }
    if (from_seq < 0) return;
    int32_t n0 = s->n_cache;
    if (!kiln_kv_seq_cp(e->ctx, from_seq, s->id, n0, best)) return;
    for (int32_t p = n0; p < best; p++)
        if (!cache_push(s, t->prompt[p])) { /* out of memory: give back what was taken */
            kiln_kv_seq_rm(e->ctx, s->id, n0, -1);
            s->n_cache = n0;
            return;
        }
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
    if (!t->cache_prompt || !e->p.prefix_share) return false;
    for (int i = 0; i < e->n_slots; i++) {
        const struct srv_slot *o = &e->slots[i];
        if (o == s || !o->task || o->generating || o->order > s->order || o->n_cache >= o->task->n_prompt) continue;
        int32_t lcp = common_prefix(o->task->prompt, o->task->n_prompt, t->prompt, t->n_prompt - 1);
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
    int rc = kiln_decode(e->ctx, &view), calls = 1;
    /* no room: parked prefixes give way to running sequences first (the cache is unchanged on error) */
    while (rc == -2 && srv_pcache_evict_lru(e->pcache)) {
        rc = kiln_decode(e->ctx, &view);
        calls++;
    }
    /* counted before any token of it is published: a client that got its answer reads
     * /metrics with it */
    int32_t n_prompt = 0, n_gen = 0;
    for (int32_t i = lo; rc == 0 && i < hi; i++) {
        if (e->slots[b->seq_id[i]].generating) n_gen++;
        else n_prompt++;
    }
    srv_metrics_step(e->metrics, n_prompt, n_gen, e->n_busy_step, calls, srv_now() - t0);
    if (rc == -2 && hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        decode_range(e, lo, mid);
        decode_range(e, mid, hi);
        return;
    }
    for (int32_t i = lo; i < hi; i++) {
        struct srv_slot *s = &e->slots[b->seq_id[i]];
        if (!s->task || s->failed) continue;
        if (rc != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "decode failed: %s", kiln_context_error(e->ctx));
            task_fail(s->task, rc == -2 ? 503 : 500, msg);
            s->failed = true;
            slot_release(e, s, true);
            continue;
        }
        if (!cache_push(s, b->token[i])) {
            task_fail(s->task, 500, "out of memory");
            s->failed = true;
            slot_release(e, s, true);
            continue;
        }
        atomic_store(&s->n_cache_pub, s->n_cache);
        if (b->logits[i]) slot_sample(e, s, kiln_get_logits_ith(e->ctx, i - lo));
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
            task_fail(s->task, 499, "the client closed the connection");
            slot_release(e, s, true);
            continue;
        }
        if (s->task->deadline > 0 && t0 > s->task->deadline) {
            /* the cache holds only decoded tokens: it stays valid for a later prefix */
            task_fail(s->task, 504, "the request ran past the server's --request-timeout");
            srv_metrics_timeout(e->metrics);
            slot_release(e, s, false);
            continue;
        }
        if (s->generating) {
            kiln_batch_add(b, s->next, s->n_cache, s->id, true);
            n_gen++;
        }
    }
    int32_t budget = e->n_batch - b->n_tokens;
    if (n_gen > 0 && budget > e->p.prefill_chunk) budget = e->p.prefill_chunk;
    /* prompts in arrival order, so an early long prompt is not overtaken forever */
    for (;;) {
        struct srv_slot *next = NULL;
        for (int i = 0; i < e->n_slots; i++) {
            struct srv_slot *s = &e->slots[i];
            if (s->task && !s->generating && s->n_cache < s->task->n_prompt && !s->in_batch &&
                (!next || s->order < next->order))
                next = s;
        }
        if (!next || budget <= 0) break;
        share_prefix(e, next);
        if (should_wait(e, next)) {
            next->in_batch = true; /* handled this step: nothing to decode */
            continue;
        }
        const struct srv_task *t = next->task;
        int32_t n = t->n_prompt - next->n_cache;
        if (n > budget) n = budget;
        for (int32_t k = 0; k < n; k++) {
            int32_t pos = next->n_cache + k;
            kiln_batch_add(b, t->prompt[pos], pos, next->id, pos == t->n_prompt - 1);
        }
        budget -= n;
        next->in_batch = true;
    }
    e->n_busy_step = 0;
    for (int i = 0; i < e->n_slots; i++) e->n_busy_step += e->slots[i].task != NULL;
    if (b->n_tokens > 0) decode_range(e, 0, b->n_tokens);
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
        struct srv_task *t = e->queue[(e->q_head + k) % e->p.queue_max];
        if (t->deadline > 0 && now > t->deadline) {
            task_fail(t, 504, "the request waited past the server's --request-timeout");
            srv_metrics_timeout(e->metrics);
            srv_task_unref(t);
            continue;
        }
        e->queue[(e->q_head + kept++) % e->p.queue_max] = t;
    }
    e->q_len = kept;
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
        while (e->q_len > 0) {
            struct srv_task *t = e->queue[e->q_head];
            int32_t lcp = 0;
            struct srv_slot *s = atomic_load(&t->cancel) ? NULL : pick_slot(e, t, &lcp);
            if (!s && !atomic_load(&t->cancel)) break;
            e->q_head = (e->q_head + 1) % e->p.queue_max;
            e->q_len--;
            if (s) slot_start(e, s, t, lcp);
            else { /* cancelled while waiting: done, for whoever still looks */
                task_fail(t, 499, "the request was cancelled");
                srv_task_unref(t);
            }
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
    e->queue = calloc((size_t)e->p.queue_max, sizeof *e->queue);
    e->batch = kiln_batch_init(e->n_batch);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (!e->slots || !e->queue || !e->batch.capacity) {
        snprintf(err, errlen, "out of memory");
        srv_engine_free(e);
        return NULL;
    }
    for (int i = 0; i < e->n_slots; i++) e->slots[i].id = i;
    /* the context's sequences past the slots hold the prefix cache */
    int n_park = p->cache_ram_mib != 0 && p->prefix_share ? (int)kiln_n_seq_max(ctx) - e->n_slots : 0;
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
    for (int i = 0; ok && i < n; i++) {
        atomic_fetch_add(&t[i]->refs, 1);
        e->queue[(e->q_head + e->q_len) % e->p.queue_max] = t[i];
        e->q_len++;
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
 * (e->mu held; the task's published fields under its own lock, e->mu before t->mu). */
static void slot_json_more(struct srv_engine *e, const struct srv_slot *s, cJSON *o) {
    (void)e;
    struct srv_task *t = s->task;
    cJSON_AddStringToObject(o, "state", !t ? "idle" : s->generating ? "generating" : "prompt");
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

cJSON *srv_engine_slots_json(struct srv_engine *e) {
    cJSON *arr = cJSON_CreateArray();
    pthread_mutex_lock(&e->mu);
    for (int i = 0; arr && i < e->n_slots; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddNumberToObject(o, "n_ctx", e->n_ctx_slot);
        cJSON_AddBoolToObject(o, "is_processing", e->slots[i].task != NULL);
        slot_json_more(e, &e->slots[i], o);
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
        task_fail(t, 503, "the server is shutting down");
        srv_task_unref(t);
    }
    pthread_mutex_lock(&e->mu);
    for (; e->queue && e->q_len > 0; e->q_len--) {
        struct srv_task *t = e->queue[e->q_head];
        e->q_head = (e->q_head + 1) % e->p.queue_max;
        task_fail(t, 503, "the server is shutting down");
        srv_task_unref(t);
    }
    pthread_mutex_unlock(&e->mu);
}

void srv_engine_free(struct srv_engine *e) {
    if (!e) return;
    srv_engine_shutdown(e);
    for (int i = 0; e->slots && i < e->n_slots; i++) free(e->slots[i].cache);
    srv_pcache_free(e->pcache);
    free(e->slots);
    free(e->queue);
    kiln_batch_free(&e->batch);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
