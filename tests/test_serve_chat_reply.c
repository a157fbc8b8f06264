/*
 * test_serve_chat_reply.c - the server's chat replies without a model: a task
 * whose text is a model's output (tool calls in several formats, thinking,
 * plain text) read back as OpenAI's assistant message (content null beside
 * calls, reasoning_content, tool_calls with ids, function names and arguments
 * as JSON text, finish_reason "tool_calls"), and streamed: the text arriving a
 * few bytes at a time, the deltas (role once, reasoning and content pieces, a
 * call's id, name and arguments once they are whole) must add up to exactly the
 * whole message, also where a call breaks off into text. (The KJV model cannot write a tool call; test_serve_chat
 * drives the real server.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_impl.h"
#include "testutil.h"

static struct kiln_server srv = {.model_id = "test-model"};

static struct srv_task *task(const char *text, enum kiln_tool_format f, bool tools, const char *think) {
    struct srv_task *t = srv_task_new();
    t->api = SRV_API_CHAT;
    snprintf(t->id, sizeof t->id, "chatcmpl-test-%d", (int)f);
    t->created = 1700000000;
    t->chat.parse = true;
    t->chat.parallel = true;
    t->chat.o.format = f;
    t->chat.o.parse_tools = tools;
    t->chat.o.reasoning = true;
    if (think) t->chat.o.think_prefix = strdup(think);
    t->finish = "stop";
    t->stop_word = -1;
    srv_bytes_append(&t->text, &t->len, &t->cap, text, strlen(text));
    return t;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* the message the deltas of a stream add up to */
static cJSON *replay(struct srv_task *t, size_t step, bool *one_role) {
    struct srv_chat_sent sent = {0};
    cJSON *events = cJSON_CreateArray();
    size_t full = t->len;
    for (size_t at = 0; at < full; at += step) {
        size_t safe = at;
        while (safe < full && ((unsigned char)t->text[safe] & 0xC0) == 0x80) safe++;
        t->safe = safe;
        CHECK(srv_chat_deltas(&srv, t, &sent, false, events));
    }
    t->safe = full;
    CHECK(srv_chat_deltas(&srv, t, &sent, true, events));
    /* add the deltas up */
    struct tc {
        char id[64], name[64], args[1024];
    } calls[8];
    memset(calls, 0, sizeof calls);
    int n_calls = 0, roles = 0;
    char content[4096] = "", reasoning[4096] = "";
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "choices"), 0), "delta");
        if (str(d, "role")) roles++;
        if (str(d, "content")) strncat(content, str(d, "content"), sizeof content - strlen(content) - 1);
        if (str(d, "reasoning_content"))
            strncat(reasoning, str(d, "reasoning_content"), sizeof reasoning - strlen(reasoning) - 1);
        const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(d, "tool_calls"), *c;
        cJSON_ArrayForEach(c, tcs) {
            int i = cJSON_GetObjectItemCaseSensitive(c, "index")->valueint;
            if (i < 0 || i >= 8) continue;
            if (i + 1 > n_calls) n_calls = i + 1;
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
            if (str(c, "id")) snprintf(calls[i].id, sizeof calls[i].id, "%s", str(c, "id"));
            if (str(f, "name")) snprintf(calls[i].name, sizeof calls[i].name, "%s", str(f, "name"));
            if (str(f, "arguments"))
                strncat(calls[i].args, str(f, "arguments"), sizeof calls[i].args - strlen(calls[i].args) - 1);
        }
    }
    cJSON_Delete(events);
    *one_role = roles == 1;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    if (n_calls && !content[0]) cJSON_AddNullToObject(m, "content");
    else cJSON_AddStringToObject(m, "content", content);
    if (reasoning[0]) cJSON_AddStringToObject(m, "reasoning_content", reasoning);
    if (n_calls) {
        cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
        for (int i = 0; i < n_calls; i++) {
            cJSON *c = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(c, "id", calls[i].id);
            cJSON_AddStringToObject(c, "type", "function");
            f = cJSON_AddObjectToObject(c, "function");
            cJSON_AddStringToObject(f, "name", calls[i].name);
            cJSON_AddStringToObject(f, "arguments", calls[i].args);
            cJSON_AddItemToArray(arr, c);
        }
    }
    return m;
}

