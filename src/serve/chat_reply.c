/*
 * chat_reply.c - a chat task's output read back as OpenAI's assistant message:
 * content, reasoning_content and tool_calls (id, function name, arguments as
 * JSON text) with finish_reason "tool_calls", and, while streaming, the
 * deltas of each part as the text grows (reasoning_content and content
 * pieces; a call's id, name and arguments once its arguments are whole JSON).
 * The parser (kiln_chat_parse) holds back what may still become markup, so
 * that what is sent is never taken back.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a call's id: 9 letters and digits (Mistral's templates insist), the same for the task's stream and body */
static void call_id(const struct srv_task *t, size_t i, const char *own, char *out, size_t size) {
    if (own && *own) {
        snprintf(out, size, "%s", own);
        return;
    }
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint64_t h = 1469598103934665603ull;
    for (const char *p = t->id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (i + 1)) * 1099511628211ull;
    h ^= (uint64_t)t->created * 0x9E3779B97F4A7C15ull;
    size_t k = 0;
    for (; k < 9 && k + 1 < size; k++) {
        out[k] = digits[h % 62];
        h = h / 62 ^ (h << 7) ^ (uint64_t)(k + 1) * 0xD6E8FEB86659FD93ull;
    }
    out[k] = 0;
}

static bool parse(struct srv_task *t, size_t len, bool final, struct kiln_chat_reply *r) {
    struct kiln_chat_parse_opts o = t->chat.o;
    o.partial = !final;
    if (kiln_chat_parse(t->text ? t->text : "", len, &o, r) != 0) return false;
    if (!t->chat.parallel && r->n_calls > 1) { /* parallel_tool_calls false: the first call only */
        for (size_t i = 1; i < r->n_calls; i++) {
            free(r->calls[i].name);
            free(r->calls[i].arguments);
            free(r->calls[i].id);
        }
        r->n_calls = 1;
    }
    return true;
}

static cJSON *call_json(const struct srv_task *t, size_t i, const struct kiln_tool_call *c, bool with_index) {
    cJSON *o = cJSON_CreateObject();
    char id[64];
    call_id(t, i, c->id, id, sizeof id);
    if (with_index) cJSON_AddNumberToObject(o, "index", (double)i);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(o, "function");
    srv_add_text(f, "name", c->name ? c->name : "", c->name ? strlen(c->name) : 0);
    srv_add_text(f, "arguments", c->arguments, strlen(c->arguments));
    return o;
}

cJSON *srv_chat_message(struct kiln_server *s, struct srv_task *t, const char **finish) {
    (void)s;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    *finish = t->finish ? t->finish : "stop";
    struct kiln_chat_reply r;
    if (!t->chat.parse || !parse(t, t->len, true, &r)) {
        srv_add_text(m, "content", t->text ? t->text : "", t->len);
        return m;
    }
    if (r.n_calls && !r.content[0])
        cJSON_AddNullToObject(m, "content");
    else
        srv_add_text(m, "content", r.content, strlen(r.content));
    if (r.reasoning[0]) srv_add_text(m, "reasoning_content", r.reasoning, strlen(r.reasoning));
    if (r.n_calls) {
        cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
        for (size_t i = 0; i < r.n_calls; i++) cJSON_AddItemToArray(calls, call_json(t, i, &r.calls[i], false));
        if (!strcmp(*finish, "stop")) *finish = "tool_calls";
    }
    kiln_chat_reply_free(&r);
    return m;
}

/* one chat.completion.chunk with this delta; the first of a batch carries the logprobs of the
 * tokens since the last one */
static cJSON *chunk(struct kiln_server *s, struct srv_task *t, struct srv_chat_sent *sent, cJSON *delta) {
    int32_t tok0 = sent->toks < t->n_toks ? sent->toks : t->n_toks;
    cJSON *o = srv_format_chunk(s, t, t->len, t->len, tok0, t->n_toks, false);
    sent->toks = t->n_toks;
    cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(choice, "delta", delta);
    return o;
}

bool srv_chat_deltas(struct kiln_server *s, struct srv_task *t, struct srv_chat_sent *sent, bool final,
                     cJSON *events) {
    struct kiln_chat_reply r;
    if (!parse(t, final ? t->len : t->safe, final, &r)) return false;
    bool first = !sent->content && !sent->reasoning && !sent->any_call;
    size_t rl = strlen(r.reasoning), cl = strlen(r.content);
    if (rl > sent->reasoning) {
        cJSON *d = cJSON_CreateObject();
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        first = false;
        srv_add_text(d, "reasoning_content", r.reasoning + sent->reasoning, rl - sent->reasoning);
        cJSON_AddItemToArray(events, chunk(s, t, sent, d));
        sent->reasoning = rl;
    }
    if (cl > sent->content) {
        cJSON *d = cJSON_CreateObject();
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        first = false;
        srv_add_text(d, "content", r.content + sent->content, cl - sent->content);
        cJSON_AddItemToArray(events, chunk(s, t, sent, d));
        sent->content = cl;
    }
    for (size_t i = 0; i < r.n_calls; i++) {
        const struct kiln_tool_call *c = &r.calls[i];
        size_t al = strlen(c->arguments);
        bool big = i >= 64; /* past the table: whole, once, at the end */
        if (!c->name || (big && !final) || (big && i < sent->n_calls)) continue;
        /* a call goes out once its arguments are whole JSON: a call that breaks off into text
         * becomes content, and what was sent cannot be taken back */
        if (!final && i + 1 == r.n_calls && !sent->named[i]) {
            cJSON *whole = cJSON_ParseWithLength(c->arguments, al);
            bool done = cJSON_IsObject(whole);
            cJSON_Delete(whole);
            if (!done) continue;
        }
        if (big || !sent->named[i]) { /* its id and name, and what arguments there are */
            cJSON *d = cJSON_CreateObject();
            if (first) cJSON_AddStringToObject(d, "role", "assistant");
            first = false;
            cJSON *tc = cJSON_AddArrayToObject(d, "tool_calls");
            cJSON *call = call_json(t, i, c, true);
            cJSON_AddItemToArray(tc, call);
            cJSON_AddItemToArray(events, chunk(s, t, sent, d));
            if (!big) {
                sent->named[i] = true;
                sent->args[i] = al;
            }
            sent->any_call = true;
            if (i + 1 > sent->n_calls) sent->n_calls = i + 1;
            continue;
        }
        if (al > sent->args[i]) {
            cJSON *d = cJSON_CreateObject();
            cJSON *tc = cJSON_AddArrayToObject(d, "tool_calls"), *call = cJSON_CreateObject();
            cJSON_AddNumberToObject(call, "index", (double)i);
            cJSON *f = cJSON_AddObjectToObject(call, "function");
            srv_add_text(f, "arguments", c->arguments + sent->args[i], al - sent->args[i]);
            cJSON_AddItemToArray(tc, call);
            cJSON_AddItemToArray(events, chunk(s, t, sent, d));
            sent->args[i] = al;
        }
    }
    if (final && first) { /* nothing to show at all: the role and an empty content, as a plain stream has them */
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        cJSON_AddItemToArray(events, chunk(s, t, sent, d));
    }
    if (t->want_logprobs && sent->toks < t->n_toks && (final || t->safe == t->len)) /* tokens no part showed yet */
        cJSON_AddItemToArray(events, chunk(s, t, sent, cJSON_CreateObject()));
    kiln_chat_reply_free(&r);
    return true;
}
