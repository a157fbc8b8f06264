/*
 * generate.c - the generation routes (/v1/completions, /v1/chat/completions,
 * /completion): a request becomes a task for the engine per prompt of a list,
 * run side by side. On a worker the body is parsed, tokenized and submitted;
 * the connection then waits suspended and is resumed by its tasks: once for a
 * whole body (one JSON document), or as tokens come for a stream of
 * server-sent events, one task's events after the other's.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void cancel_group(struct kiln_server *s, struct srv_group *g) {
    for (int i = 0; i < g->n; i++) atomic_store(&g->t[i]->cancel, true);
    if (s->engine) srv_engine_poke(s->engine);
}

static void unref_all(struct srv_group *g) {
    for (int i = 0; i < g->n; i++) srv_task_unref(g->t[i]);
    g->n = 0;
}

/* usage summed over a group's finished tasks */
static cJSON *group_usage(const struct srv_group *g) {
    struct srv_task sum = {0};
    for (int i = 0; i < g->n; i++)
        sum.n_prompt += g->t[i]->n_prompt, sum.n_gen += g->t[i]->n_gen, sum.n_cached += g->t[i]->n_cached;
    return srv_format_usage(&sum);
}

/* ------------------------------------------------------------------ streaming */

struct stream {
    struct kiln_server *s;
    struct srv_exchange *x; /* its tasks are x->g's */
    int k;                  /* the task being streamed: x->g.t[k] */
    size_t sent;            /* text bytes sent */
    int32_t tok_sent;       /* tokens whose logprobs were sent */
    char *buf;              /* pending output */
    size_t len, off, cap;
    bool finished, failed;
    struct srv_chat_sent cs; /* a parsed chat: what was sent of each part */
    struct srv_anthropic_stream an; /* /v1/messages: the blocks opened */
    bool role_sent;                 /* a chat's first chunk, the role alone, went out */
    struct srv_responses_stream rs; /* /v1/responses: the items opened */
};

static bool out_append(struct stream *st, const char *s, size_t n) {
    return srv_bytes_append(&st->buf, &st->len, &st->cap, s, n);
}

/* "event: TYPE" and its data, for each of Anthropic's events */
static bool out_named(struct stream *st, cJSON *events) {
    bool ok = events != NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
        char *text = cJSON_PrintUnformatted(e);
        ok = ok && text && out_append(st, "event: ", 7) && out_append(st, type->valuestring, strlen(type->valuestring)) &&
             out_append(st, "\ndata: ", 7) && out_append(st, text, strlen(text)) && out_append(st, "\n\n", 2);
        free(text);
    }
    cJSON_Delete(events);
    return ok;
}

static bool out_event(struct stream *st, cJSON *json) {
    struct srv_task *t = st->x->g.t[st->k];
    if (t->api == SRV_API_CHAT && st->role_sent) { /* the role was said once, in the first chunk */
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(json, "choices"), 0);
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "delta"), "role");
    }
    if (t->wire != SRV_WIRE_OPENAI) { /* the chat's chunk told as Anthropic's or the Responses API's events */
        cJSON *events = json ? cJSON_CreateArray() : NULL;
        if (events && t->wire == SRV_WIRE_ANTHROPIC) srv_anthropic_chunk(&st->an, st->s, t, json, events);
        else if (events) srv_responses_chunk(&st->rs, st->s, t, json, events);
        cJSON_Delete(json);
        return out_named(st, events);
    }
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    bool ok = text && out_append(st, "data: ", 6) && out_append(st, text, strlen(text)) && out_append(st, "\n\n", 2);
    free(text);
    return ok;
}

