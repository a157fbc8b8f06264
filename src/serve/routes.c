/*
 * routes.c - the routes that answer at once (no generation): health, models,
 * props, slots, tokenize, detokenize, apply-template, with llama-server's
 * field names.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum MHD_Result srv_route_health(struct srv_req *r) {
    bool ready = atomic_load(&r->srv->ready);
    if (!ready) return srv_reply_error(r, 503, "loading model");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    return srv_reply_json(r, 200, o);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

cJSON *srv_name_list(const char *csv) {
    cJSON *a = cJSON_CreateArray();
    char *copy = csv ? strdup(csv) : NULL;
    size_t n = 0;
    char **names = copy ? calloc(strlen(copy) / 2 + 1, sizeof *names) : NULL;
    if (names) { /* as a set: trimmed, without empties, in byte order, each once */
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            size_t len = strlen(t);
            while (len && t[len - 1] == ' ') t[--len] = 0;
            if (len) names[n++] = t;
        }
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n; i++)
            if (!i || strcmp(names[i], names[i - 1])) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
    }
    free(names);
    free(copy);
    return a;
}

enum MHD_Result srv_route_models(struct srv_req *r) {
    struct kiln_server *s = r->srv;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddItemToObject(m, "aliases", srv_name_list(s->p.alias));
    cJSON_AddItemToObject(m, "tags", srv_name_list(s->p.tags));
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "kiln");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    const struct kiln_hparams *hp = kiln_model_hparams(s->model);
    cJSON_AddNumberToObject(meta, "n_vocab", (double)hp->n_vocab);
    cJSON_AddNumberToObject(meta, "n_ctx_train", (double)hp->n_ctx_train);
    cJSON_AddNumberToObject(meta, "n_embd", (double)hp->n_embd);
    cJSON_AddNumberToObject(meta, "n_params", (double)kiln_model_n_params(s->model));
    cJSON_AddNumberToObject(meta, "size", (double)kiln_model_size(s->model));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), m);
    return srv_reply_json(r, 200, o);
}

