/*
 * fields.c - the one list of request fields each body accepts. A field kiln
 * implements is read by the route's parser; a field OpenAI's or llama-server's
 * API defines that kiln does not implement is accepted only with the value that
 * asks for nothing (null, or the field's "off" value, as clients that send every
 * default do); any other field is an error naming it. Nothing is silently ignored.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <string.h>

/* which bodies a row covers */
#define CMPL (1u << SRV_BODY_COMPLETIONS)
#define CHAT (1u << SRV_BODY_CHAT)
#define LLAMA (1u << SRV_BODY_LLAMA)
#define GEN (CMPL | CHAT | LLAMA)
#define TOK (1u << SRV_BODY_TOKENIZE)
#define DETOK (1u << SRV_BODY_DETOKENIZE)
#define TMPL (1u << SRV_BODY_TEMPLATE)
#define MSG (1u << SRV_BODY_MESSAGE)
#define PART (1u << SRV_BODY_CONTENT_PART)
#define SOPT (1u << SRV_BODY_STREAM_OPTIONS)
#define TCALL (1u << SRV_BODY_TOOL_CALL)
#define FUNC (1u << SRV_BODY_FUNCTION)
#define EMBD (1u << SRV_BODY_EMBEDDINGS)
#define RANK (1u << SRV_BODY_RERANK)
#define ANT (1u << SRV_BODY_MESSAGES)
#define AMSG (1u << SRV_BODY_MESSAGES_MSG)
#define BLOCK (1u << SRV_BODY_BLOCK)
#define ATOOL (1u << SRV_BODY_MESSAGES_TOOL)
#define RESP (1u << SRV_BODY_RESPONSES)
#define RITEM (1u << SRV_BODY_RESP_ITEM)
#define RPART (1u << SRV_BODY_RESP_PART)
#define RTOOL (1u << SRV_BODY_RESP_TOOL)

struct field {
    const char *name;
    unsigned bodies;
    bool implemented;
    const char *off; /* not implemented: the JSON value that asks for nothing (NULL: only null) */
    const char *hint; /* not implemented: what to use instead, or what the field is */
};

#define IMPL(nm, b) {nm, b, true, NULL, NULL}
#define NOT(nm, b, off_json, why) {nm, b, false, off_json, why}

