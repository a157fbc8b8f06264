/*
 * chat_parse.c - a chat model's output into OpenAI's reply: the thinking
 * block split off as reasoning (<think>...</think>, or the rest of a block the
 * prompt opened), then the tool calls of the template's format (formats.c,
 * harmony.c). Also which format a template implies, found by the markup its
 * own text writes for tool calls.
 */
#include <stdlib.h>
#include <string.h>

#include "toolcall_impl.h"

/* ------------------------------------------------------------------ formats */

static const char *const names[KILN_TOOLS_COUNT] = {
    [KILN_TOOLS_CONTENT] = "content",       [KILN_TOOLS_GENERIC] = "generic",
    [KILN_TOOLS_HERMES] = "hermes",         [KILN_TOOLS_QWEN3_CODER] = "qwen3-coder",
    [KILN_TOOLS_LLAMA3] = "llama3",         [KILN_TOOLS_MISTRAL] = "mistral",
    [KILN_TOOLS_GPT_OSS] = "gpt-oss",       [KILN_TOOLS_DEEPSEEK_R1] = "deepseek-r1",
    [KILN_TOOLS_DEEPSEEK_V3] = "deepseek-v3.1",
};

const char *kiln_tool_format_name(enum kiln_tool_format f) {
    return (unsigned)f < KILN_TOOLS_COUNT ? names[f] : "unknown";
}

enum kiln_tool_format kiln_tool_format_detect(const char *t) {
    if (!t) return KILN_TOOLS_CONTENT;
    if (strstr(t, "<|channel|>") && strstr(t, "<|message|>")) return KILN_TOOLS_GPT_OSS;
    if (strstr(t, "<｜tool▁calls▁begin｜>") || strstr(t, "<｜tool▁call▁begin｜>"))
        return strstr(t, "```json") ? KILN_TOOLS_DEEPSEEK_R1 : KILN_TOOLS_DEEPSEEK_V3;
    if (strstr(t, "[TOOL_CALLS]")) return KILN_TOOLS_MISTRAL;
    if (strstr(t, "<tool_call>") && strstr(t, "<function=")) return KILN_TOOLS_QWEN3_CODER;
    if (strstr(t, "<tool_call>")) return KILN_TOOLS_HERMES;
    if (strstr(t, "<|start_header_id|>") && (strstr(t, "<|python_tag|>") || strstr(t, "ipython")))
        return KILN_TOOLS_LLAMA3;
    return strstr(t, "tools") ? KILN_TOOLS_GENERIC : KILN_TOOLS_CONTENT;
}

/* ------------------------------------------------------------------ helpers */

const char *tc_find(const char *s, size_t n, const char *needle) {
    size_t l = strlen(needle);
    if (!l || l > n) return NULL;
    for (const char *p = s; (p = memchr(p, needle[0], n - (size_t)(p - s) - l + 1)); p++)
        if (!memcmp(p, needle, l)) return p;
    return NULL;
}

size_t tc_partial_marker(const char *s, size_t n, const char *marker) {
    size_t l = strlen(marker);
    for (size_t k = l - 1 < n ? l - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, marker, k)) return k;
    return 0;
}

