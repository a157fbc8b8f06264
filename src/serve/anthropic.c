/*
 * anthropic.c - Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) over
 * the chat path: the request becomes a chat body (system, content blocks, tool_use and
 * tool_result, thinking, tools, tool_choice), generated as a chat, and the answer is told in
 * Anthropic's shape: a message with content blocks, or its stream of named events.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the request */

/* The text of a string or of an array of text blocks (system, tool_result content); NULL with a message. */
static char *block_text(const cJSON *v, const char *what, char *err, size_t errlen) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (!cJSON_IsArray(v)) {
        snprintf(err, errlen, "'%s' must be a string or an array of text blocks", what);
        return NULL;
    }
    size_t len = 0, cap = 0;
    char *out = NULL;
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        if (!srv_check_fields(b, SRV_BODY_BLOCK, "a content block", err, errlen)) break;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type"), *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, errlen, "'%s' holds a block that is not {\"type\": \"text\", \"text\": ...}%s", what,
                     cJSON_IsString(type) && !strcmp(type->valuestring, "image") ? ": image input is not supported"
                                                                                 : "");
            break;
        }
        if ((len && !srv_bytes_append(&out, &len, &cap, "\n", 1)) ||
            !srv_bytes_append(&out, &len, &cap, text->valuestring, strlen(text->valuestring))) {
            snprintf(err, errlen, "out of memory");
            break;
        }
    }
    if (err[0]) {
        free(out);
        return NULL;
    }
    if (!out) out = strdup("");
    else out[len] = 0;
    return out;
}

static cJSON *text_message(const char *role, const char *text) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", text);
    return m;
}

/* messages[i] into the chat's messages (out): a user's tool results become tool messages, an
 * assistant's tool_use blocks its tool_calls and its thinking blocks its reasoning_content. */