static const struct field fields[] = {
    /* ---- generation: read by srv_parse_gen (params.c) */
    IMPL("model", GEN), IMPL("temperature", GEN), IMPL("top_p", GEN), IMPL("top_k", GEN), IMPL("min_p", GEN),
    IMPL("typical_p", GEN), IMPL("presence_penalty", GEN), IMPL("frequency_penalty", GEN),
    IMPL("repeat_penalty", GEN), IMPL("repeat_last_n", GEN), IMPL("seed", GEN), IMPL("stream", GEN),
    IMPL("stream_options", GEN), IMPL("cache_prompt", GEN), IMPL("stop", GEN), IMPL("logit_bias", GEN),
    IMPL("ignore_eos", GEN), IMPL("n", GEN), IMPL("max_tokens", GEN), IMPL("max_completion_tokens", GEN),
    IMPL("n_predict", GEN),
    IMPL("prompt", CMPL | LLAMA), IMPL("content", LLAMA | TOK), IMPL("logprobs", CMPL | CHAT),
    IMPL("top_logprobs", CHAT), IMPL("n_probs", LLAMA), IMPL("messages", CHAT | TMPL),
    IMPL("include_usage", SOPT),
    /* ---- chats with the model's template (chat.c) */
    IMPL("tools", CHAT | TMPL), IMPL("tool_choice", CHAT | TMPL), IMPL("parallel_tool_calls", CHAT | TMPL),
    IMPL("chat_template_kwargs", CHAT | TMPL), IMPL("add_generation_prompt", CHAT | TMPL),
    IMPL("reasoning_format", CHAT),
    /* ---- structured output: read by srv_parse_grammar (grammar.c) */
    IMPL("response_format", CMPL | CHAT), IMPL("grammar", GEN), IMPL("json_schema", GEN),
    /* ---- the other routes */
    IMPL("add_special", TOK), IMPL("with_pieces", TOK), IMPL("tokens", DETOK),
    /* ---- embeddings and reranking (embed.c) */
    IMPL("model", EMBD | RANK), IMPL("input", EMBD), IMPL("content", EMBD), IMPL("encoding_format", EMBD),
    IMPL("embd_normalize", EMBD), IMPL("query", RANK), IMPL("documents", RANK), IMPL("top_n", RANK),
    IMPL("return_documents", RANK),
    /* ---- inside messages[i] and its content parts (roles.c) */
    IMPL("role", MSG), IMPL("content", MSG), IMPL("type", PART), IMPL("text", PART),
    IMPL("name", MSG), IMPL("tool_calls", MSG), IMPL("tool_call_id", MSG), IMPL("function_call", MSG),
    IMPL("reasoning_content", MSG),
    IMPL("id", TCALL), IMPL("type", TCALL), IMPL("function", TCALL), IMPL("name", FUNC), IMPL("arguments", FUNC),

    /* ---- Anthropic's Messages API: read by srv_anthropic_to_chat (anthropic.c) */
    IMPL("model", ANT), IMPL("messages", ANT), IMPL("system", ANT), IMPL("max_tokens", ANT),
    IMPL("stop_sequences", ANT), IMPL("stream", ANT), IMPL("temperature", ANT), IMPL("top_p", ANT),
    IMPL("top_k", ANT), IMPL("tools", ANT), IMPL("tool_choice", ANT), IMPL("thinking", ANT),
    IMPL("role", AMSG), IMPL("content", AMSG),
    IMPL("type", BLOCK), IMPL("text", BLOCK), IMPL("id", BLOCK), IMPL("name", BLOCK), IMPL("input", BLOCK),
    IMPL("tool_use_id", BLOCK), IMPL("content", BLOCK), IMPL("is_error", BLOCK), IMPL("thinking", BLOCK),
    IMPL("signature", BLOCK), IMPL("data", BLOCK),
    /* a caching breakpoint: kiln keeps every prompt's prefix anyway (the prefix cache) */
    IMPL("cache_control", BLOCK | ATOOL | ANT),
    IMPL("name", ATOOL), IMPL("description", ATOOL), IMPL("input_schema", ATOOL),
    NOT("metadata", ANT, NULL, "request metadata (user ids)"),
    NOT("service_tier", ANT, "\"auto\"", "service tiers"),
    NOT("container", ANT, NULL, "containers"),
    NOT("mcp_servers", ANT, "[]", "MCP servers"),
    NOT("context_management", ANT, NULL, "context management"),
    NOT("source", BLOCK, NULL, "image and document input"),
    NOT("citations", BLOCK, NULL, "citations"),
    NOT("type", ATOOL, "\"custom\"", "Anthropic's server tools"),

    /* ---- OpenAI's Responses API: read by srv_responses_to_chat (responses.c) */
    IMPL("model", RESP), IMPL("input", RESP), IMPL("instructions", RESP), IMPL("max_output_tokens", RESP),
    IMPL("temperature", RESP), IMPL("top_p", RESP), IMPL("stream", RESP), IMPL("tools", RESP),
    IMPL("tool_choice", RESP), IMPL("parallel_tool_calls", RESP),
    IMPL("type", RITEM), IMPL("role", RITEM), IMPL("content", RITEM), IMPL("call_id", RITEM), IMPL("name", RITEM),
    IMPL("arguments", RITEM), IMPL("output", RITEM), IMPL("id", RITEM), IMPL("status", RITEM),
    IMPL("type", RPART), IMPL("text", RPART), IMPL("annotations", RPART),
    IMPL("type", RTOOL), IMPL("name", RTOOL), IMPL("description", RTOOL), IMPL("parameters", RTOOL),
    IMPL("strict", RTOOL),
    NOT("previous_response_id", RESP, NULL, "stored responses (send the whole conversation as 'input')"),
    NOT("store", RESP, "false", "stored responses"),
    NOT("background", RESP, "false", "background responses"),
    NOT("conversation", RESP, NULL, "conversations"),
    NOT("include", RESP, "[]", "extra output data"),
    NOT("metadata", RESP, NULL, "stored metadata"),
    NOT("reasoning", RESP, NULL, "reasoning control"),
    NOT("text", RESP, "{\"format\": {\"type\": \"text\"}}", "structured output here (use /v1/chat/completions)"),
    NOT("truncation", RESP, "\"disabled\"", "truncation"),
    NOT("user", RESP, NULL, "end-user ids"),
    NOT("service_tier", RESP, "\"auto\"", "service tiers"),
    NOT("max_tool_calls", RESP, NULL, "tool call limits"),
    NOT("prompt", RESP, NULL, "stored prompts"),
    NOT("top_logprobs", RESP, "0", "logprobs here"),

    /* ---- OpenAI's fields kiln does not implement */
    NOT("best_of", CMPL, "1", "server-side best-of-n sampling"),
    NOT("echo", CMPL | LLAMA, "false", "echoing the prompt in the answer"),
    NOT("suffix", CMPL, "\"\"", "fill-in-the-middle"),
    NOT("user", GEN | EMBD, NULL, "end-user ids for abuse monitoring"),
    NOT("dimensions", EMBD, NULL, "shortened embeddings (the model's size is the only one)"),
    NOT("truncate", EMBD, "false", "truncating inputs longer than the context"),
    NOT("texts", RANK, NULL, "TEI's rerank shape (use 'documents')"),
    NOT("functions", CHAT, "[]", "function calls"),
    NOT("function_call", CHAT, "\"none\"", "function calls"),
    NOT("response_format", LLAMA, "{\"type\": \"text\"}", "response_format here (use 'grammar' or 'json_schema')"),
    NOT("audio", CHAT, NULL, "audio output"),
    NOT("modalities", CHAT, "[\"text\"]", "output modalities other than text"),
    NOT("metadata", CHAT, NULL, "stored completions"),
    NOT("store", CHAT, "false", "stored completions"),
    NOT("prediction", CHAT, NULL, "predicted outputs"),
    NOT("reasoning_effort", CHAT, NULL, "reasoning control"),
    NOT("service_tier", CHAT, "\"auto\"", "service tiers"),
    NOT("web_search_options", CHAT, NULL, "web search"),
    NOT("n_probs", CMPL | CHAT, "0", "llama-server's n_probs here (use 'logprobs')"),
    NOT("top_logprobs", CMPL | LLAMA, "0", "top_logprobs here (use 'logprobs' on /v1/completions, 'n_probs' "
                                           "on /completion)"),
    /* ---- llama-server's fields kiln does not implement */
    NOT("grammar_lazy", GEN, "false", "lazy grammars"),
    NOT("grammar_triggers", GEN, "[]", "grammar triggers"),
    NOT("preserved_tokens", GEN, "[]", "preserved tokens"),
    NOT("chat_format", GEN, NULL, "chat formats"),
    NOT("chat_parser", GEN, NULL, "chat output parsers"),
    NOT("parse_tool_calls", GEN, "false", "tool calls"),
    NOT("generation_prompt", GEN, NULL, "generation prompts"),
    NOT("continue_final_message", CHAT | TMPL, "false", "continuing the final message"),
    NOT("reasoning_budget_tokens", CHAT, "-1", "reasoning budgets"),
    NOT("thinking_budget_tokens", CHAT, "-1", "reasoning budgets"),
    NOT("reasoning_budget_message", CHAT, NULL, "reasoning budgets"),
    NOT("reasoning_control", CHAT, NULL, "reasoning control"),
    NOT("reasoning_budget_start_tag", GEN, NULL, "reasoning budgets"),
    NOT("reasoning_budget_end_tag", GEN, NULL, "reasoning budgets"),
    NOT("reasoning_budget_end_tags", GEN, NULL, "reasoning budgets"),
    NOT("verbose", GEN, "false", "the __verbose field"),
    NOT("timings_per_token", GEN, "false", "timings in every streamed event"),
    IMPL("return_tokens", LLAMA),
    NOT("return_tokens", CMPL | CHAT, "false", "generated token ids in the answer (/completion has them)"),
    NOT("return_progress", GEN, "false", "prompt progress events"),
    NOT("sse_ping_interval", GEN, "-1", "SSE pings"),
    NOT("n_indent", GEN, "0", "indentation limits"),
    NOT("n_keep", GEN, NULL, "context shifting"),
    NOT("n_discard", GEN, NULL, "context shifting"),
    NOT("n_cmpl", GEN, "1", "several completions per prompt"),
    NOT("n_cache_reuse", GEN, "0", "KV shifting of cached chunks"),
    NOT("t_max_predict_ms", GEN, "-1", "prediction time limits"),
    NOT("t_max_prompt_ms", GEN, "-1", "prompt time limits"),
    NOT("response_fields", GEN, NULL, "response field selection"),
    NOT("id_slot", GEN, "-1", "choosing a slot"),
    NOT("samplers", GEN, NULL, "a custom sampler order"),
    NOT("sampler_seq", GEN, NULL, "a custom sampler order"),
    NOT("top_n_sigma", GEN, "-1", "top-n-sigma sampling"),
    NOT("xtc_probability", GEN, "0", "XTC sampling"),
    NOT("xtc_threshold", GEN, NULL, "XTC sampling"),
    NOT("dynatemp_range", GEN, "0", "dynamic temperature"),
    NOT("dynatemp_exponent", GEN, NULL, "dynamic temperature"),
    NOT("mirostat", GEN, "0", "mirostat sampling"),
    NOT("mirostat_tau", GEN, NULL, "mirostat sampling"),
    NOT("mirostat_eta", GEN, NULL, "mirostat sampling"),
    NOT("dry_multiplier", GEN, "0", "DRY sampling"),
    NOT("dry_base", GEN, NULL, "DRY sampling"),
    NOT("dry_allowed_length", GEN, NULL, "DRY sampling"),
    NOT("dry_penalty_last_n", GEN, NULL, "DRY sampling"),
    NOT("dry_sequence_breakers", GEN, NULL, "DRY sampling"),
    NOT("penalize_nl", GEN, "false", "newline penalties"),
    NOT("min_keep", GEN, "0", "min_keep"),
    NOT("post_sampling_probs", GEN, "false", "probabilities after sampling"),
    NOT("adaptive_target", GEN, NULL, "adaptive sampling"),
    NOT("adaptive_decay", GEN, NULL, "adaptive sampling"),
    NOT("backend_sampling", GEN, "false", "sampling on the backend"),
    NOT("lora", GEN, "[]", "LoRA adapters"),
    NOT("image_data", GEN, "[]", "images"),
    NOT("multimodal_data", GEN, "[]", "multimodal input"),
    NOT("parse_special", TOK, NULL, "parse_special (control-token text is always parsed)"),
    /* ---- messages[i] */
    NOT("refusal", MSG, NULL, "refusals"),
    NOT("audio", MSG, NULL, "audio"),
    NOT("cache_control", PART, NULL, "cache control"),
    NOT("include_obfuscation", SOPT, "false", "stream obfuscation"),
};