static char *dup_n(const char *s, size_t n, bool *oom) {
    if (!s) return NULL;
    char *p = malloc(n + 1);
    if (!p) {
        *oom = true;
        return NULL;
    }
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

struct kiln_tool_call *tc_add_call(struct tc_reply *r, const char *name, size_t nn, const char *args, size_t an,
                                   const char *id, size_t idn) {
    if (r->n_calls == r->cap_calls) {
        size_t cap = r->cap_calls ? r->cap_calls * 2 : 4;
        struct kiln_tool_call *c = realloc(r->calls, cap * sizeof *c);
        if (!c) {
            r->oom = true;
            return NULL;
        }
        r->calls = c;
        r->cap_calls = cap;
    }
    struct kiln_tool_call *c = &r->calls[r->n_calls++];
    c->name = dup_n(name, nn, &r->oom);
    c->arguments = dup_n(args ? args : "", args ? an : 0, &r->oom);
    c->id = id && idn ? dup_n(id, idn, &r->oom) : NULL;
    return c;
}

void tc_drop_calls(struct tc_reply *r, size_t from) {
    for (size_t i = from; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
        free(r->calls[i].id);
    }
    if (from < r->n_calls) r->n_calls = from;
}

static void put_trimmed(struct tc_buf *b, const char *s, size_t n) {
    size_t a = tc_skip_ws(s, n, 0);
    while (n > a && tc_is_ws(s[n - 1])) n--;
    tc_put(b, s + a, n - a);
}

/* ------------------------------------------------------------------ the reply */

static void parse_body(const struct kiln_chat_parse_opts *o, const char *body, size_t n, struct tc_reply *r) {
    if (!o->parse_tools || o->format == KILN_TOOLS_CONTENT) {
        tc_put(&r->content, body, n);
        return;
    }
    size_t start = n;
    bool ok = tc_parse_calls(o, body, n, r, &start);
    if (!ok) { /* not calls after all: text (while generating, held back until the end decides) */
        tc_drop_calls(r, 0);
        if (!o->partial) start = n;
    }
    size_t keep = start;
    if (o->partial && start == n) { /* the start of markup may be on its way */
        size_t m = tc_call_start(o->format, body, n);
        keep = m < n ? m : n;
    }
    tc_put(&r->content, body, keep);
}

/* the end of reasoning that the prompt or a <think> opened at text[from]: the closing tag,
 * or a tool call's start (a model may call without closing its thoughts) */
static void split_thinking(const struct kiln_chat_parse_opts *o, const char *text, size_t n, size_t from,
                           struct tc_reply *r) {
    const char *end = tc_find(text + from, n - from, "</think>");
    size_t close = end ? (size_t)(end - text) : n;
    size_t call = o->parse_tools ? from + tc_call_start(o->format, text + from, close - from) : close;
    if (call < close) { /* a call begins inside the open block: thinking ended there */
        put_trimmed(&r->reasoning, text + from, call - from);
        parse_body(o, text + call, n - call, r);
        return;
    }
    if (!end) {
        size_t hold = o->partial ? tc_partial_marker(text, n, "</think>") : 0;
        put_trimmed(&r->reasoning, text + from, n - from - hold);
        return;
    }
    put_trimmed(&r->reasoning, text + from, close - from);
    size_t b = tc_skip_ws(text, n, close + 8);
    parse_body(o, text + b, n - b, r);
}

int kiln_chat_parse(const char *text, size_t n, const struct kiln_chat_parse_opts *o, struct kiln_chat_reply *out) {
    memset(out, 0, sizeof *out);
    struct tc_reply r = {0};
    if (!text) n = 0, text = "";
    if (o->format == KILN_TOOLS_GPT_OSS) {
        tc_parse_harmony(o, text, n, &r);
    } else if (o->reasoning && o->think_prefix) {
        split_thinking(o, text, n, 0, &r);
    } else if (o->reasoning) {
        size_t i = tc_skip_ws(text, n, 0);
        if (n - i >= 7 && !memcmp(text + i, "<think>", 7))
            split_thinking(o, text, n, i + 7, &r);
        else if (o->partial && i < n && tc_partial_marker(text + i, n - i, "<think>") == n - i)
            ; /* "<thi": wait */
        else
            parse_body(o, text, n, &r);
    } else {
        if (o->think_prefix) tc_puts(&r.content, o->think_prefix);
        parse_body(o, text, n, &r);
    }
    out->content = tc_take(&r.content);
    out->reasoning = tc_take(&r.reasoning);
    out->calls = r.calls;
    out->n_calls = r.n_calls;
    if (r.oom || r.content.oom || r.reasoning.oom || !out->content || !out->reasoning) {
        kiln_chat_reply_free(out);
        return -1;
    }
    return 0;
}

void kiln_chat_reply_free(struct kiln_chat_reply *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
        free(r->calls[i].id);
    }
    free(r->calls);
    free(r->content);
    free(r->reasoning);
    memset(r, 0, sizeof *r);
}
