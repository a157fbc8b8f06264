/*
 * roles.c - one chat message of a request into what the native chat templates
 * render: the roles apps send (developer as system; tool and function results;
 * an assistant's tool_calls or function_call with or without content), every
 * field checked and bounded. In the native families a call is text after the
 * assistant's content (kiln_chat_tool_calls), and a result is a "tool" message
 * where the family writes one (as llama.cpp's formatter does), else a user turn
 * wrapped in <tool_response> rather than dropped. Jinja templates render the
 * request's own messages instead (chat.c).
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 64    /* a function or participant name, as OpenAI limits it */
#define ID_MAX_LEN 256     /* a tool call's id */
#define MAX_CALLS 128      /* tool calls in one message */

static const struct {
    const char *api, *tmpl; /* the role as sent, as rendered */
} roles[] = {
    {"system", "system"}, {"user", "user"}, {"assistant", "assistant"},
    {"developer", "system"}, /* OpenAI's newer name for system instructions */
    {"tool", "tool"},        {"function", "tool"}, /* function: the deprecated form of tool */
};

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts joined. */
static char *content_text(const cJSON *c, int i, char *err, size_t errlen) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        snprintf(err, errlen, "'messages'[%d].content must be a string or an array of text parts", i);
        return NULL;
    }
    size_t len = 0;
    const cJSON *part;
    int j = 0;
    cJSON_ArrayForEach(part, c) {
        char where[64];
        snprintf(where, sizeof where, "'messages'[%d].content[%d]", i, j++);
        if (cJSON_IsObject(part) && !srv_check_fields(part, SRV_BODY_CONTENT_PART, where, err, errlen)) return NULL;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, errlen, "'messages'[%d].content parts must be {\"type\": \"text\", \"text\": string}", i);
            return NULL;
        }
        len += strlen(text->valuestring);
    }
    char *out = malloc(len + 1), *p = out;
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    cJSON_ArrayForEach(part, c) {
        const char *text = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t l = strlen(text);
        memcpy(p, text, l);
        p += l;
    }
    *p = 0;
    return out;
}

/* A string field of at most max bytes; absent or null leaves *out NULL. */
static bool short_string(const cJSON *o, const char *key, size_t max, const char *where, const char **out, char *err,
                         size_t errlen) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!it || cJSON_IsNull(it)) return true;
    if (!cJSON_IsString(it) || !*it->valuestring || strlen(it->valuestring) > max) {
        snprintf(err, errlen, "%s.%s must be a string of 1 to %zu bytes", where, key, max);
        return false;
    }
    *out = it->valuestring;
    return true;
}

/* A function name: what every template can print inside a JSON string as is. */
static bool valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.' || c == ':'))
            return false;
    }
    return true;
}

/* {"name", "arguments"} of a call: arguments is JSON text (OpenAI sends a string) or a JSON
 * object; *args is malloc'd minified JSON. */
static bool parse_function(const cJSON *fn, const char *where, const char **name, char **args, char *err,
                           size_t errlen) {
    if (!cJSON_IsObject(fn)) {
        snprintf(err, errlen, "%s must be an object {\"name\", \"arguments\"}", where);
        return false;
    }
    if (!srv_check_fields(fn, SRV_BODY_FUNCTION, where, err, errlen)) return false;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name"), *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (!cJSON_IsString(n) || !valid_name(n->valuestring)) {
        snprintf(err, errlen, "%s.name must be 1 to %d letters, digits, '_', '-', '.' or ':'", where, NAME_MAX_LEN);
        return false;
    }
    cJSON *parsed = NULL;
    if (cJSON_IsString(a)) parsed = cJSON_ParseWithOpts(a->valuestring, NULL, true);
    else if (cJSON_IsObject(a)) parsed = cJSON_Duplicate(a, true);
    if (!parsed) {
        snprintf(err, errlen, "%s.arguments must be JSON text (a string) or an object", where);
        return false;
    }
    *args = cJSON_PrintUnformatted(parsed);
    cJSON_Delete(parsed);
    *name = n->valuestring;
    if (!*args) snprintf(err, errlen, "out of memory");
    return *args != NULL;
}

/* The calls of an assistant message (tool_calls, or the deprecated function_call) as
 * the family's text, malloc'd; "" when there are none. */
