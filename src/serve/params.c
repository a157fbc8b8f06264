/*
 * params.c - request bodies into tasks: every field is type- and range-checked
 * and a bad one is named in the error (the client gets a 400), prompts become
 * token ids (text tokenized, ids checked against the vocabulary). Chat
 * messages are rendered in chat.c.
 */
#include "serve_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *srv_parse_body(struct srv_req *r, char *err, size_t errlen) {
    return srv_parse_json(r->body, r->body_len, err, errlen);
}

/* ------------------------------------------------------------------ typed fields */

/* A number field in [lo, hi]: absent or null leaves *out; false with a message otherwise. */
static bool get_num(const cJSON *o, const char *key, double lo, double hi, double *out, char *err, size_t errlen) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) return true;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo || it->valuedouble > hi) {
        snprintf(err, errlen, "'%s' must be a number in [%g, %g]", key, lo, hi);
        return false;
    }
    *out = it->valuedouble;
    return true;
}

static bool get_f32(const cJSON *o, const char *key, double lo, double hi, float *out, char *err, size_t errlen) {
    double d = *out;
    if (!get_num(o, key, lo, hi, &d, err, errlen)) return false;
    *out = (float)d;
    return true;
}

static bool get_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, char *err, size_t errlen) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) return true;
    double d = it->valuedouble;
    if (!cJSON_IsNumber(it) || d != floor(d) || d < lo || d > hi) {
        snprintf(err, errlen, "'%s' must be an integer in [%.0f, %.0f]", key, lo, hi);
        return false;
    }
    *out = (int64_t)d;
    return true;
}

static bool get_bool(const cJSON *o, const char *key, bool *out, char *err, size_t errlen) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) return true;
    if (!cJSON_IsBool(it)) {
        snprintf(err, errlen, "'%s' must be true or false", key);
        return false;
    }
    *out = cJSON_IsTrue(it);
    return true;
}

/* ------------------------------------------------------------------ prompts */

int32_t srv_tokenize(const struct kiln_vocab *v, const char *text, size_t len, bool add_special, int32_t **ids) {
    if (len > (size_t)INT32_MAX - 8) return -1;
    int64_t cap = (int64_t)len + 8;
    int32_t *out = malloc(sizeof *out * (size_t)cap);
    if (!out) return -1;
    int64_t n = kiln_tokenize(v, text, len, out, cap, add_special, true);
    if (n < 0 && n != KILN_ERR_INVALID && -n <= INT32_MAX) {
        cap = -n;
        int32_t *more = realloc(out, sizeof *out * (size_t)cap);
        if (!more) {
            free(out);
            return -1;
        }
        out = more;
        n = kiln_tokenize(v, text, len, out, cap, add_special, true);
    }
    if (n < 0 || n > INT32_MAX) {
        free(out);
        return -1;
    }
    *ids = out;
    return (int32_t)n;
}

/* A text over a slot's context is refused with bounded work, whatever its length: with
 * SPM and BPE vocabularies a token covers at most max_piece bytes (one more for SPM's
 * leading space), so a longer text cannot fit; below that, prefixes cut before a space
 * and doubling from 4 bytes a token are tokenized first, and one already over the
 * context (with slack for the cut) ends it. */
int32_t srv_tokenize_bounded(struct kiln_server *s, const char *field, const char *text, size_t len,
                             bool add_special, int64_t n_ctx, int32_t **ids, char *err, size_t errlen) {
    const enum kiln_vocab_type vt = kiln_vocab_type(s->vocab);
    if (n_ctx > 0 && (vt == KILN_VOCAB_SPM || vt == KILN_VOCAB_BPE)) {
        const int64_t most = (n_ctx + 1) * (int64_t)s->max_piece + 1;
        if ((int64_t)len > most) {
            snprintf(err, errlen,
                     "'%s' is %zu bytes: more than a context of %lld tokens holds (at most %lld bytes with this "
                     "vocabulary)",
                     field, len, (long long)n_ctx, (long long)most);
            return -2 - (int32_t)(n_ctx + 1); /* over the context: at least n_ctx + 1 tokens */
        }
        for (size_t probe = (size_t)n_ctx * 4; probe < len; probe *= 2) {
            size_t cut = probe;
            while (cut > probe / 2 && text[cut] != ' ') cut--;
            if (text[cut] != ' ') continue; /* no word boundary near: only the whole text tells */
            int32_t *pre = NULL;
            int32_t n = srv_tokenize(s->vocab, text, cut, add_special, &pre);
            free(pre);
            if (n > n_ctx + 16) {
                snprintf(err, errlen, "'%s' is longer than a context of %lld tokens: its first %zu bytes are %d tokens",
                         field, (long long)n_ctx, cut, n);
                return -2 - n;
            }
        }
    }
    int32_t n = srv_tokenize(s->vocab, text, len, add_special, ids);
    if (n < 0) snprintf(err, errlen, "'%s' cannot be tokenized", field);
    return n;
}

