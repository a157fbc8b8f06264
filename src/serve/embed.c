/*
 * embed.c - the embedding and reranking routes of `kiln serve --embeddings` (or
 * --reranking): OpenAI's /v1/embeddings, llama-server's /embedding(s), and /v1/rerank
 * and /rerank in llama-server's shape. A request's inputs are tokenized and checked
 * first, then packed many to a decode (each sequence attending only to itself) on
 * the server's embedding context, one request at a time (s->embd_mu).
 */
#include "serve_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inputs {
    int32_t **ids;
    int32_t *n;
    int count;
    int64_t tokens;
};

static void inputs_free(struct inputs *in) {
    for (int i = 0; i < in->count; i++) free(in->ids[i]);
    free(in->ids);
    free(in->n);
    memset(in, 0, sizeof *in);
}

static bool is_ids(const cJSON *a) {
    if (!cJSON_IsArray(a) || !a->child) return false;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) if (!cJSON_IsNumber(it)) return false;
    return true;
}

/* One input (a string or token ids) into in's slot i; 400 messages name it. */
static bool one_input(struct kiln_server *s, const cJSON *v, const char *field, int i, struct inputs *in, char *err,
                      size_t errlen) {
    const int64_t n_ctx = kiln_n_ctx(s->ctx);
    char name[64];
    snprintf(name, sizeof name, "%s[%d]", field, i);
    int32_t n = 0;
    if (cJSON_IsString(v)) {
        n = srv_tokenize_bounded(s, name, v->valuestring, strlen(v->valuestring), true, n_ctx, &in->ids[i], err,
                                 errlen);
        if (n < 0) return false;
    } else if (is_ids(v)) {
        if (cJSON_GetArraySize(v) > n_ctx)
            return snprintf(err, errlen, "'%s' has %d tokens, more than the context (%lld)", name,
                            cJSON_GetArraySize(v), (long long)n_ctx),
                   false;
        if (!srv_parse_ids(s, v, name, &in->ids[i], &n, err, errlen)) return false;
    } else {
        snprintf(err, errlen, "'%s' must be a string or an array of token ids", name);
        return false;
    }
    in->n[i] = n;
    in->tokens += n;
    if (n == 0) return snprintf(err, errlen, "'%s' is empty: an input needs at least one token", name), false;
    if (n > n_ctx)
        return snprintf(err, errlen, "'%s' has %d tokens, more than the context (%lld)", name, n, (long long)n_ctx),
               false;
    return true;
}

/* input: a string, token ids, or a list of strings and token id lists */
static bool parse_inputs(struct kiln_server *s, const cJSON *v, const char *field, struct inputs *in, char *err,
                         size_t errlen) {
    const bool list = cJSON_IsArray(v) && !is_ids(v);
    const int count = list ? cJSON_GetArraySize(v) : 1;
    if (!v || (!cJSON_IsString(v) && !cJSON_IsArray(v)))
        return snprintf(err, errlen, "'%s' must be a string, token ids, or a list of them", field), false;
    if (count == 0) return snprintf(err, errlen, "'%s' is an empty list", field), false;
    if (count > SRV_MAX_EMBD_INPUTS)
        return snprintf(err, errlen, "'%s' has %d inputs; at most %d in one request", field, count,
                        SRV_MAX_EMBD_INPUTS),
               false;
    in->ids = calloc((size_t)count, sizeof *in->ids);
    in->n = calloc((size_t)count, sizeof *in->n);
    if (!in->ids || !in->n) return snprintf(err, errlen, "out of memory"), false;
    in->count = count;
    if (!list) return one_input(s, v, field, 0, in, err, errlen);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) if (!one_input(s, it, field, i++, in, err, errlen)) return false;
    return true;
}

/* Every input's output (n_embd_out floats, or per token with pooling none) into out[i]
 * (malloc'd), many inputs to a decode. */