static char *calls_text(enum kiln_chat_template family, const cJSON *m, int i, char *err, size_t errlen) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(m, "function_call");
    if (tc && cJSON_IsNull(tc)) tc = NULL;
    if (fc && cJSON_IsNull(fc)) fc = NULL;
    int n = tc ? cJSON_GetArraySize(tc) : fc ? 1 : 0;
    if (tc && (!cJSON_IsArray(tc) || n > MAX_CALLS)) {
        snprintf(err, errlen, "'messages'[%d].tool_calls must be an array of at most %d calls", i, MAX_CALLS);
        return NULL;
    }
    if (tc && fc) {
        snprintf(err, errlen, "'messages'[%d] has both tool_calls and function_call", i);
        return NULL;
    }
    struct kiln_chat_tool_call *calls = calloc((size_t)(n ? n : 1), sizeof *calls);
    char **args = calloc((size_t)(n ? n : 1), sizeof *args), *out = NULL;
    bool ok = calls && args;
    char where[96];
    for (int k = 0; ok && k < n; k++) {
        const cJSON *fn = fc;
        if (tc) {
            const cJSON *call = cJSON_GetArrayItem(tc, k);
            snprintf(where, sizeof where, "'messages'[%d].tool_calls[%d]", i, k);
            const char *id = NULL, *type = NULL;
            ok = cJSON_IsObject(call) && srv_check_fields(call, SRV_BODY_TOOL_CALL, where, err, errlen) &&
                 short_string(call, "id", ID_MAX_LEN, where, &id, err, errlen) &&
                 short_string(call, "type", 32, where, &type, err, errlen);
            if (ok && type && strcmp(type, "function")) {
                snprintf(err, errlen, "%s.type must be \"function\"", where);
                ok = false;
            } else if (!ok && !err[0]) {
                snprintf(err, errlen, "%s must be an object {\"id\", \"type\", \"function\"}", where);
            }
            fn = ok ? cJSON_GetObjectItemCaseSensitive(call, "function") : NULL;
            snprintf(where + strlen(where), sizeof where - strlen(where), ".function");
        } else {
            snprintf(where, sizeof where, "'messages'[%d].function_call", i);
        }
        ok = ok && parse_function(fn, where, &calls[k].name, &args[k], err, errlen);
        calls[k].arguments = args[k];
    }
    if (ok) {
        int64_t need = kiln_chat_tool_calls(family, calls, (size_t)n, NULL, 0);
        size_t size = need < 0 ? (size_t)-need : 1;
        out = need == KILN_ERR_INVALID ? NULL : malloc(size);
        if (out && kiln_chat_tool_calls(family, calls, (size_t)n, out, size) < 0) out[0] = 0;
        if (!out) snprintf(err, errlen, "out of memory");
    } else if (!err[0]) {
        snprintf(err, errlen, "out of memory");
    }
    for (int k = 0; args && k < n; k++) free(args[k]);
    free(args);
    free(calls);
    return out;
}

/* Family t writes a message of this role (some leave out roles they do not know). */
static bool renders(enum kiln_chat_template t, const char *role) {
    const struct kiln_chat_msg m = {role, "\x01"}; /* a byte no family's own text has */
    char buf[1024];
    int64_t n = kiln_chat_apply(t, &m, 1, false, buf, sizeof buf);
    return n > 0 && memchr(buf, 1, (size_t)n) != NULL;
}

static char *wrap(const char *pre, char *text, const char *post) {
    size_t a = strlen(pre), b = strlen(text), c = strlen(post);
    char *out = malloc(a + b + c + 1);
    if (out) {
        memcpy(out, pre, a);
        memcpy(out + a, text, b);
        memcpy(out + a + b, post, c + 1);
    }
    free(text);
    return out;
}