int32_t srv_tokenize_prompt(struct kiln_server *s, const char *field, const char *text, size_t len,
                            bool add_special, int32_t **ids, char *err, size_t errlen) {
    return srv_tokenize_bounded(s, field, text, len, add_special, s->n_ctx_slot, ids, err, errlen);
}

bool srv_parse_ids(struct kiln_server *s, const cJSON *arr, const char *field, int32_t **ids, int32_t *n, char *err,
                   size_t errlen) {
    int size = cJSON_GetArraySize(arr);
    int32_t n_vocab = kiln_vocab_n_tokens(s->vocab);
    int32_t *out = malloc(sizeof *out * (size_t)(size > 0 ? size : 1));
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || d != floor(d) || d < 0 || d >= n_vocab) {
            snprintf(err, errlen, "'%s'[%d] must be a token id in [0, %d]", field, i, n_vocab - 1);
            free(out);
            return false;
        }
        out[i++] = (int32_t)d;
    }
    *ids = out;
    *n = i;
    return true;
}

static bool is_id_array(const cJSON *a) {
    return cJSON_IsArray(a) && cJSON_GetArraySize(a) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(a, 0));
}

int srv_prompt_count(const cJSON *prompt) {
    return cJSON_IsArray(prompt) && !is_id_array(prompt) ? cJSON_GetArraySize(prompt) : 1;
}

bool srv_parse_prompt(struct kiln_server *s, const cJSON *prompt, int i, struct srv_task *t, char *err,
                      size_t errlen) {
    char field[32] = "prompt"; /* what messages name: prompt, or prompt[i] of a list */
    if (cJSON_IsArray(prompt) && !is_id_array(prompt)) {
        if (cJSON_GetArraySize(prompt) == 0) {
            snprintf(err, errlen, "'prompt' is an empty list");
            return false;
        }
        prompt = cJSON_GetArrayItem(prompt, i);
        snprintf(field, sizeof field, "prompt[%d]", i);
        if (!cJSON_IsString(prompt) && !is_id_array(prompt)) {
            snprintf(err, errlen, "'%s' must be a string or a non-empty array of token ids", field);
            return false;
        }
    }
    if (cJSON_IsString(prompt)) {
        int32_t n = srv_tokenize_prompt(s, field, prompt->valuestring, strlen(prompt->valuestring),
                                        kiln_vocab_add_bos(s->vocab), &t->prompt, err, errlen);
        if (n < -1) t->n_over = -2 - n;
        if (n < 0) return false;
        t->n_prompt = n;
    } else if (is_id_array(prompt)) {
        if (!srv_parse_ids(s, prompt, field, &t->prompt, &t->n_prompt, err, errlen)) return false;
    } else {
        snprintf(err, errlen, "'prompt' must be a string, an array of token ids, or a list of either");
        return false;
    }
    if (t->n_prompt == 0) {
        snprintf(err, errlen, "'%s' is empty", field);
        return false;
    }
    t->index = i;
    return true;
}

/* ------------------------------------------------------------------ generation fields */

static bool parse_stop(const cJSON *body, struct srv_task *t, char *err, size_t errlen) {
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(body, "stop");
    if (!stop || cJSON_IsNull(stop)) return true;
    if (cJSON_IsString(stop)) {
        if (!*stop->valuestring) return true;
        if (strlen(stop->valuestring) > SRV_MAX_STOP_LEN) {
            snprintf(err, errlen, "'stop' must be a string of at most %d bytes", SRV_MAX_STOP_LEN);
            return false;
        }
        return (t->stop[t->n_stop++] = strdup(stop->valuestring)) != NULL;
    }
    if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SRV_MAX_STOP) {
        snprintf(err, errlen, "'stop' must be a string or an array of at most %d strings", SRV_MAX_STOP);
        return false;
    }
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, stop) {
        if (!cJSON_IsString(it) || !*it->valuestring || strlen(it->valuestring) > SRV_MAX_STOP_LEN) {
            snprintf(err, errlen, "'stop'[%d] must be a non-empty string of at most %d bytes", i, SRV_MAX_STOP_LEN);
            return false;
        }
        if (!(t->stop[t->n_stop++] = strdup(it->valuestring))) return false;
        i++;
    }
    return true;
}

#define MAX_BIAS 300 /* OpenAI's limit */