static const char *const body_names[] = {
    [SRV_BODY_COMPLETIONS] = "/v1/completions",      [SRV_BODY_CHAT] = "/v1/chat/completions",
    [SRV_BODY_LLAMA] = "/completion",                [SRV_BODY_TOKENIZE] = "/tokenize",
    [SRV_BODY_DETOKENIZE] = "/detokenize",           [SRV_BODY_TEMPLATE] = "/apply-template",
    [SRV_BODY_MESSAGE] = "a message",                [SRV_BODY_CONTENT_PART] = "a content part",
    [SRV_BODY_STREAM_OPTIONS] = "stream_options",    [SRV_BODY_TOOL_CALL] = "a tool call",
    [SRV_BODY_FUNCTION] = "a function call",         [SRV_BODY_EMBEDDINGS] = "/v1/embeddings",
    [SRV_BODY_RERANK] = "/v1/rerank",                [SRV_BODY_MESSAGES] = "/v1/messages",
    [SRV_BODY_MESSAGES_MSG] = "a message",           [SRV_BODY_BLOCK] = "a content block",
    [SRV_BODY_MESSAGES_TOOL] = "a tool",             [SRV_BODY_RESPONSES] = "/v1/responses",
    [SRV_BODY_RESP_ITEM] = "an input item",          [SRV_BODY_RESP_PART] = "a content part",
    [SRV_BODY_RESP_TOOL] = "a tool",
};