bool srv_message_lower(enum kiln_chat_template family, const cJSON *m, int i, struct kiln_chat_msg *out, char **content,
                       char *err, size_t errlen) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
        snprintf(err, errlen, "'messages'[%d] must be an object with a string 'role'", i);
        return false;
    }
    char where[32];
    snprintf(where, sizeof where, "'messages'[%d]", i);
    if (!srv_check_fields(m, SRV_BODY_MESSAGE, where, err, errlen)) return false;
    size_t r = 0;
    while (r < sizeof roles / sizeof roles[0] && strcmp(roles[r].api, role->valuestring)) r++;
    if (r == sizeof roles / sizeof roles[0]) {
        snprintf(err, errlen,
                 "'messages'[%d].role '%.40s' is not one of system, developer, user, assistant, tool, function", i,
                 role->valuestring);
        return false;
    }
    const bool assistant = !strcmp(roles[r].api, "assistant"), result = !strcmp(roles[r].tmpl, "tool");
    const char *name = NULL, *call_id = NULL;
    if (!short_string(m, "name", NAME_MAX_LEN, where, &name, err, errlen) ||
        !short_string(m, "tool_call_id", ID_MAX_LEN, where, &call_id, err, errlen))
        return false;
    /* fields that belong to another role are errors, not ignored */
    const char *misplaced = name && !result       ? "name"
                            : call_id && !result   ? "tool_call_id"
                            : assistant            ? NULL
                            : cJSON_GetObjectItemCaseSensitive(m, "tool_calls")    ? "tool_calls"
                            : cJSON_GetObjectItemCaseSensitive(m, "function_call") ? "function_call"
                                                                                   : NULL;
    if (misplaced) {
        snprintf(err, errlen, "'messages'[%d]: '%s' belongs to %s messages, not to a '%s' one", i, misplaced,
                 result ? "assistant" : !strcmp(misplaced, "name") || !strcmp(misplaced, "tool_call_id")
                                            ? "tool and function"
                                            : "assistant",
                 roles[r].api);
        return false;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    char *calls = assistant ? calls_text(family, m, i, err, errlen) : strdup("");
    if (!calls) {
        if (!err[0]) snprintf(err, errlen, "out of memory");
        return false;
    }
    char *text = NULL;
    if ((!c || cJSON_IsNull(c)) && *calls) {
        text = strdup(""); /* an assistant that only called tools */
    } else {
        text = content_text(c, i, err, errlen);
    }
    if (text && *calls) { /* the calls follow the content */
        size_t a = strlen(text), b = strlen(calls);
        char *both = malloc(a + b + 2);
        if (both) {
            memcpy(both, text, a);
            both[a] = '\n';
            memcpy(both + (a ? a + 1 : 0), calls, b + 1);
        }
        free(text);
        text = both;
        if (!text) snprintf(err, errlen, "out of memory");
    }
    free(calls);
    const char *as = roles[r].tmpl;
    if (text && result && !renders(family, "tool")) {
        as = "user";
        text = wrap("<tool_response>\n", text, "\n</tool_response>");
        if (!text) snprintf(err, errlen, "out of memory");
    }
    if (!text) return false;
    *content = text;
    *out = (struct kiln_chat_msg){as, text};
    return true;
}

char *srv_render_native(enum kiln_chat_template family, const cJSON *messages, bool add_assistant, char *err,
                        size_t errlen) {
    int n = cJSON_GetArraySize(messages);
    if (!cJSON_IsArray(messages) || n == 0) {
        snprintf(err, errlen, "'messages' must be a non-empty array of {\"role\", \"content\"}");
        return NULL;
    }
    struct kiln_chat_msg *msgs = calloc((size_t)n, sizeof *msgs);
    char **contents = calloc((size_t)n, sizeof *contents);
    char *out = NULL;
    if (!msgs || !contents) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        if (!srv_message_lower(family, m, i, &msgs[i], &contents[i], err, errlen)) goto done;
        i++;
    }
    int64_t need = kiln_chat_apply(family, msgs, (size_t)n, add_assistant, NULL, 0);
    size_t size = need < 0 ? (size_t)-need : (size_t)need + 1;
    if (need == KILN_ERR_INVALID || !(out = malloc(size))) {
        snprintf(err, errlen, "cannot render the messages with the chat template");
        goto done;
    }
    if (kiln_chat_apply(family, msgs, (size_t)n, add_assistant, out, size) < 0) {
        snprintf(err, errlen, "cannot render the messages with the chat template");
        free(out);
        out = NULL;
    }
done:
    for (int k = 0; contents && k < n; k++) free(contents[k]);
    free(contents);
    free(msgs);
    return out;
}