static bool run(struct kiln_server *s, const struct inputs *in, float **out, char *err, size_t errlen) {
    struct kiln_context *ctx = s->ctx;
    const int64_t n_ctx = kiln_n_ctx(ctx), dim = kiln_n_embd_out(ctx);
    const int32_t n_seq = (int32_t)kiln_n_seq_max(ctx);
    const bool per_token = kiln_context_pooling(ctx) == KILN_POOLING_NONE;
    struct kiln_batch b = kiln_batch_init((int32_t)n_ctx);
    if (!b.capacity) return snprintf(err, errlen, "out of memory"), false;
    bool ok = true;
    pthread_mutex_lock(&s->embd_mu);
    for (int i0 = 0; ok && i0 < in->count;) {
        int i1 = i0;
        int64_t tokens = 0;
        while (i1 < in->count && i1 - i0 < n_seq && tokens + in->n[i1] <= n_ctx) tokens += in->n[i1++];
        kiln_batch_clear(&b);
        for (int i = i0; i < i1; i++)
            for (int32_t t = 0; t < in->n[i]; t++) kiln_batch_add(&b, in->ids[i][t], t, i - i0, true);
        if (kiln_decode(ctx, &b) != KILN_OK) {
            snprintf(err, errlen, "embedding failed: %s", kiln_context_error(ctx));
            ok = false;
            break;
        }
        int32_t at = 0;
        for (int i = i0; ok && i < i1; i++) {
            const int64_t rows = per_token ? in->n[i] : 1;
            out[i] = malloc(sizeof(float) * (size_t)(rows * dim));
            if (!out[i]) {
                snprintf(err, errlen, "out of memory");
                ok = false;
                break;
            }
            for (int64_t r = 0; r < rows; r++) {
                const float *e = per_token ? kiln_get_embeddings_ith(ctx, at + (int32_t)r)
                                           : kiln_get_embeddings_seq(ctx, i - i0);
                memcpy(out[i] + r * dim, e, sizeof(float) * (size_t)dim);
            }
            at += in->n[i];
        }
        i0 = i1;
    }
    pthread_mutex_unlock(&s->embd_mu);
    kiln_batch_free(&b);
    return ok;
}

static cJSON *float_array(const float *v, int64_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t k = 0; a && k < n; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[k]));
    return a;
}

static char *base64(const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = tab[v >> 18 & 63];
        *q++ = tab[v >> 12 & 63];
        *q++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *q = 0;
    return o;
}

/* The answer's frame both APIs share: the request's model (else the server's), a list,
 * the tokens read */
static cJSON *list_answer(const struct kiln_server *s, const cJSON *body, int64_t tokens) {
    cJSON *o = cJSON_CreateObject();
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(body, "model");
    cJSON_AddStringToObject(o, "model", cJSON_IsString(model) ? model->valuestring : s->model_id);
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    return o;
}

static enum MHD_Result refuse_unless(struct srv_req *r, bool rank) {
    const struct kiln_server *s = r->srv;
    if (!s->p.embeddings)
        return srv_reply_error(r, 400, "this server does not make %s: start it with %s",
                               rank ? "rerankings" : "embeddings", rank ? "--reranking" : "--embeddings");
    if (rank != (kiln_context_pooling(s->ctx) == KILN_POOLING_RANK))
        return srv_reply_error(r, 400, rank ? "this server does not rerank: start it with --reranking (rank pooling)"
                                            : "this server reranks (rank pooling): use /v1/rerank");
    return MHD_YES;
}