/* Under t->mu: the events for what the task published since the last call. */
static bool stream_events(struct stream *st) {
    struct srv_group *g = &st->x->g;
    struct srv_task *t = g->t[st->k];
    if (t->err_status && t->wire == SRV_WIRE_RESPONSES) {
        cJSON *events = cJSON_CreateArray(), *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddNumberToObject(o, "sequence_number", st->rs.seq++);
        cJSON_AddStringToObject(o, "code", t->err_status >= 500 ? "server_error" : "invalid_request_error");
        cJSON_AddStringToObject(o, "message", t->err);
        cJSON_AddNullToObject(o, "param");
        cJSON_AddItemToArray(events, o);
        st->finished = st->failed = true;
        return out_named(st, events);
    }
    if (t->err_status && t->wire == SRV_WIRE_ANTHROPIC) {
        cJSON *events = cJSON_CreateArray(), *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddStringToObject(e, "type", t->err_status >= 500 ? "api_error" : "invalid_request_error");
        cJSON_AddStringToObject(e, "message", t->err);
        cJSON_AddItemToArray(events, o);
        st->finished = st->failed = true;
        return out_named(st, events);
    }
    if (t->err_status) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", t->err);
        cJSON_AddStringToObject(e, "type", t->err_status >= 500 ? "server_error" : "invalid_request_error");
        cJSON_AddNumberToObject(e, "code", t->err_status);
        st->finished = st->failed = true; /* the others are cancelled once the lock is let go */
        return out_event(st, o) && (t->api == SRV_API_LLAMA || out_append(st, "data: [DONE]\n\n", 14));
    }
    size_t to = t->done ? t->len : t->safe;
    if (t->api == SRV_API_CHAT && !st->role_sent) { /* as llama-server: the role alone, content null */
        cJSON *first = srv_format_chunk(st->s, t, 0, 0, 0, 0, false);
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(first, "choices"), 0), *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddNullToObject(d, "content");
        cJSON_ReplaceItemInObjectCaseSensitive(choice, "delta", d);
        if (!out_event(st, first)) return false;
        st->role_sent = true;
    }
    if (t->api == SRV_API_CHAT && t->chat.parse) { /* parsed deltas: reasoning, content, tool calls */
        cJSON *ev = cJSON_CreateArray();
        if (!ev || !srv_chat_deltas(st->s, t, &st->cs, t->done, ev)) {
            cJSON_Delete(ev);
            return false;
        }
        for (cJSON *e; (e = cJSON_DetachItemFromArray(ev, 0));)
            if (!out_event(st, e)) {
                cJSON_Delete(ev);
                return false;
            }
        cJSON_Delete(ev);
        st->sent = to;
        st->tok_sent = t->n_toks;
    }
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
    cJSON *last = srv_format_chunk(st->s, t, to, to, tok1, tok1, true);
    if (st->cs.any_call && (!t->finish || !strcmp(t->finish, "stop"))) {
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(last, "choices"), 0);
        cJSON_ReplaceItemInObjectCaseSensitive(choice, "finish_reason", cJSON_CreateString("tool_calls"));
    }
    if (!out_event(st, last)) return false;
    if (st->k + 1 < g->n) { /* the next prompt's task (the caller holds this one's lock) */
        st->k++;
        st->role_sent = false;
        st->sent = 0;
        st->tok_sent = 0;
        return true;
    }
    st->finished = true;
    if (t->api == SRV_API_LLAMA || t->wire != SRV_WIRE_OPENAI) return true;
    if (t->include_usage) {
        cJSON *o = srv_format_chunk(st->s, t, to, to, tok1, tok1, false);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "choices");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", group_usage(g));
        if (!out_event(st, o)) return false;
    }
    return out_append(st, "data: [DONE]\n\n", 14);
}

/* libmicrohttpd's content reader, on the connection's thread: what is ready, or 0 after
 * suspending the connection until a task publishes (srv_exchange_wake resumes it). */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    struct stream *st = cls;
    for (;;) {
        if (st->off < st->len) {
            size_t n = st->len - st->off < max ? st->len - st->off : max;
            memcpy(out, st->buf + st->off, n);
            st->off += n;
            return (ssize_t)n;
        }
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&st->x->gone)) return MHD_CONTENT_READER_END_WITH_ERROR;
        st->len = st->off = 0;
        struct srv_task *t = st->x->g.t[st->k];
        pthread_mutex_lock(&t->mu);
        bool news = t->done || t->safe != st->sent, ok = true;
        if (news) ok = stream_events(st); /* may move st->k on to the next task */
        pthread_mutex_unlock(&t->mu);
        if (st->failed) cancel_group(st->s, &st->x->g);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (!news && srv_exchange_suspend(st->x)) return 0;
    }
}

static void stream_free(void *cls) {
    struct stream *st = cls;
    srv_exchange_release_group(st->x); /* cancels what did not finish */
    srv_exchange_unref(st->x);
    srv_responses_stream_free(&st->rs);
    free(st->buf);
    free(st);
}

