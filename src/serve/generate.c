/*
 * generate.c - the generation routes (/v1/completions, /v1/chat/completions,
 * /completion): a request becomes a task for the engine; the connection's
 * thread waits for it (one JSON body) or streams it as server-sent events,
 * and cancels it when the client goes away.
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

/* ------------------------------------------------------------------ streaming */

struct stream {
    struct kiln_server *s;
    struct srv_task *t;
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
    struct srv_task *t = st->t;
    if (t->err_status) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", t->err);
        cJSON_AddStringToObject(e, "type", t->err_status >= 500 ? "server_error" : "invalid_request_error");
        cJSON_AddNumberToObject(e, "code", t->err_status);
        st->finished = true;
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
    st->finished = true;
    if (!out_event(st, srv_format_chunk(st->s, t, to, to, tok1, tok1, true))) return false;
    if (t->api == SRV_API_LLAMA) return true;
    if (t->include_usage) {
        cJSON *o = srv_format_chunk(st->s, t, to, to, tok1, tok1, false);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "choices");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", srv_format_usage(t));
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
        struct srv_task *t = st->t;
        pthread_mutex_lock(&t->mu);
        while (!t->done && t->safe == st->sent) {
            wait_a_bit(t);
            if (!t->done && srv_client_gone(st->conn)) {
                pthread_mutex_unlock(&t->mu);
                cancel(st->s, t);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        bool ok = stream_events(st);
        pthread_mutex_unlock(&t->mu);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls) {
    struct stream *st = cls;
    if (!st->finished) cancel(st->s, st->t);
    atomic_fetch_sub(&st->s->in_flight, 1);
    srv_task_unref(st->t);
    free(st->buf);
    free(st);
}

static enum MHD_Result reply_stream(struct srv_req *r, struct srv_task *t) {
    struct stream *st = calloc(1, sizeof *st);
    if (!st) {
        cancel(r->srv, t);
        srv_task_unref(t);
        atomic_fetch_sub(&r->srv->in_flight, 1);
        return MHD_NO;
    }
    *st = (struct stream){.s = r->srv, .t = t, .conn = r->conn};
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

static enum MHD_Result reply_whole(struct srv_req *r, struct srv_task *t) {
    pthread_mutex_lock(&t->mu);
    while (!t->done) {
        wait_a_bit(t);
        if (!t->done && srv_client_gone(r->conn)) {
            pthread_mutex_unlock(&t->mu);
            cancel(r->srv, t);
            srv_task_unref(t);
            return MHD_NO; /* nobody to answer: close */
        }
    }
    enum MHD_Result ret;
    if (t->err_status) {
        char msg[sizeof t->err];
        memcpy(msg, t->err, sizeof msg);
        int status = t->err_status;
        pthread_mutex_unlock(&t->mu);
        ret = srv_reply_error(r, (unsigned)status, "%s", msg);
    } else {
        cJSON *body = srv_format_final(r->srv, t);
        pthread_mutex_unlock(&t->mu);
        ret = srv_reply_json(r, 200, body);
    }
    srv_task_unref(t);
    return ret;
}

/* ------------------------------------------------------------------ the routes */

static enum MHD_Result generate(struct srv_req *r, enum srv_api api) {
    struct kiln_server *s = r->srv;
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    struct srv_task *t = srv_task_new();
    if (!t) {
        cJSON_Delete(body);
        return srv_reply_error(r, 500, "out of memory");
    }
    bool ok;
    if (api == SRV_API_CHAT) {
        char *text = srv_render_messages(s, cJSON_GetObjectItemCaseSensitive(body, "messages"), true, err, sizeof err);
        ok = text != NULL;
        if (ok) {
            t->n_prompt = srv_tokenize(s->vocab, text, strlen(text), kiln_vocab_add_bos(s->vocab), &t->prompt);
            if (t->n_prompt < 0) {
                t->n_prompt = 0;
                snprintf(err, sizeof err, "cannot tokenize the rendered messages");
                ok = false;
            }
            free(text);
        }
    } else {
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(body, "prompt");
        if (!prompt && api == SRV_API_LLAMA) prompt = cJSON_GetObjectItemCaseSensitive(body, "content");
        ok = prompt != NULL;
        if (!ok) snprintf(err, sizeof err, "'prompt' is required");
        else ok = srv_parse_prompt(s, prompt, t, err, sizeof err);
    }
    ok = ok && srv_parse_gen(s, body, api, t, err, sizeof err);
    cJSON_Delete(body);
    if (!ok) {
        srv_task_unref(t);
        return srv_reply_error(r, 400, "%s", err[0] ? err : "out of memory");
    }
    unsigned long long n = atomic_fetch_add(&s->next_id, 1);
    snprintf(t->id, sizeof t->id, "%s-kiln-%llu", api == SRV_API_CHAT ? "chatcmpl" : "cmpl", n);
    t->created = (long long)time(NULL);
    if (atomic_load(&s->stopping)) { /* draining before exit */
        srv_task_unref(t);
        return srv_reply_error(r, 503, "the server is shutting down");
    }
    if (s->p.request_timeout_s > 0) t->deadline = t->t_queued + s->p.request_timeout_s;
    if (!srv_engine_submit(s->engine, t)) {
        srv_task_unref(t);
        if (!atomic_load(&s->stopping)) srv_metrics_rejected(s->metrics);
        return srv_reply_error(r, 503, atomic_load(&s->stopping) ? "the server is shutting down"
                                                                  : "every slot is busy and the queue is full");
    }
    atomic_fetch_add(&s->in_flight, 1);
    if (t->stream) return reply_stream(r, t);
    enum MHD_Result ret = reply_whole(r, t);
    atomic_fetch_sub(&s->in_flight, 1);
    return ret;
}

enum MHD_Result srv_route_completions(struct srv_req *r) { return generate(r, SRV_API_COMPLETIONS); }
enum MHD_Result srv_route_chat(struct srv_req *r) { return generate(r, SRV_API_CHAT); }
enum MHD_Result srv_route_completion(struct srv_req *r) { return generate(r, SRV_API_LLAMA); }