/* OpenAI's {"token id": bias} or llama-server's [[id, bias], ...]; bias in [-100, 100] */
static bool parse_logit_bias(struct kiln_server *s, const cJSON *body, struct kiln_logit_bias *out, size_t *n,
                             char *err, size_t errlen) {
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(body, "logit_bias");
    if (!lb || cJSON_IsNull(lb)) return true;
    if ((!cJSON_IsObject(lb) && !cJSON_IsArray(lb)) || cJSON_GetArraySize(lb) > MAX_BIAS) {
        snprintf(err, errlen, "'logit_bias' must map at most %d token ids to biases", MAX_BIAS);
        return false;
    }
    const int32_t n_vocab = kiln_vocab_n_tokens(s->vocab);
    const cJSON *it;
    cJSON_ArrayForEach(it, lb) {
        double id = -1;
        const cJSON *v = it;
        if (cJSON_IsArray(lb)) {
            const cJSON *a = cJSON_GetArrayItem(it, 0);
            v = cJSON_GetArrayItem(it, 1);
            if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsNumber(a)) id = a->valuedouble;
        } else {
            char *end;
            long l = strtol(it->string, &end, 10);
            if (*it->string && !*end) id = (double)l;
        }
        if (id != floor(id) || id < 0 || id >= n_vocab || !cJSON_IsNumber(v) || !(v->valuedouble >= -100) ||
            !(v->valuedouble <= 100)) {
            snprintf(err, errlen, "'logit_bias' entries must be a token id in [0, %d] with a bias in [-100, 100]",
                     n_vocab - 1);
            return false;
        }
        out[(*n)++] = (struct kiln_logit_bias){(int32_t)id, (float)v->valuedouble};
    }
    return true;
}

