/*
 * test_toolcall.c - the chat-reply parsers (kiln_chat_parse): the outputs
 * llama.cpp's tests/test-chat.cpp checks, with what it expects (facts in
 * tests/data/toolcall_llama_cpp.tsv); every prefix of those outputs parsed
 * as a stream, which may only grow toward the whole parse; crafted broken
 * calls that must stay text; and, where llama.cpp's templates are present,
 * each format's template writing an assistant tool call (kiln's Jinja, itself
 * compared with @huggingface/jinja in test_jinja_conformance) that the parser
 * must read back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "testutil.h"

/* the tools of llama.cpp's tests (special_function, python, edit, ...) */
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"special_function\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"arg1\":{\"type\":\"integer\"}},\"required\":[\"arg1\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"special_function_with_opt\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"arg1\":{\"type\":\"integer\"},\"arg2\":{\"type\":\"integer\"}},\"required\":[\"arg1\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"empty_args\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"python\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"code\":{\"type\":\"string\"}},\"required\":[\"code\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"edit\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"filename\":{\"type\":\"string\"},\"oldString\":{\"type\":\"string\"},\"newString\":{\"type\":\"string\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"run_in_terminal\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"command\":{\"type\":\"string\"}}}}}]";

static enum kiln_tool_format format_named(const char *name) {
    for (int f = 0; f < KILN_TOOLS_COUNT; f++)
        if (!strcmp(kiln_tool_format_name((enum kiln_tool_format)f), name)) return (enum kiln_tool_format)f;
    return KILN_TOOLS_COUNT;
}

/* JSON with the whitespace between tokens removed */
static char *minify(const char *s) {
    char *o = malloc(strlen(s) + 1), *p = o;
    bool str = false;
    for (; *s; s++) {
        if (str) {
            *p++ = *s;
            if (*s == '\\' && s[1]) *p++ = *++s;
            else if (*s == '"') str = false;
        } else if (*s == '"') {
            str = true;
            *p++ = *s;
        } else if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r') {
            *p++ = *s;
        }
    }
    *p = 0;
    return o;
}

static char *unescape(const char *s, size_t n) {
    char *o = malloc(n + 1), *p = o;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            char c = s[++i];
            *p++ = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        } else {
            *p++ = s[i];
        }
    }
    *p = 0;
    if (!strcmp(o, "-")) o[0] = 0;
    return o;
}

static char *trimmed(const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t')) n--;
    return strndup(s, n);
}

