/*
 * test_serve_roles.c - the chat roles apps send, into the native templates
 * (src/serve/roles.c): developer as system, an assistant's tool calls (with
 * null content, or the older function_call) after its content, tool and
 * function results in the family's "tool" role where it writes one and as a
 * wrapped user turn where it would drop it, and every misplaced or
 * oversized field a 400 naming it. Expected texts are written out by hand from
 * each family's form (chat.c's table).
 */
#include "serve_impl.h"
#include "testutil.h"

static char *render(enum kiln_chat_template t, const char *json, char *err, size_t errlen) {
    cJSON *m = cJSON_Parse(json);
    err[0] = 0;
    char *out = srv_render_native(t, m, true, err, errlen);
    cJSON_Delete(m);
    return out;
}

static void expect(const char *label, enum kiln_chat_template t, const char *json, const char *want) {
    char err[512];
    char *got = render(t, json, err, sizeof err);
    CHECKF(got && !strcmp(got, want), "%s (%s):\n  got  [%s]\n  want [%s]", label, kiln_chat_template_name(t),
           got ? got : err, want);
    free(got);
}

static void refused(const char *label, const char *json, const char *word) {
    char err[512];
    char *got = render(KILN_CHAT_CHATML, json, err, sizeof err);
    CHECKF(!got && strstr(err, word), "%s: want an error naming %s, got [%s] [%s]", label, word, got ? got : "",
           err);
    free(got);
}

#define CALL "{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", " \
             "\"arguments\": \"{\\\"city\\\": \\\"Ur\\\"}\"}}"

int main(void) {
    expect("developer is system", KILN_CHAT_CHATML,
           "[{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]",
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect("a call with null content, then its result", KILN_CHAT_CHATML,
           "[{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": null, "
           "\"tool_calls\": [" CALL "]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"sunny\"}]",
           "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
           "\"get_weather\", \"arguments\": {\"city\":\"Ur\"}}\n</tool_call><|im_end|>\n<|im_start|>tool\n"
           "sunny<|im_end|>\n<|im_start|>assistant\n");
    expect("content, then the call", KILN_CHAT_CHATML,
           "[{\"role\": \"assistant\", \"content\": \"Looking.\", \"function_call\": {\"name\": \"f\", "
           "\"arguments\": {\"x\": 1}}}, {\"role\": \"function\", \"name\": \"f\", \"content\": \"42\"}]",
           "<|im_start|>assistant\nLooking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\":1}}\n"
           "</tool_call><|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n");
    expect("a family that drops a tool role gets a wrapped user turn", KILN_CHAT_VICUNA,
           "[{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"tool\", \"content\": \"sunny\"}]",
           "USER: Weather?\nUSER: <tool_response>\nsunny\n</tool_response>\nASSISTANT:");
    expect("Llama 3's call form", KILN_CHAT_LLAMA3,
           "[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [" CALL "]}]",
           "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
           "{\"city\":\"Ur\"}}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");

    refused("name on a user message", "[{\"role\": \"user\", \"content\": \"x\", \"name\": \"bob\"}]", "'name'");
    refused("tool_calls on a tool message",
            "[{\"role\": \"tool\", \"content\": \"x\", \"tool_calls\": [" CALL "]}]", "'tool_calls'");
    refused("an assistant with neither content nor calls", "[{\"role\": \"assistant\", \"content\": null}]",
            "content");
    refused("arguments that are not JSON",
            "[{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
            "\"arguments\": \"{x\"}}]}]",
            "arguments");
    refused("a function name with a space",
            "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"a b\", \"arguments\": "
            "\"{}\"}}]}]",
            "name");
    refused("a call type other than function",
            "[{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"code\", \"function\": {\"name\": \"f\", "
            "\"arguments\": \"{}\"}}]}]",
            "type");
    refused("an unknown field in a call",
            "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{}\", "
            "\"strict\": true}}]}]",
            "strict");
    refused("both tool_calls and function_call",
            "[{\"role\": \"assistant\", \"tool_calls\": [], \"function_call\": {\"name\": \"f\", \"arguments\": "
            "\"{}\"}}]",
            "both");
    refused("an unknown role", "[{\"role\": \"wizard\", \"content\": \"x\"}]", "developer");
    return tu_finish("test_serve_roles");
}
