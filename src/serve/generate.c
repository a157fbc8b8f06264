/*
 * generate.c - the generation routes (/v1/completions, /v1/chat/completions,
 * /completion): a request becomes a task for the engine (one per prompt of a
 * list, run side by side); the connection's thread waits for them (one JSON
 * body) or streams them as server-sent events, one task's events after the
 * other's, and cancels them when the client goes away.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_MS 20 /* how often a waiting connection looks for a closed client */

/* Wait on t->cv (t->mu held) for at most WAIT_MS. */
static void wait_a_bit(struct srv_task *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

static void cancel(struct kiln_server *s, struct srv_task *t) {
    atomic_store(&t->cancel, true);
    srv_engine_poke(s->engine);
}

/* One request's tasks: one per prompt, answered as choices 0..n-1. */
struct group {
    struct srv_task *t[SRV_MAX_PROMPTS];
    int n;
};

static void cancel_all(struct kiln_server *s, struct group *g) {
    for (int i = 0; i < g->n; i++) cancel(s, g->t[i]);
}

static void unref_all(struct group *g) {
    for (int i = 0; i < g->n; i++) srv_task_unref(g->t[i]);
    g->n = 0;
}

/* usage summed over a group's finished tasks */
static cJSON *group_usage(const struct group *g) {
    struct srv_task sum = {0};
    for (int i = 0; i < g->n; i++) sum.n_prompt += g->t[i]->n_prompt, sum.n_gen += g->t[i]->n_gen;
    return srv_format_usage(&sum);
}

/* ------------------------------------------------------------------ streaming */

struct stream {
    struct kiln_server *s;
    struct group g;
    int k; /* the task being streamed: g.t[k] */
    struct MHD_Connection *conn;
    size_t sent;      /* text bytes sent */
    int32_t tok_sent; /* tokens whose logprobs were sent */
    char *buf;        /* pending output */
    size_t len, off, cap;
    bool finished;
};

static bool out_append(struct stream *st, const char *s, size_t n) {
    return srv_bytes_append(&st->buf, &st->len, &st->cap, s, n);
}

static bool out_event(struct stream *st, cJSON *json) {
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    bool ok = text && out_append(st, "data: ", 6) && out_append(st, text, strlen(text)) && out_append(st, "\n\n", 2);
    free(text);
    return ok;
}

/* Under t->mu: the events for what the task published since the last call. */
static bool stream_events(struct stream *st) {
    struct srv_task *t = st->g.t[st->k];
    if (t->err_status) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", t->err);
        cJSON_AddStringToObject(e, "type", t->err_status >= 500 ? "server_error" : "invalid_request_error");
        cJSON_AddNumberToObject(e, "code", t->err_status);
        st->finished = true;
        cancel_all(st->s, &st->g);
        return out_event(st, o) && (t->api == SRV_API_LLAMA || out_append(st, "data: [DONE]\n\n", 14));
    }
    size_t to = t->done ? t->len : t->safe;
    /* one event per token, as llama-server sends them (clients count them); tokens that
     * end inside a UTF-8 character go out with the token that completes it */
    while (st->tok_sent < t->n_toks) {
        int32_t i = st->tok_sent, j = i;
        size_t e;
        do {
            e = t->toks[j].off + t->toks[j].len;
            j++;
        } while (j < t->n_toks && e < t->len && ((unsigned char)t->text[e] & 0xC0) == 0x80);
        if (e > to) break;
        if ((e > st->sent || t->want_logprobs) &&
            !out_event(st, srv_format_chunk(st->s, t, st->sent, e, i, j, false)))
            return false;
        st->sent = e > st->sent ? e : st->sent;
        st->tok_sent = j;
    }
    if (to > st->sent) { /* text no token accounts for (none expected) */
        if (!out_event(st, srv_format_chunk(st->s, t, st->sent, to, st->tok_sent, st->tok_sent, false))) return false;
        st->sent = to;
    }
    int32_t tok1 = st->tok_sent;
    if (!t->done) return true;
    if (!out_event(st, srv_format_chunk(st->s, t, to, to, tok1, tok1, true))) return false;
    if (st->k + 1 < st->g.n) { /* the next prompt's task (the caller holds this one's lock) */
        st->k++;
        st->sent = 0;
        st->tok_sent = 0;
        return true;
    }
    st->finished = true;
    if (t->api == SRV_API_LLAMA) return true;
    if (t->include_usage) {
        cJSON *o = srv_format_chunk(st->s, t, to, to, tok1, tok1, false);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "choices");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", group_usage(&st->g));
        if (!out_event(st, o)) return false;
    }
    return out_append(st, "data: [DONE]\n\n", 14);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    struct stream *st = cls;
    for (;;) {
        if (st->off < st->len) {
            size_t n = st->len - st->off < max ? st->len - st->off : max;
            memcpy(out, st->buf + st->off, n);
            st->off += n;
            return (ssize_t)n;
        }
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        st->len = st->off = 0;
        struct srv_task *t = st->g.t[st->k];
        pthread_mutex_lock(&t->mu);
        while (!t->done && t->safe == st->sent) {
            wait_a_bit(t);
            if (!t->done && srv_client_gone(st->conn)) {
                pthread_mutex_unlock(&t->mu);
                cancel_all(st->s, &st->g);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        bool ok = stream_events(st); /* may move st->k on to the next task */
        pthread_mutex_unlock(&t->mu);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls) {
    struct stream *st = cls;
    if (!st->finished) cancel_all(st->s, &st->g);
    atomic_fetch_sub(&st->s->in_flight, 1);
    unref_all(&st->g);
    free(st->buf);
    free(st);
}

static enum MHD_Result reply_stream(struct srv_req *r, struct group *g) {
    struct stream *st = calloc(1, sizeof *st);
    if (!st) {
        cancel_all(r->srv, g);
        unref_all(g);
        atomic_fetch_sub(&r->srv->in_flight, 1);
        return MHD_NO;
    }
    *st = (struct stream){.s = r->srv, .g = *g, .conn = r->conn};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    srv_metrics_response(r->srv->metrics, r->route, 200);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ------------------------------------------------------------------ one body */

/* Wait for the group's tasks in order: the index of the first that failed (the
 * others cancelled then, not waited for), -1 when all succeeded, -2 when the client
 * left first (all cancelled). */
static int wait_all(struct srv_req *r, struct group *g) {
    for (int i = 0; i < g->n; i++) {
        struct srv_task *t = g->t[i];
        pthread_mutex_lock(&t->mu);
        while (!t->done) {
            wait_a_bit(t);
            if (!t->done && srv_client_gone(r->conn)) {
                pthread_mutex_unlock(&t->mu);
                cancel_all(r->srv, g);
                return -2;
            }
        }
        const bool failed = t->err_status != 0;
        pthread_mutex_unlock(&t->mu);
        if (failed) {
            cancel_all(r->srv, g);
            return i;
        }
    }
    return -1;
}

/* One body: the first failure's error, else the task's body; for a list of prompts
 * OpenAI's choices in prompt order with usage summed, or llama-server's array of
 * bodies. The tasks read are done: the engine publishes nothing more to them. */
static enum MHD_Result reply_whole(struct srv_req *r, struct group *g) {
    const int failed = wait_all(r, g);
    if (failed == -2) {
        unref_all(g);
        return MHD_NO; /* nobody to answer: close */
    }
    enum MHD_Result ret;
    if (failed >= 0) {
        ret = srv_reply_error(r, (unsigned)g->t[failed]->err_status, "%s", g->t[failed]->err);
    } else if (g->n == 1) {
        ret = srv_reply_json(r, 200, srv_format_final(r->srv, g->t[0]));
    } else if (g->t[0]->api == SRV_API_LLAMA) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; arr && i < g->n; i++) cJSON_AddItemToArray(arr, srv_format_final(r->srv, g->t[i]));
        ret = srv_reply_json(r, 200, arr);
    } else {
        cJSON *body = srv_format_final(r->srv, g->t[0]), *choices = cJSON_GetObjectItemCaseSensitive(body, "choices");
        for (int i = 1; choices && i < g->n; i++) {
            cJSON *other = srv_format_final(r->srv, g->t[i]);
            cJSON *oc = cJSON_GetObjectItemCaseSensitive(other, "choices");
            cJSON *c = oc ? cJSON_DetachItemFromArray(oc, 0) : NULL;
            if (c) cJSON_AddItemToArray(choices, c);
            cJSON_Delete(other);
        }
        cJSON_ReplaceItemInObjectCaseSensitive(body, "usage", group_usage(g));
        ret = srv_reply_json(r, 200, body);
    }
    unref_all(g);
    return ret;
}

/* ------------------------------------------------------------------ the routes */

/* Task i of a request: prompt i of the prompt field (the rendered messages for chat)
 * and the body's generation fields. */
static struct srv_task *parse_task(struct kiln_server *s, const cJSON *body, const cJSON *prompt, enum srv_api api,
                                   int i, char *err, size_t errlen) {
    struct srv_task *t = srv_task_new();
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bool ok;
    if (api == SRV_API_CHAT) {
        char *text = srv_render_messages(s, cJSON_GetObjectItemCaseSensitive(body, "messages"), true, err, errlen);
        ok = text != NULL;
        if (ok) {
            t->n_prompt = srv_tokenize(s->vocab, text, strlen(text), kiln_vocab_add_bos(s->vocab), &t->prompt);
            if (t->n_prompt < 0) {
                t->n_prompt = 0;
                snprintf(err, errlen, "cannot tokenize the rendered messages");
                ok = false;
            }
            free(text);
        }
    } else {
        ok = prompt != NULL;
        if (!ok) snprintf(err, errlen, "'prompt' is required");
        else ok = srv_parse_prompt(s, prompt, i, t, err, errlen);
    }
    if (!(ok && srv_parse_gen(s, body, api, t, err, errlen))) {
        if (!err[0]) snprintf(err, errlen, "out of memory");
        srv_task_unref(t);
        return NULL;
    }
    return t;
}

static enum MHD_Result generate(struct srv_req *r, enum srv_api api) {
    struct kiln_server *s = r->srv;
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    if (!srv_check_fields(body, (enum srv_body)api, r->url, err, sizeof err)) {
        cJSON_Delete(body);
        return srv_reply_error(r, 400, "%s", err);
    }
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (!prompt && api == SRV_API_LLAMA) prompt = cJSON_GetObjectItemCaseSensitive(body, "content");
    const int n = api == SRV_API_CHAT || !prompt ? 1 : srv_prompt_count(prompt);
    const int want = n > 0 ? n : 1; /* an empty list: task 0 reports it */
    if (n > SRV_MAX_PROMPTS) {
        cJSON_Delete(body);
        return srv_reply_error(r, 400, "'prompt' lists %d prompts; at most %d in one request", n, SRV_MAX_PROMPTS);
    }
    struct group g = {.n = 0};
    for (int i = 0; i < want; i++) {
        struct srv_task *t = parse_task(s, body, prompt, api, i, err, sizeof err);
        if (!t) break;
        g.t[g.n++] = t;
    }
    cJSON_Delete(body);
    if (g.n < want) {
        unref_all(&g);
        return srv_reply_error(r, 400, "%s", err);
    }
    unsigned long long id = atomic_fetch_add(&s->next_id, 1);
    const long long created = (long long)time(NULL);
    for (int i = 0; i < g.n; i++) {
        snprintf(g.t[i]->id, sizeof g.t[i]->id, "%s-kiln-%llu", api == SRV_API_CHAT ? "chatcmpl" : "cmpl", id);
        g.t[i]->created = created;
        if (s->p.request_timeout_s > 0) g.t[i]->deadline = g.t[i]->t_queued + s->p.request_timeout_s;
    }
    if (atomic_load(&s->stopping)) { /* draining before exit */
        unref_all(&g);
        return srv_reply_error(r, 503, "the server is shutting down");
    }
    if (g.n > s->p.queue_max) {
        unref_all(&g);
        return srv_reply_error(r, 400, "'prompt' lists %d prompts; this server queues at most %d (--queue)", n,
                               s->p.queue_max);
    }
    if (!srv_engine_submit(s->engine, g.t, g.n)) {
        unref_all(&g);
        if (!atomic_load(&s->stopping)) srv_metrics_rejected(s->metrics);
        return srv_reply_error(r, 503, atomic_load(&s->stopping) ? "the server is shutting down"
                                                                  : "every slot is busy and the queue is full");
    }
    atomic_fetch_add(&s->in_flight, 1);
    if (g.t[0]->stream) return reply_stream(r, &g);
    enum MHD_Result ret = reply_whole(r, &g);
    atomic_fetch_sub(&s->in_flight, 1);
    return ret;
}

enum MHD_Result srv_route_completions(struct srv_req *r) { return generate(r, SRV_API_COMPLETIONS); }
enum MHD_Result srv_route_chat(struct srv_req *r) { return generate(r, SRV_API_CHAT); }
enum MHD_Result srv_route_completion(struct srv_req *r) { return generate(r, SRV_API_LLAMA); }
