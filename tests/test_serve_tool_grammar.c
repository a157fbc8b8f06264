/*
 * test_serve_tool_grammar.c - the grammars that hold tool calls (tool_choice "required",
 * a named function, the lazy grammar of "auto"), without a model: for every call
 * format, calls written as the models write them are accepted and parse back
 * (kiln_chat_parse) into the same names and arguments; calls to other tools,
 * arguments against the schema, a second call without parallel_tool_calls, text
 * before a forced call are refused; a schema kiln refuses names its tool.
 * (test_serve_tools drives the grammar through the server with a real model.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_api.h"
#include "testutil.h"

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", "
    "\"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"search\", \"description\": \"\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"}, \"book\": {\"type\": \"string\", "
    "\"enum\": [\"Genesis\", \"Exodus\"]}}, \"required\": [\"query\", \"book\"], \"additionalProperties\": false}}}]";

struct fmt_case {
    enum kiln_tool_format f;
    const char *tmpl;     /* template text that picks a variant (Mistral's [ARGS]), or NULL */
    const char *one;      /* one call: get_weather {"city": "Paris", "days": 3} */
    const char *two;      /* get_weather then search {"query": "a < b </par", "book": "Exodus"} (NULL: one call a turn) */
    const char *bad_args; /* get_weather with "days": 9 (past the schema's maximum) */
};

#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

