/*
 * responses.c - OpenAI's Responses API (POST /v1/responses) over the chat path: input (a string
 * or message, function_call and function_call_output items), instructions and function tools
 * become a chat body; the answer is a response of output items (reasoning, message,
 * function_call), or its stream of named events. Stored responses (previous_response_id) are
 * not kept: every request carries its whole conversation.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ the request */

/* content as a string or parts of input_text / output_text: the text (malloc'd), NULL with a message */
static char *item_text(const cJSON *c, const char *where, char *err, size_t errlen) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        snprintf(err, errlen, "%s.content must be a string or an array of input_text parts", where);
        return NULL;
    }
    char *out = NULL;
    size_t len = 0, cap = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        if (!srv_check_fields(p, SRV_BODY_RESP_PART, "a content part", err, errlen)) break;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if ((strcmp(ty, "input_text") && strcmp(ty, "output_text") && strcmp(ty, "text")) || !cJSON_IsString(text)) {
            snprintf(err, errlen, "%s: parts of type '%.32s' are not supported (input_text, output_text)%s", where, ty,
                     !strcmp(ty, "input_image") || !strcmp(ty, "input_file") ? ": image and file input are not" : "");
            break;
        }
        if (!srv_bytes_append(&out, &len, &cap, text->valuestring, strlen(text->valuestring))) {
            snprintf(err, errlen, "out of memory");
            break;
        }
    }
    if (err[0]) {
        free(out);
        return NULL;
    }
    if (!out) return strdup("");
    out[len] = 0;
    return out;
}

static bool lower_item(const cJSON *it, int i, cJSON *msgs, char *err, size_t errlen) {
    char where[32];
    snprintf(where, sizeof where, "input[%d]", i);
    if (!cJSON_IsObject(it) || !srv_check_fields(it, SRV_BODY_RESP_ITEM, where, err, errlen)) {
        if (!err[0]) snprintf(err, errlen, "%s must be an object", where);
        return false;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    const char *ty = cJSON_IsString(type) ? type->valuestring : "message";
    if (!strcmp(ty, "message")) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "system") && strcmp(r, "developer")) {
            snprintf(err, errlen, "%s.role must be user, assistant, system or developer", where);
            return false;
        }
        char *text = item_text(cJSON_GetObjectItemCaseSensitive(it, "content"), where, err, errlen);
        if (!text) return false;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", r);
        cJSON_AddStringToObject(m, "content", text);
        free(text);
        cJSON_AddItemToArray(msgs, m);
        return true;
    }
    const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
    if (!cJSON_IsString(call_id)) {
        snprintf(err, errlen, "%s needs 'call_id' (a string)", where);
        return false;
    }
    if (!strcmp(ty, "function_call")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name"), *args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
        if (!cJSON_IsString(name) || !cJSON_IsString(args)) {
            snprintf(err, errlen, "%s needs 'name' and 'arguments' (strings)", where);
            return false;
        }
        /* consecutive calls are one assistant turn */
        cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1), *calls = NULL;
        const cJSON *lr = cJSON_GetObjectItemCaseSensitive(last, "role");
        if (cJSON_IsString(lr) && !strcmp(lr->valuestring, "assistant"))
            calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
        if (!calls) {
            last = cJSON_CreateObject();
            cJSON_AddStringToObject(last, "role", "assistant");
            cJSON_AddStringToObject(last, "content", "");
            calls = cJSON_AddArrayToObject(last, "tool_calls");
            cJSON_AddItemToArray(msgs, last);
        } else if (!cJSON_IsArray(calls)) {
            calls = cJSON_AddArrayToObject(last, "tool_calls");
        }
        cJSON *c = cJSON_CreateObject(), *f;
        cJSON_AddStringToObject(c, "id", call_id->valuestring);
        cJSON_AddStringToObject(c, "type", "function");
        f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        cJSON_AddStringToObject(f, "arguments", args->valuestring);
        cJSON_AddItemToArray(calls, c);
        return true;
    }
    if (!strcmp(ty, "function_call_output")) {
        const cJSON *output = cJSON_GetObjectItemCaseSensitive(it, "output");
        char *text = output ? item_text(output, where, err, errlen) : NULL;
        if (!text) {
            if (!err[0]) snprintf(err, errlen, "%s needs 'output'", where);
            return false;
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "tool");
        cJSON_AddStringToObject(m, "tool_call_id", call_id->valuestring);
        cJSON_AddStringToObject(m, "content", text);
        free(text);
        cJSON_AddItemToArray(msgs, m);
        return true;
    }
    snprintf(err, errlen, "%s: items of type '%.32s' are not supported (message, function_call, function_call_output)",
             where, ty);
    return false;
}