/* /v1/embeddings (oai) and llama-server's /embedding and /embeddings */
static enum MHD_Result embeddings(struct srv_req *r, bool oai) {
    struct kiln_server *s = r->srv;
    if (!s->p.embeddings || kiln_context_pooling(s->ctx) == KILN_POOLING_RANK) return refuse_unless(r, false);
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    struct inputs in = {0};
    float **out = NULL;
    enum MHD_Result ret;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(body, "input");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(body, "content");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(body, "encoding_format");
    const cJSON *norm_j = cJSON_GetObjectItemCaseSensitive(body, "embd_normalize");
    const bool per_token = kiln_context_pooling(s->ctx) == KILN_POOLING_NONE;
    if (!input && content) oai = false; /* "content" is llama-server's own shape */
    int norm = 2;
    if (!srv_check_fields(body, SRV_BODY_EMBEDDINGS, r->url, err, sizeof err)) {
        ret = srv_reply_error(r, 400, "%s", err);
    } else if (!input == !content) {
        ret = srv_reply_error(r, 400, "give exactly one of 'input' or 'content'");
    } else if (fmt && (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64")))) {
        ret = srv_reply_error(r, 400, "'encoding_format' must be \"float\" or \"base64\"");
    } else if (norm_j && (!cJSON_IsNumber(norm_j) || norm_j->valuedouble != floor(norm_j->valuedouble) ||
                          norm_j->valuedouble < -1 || norm_j->valuedouble > 64)) {
        ret = srv_reply_error(r, 400, "'embd_normalize' must be an integer from -1 to 64");
    } else if (oai && per_token) {
        ret = srv_reply_error(r, 400, "pooling 'none' gives an embedding per token, which /v1/embeddings cannot "
                                      "return: use /embedding, or start the server with --pooling mean|cls|last");
    } else if (!parse_inputs(s, input ? input : content, input ? "input" : "content", &in, err, sizeof err)) {
        ret = srv_reply_error(r, 400, "%s", err);
    } else if (!(out = calloc((size_t)in.count, sizeof *out)) || !run(s, &in, out, err, sizeof err)) {
        ret = srv_reply_error(r, 500, "%s", out ? err : "out of memory");
    } else {
        if (norm_j) norm = (int)norm_j->valuedouble;
        const bool b64 = fmt && !strcmp(fmt->valuestring, "base64");
        const int64_t dim = kiln_n_embd_out(s->ctx);
        cJSON *data = cJSON_CreateArray();
        for (int i = 0; i < in.count; i++) {
            const int64_t rows = per_token ? in.n[i] : 1;
            for (int64_t k = 0; k < rows; k++) kiln_embd_normalize(out[i] + k * dim, out[i] + k * dim, dim, norm);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "index", i);
            if (oai) {
                cJSON_AddStringToObject(e, "object", "embedding");
                if (b64) {
                    char *t = base64((const unsigned char *)out[i], sizeof(float) * (size_t)dim);
                    cJSON_AddStringToObject(e, "embedding", t ? t : "");
                    cJSON_AddStringToObject(e, "encoding_format", "base64");
                    free(t);
                } else {
                    cJSON_AddItemToObject(e, "embedding", float_array(out[i], dim));
                }
            } else { /* llama-server's: a list of rows (one when pooled) */
                cJSON *rows_j = cJSON_AddArrayToObject(e, "embedding");
                for (int64_t k = 0; k < rows; k++) cJSON_AddItemToArray(rows_j, float_array(out[i] + k * dim, dim));
            }
            cJSON_AddItemToArray(data, e);
        }
        if (oai) {
            cJSON *o = list_answer(s, body, in.tokens);
            cJSON_AddItemToObject(o, "data", data);
            data = o;
        }
        ret = srv_reply_json(r, 200, data);
    }
    for (int i = 0; out && i < in.count; i++) free(out[i]);
    free(out);
    inputs_free(&in);
    cJSON_Delete(body);
    return ret;
}

enum MHD_Result srv_route_embeddings_oai(struct srv_req *r) { return embeddings(r, true); }
enum MHD_Result srv_route_embedding(struct srv_req *r) { return embeddings(r, false); }

/* The rerank prompt as llama-server writes it without a template: BOS, the query, EOS (or
 * SEP), SEP, the document, EOS, each as the vocabulary adds them. */
static int32_t *rerank_prompt(struct kiln_server *s, const int32_t *q, int32_t nq, const char *doc, int32_t *n,
                              char *err, size_t errlen) {
    const struct kiln_vocab *v = s->vocab;
    int32_t *d = NULL;
    const int32_t nd = srv_tokenize_bounded(s, "documents", doc, strlen(doc), false, kiln_n_ctx(s->ctx), &d, err,
                                            errlen);
    if (nd < 0) return NULL;
    int32_t eos = kiln_vocab_eos(v) != KILN_TOKEN_NULL ? kiln_vocab_eos(v) : kiln_vocab_sep(v);
    int32_t *p = malloc(sizeof *p * (size_t)(nq + nd + 4));
    if (!p) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int32_t k = 0;
    if (kiln_vocab_add_bos(v)) p[k++] = kiln_vocab_bos(v);
    memcpy(p + k, q, sizeof *q * (size_t)nq), k += nq;
    if (kiln_vocab_add_eos(v)) p[k++] = eos;
    if (kiln_vocab_add_sep(v)) p[k++] = kiln_vocab_sep(v);
    memcpy(p + k, d, sizeof *d * (size_t)nd), k += nd;
    if (kiln_vocab_add_eos(v)) p[k++] = eos;
    free(d);
    *n = k;
    return p;
}

struct scored {
    int index;
    float score;
};
static int by_score(const void *a, const void *b) {
    const struct scored *x = a, *y = b;
    return (y->score > x->score) - (y->score < x->score);
}