static bool lower_message(const cJSON *m, int i, cJSON *out, char *err, size_t errlen) {
    char where[48];
    snprintf(where, sizeof where, "messages[%d]", i);
    if (!cJSON_IsObject(m)) {
        snprintf(err, errlen, "%s must be an object", where);
        return false;
    }
    if (!srv_check_fields(m, SRV_BODY_MESSAGES_MSG, where, err, errlen)) return false;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
        snprintf(err, errlen, "%s.role must be \"user\" or \"assistant\"", where);
        return false;
    }
    const bool user = !strcmp(role->valuestring, "user");
    if (cJSON_IsString(content)) {
        cJSON_AddItemToArray(out, text_message(role->valuestring, content->valuestring));
        return true;
    }
    if (!cJSON_IsArray(content)) {
        snprintf(err, errlen, "%s.content must be a string or an array of content blocks", where);
        return false;
    }
    cJSON *parts = cJSON_CreateArray(), *calls = cJSON_CreateArray();
    char *thinking = NULL;
    size_t tl = 0, tc = 0;
    const cJSON *b;
    int j = 0;
    bool ok = true;
    cJSON_ArrayForEach(b, content) {
        char bw[80];
        snprintf(bw, sizeof bw, "%s.content[%d]", where, j++);
        if (!cJSON_IsObject(b) || !srv_check_fields(b, SRV_BODY_BLOCK, bw, err, errlen)) {
            if (!err[0]) snprintf(err, errlen, "%s must be an object", bw);
            ok = false;
            break;
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if (!strcmp(ty, "text")) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(text)) {
                snprintf(err, errlen, "%s.text must be a string", bw);
                ok = false;
                break;
            }
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "text");
            cJSON_AddStringToObject(p, "text", text->valuestring);
            cJSON_AddItemToArray(parts, p);
        } else if (!strcmp(ty, "tool_result") && user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id"), *c = cJSON_GetObjectItemCaseSensitive(b, "content");
            const cJSON *is_error = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            if (!cJSON_IsString(id) || (is_error && !cJSON_IsBool(is_error))) {
                snprintf(err, errlen, "%s needs 'tool_use_id' (a string); 'is_error' is true or false", bw);
                ok = false;
                break;
            }
            char *text = c ? block_text(c, bw, err, errlen) : strdup("");
            if (!text) {
                ok = false;
                break;
            }
            cJSON *tm = cJSON_CreateObject();
            cJSON_AddStringToObject(tm, "role", "tool");
            cJSON_AddStringToObject(tm, "tool_call_id", id->valuestring);
            if (cJSON_IsTrue(is_error)) { /* the model reads that the call failed */
                size_t n = strlen(text) + 16;
                char *e = malloc(n);
                if (e) snprintf(e, n, "Error: %s", text);
                cJSON_AddStringToObject(tm, "content", e ? e : text);
                free(e);
            } else {
                cJSON_AddStringToObject(tm, "content", text);
            }
            free(text);
            cJSON_AddItemToArray(out, tm); /* tool results answer the calls before what the user adds */
        } else if (!strcmp(ty, "tool_use") && !user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input)) {
                snprintf(err, errlen, "%s needs 'id' and 'name' (strings) and 'input' (an object)", bw);
                ok = false;
                break;
            }
            char *args = cJSON_PrintUnformatted(input);
            cJSON *call = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(call, "id", id->valuestring);
            cJSON_AddStringToObject(call, "type", "function");
            f = cJSON_AddObjectToObject(call, "function");
            cJSON_AddStringToObject(f, "name", name->valuestring);
            cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
            free(args);
            cJSON_AddItemToArray(calls, call);
        } else if (!strcmp(ty, "thinking") && !user) {
            const cJSON *th = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            if (!cJSON_IsString(th)) {
                snprintf(err, errlen, "%s.thinking must be a string", bw);
                ok = false;
                break;
            }
            if ((tl && !srv_bytes_append(&thinking, &tl, &tc, "\n", 1)) ||
                !srv_bytes_append(&thinking, &tl, &tc, th->valuestring, strlen(th->valuestring))) {
                snprintf(err, errlen, "out of memory");
                ok = false;
                break;
            }
            thinking[tl] = 0;
        } else if (!strcmp(ty, "redacted_thinking") && !user) {
            /* encrypted by another service: nothing kiln's model can read */
        } else {
            snprintf(err, errlen, "%s: blocks of type '%.32s' are not supported in a%s message%s", bw, ty,
                     user ? " user" : "n assistant",
                     !strcmp(ty, "image") || !strcmp(ty, "document") ? " (image input is not supported)" : "");
            ok = false;
            break;
        }
    }
    if (ok && (cJSON_GetArraySize(parts) > 0 || cJSON_GetArraySize(calls) > 0 || thinking)) {
        cJSON *cm = cJSON_CreateObject();
        cJSON_AddStringToObject(cm, "role", role->valuestring);
        if (cJSON_GetArraySize(parts) > 0) {
            cJSON_AddItemToObject(cm, "content", parts);
            parts = NULL;
        } else {
            cJSON_AddStringToObject(cm, "content", "");
        }
        if (thinking) cJSON_AddStringToObject(cm, "reasoning_content", thinking);
        if (cJSON_GetArraySize(calls) > 0) {
            cJSON_AddItemToObject(cm, "tool_calls", calls);
            calls = NULL;
        }
        cJSON_AddItemToArray(out, cm);
    }
    cJSON_Delete(parts);
    cJSON_Delete(calls);
    free(thinking);
    return ok;
}

bool srv_json_copy(const cJSON *from, const char *name, cJSON *to, const char *as) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, name);
    if (v && !cJSON_IsNull(v)) cJSON_AddItemToObject(to, as, cJSON_Duplicate(v, true));
    return v != NULL;
}

void srv_chat_named_tool(cJSON *chat, const char *name) {
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice"), *f;
    cJSON_AddStringToObject(c, "type", "function");
    f = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(f, "name", name);
}

