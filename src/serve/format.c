/*
 * format.c - response bodies in the shapes clients parse: OpenAI's completion,
 * chat completion and their stream chunks, llama-server's /completion, with
 * usage, logprobs and llama-server's timings. Text is valid UTF-8 on the wire
 * (a token may be half a character: its bytes are given separately).
 */
#include "serve_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool srv_bytes_append(char **buf, size_t *len, size_t *cap, const void *data, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *len + n + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

/* s[0, len) with every invalid UTF-8 sequence replaced by U+FFFD (malloc'd). */
static char *utf8_clean(const char *s, size_t len) {
    char *out = malloc(len * 3 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = need > 0 && i + need <= len && !(need == 2 && c < 0xC2);
        for (size_t k = 1; ok && k < need; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && c == 0) ok = false; /* cJSON strings end at NUL */
        if (ok) {
            memcpy(o, s + i, need);
            o += need;
            i += need;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return out;
}

void srv_add_text(cJSON *o, const char *key, const char *s, size_t len) {
    char *clean = utf8_clean(s, len);
    cJSON_AddStringToObject(o, key, clean ? clean : "");
    free(clean);
}

static cJSON *bytes_array(const char *s, size_t len) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < len; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

/* ------------------------------------------------------------------ usage and timings */

cJSON *srv_format_usage(const struct srv_task *t) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", t->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", t->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", t->n_prompt + t->n_gen);
    /* the prompt tokens the cache already held (not computed again) */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", t->n_cached);
    return u;
}

cJSON *srv_format_timings(const struct srv_task *t) {
    cJSON *o = cJSON_CreateObject();
    int32_t prompt_n = t->n_prompt - t->n_cached;
    double prompt_ms = t->t_first > t->t_start ? (t->t_first - t->t_start) * 1e3 : 0;
    double pred_ms = t->t_end > t->t_first ? (t->t_end - t->t_first) * 1e3 : 0;
    cJSON_AddNumberToObject(o, "cache_n", t->n_cached);
    cJSON_AddNumberToObject(o, "prompt_n", prompt_n);
    cJSON_AddNumberToObject(o, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(o, "prompt_per_token_ms", prompt_n ? prompt_ms / prompt_n : 0);
    cJSON_AddNumberToObject(o, "prompt_per_second", prompt_ms > 0 ? prompt_n * 1e3 / prompt_ms : 0);
    cJSON_AddNumberToObject(o, "predicted_n", t->n_gen);
    cJSON_AddNumberToObject(o, "predicted_ms", pred_ms);
    cJSON_AddNumberToObject(o, "predicted_per_token_ms", t->n_gen ? pred_ms / t->n_gen : 0);
    cJSON_AddNumberToObject(o, "predicted_per_second", pred_ms > 0 ? t->n_gen * 1e3 / pred_ms : 0);
    /* kiln's: how long it waited before its prompt first went into a batch, in time and in the
     * engine's decode steps (the measure of fairness between requests) */
    cJSON_AddNumberToObject(o, "queue_ms", t->t_start > t->t_queued ? (t->t_start - t->t_queued) * 1e3 : 0);
    cJSON_AddNumberToObject(o, "queue_steps", t->queue_steps > 0 ? t->queue_steps : 0);
    return o;
}

/* ------------------------------------------------------------------ logprobs */

static void piece_of(struct kiln_server *s, int32_t id, char *buf, size_t size, size_t *len) {
    int64_t n = kiln_token_to_piece(s->vocab, id, buf, size, false);
    *len = n > 0 ? (size_t)n : 0;
}

/* OpenAI chat's {"token", "logprob", "bytes"} (+ "id" for llama-server's shape). */
static cJSON *tok_entry(const char *piece, size_t len, float logprob, int32_t id, bool with_id) {
    cJSON *o = cJSON_CreateObject();
    if (with_id) cJSON_AddNumberToObject(o, "id", id);
    srv_add_text(o, "token", piece, len);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON_AddItemToObject(o, "bytes", bytes_array(piece, len));
    return o;
}

/* toks[tok0, tok1) as chat's logprobs.content or llama-server's completion_probabilities. */
static cJSON *logprobs_list(struct kiln_server *s, const struct srv_task *t, int32_t tok0, int32_t tok1,
                            bool with_id) {
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = tok0; arr && i < tok1; i++) {
        const struct srv_tok *k = &t->toks[i];
        cJSON *e = tok_entry(t->text + k->off, k->len, k->logprob, k->id, with_id);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int j = 0; j < k->n_top; j++) {
            char buf[256];
            size_t len;
            piece_of(s, k->top[j].id, buf, sizeof buf, &len);
            cJSON_AddItemToArray(top, tok_entry(buf, len, k->top[j].logprob, k->top[j].id, with_id));
        }
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

/* Legacy completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static cJSON *logprobs_legacy(struct kiln_server *s, const struct srv_task *t, int32_t tok0, int32_t tok1) {
    cJSON *o = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (int32_t i = tok0; o && i < tok1; i++) {
        const struct srv_tok *k = &t->toks[i];
        char *clean = utf8_clean(t->text + k->off, k->len);
        cJSON_AddItemToArray(tokens, cJSON_CreateString(clean ? clean : ""));
        free(clean);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(k->logprob));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(k->off));
        cJSON *top = cJSON_CreateObject();
        for (int j = 0; j < k->n_top; j++) {
            char buf[256];
            size_t len;
            piece_of(s, k->top[j].id, buf, sizeof buf, &len);
            char *c = utf8_clean(buf, len);
            if (c && !cJSON_GetObjectItemCaseSensitive(top, c)) cJSON_AddNumberToObject(top, c, k->top[j].logprob);
            free(c);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

static void add_logprobs(struct kiln_server *s, cJSON *choice, const struct srv_task *t, int32_t tok0,
                         int32_t tok1) {
    if (!t->want_logprobs) {
        cJSON_AddNullToObject(choice, "logprobs");
    } else if (t->api == SRV_API_CHAT) {
        cJSON *lp = cJSON_AddObjectToObject(choice, "logprobs");
        cJSON_AddItemToObject(lp, "content", logprobs_list(s, t, tok0, tok1, false));
    } else {
        cJSON_AddItemToObject(choice, "logprobs", logprobs_legacy(s, t, tok0, tok1));
    }
}

/* ------------------------------------------------------------------ bodies */

static const char *stop_type(const struct srv_task *t) {
    if (!t->finish) return "none";
    if (!strcmp(t->finish, "length")) return "limit";
    return t->stop_word >= 0 ? "word" : "eos";
}

static cJSON *openai_head(struct kiln_server *s, const struct srv_task *t, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", t->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)t->created);
    cJSON_AddStringToObject(o, "model", s->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "kiln");
    return o;
}

/* the prompt's tokens as text, control tokens as their markup (malloc'd, NULL when it cannot) */
static char *detokenize_prompt(struct kiln_server *s, const struct srv_task *t) {
    int64_t n = kiln_detokenize(s->vocab, t->prompt, t->n_prompt, NULL, 0, false, true);
    if (n == KILN_ERR_INVALID) return NULL;
    size_t size = (size_t)(n < 0 ? -n : n) + 1;
    char *text = malloc(size);
    if (text && (n = kiln_detokenize(s->vocab, t->prompt, t->n_prompt, text, size, false, true)) >= 0) {
        text[n] = 0;
        return text;
    }
    free(text);
    return NULL;
}

/* llama-server's generation_settings: what the request's sampling was (null: a setting kiln does not
 * have, left off) */
static cJSON *generation_settings(struct kiln_server *s, const struct srv_task *t) {
    cJSON *g = cJSON_CreateObject();
    const struct kiln_sampling_params *p = &t->sp;
    cJSON_AddNumberToObject(g, "n_predict", t->n_predict);
    cJSON_AddNumberToObject(g, "seed", p->seed);
    cJSON_AddNumberToObject(g, "temperature", p->temp);
    cJSON_AddNumberToObject(g, "top_k", p->top_k);
    cJSON_AddNumberToObject(g, "top_p", p->top_p);
    cJSON_AddNumberToObject(g, "min_p", p->min_p);
    cJSON_AddNumberToObject(g, "typical_p", p->typical_p);
    cJSON_AddNumberToObject(g, "repeat_last_n", p->penalty_last_n);
    cJSON_AddNumberToObject(g, "repeat_penalty", p->penalty_repeat);
    cJSON_AddNumberToObject(g, "presence_penalty", p->penalty_present);
    cJSON_AddNumberToObject(g, "frequency_penalty", p->penalty_freq);
    cJSON_AddBoolToObject(g, "ignore_eos", t->ignore_eos);
    cJSON_AddBoolToObject(g, "stream", t->stream);
    cJSON_AddNumberToObject(g, "n_probs", t->n_probs);
    cJSON *stop = cJSON_AddArrayToObject(g, "stop");
    for (int i = 0; i < t->n_stop; i++) cJSON_AddItemToArray(stop, cJSON_CreateString(t->stop[i]));
    cJSON *lb = cJSON_AddArrayToObject(g, "logit_bias");
    for (size_t i = 0; i < t->n_bias; i++) { /* as llama-server: -inf (a ban) is null */
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "token", t->bias[i].token);
        if (isinf(t->bias[i].bias)) cJSON_AddNullToObject(e, "bias");
        else cJSON_AddNumberToObject(e, "bias", t->bias[i].bias);
        cJSON_AddItemToArray(lb, e);
    }
    /* samplers llama-server has and kiln does not: not used */
    cJSON_AddNullToObject(g, "adaptive_target");
    cJSON_AddNullToObject(g, "adaptive_decay");
    (void)s;
    return g;
}

static cJSON *llama_body(struct kiln_server *s, const struct srv_task *t, size_t from, size_t to, int32_t tok0,
                         int32_t tok1, bool final) {
    cJSON *o = cJSON_CreateObject();
    srv_add_text(o, "content", t->text ? t->text + from : "", to - from);
    cJSON_AddNumberToObject(o, "index", t->index);
    /* the generated ids: each streamed chunk's; in a whole answer with return_tokens */
    cJSON *ids = cJSON_AddArrayToObject(o, "tokens");
    for (int32_t i = tok0; (!final || t->return_tokens) && i < tok1; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(t->toks[i].id));
    cJSON_AddNumberToObject(o, "id_slot", t->slot);
    cJSON_AddBoolToObject(o, "stop", final);
    cJSON_AddStringToObject(o, "model", s->model_id);
    cJSON_AddNumberToObject(o, "tokens_predicted", t->n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", t->n_prompt);
    if (t->n_probs > 0) cJSON_AddItemToObject(o, "completion_probabilities", logprobs_list(s, t, tok0, tok1, true));
    if (final) {
        cJSON_AddNumberToObject(o, "tokens_cached", t->n_cached);
        cJSON_AddStringToObject(o, "stop_type", stop_type(t));
        cJSON_AddStringToObject(o, "stopping_word", t->stop_word >= 0 ? t->stop[t->stop_word] : "");
        cJSON_AddBoolToObject(o, "truncated", false);
        cJSON_AddBoolToObject(o, "has_new_line", t->text && memchr(t->text, '\n', t->len) != NULL);
        cJSON_AddItemToObject(o, "generation_settings", generation_settings(s, t));
        char *prompt = detokenize_prompt(s, t);
        if (prompt) cJSON_AddStringToObject(o, "prompt", prompt);
        free(prompt);
        cJSON_AddItemToObject(o, "timings", srv_format_timings(t));
    }
    return o;
}

cJSON *srv_format_final(struct kiln_server *s, struct srv_task *t) {
    if (t->wire == SRV_WIRE_ANTHROPIC) return srv_anthropic_final(s, t);
    if (t->wire == SRV_WIRE_RESPONSES) return srv_responses_final(s, t);
    if (t->api == SRV_API_LLAMA) return llama_body(s, t, 0, t->len, 0, t->n_toks, true);
    bool chat = t->api == SRV_API_CHAT;
    cJSON *o = openai_head(s, t, chat ? "chat.completion" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", t->index);
    const char *finish = t->finish ? t->finish : "stop";
    if (chat) {
        cJSON_AddItemToObject(choice, "message", srv_chat_message(s, t, &finish));
    } else {
        srv_add_text(choice, "text", t->text ? t->text : "", t->len);
    }
    add_logprobs(s, choice, t, 0, t->n_toks);
    cJSON_AddStringToObject(choice, "finish_reason", finish);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), choice);
    cJSON_AddItemToObject(o, "usage", srv_format_usage(t));
    cJSON_AddItemToObject(o, "timings", srv_format_timings(t));
    return o;
}

cJSON *srv_format_chunk(struct kiln_server *s, struct srv_task *t, size_t from, size_t to, int32_t tok0,
                        int32_t tok1, bool final) {
    if (t->api == SRV_API_LLAMA) return llama_body(s, t, from, to, tok0, tok1, final);
    bool chat = t->api == SRV_API_CHAT;
    cJSON *o = openai_head(s, t, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", t->index);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(choice, "delta");
        if (to > from || !final) srv_add_text(d, "content", t->text ? t->text + from : "", to - from);
    } else {
        srv_add_text(choice, "text", t->text ? t->text + from : "", to - from);
    }
    add_logprobs(s, choice, t, tok0, tok1);
    if (final) cJSON_AddStringToObject(choice, "finish_reason", t->finish ? t->finish : "stop");
    else cJSON_AddNullToObject(choice, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), choice);
    if (final) cJSON_AddItemToObject(o, "timings", srv_format_timings(t));
    return o;
}