enum MHD_Result srv_route_rerank(struct srv_req *r) {
    struct kiln_server *s = r->srv;
    if (!s->p.embeddings || kiln_context_pooling(s->ctx) != KILN_POOLING_RANK) return refuse_unless(r, true);
    char err[512] = "";
    cJSON *body = srv_parse_body(r, err, sizeof err);
    if (!body) return srv_reply_error(r, 400, "%s", err);
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(body, "query");
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(body, "documents");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(body, "top_n");
    const cJSON *ret_docs = cJSON_GetObjectItemCaseSensitive(body, "return_documents");
    struct inputs in = {0};
    float **out = NULL;
    int32_t *q = NULL;
    enum MHD_Result ret;
    const int nd = cJSON_IsArray(docs) ? cJSON_GetArraySize(docs) : 0;
    int32_t nq = 0;
    if (!srv_check_fields(body, SRV_BODY_RERANK, r->url, err, sizeof err)) {
        ret = srv_reply_error(r, 400, "%s", err);
        goto done;
    }
    if (!cJSON_IsString(query)) {
        ret = srv_reply_error(r, 400, "'query' must be a string");
        goto done;
    }
    if (nd == 0 || nd > SRV_MAX_EMBD_INPUTS) {
        ret = srv_reply_error(r, 400, "'documents' must be a list of 1 to %d strings", SRV_MAX_EMBD_INPUTS);
        goto done;
    }
    if ((top && (!cJSON_IsNumber(top) || top->valuedouble != floor(top->valuedouble) || top->valuedouble < 0)) ||
        (ret_docs && !cJSON_IsBool(ret_docs))) {
        ret = srv_reply_error(r, 400, top && !cJSON_IsNumber(top) ? "'top_n' must be a count"
                                      : ret_docs && !cJSON_IsBool(ret_docs) ? "'return_documents' must be true or false"
                                                                            : "'top_n' must be a count");
        goto done;
    }
    nq = srv_tokenize_bounded(s, "query", query->valuestring, strlen(query->valuestring), false, kiln_n_ctx(s->ctx),
                              &q, err, sizeof err);
    in.ids = calloc((size_t)nd, sizeof *in.ids);
    in.n = calloc((size_t)nd, sizeof *in.n);
    out = calloc((size_t)nd, sizeof *out);
    if (nq < 0 || !in.ids || !in.n || !out) {
        ret = srv_reply_error(r, nq < 0 ? 400 : 500, "%s", nq < 0 ? err : "out of memory");
        goto done;
    }
    in.count = nd;
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, docs) {
        if (!cJSON_IsString(it)) {
            ret = srv_reply_error(r, 400, "'documents'[%d] must be a string", i);
            goto done;
        }
        if (!(in.ids[i] = rerank_prompt(s, q, nq, it->valuestring, &in.n[i], err, sizeof err))) {
            ret = srv_reply_error(r, 400, "%s", err);
            goto done;
        }
        if (in.n[i] > (int64_t)kiln_n_ctx(s->ctx)) {
            ret = srv_reply_error(r, 400, "the query and 'documents'[%d] make %d tokens, more than the context (%u)",
                                  i, in.n[i], kiln_n_ctx(s->ctx));
            goto done;
        }
        in.tokens += in.n[i++];
    }
    if (!run(s, &in, out, err, sizeof err)) {
        ret = srv_reply_error(r, 500, "%s", err);
        goto done;
    }
    struct scored *sc = malloc(sizeof *sc * (size_t)nd);
    if (!sc) {
        ret = srv_reply_error(r, 500, "out of memory");
        goto done;
    }
    for (int k = 0; k < nd; k++) sc[k] = (struct scored){k, out[k][0]};
    qsort(sc, (size_t)nd, sizeof *sc, by_score);
    const int n_top = top && top->valuedouble < nd ? (int)top->valuedouble : nd;
    cJSON *o = list_answer(s, body, in.tokens);
    cJSON *res = cJSON_AddArrayToObject(o, "results");
    for (int k = 0; k < n_top; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "index", sc[k].index);
        cJSON_AddNumberToObject(e, "relevance_score", (double)sc[k].score);
        if (cJSON_IsTrue(ret_docs))
            cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "document"), "text",
                                    cJSON_GetArrayItem(docs, sc[k].index)->valuestring);
        cJSON_AddItemToArray(res, e);
    }
    free(sc);
    ret = srv_reply_json(r, 200, o);
done:
    for (int k = 0; out && k < nd; k++) free(out[k]);
    free(out);
    free(q);
    inputs_free(&in);
    cJSON_Delete(body);
    return ret;
}