cJSON *srv_anthropic_to_chat(const cJSON *body, bool generating, bool jinja, int32_t *think_budget, char *err,
                             size_t errlen) {
    *think_budget = -2; /* the server's */
    if (!srv_check_fields(body, SRV_BODY_MESSAGES, NULL, err, errlen)) return NULL;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
    if (!cJSON_IsArray(msgs)) {
        snprintf(err, errlen, "'messages' must be an array of messages");
        return NULL;
    }
    const cJSON *max_tokens = cJSON_GetObjectItemCaseSensitive(body, "max_tokens");
    if (generating && !cJSON_IsNumber(max_tokens)) {
        snprintf(err, errlen, "'max_tokens' is required: a number of tokens");
        return NULL;
    }
    cJSON *chat = cJSON_CreateObject(), *out = cJSON_AddArrayToObject(chat, "messages");
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(body, "system");
    if (sys && !cJSON_IsNull(sys)) {
        char *text = block_text(sys, "system", err, errlen);
        if (!text) goto fail;
        cJSON_AddItemToArray(out, text_message("system", text));
        free(text);
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) if (!lower_message(m, i++, out, err, errlen)) goto fail;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) {
            snprintf(err, errlen, "'tools' must be an array");
            goto fail;
        }
        cJSON *ot = cJSON_AddArrayToObject(chat, "tools");
        const cJSON *t;
        int k = 0;
        cJSON_ArrayForEach(t, tools) {
            char tw[32];
            snprintf(tw, sizeof tw, "tools[%d]", k++);
            if (!cJSON_IsObject(t) || !srv_check_fields(t, SRV_BODY_MESSAGES_TOOL, tw, err, errlen)) {
                if (!err[0]) snprintf(err, errlen, "%s must be an object", tw);
                goto fail;
            }
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
            if (!cJSON_IsString(name) || (schema && !cJSON_IsObject(schema))) {
                snprintf(err, errlen, "%s needs 'name' (a string); 'input_schema' is an object", tw);
                goto fail;
            }
            cJSON *ft = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(ft, "type", "function");
            f = cJSON_AddObjectToObject(ft, "function");
            cJSON_AddStringToObject(f, "name", name->valuestring);
            srv_json_copy(t, "description", f, "description");
            if (!srv_json_copy(t, "input_schema", f, "parameters")) cJSON_AddObjectToObject(f, "parameters");
            cJSON_AddItemToArray(ot, ft);
        }
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
    if (tc && !cJSON_IsNull(tc)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type"), *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
        const cJSON *dis = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if (!strcmp(ty, "auto")) cJSON_AddStringToObject(chat, "tool_choice", "auto");
        else if (!strcmp(ty, "any")) cJSON_AddStringToObject(chat, "tool_choice", "required");
        else if (!strcmp(ty, "none")) cJSON_AddStringToObject(chat, "tool_choice", "none");
        else if (!strcmp(ty, "tool") && cJSON_IsString(name)) {
            srv_chat_named_tool(chat, name->valuestring);
        } else {
            snprintf(err, errlen, "'tool_choice' must be {\"type\": \"auto\"|\"any\"|\"none\"} or {\"type\": \"tool\", "
                                  "\"name\": ...}");
            goto fail;
        }
        if (dis && !cJSON_IsBool(dis)) {
            snprintf(err, errlen, "'tool_choice.disable_parallel_tool_use' must be true or false");
            goto fail;
        }
        if (cJSON_IsTrue(dis)) cJSON_AddFalseToObject(chat, "parallel_tool_calls");
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(body, "thinking");
    if (th && !cJSON_IsNull(th)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(th, "type"), *budget = cJSON_GetObjectItemCaseSensitive(th, "budget_tokens");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if ((strcmp(ty, "enabled") && strcmp(ty, "disabled")) || (budget && !cJSON_IsNumber(budget)) ||
            (budget && (budget->valuedouble < 0 || budget->valuedouble > (1 << 24)))) {
            snprintf(err, errlen, "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": "
                                  "\"disabled\"}");
            goto fail;
        }
        /* a Jinja template is told; kiln's native families have no thinking block to open or close */
        if (jinja) cJSON_AddBoolToObject(cJSON_AddObjectToObject(chat, "chat_template_kwargs"), "enable_thinking",
                                         !strcmp(ty, "enabled"));
        if (!strcmp(ty, "disabled")) *think_budget = 0;
        else if (budget) *think_budget = (int32_t)budget->valuedouble;
    }
    if (generating) {
        srv_json_copy(body, "max_tokens", chat, "max_tokens");
        srv_json_copy(body, "stop_sequences", chat, "stop");
        srv_json_copy(body, "temperature", chat, "temperature");
        srv_json_copy(body, "top_p", chat, "top_p");
        srv_json_copy(body, "top_k", chat, "top_k");
        srv_json_copy(body, "stream", chat, "stream");
        srv_json_copy(body, "model", chat, "model");
    }
    return chat;
fail:
    cJSON_Delete(chat);
    return NULL;
}