static bool starts(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

/* every prefix of text parsed as a stream must only grow toward the whole parse */
static void check_stream(const char *label, const char *text, const struct kiln_chat_parse_opts *o,
                         const struct kiln_chat_reply *whole) {
    size_t n = strlen(text);
    struct kiln_chat_parse_opts po = *o;
    po.partial = true;
    struct kiln_chat_reply prev = {0};
    bool have_prev = false;
    for (size_t k = 0; k <= n; k++) {
        if (k < n && ((unsigned char)text[k] & 0xC0) == 0x80) continue; /* inside a character */
        struct kiln_chat_reply r;
        if (kiln_chat_parse(text, k, &po, &r) != 0) {
            CHECKF(0, "%s: partial parse of %zu bytes failed", label, k);
            continue;
        }
        bool ok = starts(whole->content, r.content) && starts(whole->reasoning, r.reasoning) &&
                  r.n_calls <= whole->n_calls;
        for (size_t i = 0; ok && i < r.n_calls; i++) {
            const struct kiln_tool_call *c = &r.calls[i], *w = &whole->calls[i];
            ok = (!c->name || (w->name && !strcmp(c->name, w->name))) && starts(w->arguments, c->arguments);
        }
        if (have_prev) { /* and grew from the previous prefix's parse */
            ok = ok && starts(r.content, prev.content) && starts(r.reasoning, prev.reasoning) &&
                 r.n_calls >= prev.n_calls;
            for (size_t i = 0; ok && i < prev.n_calls; i++)
                ok = (!prev.calls[i].name || (r.calls[i].name && !strcmp(prev.calls[i].name, r.calls[i].name))) &&
                     starts(r.calls[i].arguments, prev.calls[i].arguments);
        }
        CHECKF(ok, "%s: the stream's parse of %zu/%zu bytes is not on the way to the whole one (content '%s', "
                   "reasoning '%s', %zu calls%s%s)",
               label, k, n, r.content, r.reasoning, r.n_calls, r.n_calls ? ", last arguments " : "",
               r.n_calls ? r.calls[r.n_calls - 1].arguments : "");
        kiln_chat_reply_free(&prev);
        prev = r;
        have_prev = true;
        if (!ok) break;
    }
    kiln_chat_reply_free(&prev);
}

static void test_facts(const char *path) {
    size_t len;
    char *data = tu_read_file(path, &len);
    CHECKF(data, "cannot read %s", path);
    if (!data) return;
    int cases = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || !line[0]) continue;
        char *col[32];
        int nc = 0;
        for (char *p = line; nc < 32;) {
            char *tab = strchr(p, '\t');
            col[nc++] = unescape(p, tab ? (size_t)(tab - p) : strlen(p));
            if (!tab) break;
            p = tab + 1;
        }
        cases++;
        char label[64];
        snprintf(label, sizeof label, "case %d (%.40s)", cases, nc ? col[0] : "?");
        CHECKF(nc >= 5 && (nc - 5) % 3 == 0, "%s: %d columns", label, nc);
        enum kiln_tool_format f = nc ? format_named(col[0]) : KILN_TOOLS_COUNT;
        CHECKF(f != KILN_TOOLS_COUNT, "%s: unknown format", label);
        if (nc >= 5 && f != KILN_TOOLS_COUNT) {
            struct kiln_chat_parse_opts o = {.format = f, .tools_json = TOOLS};
            o.parse_tools = strstr(col[1], "tools") != NULL;
            o.reasoning = strstr(col[1], "reason") != NULL;
            o.partial = strstr(col[1], "partial") != NULL;
            if (strstr(col[1], "think")) o.think_prefix = "<think>\n";
            struct kiln_chat_reply r;
            CHECK(kiln_chat_parse(col[2], strlen(col[2]), &o, &r) == 0);
            char *reasoning = trimmed(r.reasoning), *want_r = trimmed(col[4]);
            CHECKF(!strcmp(r.content, col[3]), "%s: content '%s', want '%s'", label, r.content, col[3]);
            CHECKF(!strcmp(reasoning, want_r), "%s: reasoning '%s', want '%s'", label, reasoning, want_r);
            size_t want_calls = (size_t)(nc - 5) / 3;
            CHECKF(r.n_calls == want_calls, "%s: %zu calls, want %zu", label, r.n_calls, want_calls);
            for (size_t i = 0; i < r.n_calls && i < want_calls; i++) {
                char *a = minify(r.calls[i].arguments), *w = minify(col[5 + 3 * i + 1]);
                const char *id = col[5 + 3 * i + 2];
                CHECKF(r.calls[i].name && !strcmp(r.calls[i].name, col[5 + 3 * i]), "%s: call %zu is '%s', want '%s'",
                       label, i, r.calls[i].name ? r.calls[i].name : "(null)", col[5 + 3 * i]);
                CHECKF(!strcmp(a, w), "%s: call %zu arguments %s, want %s", label, i, a, w);
                CHECKF(*id ? r.calls[i].id && !strcmp(r.calls[i].id, id) : !r.calls[i].id, "%s: call %zu id '%s'",
                       label, i, r.calls[i].id ? r.calls[i].id : "(none)");
                free(a);
                free(w);
            }
            if (!o.partial) check_stream(label, col[2], &o, &r);
            free(reasoning);
            free(want_r);
            kiln_chat_reply_free(&r);
        }
        for (int i = 0; i < nc; i++) free(col[i]);
    }
    CHECKF(cases >= 50, "only %d cases in %s", cases, path);
    printf("test_toolcall: %d cases from llama.cpp's test-chat.cpp\n", cases);
    free(data);
}