enum MHD_Result srv_route_props(struct srv_req *r) {
    struct kiln_server *s = r->srv;
    cJSON *o = cJSON_CreateObject();
    cJSON *g = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(g, "n_ctx", s->n_ctx_slot);
    cJSON_AddNumberToObject(g, "n_predict", s->p.n_predict);
    /* the sampling a request that sets none gets (--temp, --seed, ...), under the request's field names */
    const struct kiln_sampling_params *d = &s->p.sampling;
    cJSON *gp = cJSON_AddObjectToObject(g, "params");
    cJSON_AddNumberToObject(gp, "n_predict", s->p.n_predict);
    cJSON_AddNumberToObject(gp, "seed", d->seed);
    cJSON_AddNumberToObject(gp, "temperature", d->temp);
    cJSON_AddNumberToObject(gp, "top_k", d->top_k);
    cJSON_AddNumberToObject(gp, "top_p", d->top_p);
    cJSON_AddNumberToObject(gp, "min_p", d->min_p);
    cJSON_AddNumberToObject(gp, "typical_p", d->typical_p);
    cJSON_AddNumberToObject(gp, "repeat_last_n", d->penalty_last_n);
    cJSON_AddNumberToObject(gp, "repeat_penalty", d->penalty_repeat);
    cJSON_AddNumberToObject(gp, "presence_penalty", d->penalty_present);
    cJSON_AddNumberToObject(gp, "frequency_penalty", d->penalty_freq);
    cJSON_AddNumberToObject(o, "total_slots", s->p.n_parallel);
    cJSON_AddStringToObject(o, "model_alias", s->model_id);
    cJSON_AddBoolToObject(o, "endpoint_slots", s->p.slots);
    cJSON_AddBoolToObject(o, "endpoint_metrics", s->p.metrics);
    cJSON_AddBoolToObject(o, "is_sleeping", false);
    cJSON_AddStringToObject(o, "model_path", s->model_path);
    /* as llama-server: the template's text (kiln's native family's name when it renders without Jinja) */
    cJSON_AddStringToObject(o, "chat_template", s->chat ? srv_chat_tmpl_src(s->chat) : kiln_chat_template_name(s->tmpl));
    cJSON_AddBoolToObject(o, "jinja", s->chat != NULL);
    char desc[128];
    kiln_model_desc(s->model, desc, sizeof desc);
    cJSON_AddStringToObject(o, "model_desc", desc);
    cJSON_AddStringToObject(o, "build_info", "kiln");
    /* the limits a client or a balancer plans with */
    cJSON_AddNumberToObject(o, "n_ctx", kiln_n_ctx(s->ctx));
    cJSON_AddNumberToObject(o, "n_ctx_slot", s->n_ctx_slot);
    cJSON_AddBoolToObject(o, "embeddings", s->p.embeddings);
    if (s->p.embeddings) cJSON_AddStringToObject(o, "pooling", kiln_pooling_name(kiln_context_pooling(s->ctx)));
    cJSON_AddNumberToObject(o, "kv_cache_bytes", (double)kiln_kv_size_bytes(s->ctx));
    cJSON_AddNumberToObject(o, "queue_max", s->p.queue_max);
    cJSON_AddNumberToObject(o, "max_body", (double)s->p.max_body);
    cJSON_AddNumberToObject(o, "request_timeout", s->p.request_timeout_s);
    cJSON_AddNumberToObject(o, "drain_timeout", s->p.drain_s);
    static const char *const share[] = {[KILN_PREFIX_SHARE_TENANT] = "tenant", [KILN_PREFIX_SHARE_GLOBAL] = "global",
                                         [KILN_PREFIX_SHARE_OFF] = "off"};
    cJSON_AddBoolToObject(o, "prefix_share", s->p.prefix_share != KILN_PREFIX_SHARE_OFF);
    cJSON_AddStringToObject(o, "prefix_share_mode", share[s->p.prefix_share]);
    cJSON_AddNumberToObject(o, "max_connections", s->p.max_connections);
    cJSON_AddNumberToObject(o, "header_timeout", s->p.header_timeout_s);
    cJSON_AddNumberToObject(o, "body_timeout", s->p.body_timeout_s);
    cJSON_AddNumberToObject(o, "max_prompt_bytes", ((double)s->n_ctx_slot + 1) * s->max_piece + 1);
    cJSON_AddNumberToObject(o, "cache_ram_mib", s->p.cache_ram_mib);
    cJSON_AddNumberToObject(o, "prefix_cache_entries", (double)kiln_n_seq_max(s->ctx) - s->p.n_parallel);
    return srv_reply_json(r, 200, o);
}

enum MHD_Result srv_route_metrics(struct srv_req *r) {
    if (!r->srv->p.metrics)
        return srv_reply_error(r, 501, "this server does not answer /metrics: start it with --metrics");
    struct srv_engine_stats es = {0};
    if (r->srv->engine) srv_engine_stats(r->srv->engine, &es);
    char *text = srv_metrics_render(r->srv->metrics, &es);
    if (!text) return srv_reply_error(r, 500, "out of memory");
    enum MHD_Result ret = srv_reply_plain(r, 200, text); /* Prometheus text format */
    r->reply.hdr = "Process-Start-Time-Unix"; /* as llama-server: a scraper sees a restart */
    r->reply.hdr_val = r->srv->start_unix;
    return ret;
}

enum MHD_Result srv_route_slots(struct srv_req *r) {
    /* with tenants, what a slot holds for another is not shown (it would tell its prompt's length) */
    struct kiln_server *s = r->srv;
    if (!s->p.slots) return srv_reply_error(r, 501, "this server does not answer /slots: started with --no-slots");
    bool isolate = s->p.prefix_share != KILN_PREFIX_SHARE_GLOBAL &&
                   (srv_auth_has_keys(s->auth) || srv_auth_has_proxies(s->auth));
    cJSON *a = s->engine ? srv_engine_slots_json(s->engine, r->tenant, isolate) : cJSON_CreateArray();
    if (!a) return srv_reply_error(r, 500, "out of memory");
    return srv_reply_json(r, 200, a);
}