static const struct fmt_case CASES[] = {
    {KILN_TOOLS_HERMES, NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a < b </par\", \"book\": \"Exodus\"}}\n</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>"},
    {KILN_TOOLS_QWEN3_CODER, NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
     "</function>\n</tool_call>",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
     "</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\na < b </par\n</parameter>\n"
     "<parameter=book>\nExodus\n</parameter>\n</function>\n</tool_call>",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n9\n</parameter>\n"
     "</function>\n</tool_call>"},
    {KILN_TOOLS_LLAMA3, NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}; {\"name\": \"search\", "
     "\"parameters\": {\"query\": \"a < b </par\", \"book\": \"Exodus\"}}",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 9}}"},
    {KILN_TOOLS_MISTRAL, NULL,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}, \"id\": \"abcDEF123\"}]",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}, \"id\": \"abcDEF123\"}, "
     "{\"name\": \"search\", \"arguments\": {\"query\": \"a < b </par\", \"book\": \"Exodus\"}, \"id\": \"x2345678Z\"}]",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}, \"id\": \"abcDEF123\"}]"},
    {KILN_TOOLS_MISTRAL, "{{ '[TOOL_CALLS]' + name + '[ARGS]' }}",
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 3}",
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 3}[TOOL_CALLS]search[ARGS]{\"query\": \"a < b "
     "</par\", \"book\": \"Exodus\"}",
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 9}"},
    {KILN_TOOLS_GPT_OSS, NULL,
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 3}", NULL,
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 9}"},
    {KILN_TOOLS_DEEPSEEK_R1, NULL,
     DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```" DS_CALL_END DS_CALLS_END,
     DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```" DS_CALL_END "\n" DS_CALL
     "function" DS_SEP "search\n```json\n{\"query\": \"a < b </par\", \"book\": \"Exodus\"}\n```" DS_CALL_END DS_CALLS_END,
     DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 9}\n```" DS_CALL_END DS_CALLS_END},
    {KILN_TOOLS_DEEPSEEK_V3, NULL,
     DS_CALLS DS_CALL "get_weather" DS_SEP "{\"city\": \"Paris\", \"days\": 3}" DS_CALL_END DS_CALLS_END,
     DS_CALLS DS_CALL "get_weather" DS_SEP "{\"city\": \"Paris\", \"days\": 3}" DS_CALL_END DS_CALL "search" DS_SEP
     "{\"query\": \"a < b </par\", \"book\": \"Exodus\"}" DS_CALL_END DS_CALLS_END,
     DS_CALLS DS_CALL "get_weather" DS_SEP "{\"city\": \"Paris\", \"days\": 9}" DS_CALL_END DS_CALLS_END},
    {KILN_TOOLS_GENERIC, NULL, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}]}",
     "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}, {\"name\": "
     "\"search\", \"arguments\": {\"query\": \"a < b </par\", \"book\": \"Exodus\"}}]}",
     "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}]}"},
};

static cJSON *tools;

static struct kiln_grammar *compile(enum kiln_tool_format f, const char *tmpl, const char *only, bool parallel,
                                    const char *before) {
    struct srv_tool_grammar_opts o = {.format = f, .tools = tools, .only = only, .parallel = parallel,
                                      .before = before, .template_src = tmpl};
    char err[400];
    char *gbnf = srv_tool_grammar(&o, err, sizeof err);
    CHECKF(gbnf != NULL, "%s: %s", kiln_tool_format_name(f), err);
    if (!gbnf) return NULL;
    struct kiln_grammar *g = kiln_grammar_parse(gbnf, strlen(gbnf), NULL, err, sizeof err);
    CHECKF(g != NULL, "%s: %s\n%s", kiln_tool_format_name(f), err, gbnf);
    free(gbnf);
    return g;
}

/* the whole text is a complete sentence of g */
static bool accepts(const struct kiln_grammar *g, const char *text) {
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(g, NULL, err, sizeof err);
    if (!m) return false;
    bool ok = kiln_grammar_matcher_accept_text(m, text, strlen(text)) && kiln_grammar_matcher_can_end(m);
    kiln_grammar_matcher_free(m);
    return ok;
}

/* the text parses into calls with these names and these arguments (JSON, compared as parsed) */
static void parses(enum kiln_tool_format f, const char *text, const char *const *names, const char *const *args,
                   size_t n) {
    char *tj = cJSON_PrintUnformatted(tools);
    struct kiln_chat_parse_opts o = {.format = srv_tool_grammar_format(f), .parse_tools = true, .tools_json = tj};
    struct kiln_chat_reply r;
    CHECK(kiln_chat_parse(text, strlen(text), &o, &r) == 0);
    CHECKF(r.n_calls == n, "%s: %zu calls, not %zu, from %s", kiln_tool_format_name(f), r.n_calls, n, text);
    for (size_t i = 0; i < n && i < r.n_calls; i++) {
        CHECKF(r.calls[i].name && !strcmp(r.calls[i].name, names[i]), "%s: call %zu is %s", kiln_tool_format_name(f),
               i, r.calls[i].name ? r.calls[i].name : "(null)");
        cJSON *got = cJSON_Parse(r.calls[i].arguments), *want = cJSON_Parse(args[i]);
        CHECKF(got && cJSON_Compare(got, want, true), "%s: call %zu arguments %s, not %s", kiln_tool_format_name(f), i,
               r.calls[i].arguments, args[i]);
        cJSON_Delete(got);
        cJSON_Delete(want);
    }
    kiln_chat_reply_free(&r);
    free(tj);
}

static char *replace(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    if (!p) return strdup(s);
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return out;
}

static void one_format(const struct fmt_case *c) {
    const char *fname = kiln_tool_format_name(c->f);
    static const char *const names[] = {"get_weather", "search"};
    static const char *const args[] = {"{\"city\": \"Paris\", \"days\": 3}", "{\"query\": \"a < b </par\", \"book\": \"Exodus\"}"};
    struct kiln_grammar *par = compile(c->f, c->tmpl, NULL, true, NULL);
    struct kiln_grammar *single = compile(c->f, c->tmpl, NULL, false, NULL);
    struct kiln_grammar *named = compile(c->f, c->tmpl, "search", true, NULL);
    struct kiln_grammar *think = compile(c->f, c->tmpl, NULL, false, "</think>\n\n");
    if (!par || !single || !named || !think) goto done;
    CHECKF(accepts(par, c->one), "%s: one call refused: %s", fname, c->one);
    CHECKF(accepts(single, c->one), "%s: one call refused without parallel", fname);
    parses(c->f, c->one, names, args, 1);
    CHECKF(!accepts(par, c->bad_args), "%s: arguments against the schema accepted: %s", fname, c->bad_args);
    CHECKF(!accepts(named, c->one), "%s: a call to another function than the named one accepted", fname);
    char *wrong = replace(c->one, "get_weather", "get_weathers");
    CHECKF(!accepts(par, wrong), "%s: a call to a tool not offered accepted: %s", fname, wrong);
    free(wrong);
    char *missing = replace(c->one, "Paris", "Paris\", \"country\": \"France");
    if (c->f != KILN_TOOLS_QWEN3_CODER) /* (XML: the value is raw text) */
        CHECKF(!accepts(par, missing), "%s: an argument the schema does not define accepted: %s", fname, missing);
    free(missing);
    size_t tl = strlen(c->one) + 32;
    char *texted = malloc(tl);
    snprintf(texted, tl, "Sure. %s", c->one);
    CHECKF(!accepts(par, texted), "%s: text before a forced call accepted", fname);
    free(texted);
    char *thought = malloc(tl);
    snprintf(thought, tl, "</think>\n\n%s", c->one);
    CHECKF(accepts(think, thought) && !accepts(think, c->one), "%s: the thinking block is not closed first", fname);
    free(thought);
    if (c->two) {
        CHECKF(accepts(par, c->two), "%s: two calls refused: %s", fname, c->two);
        CHECKF(!accepts(single, c->two), "%s: two calls accepted without parallel_tool_calls", fname);
        parses(c->f, c->two, names, args, 2);
    }
done:
    kiln_grammar_free(par);
    kiln_grammar_free(single);
    kiln_grammar_free(named);
    kiln_grammar_free(think);
}

/* "auto": free text until the format's opener, the calls held from there */
static void lazy(void) {
    size_t n = 0;
    const char *const *trig = srv_tool_triggers(KILN_TOOLS_HERMES, &n);
    CHECK(n == 1 && !strcmp(trig[0], "<tool_call>"));
    size_t none = 1;
    CHECK(srv_tool_triggers(KILN_TOOLS_LLAMA3, &none) == NULL && none == 0); /* a reply that is a JSON call: no opener to wait for */
    struct kiln_grammar *g = compile(KILN_TOOLS_HERMES, NULL, NULL, true, NULL);
    if (!g) return;
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new_lazy(g, NULL, trig, n, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    const char *text = "Let me look that up.\n";
    CHECK(kiln_grammar_matcher_accept_text(m, text, strlen(text)) && !kiln_grammar_matcher_is_active(m));
    const char *call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    CHECK(kiln_grammar_matcher_accept_text(m, call, strlen(call)) && kiln_grammar_matcher_is_active(m) &&
          kiln_grammar_matcher_can_end(m));
    kiln_grammar_matcher_reset(m);
    const char *bad = "Well <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\"";
    CHECK(!kiln_grammar_matcher_accept_text(m, bad, strlen(bad)));
    kiln_grammar_matcher_free(m);
    kiln_grammar_free(g);
}

static void refused(void) {
    char err[400];
    struct srv_tool_grammar_opts o = {.format = KILN_TOOLS_HERMES, .tools = tools, .only = "nope"};
    CHECK(srv_tool_grammar(&o, err, sizeof err) == NULL && strstr(err, "nope") && strstr(err, "tool_choice"));
    cJSON *t = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"ok\", \"parameters\": {\"type\": "
                           "\"object\"}}}, {\"type\": \"function\", \"function\": {\"name\": \"uniq\", \"parameters\": "
                           "{\"type\": \"object\", \"properties\": {\"xs\": {\"type\": \"array\", \"uniqueItems\": "
                           "true}}}}}]");
    for (int f = KILN_TOOLS_CONTENT; f < KILN_TOOLS_COUNT; f++) {
        struct srv_tool_grammar_opts r = {.format = (enum kiln_tool_format)f, .tools = t};
        char *g = srv_tool_grammar(&r, err, sizeof err);
        CHECKF(!g && strstr(err, "'tools'[1]") && strstr(err, "uniqueItems"), "%s: %s",
               kiln_tool_format_name((enum kiln_tool_format)f), g ? "accepted" : err);
        free(g);
    }
    cJSON_Delete(t);
}

int main(void) {
    tools = cJSON_Parse(TOOLS);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) one_format(&CASES[i]);
    /* a template with no call markup: the generic JSON calls */
    CHECK(srv_tool_grammar_format(KILN_TOOLS_CONTENT) == KILN_TOOLS_GENERIC);
    lazy();
    refused();
    cJSON_Delete(tools);
    return tu_finish("test_serve_tool_grammar");
}
