/*
 * fuzz_jinja.c - libFuzzer harness for the Jinja interpreter: any input is a
 * template; it either fails to parse with a message naming a line, or parses
 * and renders (with a conversation, tools and the limits below) to text or to
 * an error with a message. Nothing else may happen: no crash, no leak, no
 * hang past the limits. The same input's last line, when it starts with '{',
 * is also tried as the render context (a JSON object).
 * Build: cmake -DCMAKE_C_COMPILER=clang -DKILN_FUZZ=ON -DKILN_SANITIZE=ON; run: scripts/fuzz.sh SECONDS jinja.
 * tests/test_jinja_fuzz.c runs it briefly in the test suite with a built-in mutator.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static const char CONTEXT[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true, \"enable_thinking\": true,"
    " \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi "
    "\\u00e9\"}, {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\", \"tool_calls\": "
    "[{\"id\": \"call00001\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
    "{\"location\": \"Paris\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call00001\", \"content\": \"18 C\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\"}}, \"required\":"
    " [\"location\"]}}}]}";

static volatile size_t sink;

static void check_error(const char *err) {
    /* every failure says something, and a template failure names the template */
    if (!err[0] || !strstr(err, "template")) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    struct kiln_jinja_opts o = kiln_jinja_default_opts();
    o.now = 1741944413;
    o.limits.max_steps = 200000;
    o.limits.max_memory = 32u << 20;
    o.limits.max_output = 1u << 20;
    o.limits.max_depth = 300;
    struct kiln_jinja *t = kiln_jinja_parse((const char *)data, size, err, sizeof err);
    if (!t) {
        check_error(err);
        return 0;
    }
    size_t n = 0;
    char *out = kiln_jinja_render(t, CONTEXT, sizeof CONTEXT - 1, &o, &n, err, sizeof err);
    if (out) {
        if (strlen(out) > n) abort();
        sink += n;
        free(out);
    } else {
        check_error(err);
    }
    /* the last line as a context of its own */
    const uint8_t *nl = size ? memchr(data, '\n', size) : NULL;
    const uint8_t *last = data;
    while (nl) {
        last = nl + 1;
        nl = memchr(last, '\n', size - (size_t)(last - data));
    }
    size_t ln = size - (size_t)(last - data);
    if (ln && last[0] == '{') {
        out = kiln_jinja_render(t, (const char *)last, ln, &o, &n, err, sizeof err);
        if (out)
            free(out);
        else if (!err[0])
            abort();
    }
    kiln_jinja_free(t);
    return 0;
}