enum MHD_Result srv_route_tokenize(struct srv_req *r) {
    char err[256] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    if (!srv_check_fields(body, SRV_BODY_TOKENIZE, r->url, err, sizeof err)) {
        cJSON_Delete(body);
        return srv_reply_error(r, 400, "%s", err);
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(body, "content");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(body, "add_special");
    const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(body, "with_pieces");
    enum MHD_Result ret;
    if (!cJSON_IsString(content)) {
        ret = srv_reply_error(r, 400, "'content' must be a string");
    } else if ((add && !cJSON_IsBool(add)) || (pieces && !cJSON_IsBool(pieces))) {
        ret = srv_reply_error(r, 400, "'%s' must be true or false", add && !cJSON_IsBool(add) ? "add_special" : "with_pieces");
    } else {
        int32_t *ids = NULL;
        int32_t n = srv_tokenize_bounded(r->srv, "content", content->valuestring, strlen(content->valuestring),
                                         cJSON_IsTrue(add), (int64_t)r->srv->n_ctx_slot * r->srv->p.n_parallel, &ids,
                                         err, sizeof err);
        if (n < 0) {
            ret = srv_reply_error(r, 400, "%s", err);
        } else {
            cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "tokens");
            for (int32_t i = 0; i < n; i++) {
                if (!cJSON_IsTrue(pieces)) {
                    cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
                    continue;
                }
                char buf[256];
                int64_t len = kiln_token_to_piece(r->srv->vocab, ids[i], buf, sizeof buf, false);
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "id", ids[i]);
                srv_add_text(e, "piece", buf, len > 0 ? (size_t)len : 0);
                cJSON_AddItemToArray(arr, e);
            }
            free(ids);
            ret = srv_reply_json(r, 200, o);
        }
    }
    cJSON_Delete(body);
    return ret;
}

enum MHD_Result srv_route_detokenize(struct srv_req *r) {
    char err[256] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    if (!srv_check_fields(body, SRV_BODY_DETOKENIZE, r->url, err, sizeof err)) {
        cJSON_Delete(body);
        return srv_reply_error(r, 400, "%s", err);
    }
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(body, "tokens");
    int32_t *ids = NULL, n = 0;
    enum MHD_Result ret;
    if (!cJSON_IsArray(tokens)) {
        ret = srv_reply_error(r, 400, "'tokens' must be an array of token ids");
    } else if (!srv_parse_ids(r->srv, tokens, "tokens", &ids, &n, err, sizeof err)) {
        ret = srv_reply_error(r, 400, "%s", err);
    } else {
        int64_t len = kiln_detokenize(r->srv->vocab, ids, n, NULL, 0, false, false);
        size_t size = len < 0 ? (size_t)-len + 1 : (size_t)len + 1;
        char *text = len == KILN_ERR_INVALID ? NULL : malloc(size);
        if (text) len = kiln_detokenize(r->srv->vocab, ids, n, text, size, false, false);
        if (!text || len < 0) {
            ret = srv_reply_error(r, 500, "cannot detokenize");
        } else {
            cJSON *o = cJSON_CreateObject();
            srv_add_text(o, "content", text, (size_t)len);
            ret = srv_reply_json(r, 200, o);
        }
        free(text);
    }
    free(ids);
    cJSON_Delete(body);
    return ret;
}

enum MHD_Result srv_route_apply_template(struct srv_req *r) {
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    if (!srv_check_fields(body, SRV_BODY_TEMPLATE, r->url, err, sizeof err)) {
        cJSON_Delete(body);
        return srv_reply_error(r, 400, "%s", err);
    }
    int status;
    char *text = srv_chat_render(r->srv, body, SRV_BODY_TEMPLATE, NULL, &status, err, sizeof err);
    cJSON_Delete(body);
    if (!text) return srv_reply_error(r, (unsigned)status, "%s", err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text);
    free(text);
    return srv_reply_json(r, 200, o);
}