cJSON *srv_responses_to_chat(const cJSON *body, char *err, size_t errlen) {
    if (!srv_check_fields(body, SRV_BODY_RESPONSES, NULL, err, errlen)) return NULL;
    cJSON *chat = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(chat, "messages");
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(body, "instructions");
    if (ins && !cJSON_IsNull(ins)) {
        if (!cJSON_IsString(ins)) {
            snprintf(err, errlen, "'instructions' must be a string");
            goto fail;
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", ins->valuestring);
        cJSON_AddItemToArray(msgs, m);
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(body, "input");
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        cJSON_AddItemToArray(msgs, m);
    } else if (cJSON_IsArray(input)) {
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, input) if (!lower_item(it, i++, msgs, err, errlen)) goto fail;
    } else {
        snprintf(err, errlen, "'input' must be a string or an array of items");
        goto fail;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        cJSON *ot = cJSON_AddArrayToObject(chat, "tools");
        const cJSON *t;
        int k = 0;
        cJSON_ArrayForEach(t, tools) {
            char tw[32];
            snprintf(tw, sizeof tw, "tools[%d]", k++);
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            if (!cJSON_IsObject(t) || !srv_check_fields(t, SRV_BODY_RESP_TOOL, tw, err, errlen)) {
                if (!err[0]) snprintf(err, errlen, "%s must be an object", tw);
                goto fail;
            }
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name)) {
                snprintf(err, errlen, "%s: only function tools ({\"type\": \"function\", \"name\": ...}) are supported",
                         tw);
                goto fail;
            }
            cJSON *ft = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(ft, "type", "function");
            f = cJSON_AddObjectToObject(ft, "function");
            cJSON_AddStringToObject(f, "name", name->valuestring);
            srv_json_copy(t, "description", f, "description");
            srv_json_copy(t, "parameters", f, "parameters");
            cJSON_AddItemToArray(ot, ft);
        }
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
    if (cJSON_IsString(tc)) {
        srv_json_copy(body, "tool_choice", chat, "tool_choice");
    } else if (cJSON_IsObject(tc)) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
        if (!cJSON_IsString(name)) {
            snprintf(err, errlen, "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
            goto fail;
        }
        srv_chat_named_tool(chat, name->valuestring);
    }
    srv_json_copy(body, "parallel_tool_calls", chat, "parallel_tool_calls");
    srv_json_copy(body, "max_output_tokens", chat, "max_tokens");
    srv_json_copy(body, "temperature", chat, "temperature");
    srv_json_copy(body, "top_p", chat, "top_p");
    srv_json_copy(body, "stream", chat, "stream");
    srv_json_copy(body, "model", chat, "model");
    return chat;
fail:
    cJSON_Delete(chat);
    return NULL;
}

/* ------------------------------------------------------------------ the answer */

static cJSON *usage(const struct srv_task *t) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", t->n_prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", t->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", t->n_gen);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", t->n_prompt + t->n_gen);
    return u;
}

static cJSON *response_head(struct kiln_server *s, const struct srv_task *t, const char *status) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", t->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)t->created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "model", s->model_id);
    cJSON_AddNullToObject(o, "error");
    cJSON_AddNullToObject(o, "previous_response_id");
    cJSON_AddBoolToObject(o, "store", false);
    return o;
}

static cJSON *message_item(const struct srv_task *t, const char *text, const char *status) {
    char id[64];
    snprintf(id, sizeof id, "msg_%s", t->id);
    cJSON *m = cJSON_CreateObject(), *part;
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "status", status);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(m, "content");
    if (text) {
        part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "output_text");
        cJSON_AddStringToObject(part, "text", text);
        cJSON_AddArrayToObject(part, "annotations");
        cJSON_AddItemToArray(content, part);
    }
    return m;
}

static cJSON *call_item(const struct srv_task *t, int k, const char *call_id, const char *name, const char *args,
                        const char *status) {
    char id[64];
    snprintf(id, sizeof id, "fc_%s_%d", t->id, k);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "function_call");
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "call_id", call_id);
    cJSON_AddStringToObject(c, "name", name);
    cJSON_AddStringToObject(c, "arguments", args);
    cJSON_AddStringToObject(c, "status", status);
    return c;
}

static cJSON *reasoning_item(const struct srv_task *t, const char *text) {
    char id[64];
    snprintf(id, sizeof id, "rs_%s", t->id);
    cJSON *r = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "reasoning");
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddArrayToObject(r, "summary");
    cJSON_AddStringToObject(c, "type", "reasoning_text");
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "content"), c);
    return r;
}