enum MHD_Result srv_send_stream(struct srv_exchange *x, struct MHD_Connection *c) {
    struct stream *st = calloc(1, sizeof *st);
    if (!st) return MHD_NO;
    *st = (struct stream){.s = x->srv, .x = x};
    srv_exchange_ref(x);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    srv_response_headers(x->srv, c, resp, false);
    srv_metrics_response(x->srv->metrics, x->route ? x->route->path : NULL, 200);
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ------------------------------------------------------------------ one body */

/* The group's answer once it is known: the first failure's error (the others cancelled),
 * else every task's body; for a list of prompts OpenAI's choices in prompt order with
 * usage summed, or llama-server's array of bodies. False while a task still runs. */
bool srv_group_reply(struct srv_exchange *x, struct srv_req *r) {
    struct srv_group *g = &x->g;
    int failed = -1;
    for (int i = 0; i < g->n; i++) {
        struct srv_task *t = g->t[i];
        pthread_mutex_lock(&t->mu);
        const bool done = t->done, bad = t->err_status != 0;
        pthread_mutex_unlock(&t->mu);
        if (bad) {
            failed = i;
            break;
        }
        if (!done) return false;
    }
    /* the tasks read are done: the engine publishes nothing more to them */
    if (failed >= 0) {
        cancel_group(x->srv, g);
        srv_reply_error(r, (unsigned)g->t[failed]->err_status, "%s", g->t[failed]->err);
    } else if (g->n == 1) {
        srv_reply_json(r, 200, srv_format_final(x->srv, g->t[0]));
    } else if (g->t[0]->api == SRV_API_LLAMA) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; arr && i < g->n; i++) cJSON_AddItemToArray(arr, srv_format_final(x->srv, g->t[i]));
        srv_reply_json(r, 200, arr);
    } else {
        cJSON *body = srv_format_final(x->srv, g->t[0]), *choices = cJSON_GetObjectItemCaseSensitive(body, "choices");
        for (int i = 1; choices && i < g->n; i++) {
            cJSON *other = srv_format_final(x->srv, g->t[i]);
            cJSON *oc = cJSON_GetObjectItemCaseSensitive(other, "choices");
            cJSON *c = oc ? cJSON_DetachItemFromArray(oc, 0) : NULL;
            if (c) cJSON_AddItemToArray(choices, c);
            cJSON_Delete(other);
        }
        cJSON_ReplaceItemInObjectCaseSensitive(body, "usage", group_usage(g));
        srv_reply_json(r, 200, body);
    }
    return true;
}

/* ------------------------------------------------------------------ building the tasks */

/* Task i of a request: prompt i of the prompt field (the rendered messages for chat)
 * and the body's generation fields. */