/* broken calls stay content, whole; nothing crashes on garbage */
static void test_broken(void) {
    static const struct {
        const char *format, *text;
    } cases[] = {
        {"hermes", "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {bad}}</tool_call>"},
        {"hermes", "<tool_call>\n{\"arguments\": {\"arg1\": 1}}</tool_call>"},
        {"hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call> and then some text"},
        {"hermes", "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>"},
        {"hermes", "I would use <tool_call> here but I won't."},
        {"qwen3-coder", "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>"},
        {"qwen3-coder", "<tool_call>\n<function=f\n"},
        {"mistral", "[TOOL_CALLS]special_function[ARGS]{\"arg1\": "},
        {"mistral", "[TOOL_CALLS]special_function[ARGS][1, 2]"},
        {"mistral", "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"oops\"}]"},
        {"mistral", "[TOOL_CALLS]no args tag"},
        {"deepseek-r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": }```"},
        {"deepseek-v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1"},
        {"deepseek-v3.1", "<｜tool▁calls▁begin｜>garbage"},
        {"llama3", "{\"name\": \"f\", \"parameters\": {\"a\": 1}} trailing"},
        {"llama3", "{this is not json}"},
        {"generic", "{\"tool_call\": {\"name\": \"f\"  \"arguments\": {}}}"},
        {"generic", "{\"something\": \"else\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kiln_chat_parse_opts o = {.format = format_named(cases[i].format), .parse_tools = true, .reasoning = true};
        struct kiln_chat_reply r;
        CHECK(kiln_chat_parse(cases[i].text, strlen(cases[i].text), &o, &r) == 0);
        CHECKF(r.n_calls == 0 && !strcmp(r.content, cases[i].text), "%s: '%s' gave %zu calls, content '%s'",
               cases[i].format, cases[i].text, r.n_calls, r.content);
        kiln_chat_reply_free(&r);
    }
    /* gpt-oss: arguments that are not JSON give no call */
    struct kiln_chat_parse_opts o = {.format = KILN_TOOLS_GPT_OSS, .parse_tools = true, .reasoning = true};
    struct kiln_chat_reply r;
    const char *bad = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{not json";
    CHECK(kiln_chat_parse(bad, strlen(bad), &o, &r) == 0 && r.n_calls == 0);
    kiln_chat_reply_free(&r);
    /* tools not offered: markup is content */
    o = (struct kiln_chat_parse_opts){.format = KILN_TOOLS_HERMES, .parse_tools = false};
    const char *call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    CHECK(kiln_chat_parse(call, strlen(call), &o, &r) == 0 && r.n_calls == 0 && !strcmp(r.content, call));
    kiln_chat_reply_free(&r);
    /* the generic reply */
    o = (struct kiln_chat_parse_opts){.format = KILN_TOOLS_GENERIC, .parse_tools = true};
    const char *gen[][3] = {
        {"{\"response\": \"Hello!\"}", "Hello!", ""},
        {"{\"tool_call\": {\"name\": \"f\", \"arguments\": {\"a\": 1}}}", "", "f"},
        {"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"b\": [1]}}]}", "",
         "f"},
        {"plain text", "plain text", ""},
    };
    for (size_t i = 0; i < 4; i++) {
        CHECK(kiln_chat_parse(gen[i][0], strlen(gen[i][0]), &o, &r) == 0);
        CHECKF(!strcmp(r.content, gen[i][1]) && (gen[i][2][0] ? r.n_calls && !strcmp(r.calls[0].name, gen[i][2])
                                                               : r.n_calls == 0),
               "generic '%s': content '%s', %zu calls", gen[i][0], r.content, r.n_calls);
        kiln_chat_reply_free(&r);
    }
    /* Llama 3: JSON calls and builtin tools after <|python_tag|> */
    o = (struct kiln_chat_parse_opts){.format = KILN_TOOLS_LLAMA3, .parse_tools = true};
    const char *ll[][3] = {
        {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "get_weather", "{\"city\":\"Paris\"}"},
        {"<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}", "f", "{}"},
        {"<|python_tag|>brave_search.call(query=\"kiln\")", "brave_search", "{\"query\":\"kiln\"}"},
        {"<|python_tag|>wolfram_alpha.call(query=\"2+2\", n=1)", "wolfram_alpha", "{\"query\":\"2+2\",\"n\":1}"},
        {"<|python_tag|>print('hi')", "python", "{\"code\":\"print('hi')\"}"},
    };
    for (size_t i = 0; i < 5; i++) {
        CHECK(kiln_chat_parse(ll[i][0], strlen(ll[i][0]), &o, &r) == 0);
        CHECKF(r.n_calls == 1 && !strcmp(r.calls[0].name, ll[i][1]) && !strcmp(r.calls[0].arguments, ll[i][2]),
               "llama3 '%s': %zu calls, %s %s", ll[i][0], r.n_calls, r.n_calls ? r.calls[0].name : "",
               r.n_calls ? r.calls[0].arguments : "");
        struct kiln_chat_reply whole = r;
        check_stream(ll[i][0], ll[i][0], &o, &whole);
        kiln_chat_reply_free(&r);
    }
    /* garbage and deep nesting: no crash, the text back as content */
    char *deep = malloc(200004);
    strcpy(deep, "<tool_call>");
    memset(deep + 11, '[', 199990);
    deep[200001] = 0;
    for (int f = 0; f < KILN_TOOLS_COUNT; f++) {
        o = (struct kiln_chat_parse_opts){.format = (enum kiln_tool_format)f, .parse_tools = true, .reasoning = true};
        CHECK(kiln_chat_parse(deep, strlen(deep), &o, &r) == 0);
        kiln_chat_reply_free(&r);
        o.partial = true;
        CHECK(kiln_chat_parse(deep, strlen(deep), &o, &r) == 0);
        kiln_chat_reply_free(&r);
        const char *bytes = "\xff\xfe<tool_call>\x01{\"name\":\"\\ud800\"}\0";
        CHECK(kiln_chat_parse(bytes, 30, &o, &r) == 0);
        kiln_chat_reply_free(&r);
        CHECK(kiln_chat_parse(NULL, 0, &o, &r) == 0 && !strcmp(r.content, ""));
        kiln_chat_reply_free(&r);
    }
    free(deep);
}

/* ------------------------------------------------------------------ templates that write calls */

static char *render(struct kiln_jinja *t, const char *ctx) {
    char err[512];
    struct kiln_jinja_opts opts = kiln_jinja_default_opts();
    opts.now = 1741944413;
    char *out = kiln_jinja_render(t, ctx, strlen(ctx), &opts, NULL, err, sizeof err);
    if (!out) fprintf(stderr, "render: %s\n", err);
    return out;
}

/* the assistant's turn as the model writes it: what the history adds after the generation prompt,
 * without the end-of-turn token the model would stop on */
static char *assistant_turn(const char *gen, const char *hist) {
    size_t gl = 0; /* where they part: a generation prompt may open a block the history does not (<think>) */
    while (gen[gl] && gen[gl] == hist[gl]) gl++;
    if (gl < strlen(gen) / 2) return NULL;
    if (gen[gl]) /* parted inside a token like <|...|>: from its start */
        for (size_t k = gl; k > 0 && gl - k < 16; k--)
            if (hist[k - 1] == '<') {
                gl = k - 1;
                break;
            }
    char *t = strdup(hist + gl);
    static const char *const ends[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "</s>", "<|end|>", "<|call|>",
                                       "<|return|>", "<｜end▁of▁sentence｜>", "<|endoftext|>", "<｜Assistant｜>"};
    for (bool again = true; again;) {
        again = false;
        size_t n = strlen(t);
        while (n && (t[n - 1] == '\n' || t[n - 1] == ' ')) t[--n] = 0;
        for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
            size_t l = strlen(ends[i]);
            if (n >= l && !strcmp(t + n - l, ends[i])) {
                t[n - l] = 0;
                again = true;
                break;
            }
        }
    }
    return t;
}

static void test_round_trip(void) {
    const char *peer = getenv("PEER_DIR") ? getenv("PEER_DIR") : "/tmp/kiln-peer";
    static const struct {
        const char *file;
        enum kiln_tool_format want;
        const char *args; /* the call's arguments as the conversation gives them */
    } T[] = {
        {"Qwen-Qwen2.5-7B-Instruct", KILN_TOOLS_HERMES, "{\"city\": \"Paris\", \"days\": 3}"},
        {"Qwen-Qwen3-0.6B", KILN_TOOLS_HERMES, "{\"city\": \"Paris\", \"days\": 3}"},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", KILN_TOOLS_HERMES, "{\"city\": \"Paris\", \"days\": 3}"},
        {"Qwen3-Coder", KILN_TOOLS_QWEN3_CODER, "{\"city\": \"Paris\", \"days\": 3}"},
        {"Qwen3.5-4B", KILN_TOOLS_QWEN3_CODER, "{\"city\": \"Paris\", \"days\": 3}"},
        {"meta-llama-Llama-3.1-8B-Instruct", KILN_TOOLS_LLAMA3, "{\"city\": \"Paris\", \"days\": 3}"},
        {"meta-llama-Llama-3.3-70B-Instruct", KILN_TOOLS_LLAMA3, "{\"city\": \"Paris\", \"days\": 3}"},
        {"mistralai-Mistral-Nemo-Instruct-2407", KILN_TOOLS_MISTRAL, "{\"city\": \"Paris\", \"days\": 3}"},
        {"Mistral-Small-3.2-24B-Instruct-2506", KILN_TOOLS_MISTRAL, "{\"city\": \"Paris\", \"days\": 3}"},
        {"unsloth-mistral-Devstral-Small-2507", KILN_TOOLS_MISTRAL, "{\"city\": \"Paris\", \"days\": 3}"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", KILN_TOOLS_DEEPSEEK_R1, "{\"city\": \"Paris\", \"days\": 3}"},
        {"deepseek-ai-DeepSeek-V3.1", KILN_TOOLS_DEEPSEEK_V3, "{\"city\": \"Paris\", \"days\": 3}"},
        {"openai-gpt-oss-120b", KILN_TOOLS_GPT_OSS, "{\"city\": \"Paris\", \"days\": 3}"},
    };
    int done = 0;
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/src/models/templates/%s.jinja", peer, T[i].file);
        size_t len;
        char *src = tu_read_file(path, &len);
        if (!src) continue;
        enum kiln_tool_format f = kiln_tool_format_detect(src);
        CHECKF(f == T[i].want, "%s: detected %s, want %s", T[i].file, kiln_tool_format_name(f),
               kiln_tool_format_name(T[i].want));
        char err[512];
        struct kiln_jinja *t = kiln_jinja_parse(src, len, err, sizeof err);
        CHECKF(t, "%s: %s", T[i].file, err);
        if (!t) {
            free(src);
            continue;
        }
        static const char head[] =
            "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false, \"tools\": "
            "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
            "{\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"messages\": [{\"role\": \"user\", \"content\": "
            "\"Weather in Paris?\"}";
        char gen[2048], hist[4096];
        snprintf(gen, sizeof gen, "%s], \"add_generation_prompt\": true}", head);
        snprintf(hist, sizeof hist,
                 "%s, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call00001\", \"type\": "
                 "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": %s}}]}], "
                 "\"add_generation_prompt\": false}",
                 head, T[i].args);
        char *g = render(t, gen), *h = render(t, hist);
        char *turn = g && h ? assistant_turn(g, h) : NULL;
        CHECKF(turn, "%s: the history does not continue the generation prompt", T[i].file);
        if (turn) {
            struct kiln_chat_parse_opts o = {.format = f, .parse_tools = true, .reasoning = true,
                                             .tools_json = strstr(gen, "[{\"type\"")};
            struct kiln_chat_reply r;
            CHECK(kiln_chat_parse(turn, strlen(turn), &o, &r) == 0);
            char *want = minify(T[i].args);
            bool ok = r.n_calls == 1 && r.calls[0].name && !strcmp(r.calls[0].name, "get_weather") &&
                      !strcmp(r.calls[0].arguments, want);
            CHECKF(ok, "%s: the template wrote '%s', parsed into %zu calls (%s %s), content '%s'", T[i].file, turn,
                   r.n_calls, r.n_calls ? r.calls[0].name : "", r.n_calls ? r.calls[0].arguments : "", r.content);
            if (ok) done++;
            free(want);
            kiln_chat_reply_free(&r);
        }
        free(turn);
        free(g);
        free(h);
        kiln_jinja_free(t);
        free(src);
    }
    if (!done) printf("note: no peer templates (PEER_DIR): the round trip through templates was not run\n");
    else printf("test_toolcall: %d templates' own tool calls read back\n", done);
}

int main(void) {
    const char *src = getenv("KILN_SRC") ? getenv("KILN_SRC") : "..";
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/toolcall_llama_cpp.tsv", src);
    test_facts(path);
    test_broken();
    test_round_trip();
    return tu_finish("test_toolcall");
}