static void finish_head(cJSON *o, const struct srv_task *t) {
    bool cut = t->finish && !strcmp(t->finish, "length");
    cJSON_ReplaceItemInObjectCaseSensitive(o, "status", cJSON_CreateString(cut ? "incomplete" : "completed"));
    if (cut) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddItemToObject(o, "usage", usage(t));
}

cJSON *srv_responses_final(struct kiln_server *s, struct srv_task *t) {
    const char *finish;
    cJSON *m = srv_chat_message(s, t, &finish), *o = response_head(s, t, "completed");
    cJSON *out = cJSON_AddArrayToObject(o, "output");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    if (cJSON_IsString(r)) cJSON_AddItemToArray(out, reasoning_item(t, r->valuestring));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (cJSON_IsString(c) && (c->valuestring[0] || !cJSON_GetArraySize(calls)))
        cJSON_AddItemToArray(out, message_item(t, c->valuestring, "completed"));
    const cJSON *call;
    int k = 0;
    cJSON_ArrayForEach(call, calls) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id"), *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        cJSON_AddItemToArray(out, call_item(t, k++, cJSON_IsString(id) ? id->valuestring : "",
                                            cJSON_IsString(name) ? name->valuestring : "",
                                            cJSON_IsString(args) ? args->valuestring : "{}", "completed"));
    }
    finish_head(o, t);
    cJSON_Delete(m);
    return o;
}

/* ------------------------------------------------------------------ the stream */

static cJSON *event(struct srv_responses_stream *a, cJSON *events, const char *type) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNumberToObject(e, "sequence_number", a->seq++);
    cJSON_AddItemToArray(events, e);
    return e;
}

static void item_id(const struct srv_task *t, const struct srv_responses_stream *a, char *id, size_t n) {
    if (a->kind == SRV_RESP_TEXT) snprintf(id, n, "msg_%s", t->id);
    else if (a->kind == SRV_RESP_REASONING) snprintf(id, n, "rs_%s", t->id);
    else snprintf(id, n, "fc_%s_%d", t->id, a->call);
}

static cJSON *current_item(const struct srv_task *t, const struct srv_responses_stream *a, const char *status) {
    const char *text = a->text ? a->text : "";
    if (a->kind == SRV_RESP_TEXT) return message_item(t, strcmp(status, "completed") ? NULL : text, status);
    if (a->kind == SRV_RESP_REASONING) return reasoning_item(t, text);
    return call_item(t, a->call, a->call_id, a->name, strcmp(status, "completed") ? "" : text, status);
}

static void close_item(struct srv_responses_stream *a, const struct srv_task *t, cJSON *events) {
    if (a->kind == SRV_RESP_NONE) return;
    char id[80];
    item_id(t, a, id, sizeof id);
    const char *text = a->text ? a->text : "";
    if (a->kind == SRV_RESP_TEXT) {
        cJSON *e = event(a, events, "response.output_text.done");
        cJSON_AddStringToObject(e, "item_id", id);
        cJSON_AddNumberToObject(e, "output_index", a->index);
        cJSON_AddNumberToObject(e, "content_index", 0);
        cJSON_AddStringToObject(e, "text", text);
        e = event(a, events, "response.content_part.done");
        cJSON_AddStringToObject(e, "item_id", id);
        cJSON_AddNumberToObject(e, "output_index", a->index);
        cJSON_AddNumberToObject(e, "content_index", 0);
        cJSON *p = cJSON_AddObjectToObject(e, "part");
        cJSON_AddStringToObject(p, "type", "output_text");
        cJSON_AddStringToObject(p, "text", text);
        cJSON_AddArrayToObject(p, "annotations");
    } else if (a->kind == SRV_RESP_CALL) {
        cJSON *e = event(a, events, "response.function_call_arguments.done");
        cJSON_AddStringToObject(e, "item_id", id);
        cJSON_AddNumberToObject(e, "output_index", a->index);
        cJSON_AddStringToObject(e, "arguments", text);
    }
    cJSON *e = event(a, events, "response.output_item.done");
    cJSON_AddNumberToObject(e, "output_index", a->index);
    cJSON_AddItemToObject(e, "item", current_item(t, a, "completed"));
    cJSON_AddItemToArray(a->done, current_item(t, a, "completed"));
    a->kind = SRV_RESP_NONE;
    free(a->text);
    a->text = NULL;
    a->len = a->cap = 0;
}