/* Edit distance of two short names, capped: how a misspelling finds its field. */
static int distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The implemented field of this body nearest to name (at most 2 edits), or NULL. */
static const char *nearest(const char *name, unsigned bit) {
    const char *best = NULL;
    int bd = 3;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!fields[i].implemented || !(fields[i].bodies & bit)) continue;
        int d = distance(name, fields[i].name);
        if (d < bd) bd = d, best = fields[i].name;
    }
    return best;
}

static bool is_off(const cJSON *v, const char *off) {
    if (cJSON_IsNull(v)) return true;
    if (!off) return false;
    cJSON *want = cJSON_Parse(off);
    bool same = want && cJSON_Compare(v, want, true);
    cJSON_Delete(want);
    return same;
}

bool srv_check_fields(const cJSON *obj, enum srv_body body, const char *where, char *err, size_t errlen) {
    const unsigned bit = 1u << body;
    const char *place = where ? where : body_names[body];
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *name = it->string ? it->string : "";
        const struct field *hit = NULL;
        bool elsewhere = false;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0] && !hit; i++) {
            if (strcmp(fields[i].name, name)) continue;
            if (fields[i].bodies & bit) hit = &fields[i];
            else elsewhere = true;
        }
        if (hit && hit->implemented) continue;
        if (hit) {
            if (is_off(it, hit->off)) continue;
            snprintf(err, errlen, "'%.64s' is not supported: kiln does not implement %s on %s", name, hit->hint,
                     place);
            return false;
        }
        const char *near = nearest(name, bit);
        if (near)
            snprintf(err, errlen, "unrecognized field '%.64s' in %s (did you mean '%s'?)", name, place, near);
        else if (elsewhere)
            snprintf(err, errlen, "'%.64s' is not a field of %s", name, place);
        else
            snprintf(err, errlen, "unrecognized field '%.64s' in %s", name, place);
        return false;
    }
    return true;
}

_Static_assert((int)SRV_BODY_COMPLETIONS == (int)SRV_API_COMPLETIONS && (int)SRV_BODY_CHAT == (int)SRV_API_CHAT &&
                   (int)SRV_BODY_LLAMA == (int)SRV_API_LLAMA,
               "generate() passes its srv_api as the srv_body");