bool srv_parse_gen(struct kiln_server *s, const cJSON *body, enum srv_api api, struct srv_task *t, char *err,
                   size_t errlen) {
    t->api = api;
    struct kiln_sampling_params sp = s->p.sampling; /* the server's defaults (--temp, --seed, ...) */
    int64_t n = 1, n_predict = s->p.n_predict, seed = INT64_MIN, top_k = sp.top_k, last_n = sp.penalty_last_n, logprobs = 0;
    const int32_t n_ctx = s->n_ctx_slot;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(body, "model");
    if (model && ((!cJSON_IsString(model) && !cJSON_IsNull(model)) ||
                  (cJSON_IsString(model) && strlen(model->valuestring) > SRV_MAX_MODEL_LEN))) {
        snprintf(err, errlen, "'model' must be a string of at most %d bytes", SRV_MAX_MODEL_LEN);
        return false;
    }
    if (!get_int(body, "n", 1, 1e9, &n, err, errlen)) return false;
    if (n != 1) {
        snprintf(err, errlen, "'n' must be 1: one choice per request");
        return false;
    }
    /* the token limit under any of its names, as llama-server reads them (n_predict first);
     * -1 (until the context is full) is llama-server's, OpenAI's names start at 0 there */
    const double lo = api == SRV_API_LLAMA ? -1 : 0;
    if (!get_int(body, "max_tokens", lo, 1 << 24, &n_predict, err, errlen) ||
        !get_int(body, "max_completion_tokens", lo, 1 << 24, &n_predict, err, errlen) ||
        !get_int(body, "n_predict", -1, 1 << 24, &n_predict, err, errlen))
        return false;
    if (!get_f32(body, "temperature", 0, 100, &sp.temp, err, errlen) ||
        !get_f32(body, "top_p", 1e-6, 1, &sp.top_p, err, errlen) ||
        !get_int(body, "top_k", 0, 1 << 30, &top_k, err, errlen) ||
        !get_f32(body, "min_p", 0, 1, &sp.min_p, err, errlen) ||
        !get_f32(body, "typical_p", 1e-6, 1, &sp.typical_p, err, errlen) ||
        !get_f32(body, "presence_penalty", -2, 2, &sp.penalty_present, err, errlen) ||
        !get_f32(body, "frequency_penalty", -2, 2, &sp.penalty_freq, err, errlen) ||
        !get_f32(body, "repeat_penalty", 1e-3, 100, &sp.penalty_repeat, err, errlen) ||
        !get_int(body, "repeat_last_n", -1, 1 << 20, &last_n, err, errlen) ||
        !get_int(body, "seed", -9.2e18, 9.2e18, &seed, err, errlen))
        return false;
    sp.top_k = (int32_t)top_k;
    sp.penalty_last_n = (int32_t)(last_n < 0 ? n_ctx : last_n);
    if (seed != INT64_MIN) sp.seed = seed < 0 ? KILN_SEED_RANDOM : (uint32_t)(seed & 0xFFFFFFFF);
    if (!get_bool(body, "stream", &t->stream, err, errlen) ||
        !get_bool(body, "cache_prompt", &t->cache_prompt, err, errlen))
        return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(body, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) {
            snprintf(err, errlen, "'stream_options' must be an object");
            return false;
        }
        if (!srv_check_fields(so, SRV_BODY_STREAM_OPTIONS, "'stream_options'", err, errlen) ||
            !get_bool(so, "include_usage", &t->include_usage, err, errlen))
            return false;
    }
    /* logprobs: an integer count (completions), a flag plus top_logprobs (chat), n_probs (llama) */
    if (api == SRV_API_COMPLETIONS) {
        if (!get_int(body, "logprobs", 0, SRV_MAX_TOP, &logprobs, err, errlen)) return false;
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(body, "logprobs");
        t->want_logprobs = lp && cJSON_IsNumber(lp);
        t->n_probs = (int)logprobs;
    } else if (api == SRV_API_CHAT) {
        if (!get_bool(body, "logprobs", &t->want_logprobs, err, errlen) ||
            !get_int(body, "top_logprobs", 0, SRV_MAX_TOP, &logprobs, err, errlen))
            return false;
        if (logprobs > 0 && !t->want_logprobs) {
            snprintf(err, errlen, "'top_logprobs' needs 'logprobs': true");
            return false;
        }
        t->n_probs = (int)logprobs;
    } else {
        if (!get_int(body, "n_probs", 0, SRV_MAX_TOP, &logprobs, err, errlen)) return false;
        t->n_probs = (int)logprobs;
        t->want_logprobs = logprobs > 0;
    }
    if (!parse_stop(body, t, err, errlen)) {
        if (!*err) snprintf(err, errlen, "out of memory");
        return false;
    }
    /* limits against the slot's context: a prompt that does not fit is an error, not a truncation */
    if (t->n_prompt >= n_ctx) {
        t->n_over = t->n_prompt;
        snprintf(err, errlen, "the prompt is %d tokens, the context of a slot holds %d (prompt + at least 1)",
                 t->n_prompt, n_ctx);
        return false;
    }
    if (n_predict > 0 && (int64_t)t->n_prompt + n_predict > (int64_t)n_ctx + 1) {
        snprintf(err, errlen, "'%s' %lld with a prompt of %d tokens is beyond the context of a slot (%d tokens)",
                 api == SRV_API_LLAMA ? "n_predict" : "max_tokens", (long long)n_predict, t->n_prompt, n_ctx);
        return false;
    }
    t->n_predict = (int32_t)n_predict;
    /* logit_bias, and ignore_eos (llama-server): end-of-generation tokens banned */
    struct kiln_logit_bias bias[MAX_BIAS + 2];
    size_t n_bias = 0;
    if (!parse_logit_bias(s, body, bias, &n_bias, err, errlen)) return false;
    bool ignore_eos = false;
    if (!get_bool(body, "ignore_eos", &ignore_eos, err, errlen)) return false;
    int32_t eogs[2] = {kiln_vocab_eos(s->vocab), kiln_vocab_eot(s->vocab)};
    for (int i = 0; ignore_eos && i < 2; i++)
        if (eogs[i] != KILN_TOKEN_NULL) bias[n_bias++] = (struct kiln_logit_bias){eogs[i], -INFINITY};
    sp.logit_bias = bias;
    sp.n_logit_bias = n_bias;
    t->sp = sp; /* as /completion's generation_settings tell it */
    t->sp.logit_bias = NULL;
    if (n_bias && (t->bias = malloc(n_bias * sizeof *t->bias))) {
        memcpy(t->bias, bias, n_bias * sizeof *t->bias);
        t->n_bias = n_bias;
    }
    t->ignore_eos = ignore_eos;
    if (!get_bool(body, "return_tokens", &t->return_tokens, err, errlen)) return false;
    t->smpl = kiln_sampler_from_params(&sp);
    if (!t->smpl) {
        snprintf(err, errlen, "sampling parameters: %s", kiln_sampler_last_error());
        return false;
    }
    /* structured output: the grammar's stage first, so the others see allowed tokens only */
    struct kiln_sampler *g = NULL;
    if (!srv_parse_grammar(s, body, api, &t->chat, &g, err, errlen)) return false;
    if (g) {
        struct kiln_sampler *chain = kiln_sampler_chain_new(), *rest = t->smpl;
        t->smpl = chain;
        bool ok = chain && kiln_sampler_chain_add(chain, g); /* an add takes its stage in every case */
        ok = ok ? kiln_sampler_chain_add(chain, rest) : (kiln_sampler_free(rest), false);
        if (!chain) kiln_sampler_free(g);
        if (!ok) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
    }
    return true;
}