static void open_item(struct srv_responses_stream *a, const struct srv_task *t, cJSON *events, enum srv_resp_kind kind,
                      const char *call_id, const char *name) {
    close_item(a, t, events);
    a->kind = kind;
    a->index = a->next++;
    if (kind == SRV_RESP_CALL) {
        snprintf(a->call_id, sizeof a->call_id, "%s", call_id);
        snprintf(a->name, sizeof a->name, "%s", name);
    }
    cJSON *e = event(a, events, "response.output_item.added");
    cJSON_AddNumberToObject(e, "output_index", a->index);
    cJSON_AddItemToObject(e, "item", current_item(t, a, "in_progress"));
    if (kind == SRV_RESP_TEXT) {
        char id[80];
        item_id(t, a, id, sizeof id);
        e = event(a, events, "response.content_part.added");
        cJSON_AddStringToObject(e, "item_id", id);
        cJSON_AddNumberToObject(e, "output_index", a->index);
        cJSON_AddNumberToObject(e, "content_index", 0);
        cJSON *p = cJSON_AddObjectToObject(e, "part");
        cJSON_AddStringToObject(p, "type", "output_text");
        cJSON_AddStringToObject(p, "text", "");
        cJSON_AddArrayToObject(p, "annotations");
    }
}

static void add_delta(struct srv_responses_stream *a, const struct srv_task *t, cJSON *events, const char *type,
                      const char *text) {
    size_t n = strlen(text);
    if (srv_bytes_append(&a->text, &a->len, &a->cap, text, n + 1)) a->len--; /* kept NUL-terminated */
    char id[80];
    item_id(t, a, id, sizeof id);
    cJSON *e = event(a, events, type);
    cJSON_AddStringToObject(e, "item_id", id);
    cJSON_AddNumberToObject(e, "output_index", a->index);
    if (a->kind != SRV_RESP_CALL) cJSON_AddNumberToObject(e, "content_index", 0);
    cJSON_AddStringToObject(e, "delta", text);
}

void srv_responses_chunk(struct srv_responses_stream *a, struct kiln_server *s, struct srv_task *t, const cJSON *chunk,
                         cJSON *events) {
    if (!a->started) {
        a->started = true;
        a->done = cJSON_CreateArray();
        cJSON *r = response_head(s, t, "in_progress");
        cJSON_AddArrayToObject(r, "output");
        cJSON_AddItemToObject(event(a, events, "response.created"), "response", r);
        r = response_head(s, t, "in_progress");
        cJSON_AddArrayToObject(r, "output");
        cJSON_AddItemToObject(event(a, events, "response.in_progress"), "response", r);
    }
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
    if (cJSON_IsString(r) && r->valuestring[0]) {
        if (a->kind != SRV_RESP_REASONING) open_item(a, t, events, SRV_RESP_REASONING, NULL, NULL);
        add_delta(a, t, events, "response.reasoning_text.delta", r->valuestring);
    }
    if (cJSON_IsString(c) && c->valuestring[0]) {
        if (a->kind != SRV_RESP_TEXT) open_item(a, t, events, SRV_RESP_TEXT, NULL, NULL);
        add_delta(a, t, events, "response.output_text.delta", c->valuestring);
    }
    const cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(d, "tool_calls")) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(call, "index");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id"), *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        int k = cJSON_IsNumber(idx) ? idx->valueint : 0;
        if (a->kind != SRV_RESP_CALL || a->call != k) {
            a->call = k;
            open_item(a, t, events, SRV_RESP_CALL, cJSON_IsString(id) ? id->valuestring : "",
                      cJSON_IsString(name) ? name->valuestring : "");
        }
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (cJSON_IsString(args) && args->valuestring[0])
            add_delta(a, t, events, "response.function_call_arguments.delta", args->valuestring);
    }
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(choice, "finish_reason"))) return;
    if (!a->next) open_item(a, t, events, SRV_RESP_TEXT, NULL, NULL); /* an empty answer: one empty message */
    close_item(a, t, events);
    cJSON *o = response_head(s, t, "completed");
    cJSON_AddItemToObject(o, "output", a->done);
    a->done = NULL;
    finish_head(o, t);
    const bool cut = t->finish && !strcmp(t->finish, "length");
    cJSON_AddItemToObject(event(a, events, cut ? "response.incomplete" : "response.completed"), "response", o);
}

void srv_responses_stream_free(struct srv_responses_stream *a) {
    free(a->text);
    cJSON_Delete(a->done);
}

enum MHD_Result srv_route_responses(struct srv_req *r) {
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    cJSON *chat = srv_responses_to_chat(body, err, sizeof err);
    cJSON_Delete(body);
    if (!chat) return srv_reply_error(r, 400, "%s", err);
    enum MHD_Result ret = srv_generate(r, chat, SRV_API_CHAT, SRV_WIRE_RESPONSES, -2);
    cJSON_Delete(chat);
    return ret;
}