static void expect(const char *label, const char *text, enum kiln_tool_format f, bool tools, const char *think,
                   const char *want_json, const char *want_finish) {
    struct srv_task *t = task(text, f, tools, think);
    const char *finish = NULL;
    cJSON *m = srv_chat_message(&srv, t, &finish), *want = cJSON_Parse(want_json);
    CHECKF(want, "%s: bad expectation", label);
    /* "*" in an expected id: the id kiln makes (9 letters and digits) */
    const cJSON *gc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    cJSON *wc = cJSON_GetObjectItemCaseSensitive(want, "tool_calls");
    for (int i = 0; i < cJSON_GetArraySize(wc); i++) {
        cJSON *w = cJSON_GetArrayItem(wc, i);
        const char *gid = str(cJSON_GetArrayItem(gc, i), "id");
        if (str(w, "id") && !strcmp(str(w, "id"), "*") && gid) {
            CHECKF(strlen(gid) == 9 && strspn(gid, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == 9,
                   "%s: call id '%s'", label, gid);
            cJSON_ReplaceItemInObjectCaseSensitive(w, "id", cJSON_CreateString(gid));
        }
    }
    char *got = cJSON_PrintUnformatted(m);
    CHECKF(want && cJSON_Compare(m, want, true), "%s: message %s\n  want %s", label, got, want_json);
    CHECKF(!strcmp(finish, want_finish), "%s: finish %s, want %s", label, finish, want_finish);
    for (size_t step = 1; step <= 7; step += 3) {
        bool one_role;
        cJSON *r = replay(t, step, &one_role);
        char *rs = cJSON_PrintUnformatted(r);
        CHECKF(cJSON_Compare(r, m, true), "%s: streamed %zu bytes at a time adds up to %s\n  not %s", label, step, rs,
               got);
        CHECKF(one_role, "%s: the role is not sent exactly once", label);
        free(rs);
        cJSON_Delete(r);
    }
    free(got);
    cJSON_Delete(m);
    cJSON_Delete(want);
    srv_task_unref(t);
}

int main(void) {
    const char *finish;
    struct srv_task *t;
    cJSON *m;
    expect("hermes call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
           KILN_TOOLS_HERMES, true, NULL,
           "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"*\", \"type\": \"function\", "
           "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\"}}]}",
           "tool_calls");
    expect("content, then two mistral calls with their ids",
           "Let me check.[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}"
           "[TOOL_CALLS]get_time[CALL_ID]000000002[ARGS]{\"tz\": \"CET\"}",
           KILN_TOOLS_MISTRAL, true, NULL,
           "{\"role\": \"assistant\", \"content\": \"Let me check.\", \"tool_calls\": ["
           "{\"id\": \"abc123XYZ\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
           "\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
           "{\"id\": \"000000002\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": "
           "\"{\\\"tz\\\":\\\"CET\\\"}\"}}]}",
           "tool_calls");
    expect("thinking the prompt opened, then content", "Two and two.\n</think>\n\nFour.", KILN_TOOLS_HERMES, false,
           "<think>\n", "{\"role\": \"assistant\", \"content\": \"Four.\", \"reasoning_content\": \"Two and two.\"}",
           "stop");
    expect("harmony: analysis, then a call", "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
           "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Zürich\"}",
           KILN_TOOLS_GPT_OSS, true, NULL,
           "{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"Need the weather.\", \"tool_calls\": "
           "[{\"id\": \"*\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
           "\"{\\\"city\\\":\\\"Zürich\\\"}\"}}]}",
           "tool_calls");
    expect("plain text with tools offered", "And God said, Let there be light.", KILN_TOOLS_HERMES, true, NULL,
           "{\"role\": \"assistant\", \"content\": \"And God said, Let there be light.\"}", "stop");
    expect("a call that does not parse stays content", "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}}\n</tool_call>",
           KILN_TOOLS_HERMES, true, NULL,
           "{\"role\": \"assistant\", \"content\": \"<tool_call>\\n{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": "
           "{oops}}\\n</tool_call>\"}",
           "stop");
    expect("an empty reply", "", KILN_TOOLS_HERMES, true, "<think>\n", "{\"role\": \"assistant\", \"content\": \"\"}",
           "stop");
    /* parallel_tool_calls false: the first call only */
    t = task("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}"
             "</tool_call>", KILN_TOOLS_HERMES, true, NULL);
    t->chat.parallel = false;
    m = srv_chat_message(&srv, t, &finish);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) == 1);
    cJSON_Delete(m);
    /* a reply cut by max_tokens keeps finish_reason length */
    t->finish = "length";
    m = srv_chat_message(&srv, t, &finish);
    CHECK(!strcmp(finish, "length"));
    cJSON_Delete(m);
    srv_task_unref(t);
    return tu_finish("test_serve_chat_reply");
}