/* ------------------------------------------------------------------ the answer */

static const char *stop_reason(const struct srv_task *t, const char *finish) {
    if (!strcmp(finish, "tool_calls")) return "tool_use";
    if (!strcmp(finish, "length")) return "max_tokens";
    return t->stop_word >= 0 ? "stop_sequence" : "end_turn";
}

static cJSON *usage(const struct srv_task *t, bool output) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", t->n_prompt - t->n_cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", t->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", output ? t->n_gen : 0);
    return u;
}

static cJSON *message_head(struct kiln_server *s, const struct srv_task *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", t->id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", s->model_id);
    return o;
}

static cJSON *tool_use_block(const cJSON *call) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id"), *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", cJSON_IsString(id) ? id->valuestring : "");
    cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
    cJSON *input = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    if (!cJSON_IsObject(input)) {
        cJSON_Delete(input);
        input = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", input);
    return b;
}

cJSON *srv_anthropic_final(struct kiln_server *s, struct srv_task *t) {
    const char *finish;
    cJSON *m = srv_chat_message(s, t, &finish), *o = message_head(s, t);
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    if (cJSON_IsString(r)) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", r->valuestring);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(content, b);
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (cJSON_IsString(c) && (c->valuestring[0] || !cJSON_GetArraySize(calls))) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", c->valuestring);
        cJSON_AddItemToArray(content, b);
    }
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) cJSON_AddItemToArray(content, tool_use_block(call));
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(t, finish));
    if (t->stop_word >= 0) cJSON_AddStringToObject(o, "stop_sequence", t->stop[t->stop_word]);
    else cJSON_AddNullToObject(o, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", usage(t, true));
    cJSON_Delete(m);
    return o;
}

/* ------------------------------------------------------------------ the stream */

static cJSON *event(cJSON *events, const char *type) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddItemToArray(events, e);
    return e;
}

static void close_block(struct srv_anthropic_stream *a, cJSON *events) {
    if (a->kind == SRV_ANT_NONE) return;
    cJSON_AddNumberToObject(event(events, "content_block_stop"), "index", a->index);
    a->kind = SRV_ANT_NONE;
}

/* a block of this kind open (the one open, or a new one after it) */
static void open_block(struct srv_anthropic_stream *a, cJSON *events, enum srv_ant_kind kind, const cJSON *call) {
    if (a->kind == kind && kind != SRV_ANT_TOOL) return;
    close_block(a, events);
    a->index = a->next++;
    a->kind = kind;
    cJSON *e = event(events, "content_block_start");
    cJSON_AddNumberToObject(e, "index", a->index);
    cJSON *b = cJSON_AddObjectToObject(e, "content_block");
    if (kind == SRV_ANT_THINKING) {
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", "");
        cJSON_AddStringToObject(b, "signature", ""); /* kiln signs nothing: as in the whole message */
    } else if (kind == SRV_ANT_TEXT) {
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", "");
    } else {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id"), *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", cJSON_IsString(id) ? id->valuestring : "");
        cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
        cJSON_AddObjectToObject(b, "input");
    }
}