static struct srv_task *parse_task(struct kiln_server *s, const cJSON *body, const cJSON *prompt, enum srv_api api,
                                   int i, int32_t *n_over, char *err, size_t errlen) {
    struct srv_task *t = srv_task_new();
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bool ok;
    if (api == SRV_API_CHAT) {
        int status;
        char *text = srv_chat_render(s, body, SRV_BODY_CHAT, &t->chat, &status, err, errlen);
        ok = text != NULL;
        t->special = t->chat.parse; /* the parser reads the model's markup, control tokens included */
        if (ok && t->chat.think_budget >= 0 && t->chat.parse && t->chat.o.format != KILN_TOOLS_GPT_OSS) {
            t->chat.n_think_end = srv_tokenize(s->vocab, "\n</think>\n\n", strlen("\n</think>\n\n"), false, &t->chat.think_end);
            if (t->chat.n_think_end < 0) t->chat.n_think_end = 0;
        }
        if (ok) {
            t->n_prompt = srv_tokenize_prompt(s, "the rendered messages", text, strlen(text),
                                              kiln_vocab_add_bos(s->vocab), &t->prompt, err, errlen);
            if (t->n_prompt < 0) {
                if (t->n_prompt < -1) t->n_over = -2 - t->n_prompt;
                t->n_prompt = 0;
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
        if (t->n_over > 0 && n_over) *n_over = t->n_over;
        srv_task_unref(t);
        return NULL;
    }
    return t;
}

bool srv_build_group(struct kiln_server *s, const cJSON *body, enum srv_api api, const char *url, uint32_t tenant,
                     struct srv_group *g, unsigned *status, int32_t *n_over, char *err, size_t errlen) {
    *status = 400;
    if (n_over) *n_over = 0;
    g->n = 0;
    if (!srv_check_fields(body, (enum srv_body)api, url, err, errlen)) return false;
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (!prompt && api == SRV_API_LLAMA) prompt = cJSON_GetObjectItemCaseSensitive(body, "content");
    const int n = api == SRV_API_CHAT || !prompt ? 1 : srv_prompt_count(prompt);
    const int want = n > 0 ? n : 1; /* an empty list: task 0 reports it */
    if (n > SRV_MAX_PROMPTS) {
        snprintf(err, errlen, "'prompt' lists %d prompts; at most %d in one request", n, SRV_MAX_PROMPTS);
        return false;
    }
    if (n > s->p.queue_max) {
        snprintf(err, errlen, "'prompt' lists %d prompts; this server queues at most %d (--queue)", n, s->p.queue_max);
        return false;
    }
    for (int i = 0; i < want; i++) {
        struct srv_task *t = parse_task(s, body, prompt, api, i, n_over, err, errlen);
        if (!t) {
            unref_all(g);
            return false;
        }
        t->tenant = tenant;
        g->t[g->n++] = t;
    }
    return true;
}

/* ------------------------------------------------------------------ the routes */

enum MHD_Result srv_generate(struct srv_req *r, const cJSON *body, enum srv_api api, enum srv_wire wire,
                             int32_t think_budget) {
    struct kiln_server *s = r->srv;
    if (s->p.embeddings)
        return srv_reply_error(r, 400, "this server makes %s (--%s): it does not generate text",
                               kiln_context_pooling(s->ctx) == KILN_POOLING_RANK ? "rerankings" : "embeddings",
                               kiln_context_pooling(s->ctx) == KILN_POOLING_RANK ? "reranking" : "embeddings");
    char err[512] = "";
    struct srv_group g = {.n = 0};
    unsigned status = 400;
    int32_t n_over = 0;
    bool ok = srv_build_group(s, body, api, r->url, r->tenant, &g, &status, &n_over, err, sizeof err);
    if (!ok && n_over > 0) return srv_reply_over_context(r, n_over, s->n_ctx_slot, err);
    if (!ok) return srv_reply_error(r, status, "%s", err);
    unsigned long long id = atomic_fetch_add(&s->next_id, 1);
    const long long created = (long long)time(NULL);
    for (int i = 0; i < g.n; i++) {
        struct srv_task *t = g.t[i];
        t->wire = wire;
        if (think_budget >= -1 && t->chat.parse) {
            t->chat.think_budget = think_budget;
            if (think_budget >= 0 && !t->chat.n_think_end && t->chat.o.format != KILN_TOOLS_GPT_OSS) {
                free(t->chat.think_end);
                t->chat.think_end = NULL;
                t->chat.n_think_end = srv_tokenize(s->vocab, "\n</think>\n\n", strlen("\n</think>\n\n"), false,
                                                   &t->chat.think_end);
                if (t->chat.n_think_end < 0) t->chat.n_think_end = 0;
            }
        }
        snprintf(g.t[i]->id, sizeof g.t[i]->id, "%s-kiln-%llu",
                 wire == SRV_WIRE_ANTHROPIC   ? "msg"
                 : wire == SRV_WIRE_RESPONSES ? "resp"
                 : api == SRV_API_CHAT        ? "chatcmpl"
                                              : "cmpl",
                 id);
        g.t[i]->created = created;
        if (s->p.request_timeout_s > 0) g.t[i]->deadline = g.t[i]->t_queued + s->p.request_timeout_s;
    }
    if (!r->x || atomic_load(&s->stopping)) { /* parsed only (the fuzzer), or draining before exit */
        unref_all(&g);
        return r->x ? srv_reply_error(r, 503, "the server is shutting down") : MHD_YES;
    }
    struct srv_exchange *x = r->x;
    x->stream = g.t[0]->stream; /* before the tasks can wake it */
    for (int i = 0; i < g.n; i++) g.t[i]->x = x;
    if (!srv_engine_submit(s->engine, g.t, g.n)) {
        unref_all(&g);
        if (!atomic_load(&s->stopping)) srv_metrics_rejected(s->metrics);
        return srv_reply_error(r, 503, atomic_load(&s->stopping) ? "the server is shutting down"
                                                                  : "every slot is busy and the queue is full");
    }
    x->g = g;
    x->in_flight = true;
    atomic_fetch_add(&s->in_flight, 1);
    return MHD_YES;
}

static enum MHD_Result generate(struct srv_req *r, enum srv_api api) {
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    enum MHD_Result ret = srv_generate(r, body, api, SRV_WIRE_OPENAI, -2);
    cJSON_Delete(body);
    return ret;
}

enum MHD_Result srv_route_completions(struct srv_req *r) { return generate(r, SRV_API_COMPLETIONS); }
enum MHD_Result srv_route_chat(struct srv_req *r) { return generate(r, SRV_API_CHAT); }
enum MHD_Result srv_route_completion(struct srv_req *r) { return generate(r, SRV_API_LLAMA); }