static void delta(struct srv_anthropic_stream *a, cJSON *events, const char *type, const char *key, const char *text) {
    cJSON *e = event(events, "content_block_delta");
    cJSON_AddNumberToObject(e, "index", a->index);
    cJSON *d = cJSON_AddObjectToObject(e, "delta");
    cJSON_AddStringToObject(d, "type", type);
    cJSON_AddStringToObject(d, key, text);
}

void srv_anthropic_chunk(struct srv_anthropic_stream *a, struct kiln_server *s, struct srv_task *t, const cJSON *chunk,
                         cJSON *events) {
    if (!a->started) {
        a->started = true;
        cJSON *e = event(events, "message_start"), *m = message_head(s, t);
        cJSON_AddArrayToObject(m, "content");
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
        cJSON_AddItemToObject(m, "usage", usage(t, false));
        cJSON_AddItemToObject(e, "message", m);
    }
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
    if (cJSON_IsString(r) && r->valuestring[0]) {
        open_block(a, events, SRV_ANT_THINKING, NULL);
        delta(a, events, "thinking_delta", "thinking", r->valuestring);
    }
    if (cJSON_IsString(c) && c->valuestring[0]) {
        open_block(a, events, SRV_ANT_TEXT, NULL);
        delta(a, events, "text_delta", "text", c->valuestring);
    }
    const cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(d, "tool_calls")) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(call, "index");
        int k = cJSON_IsNumber(idx) ? idx->valueint : 0;
        if (a->kind != SRV_ANT_TOOL || a->tool != k) {
            open_block(a, events, SRV_ANT_TOOL, call);
            a->tool = k;
        }
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(call, "function"), "arguments");
        if (cJSON_IsString(args) && args->valuestring[0])
            delta(a, events, "input_json_delta", "partial_json", args->valuestring);
    }
    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    if (!cJSON_IsString(finish)) return;
    if (!a->next) open_block(a, events, SRV_ANT_TEXT, NULL); /* an empty answer is one empty text block */
    close_block(a, events);
    cJSON *e = event(events, "message_delta"), *md = cJSON_AddObjectToObject(e, "delta");
    cJSON_AddStringToObject(md, "stop_reason", stop_reason(t, finish->valuestring));
    if (t->stop_word >= 0) cJSON_AddStringToObject(md, "stop_sequence", t->stop[t->stop_word]);
    else cJSON_AddNullToObject(md, "stop_sequence");
    cJSON_AddItemToObject(e, "usage", usage(t, true));
    event(events, "message_stop");
}

/* ------------------------------------------------------------------ the routes */

enum MHD_Result srv_route_messages(struct srv_req *r) {
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    int32_t budget;
    cJSON *chat = srv_anthropic_to_chat(body, true, r->srv->chat != NULL, &budget, err, sizeof err);
    cJSON_Delete(body);
    if (!chat) return srv_reply_error(r, 400, "%s", err);
    enum MHD_Result ret = srv_generate(r, chat, SRV_API_CHAT, SRV_WIRE_ANTHROPIC, budget);
    cJSON_Delete(chat);
    return ret;
}

enum MHD_Result srv_route_count_tokens(struct srv_req *r) {
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    int32_t budget;
    cJSON *chat = srv_anthropic_to_chat(body, false, r->srv->chat != NULL, &budget, err, sizeof err);
    cJSON_Delete(body);
    if (!chat) return srv_reply_error(r, 400, "%s", err);
    int status = 400;
    char *text = srv_chat_render(r->srv, chat, SRV_BODY_TEMPLATE, NULL, &status, err, sizeof err);
    cJSON_Delete(chat);
    if (!text) return srv_reply_error(r, (unsigned)status, "%s", err);
    int32_t *ids = NULL;
    int32_t n = srv_tokenize_prompt(r->srv, "the rendered messages", text, strlen(text),
                                    kiln_vocab_add_bos(r->srv->vocab), &ids, err, sizeof err);
    free(text);
    free(ids);
    if (n < 0) return srv_reply_error(r, 400, "%s", err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "input_tokens", n);
    return srv_reply_json(r, 200, o);
}
