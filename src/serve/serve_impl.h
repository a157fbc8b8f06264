/*
 * serve_impl.h - what the server's files share: a generation task (request
 * fields, then the text and tokens the decode loop publishes under the task's
 * lock), the engine (slots and the continuous-batching loop) and the HTTP glue.
 */
#ifndef KILN_SERVE_IMPL_H
#define KILN_SERVE_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cJSON.h>

#include "serve.h"

#define SRV_MAX_STOP 16
#define SRV_MAX_TOP 20
#define SRV_MAX_PROMPTS 64 /* prompts in one request's list */

enum srv_api {
    SRV_API_COMPLETIONS, /* POST /v1/completions */
    SRV_API_CHAT,        /* POST /v1/chat/completions */
    SRV_API_LLAMA,       /* POST /completion (llama-server's fields) */
};

/* One generated token as the client sees it: its piece is text[off, off + len). */
struct srv_tok {
    int32_t id;
    float logprob;
    uint32_t off, len;
    int n_top;
    struct {
        int32_t id;
        float logprob;
    } top[SRV_MAX_TOP];
};

struct srv_task {
    /* ---- the request, fixed once submitted */
    enum srv_api api;
    int32_t *prompt;
    int32_t n_prompt;
    int32_t n_predict; /* -1: until the slot's context is full */
    struct kiln_sampler *smpl;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int n_probs;        /* top alternatives per token */
    bool want_logprobs; /* a logprob per token */
    bool stream, cache_prompt, include_usage;
    int index; /* the choice it answers, for a list of prompts */
    char id[48];
    long long created;

    /* ---- published by the engine, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text; /* generated text (NUL-terminated) */
    size_t len, cap;
    size_t safe; /* text[0, safe) can be shown: no partial stop string or UTF-8 sequence after it */
    struct srv_tok *toks;
    int32_t n_toks, cap_toks;
    bool done;
    const char *finish; /* "stop" or "length" */
    int stop_word;      /* index of the stop string that ended it, -1 */
    int32_t n_gen;      /* tokens sampled (an end-of-generation token included) */
    int err_status;     /* != 0: failed with this HTTP status and err */
    char err[256];
    int32_t n_cached;    /* prompt tokens the slot's cache already held */
    int slot;
    double t_queued, t_start, t_first, t_end;
    double deadline; /* srv_now() past which the engine stops it (504); 0: none */

    atomic_bool cancel; /* the client is gone */
    atomic_int refs;
};

struct srv_task *srv_task_new(void);
void srv_task_unref(struct srv_task *t);
/* Under t->mu: fail the task with an HTTP status and message, wake its waiter. */
void srv_task_fail_locked(struct srv_task *t, int status, const char *msg);

/* ---- engine: slots and the decode loop (engine.c) */
struct srv_engine;
struct srv_engine *srv_engine_new(const struct kiln_model *model, struct kiln_context *ctx,
                                  const struct kiln_server_params *p, char *err, size_t errlen);
/* Queue n tasks, all or none (takes a reference on each); false when the queue has no
 * room for them all. */
bool srv_engine_submit(struct srv_engine *e, struct srv_task *const *t, int n);
/* Wake the loop (a task was cancelled). */
void srv_engine_poke(struct srv_engine *e);
/* Stop the loop and fail what runs and waits (later submits fail); the engine stays
 * valid for the connection threads until srv_engine_free. */
void srv_engine_shutdown(struct srv_engine *e);
void srv_engine_free(struct srv_engine *e);
int32_t srv_engine_n_ctx_slot(const struct srv_engine *e);
/* {"id", "n_ctx", "is_processing"} per slot (GET /slots). */
cJSON *srv_engine_slots_json(struct srv_engine *e);

/* ---- the server object the routes see */
struct kiln_server {
    struct kiln_server_params p;
    struct MHD_Daemon *daemon;
    int port;
    atomic_bool ready;    /* model attached */
    atomic_bool stopping; /* shutting down: waits give up */
    const struct kiln_model *model;
    const struct kiln_vocab *vocab;
    struct kiln_context *ctx;
    struct srv_engine *engine;
    enum kiln_chat_template tmpl;
    char model_id[256]; /* the file name, as /v1/models reports it */
    char *model_path;
    atomic_ullong next_id; /* response ids */
    atomic_int in_flight;  /* generation responses not yet sent completely */
    struct srv_metrics *metrics;
    struct srv_grammars *grammars; /* the vocabulary's token index and recent grammars */
};

/* ---- HTTP responses (http.c) */
struct srv_req {
    struct kiln_server *srv;
    struct MHD_Connection *conn;
    const char *method, *url;
    const char *body;
    size_t body_len;
    const char *route; /* the matched route's path (metrics), NULL before routing */
};
enum MHD_Result srv_reply_json(struct srv_req *r, unsigned status, cJSON *json); /* takes json */
enum MHD_Result srv_reply_plain(struct srv_req *r, unsigned status, char *text);  /* takes malloc'd text */
enum MHD_Result srv_reply_error(struct srv_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The client closed its side of the connection. */
bool srv_client_gone(struct MHD_Connection *conn);

/* ---- routes (routes.c: model-free routes; generate.c: generation) */
enum MHD_Result srv_route_health(struct srv_req *r);
enum MHD_Result srv_route_models(struct srv_req *r);
enum MHD_Result srv_route_props(struct srv_req *r);
enum MHD_Result srv_route_slots(struct srv_req *r);
enum MHD_Result srv_route_metrics(struct srv_req *r);
enum MHD_Result srv_route_tokenize(struct srv_req *r);
enum MHD_Result srv_route_detokenize(struct srv_req *r);
enum MHD_Result srv_route_apply_template(struct srv_req *r);
enum MHD_Result srv_route_completions(struct srv_req *r);
enum MHD_Result srv_route_chat(struct srv_req *r);
enum MHD_Result srv_route_completion(struct srv_req *r);

/* ---- request fields (fields.c): which fields each body accepts */
enum srv_body {
    SRV_BODY_COMPLETIONS, /* matches enum srv_api */
    SRV_BODY_CHAT,
    SRV_BODY_LLAMA,
    SRV_BODY_TOKENIZE,
    SRV_BODY_DETOKENIZE,
    SRV_BODY_TEMPLATE,
    SRV_BODY_MESSAGE,        /* messages[i] */
    SRV_BODY_CONTENT_PART,   /* messages[i].content[j] */
    SRV_BODY_STREAM_OPTIONS, /* stream_options */
};
/* Every member of obj must be a field this body implements, or a field kiln does not
 * implement given the value that asks for nothing; false with a message naming the
 * first other one. where names obj in the message (NULL: the body's route). */
bool srv_check_fields(const cJSON *obj, enum srv_body body, const char *where, char *err, size_t errlen);

/* ---- request parsing (params.c): each returns false with a message naming the field */
cJSON *srv_parse_body(struct srv_req *r, char *err, size_t errlen); /* an object, or NULL */
/* The conversation in messages, rendered with the model's template (malloc'd). */
char *srv_render_messages(struct kiln_server *s, const cJSON *messages, bool add_assistant, char *err,
                          size_t errlen);
/* Tokenize text (special tokens parsed); malloc'd ids, or -1. */
int32_t srv_tokenize(const struct kiln_vocab *v, const char *text, size_t len, bool add_special, int32_t **ids);
/* Fill t's generation fields (samplers, stops, limits, logprobs, stream) from a request body. */
bool srv_parse_gen(struct kiln_server *s, const cJSON *body, enum srv_api api, struct srv_task *t, char *err,
                   size_t errlen);
/* How many prompts the prompt field holds: a list of strings or id arrays holds
 * several, a string or one id array one. */
int srv_prompt_count(const cJSON *prompt);
/* Prompt i of the prompt field into t->prompt (t->index = i). */
bool srv_parse_prompt(struct kiln_server *s, const cJSON *prompt, int i, struct srv_task *t, char *err,
                      size_t errlen);
/* Token ids of a JSON array, each checked against the vocabulary. */
bool srv_parse_ids(struct kiln_server *s, const cJSON *arr, const char *field, int32_t **ids, int32_t *n, char *err,
                   size_t errlen);

/* ---- structured output (grammar.c): response_format, grammar, json_schema */
struct srv_grammars;
/* The token index of v and an empty cache of compiled grammars; NULL with a message. */
struct srv_grammars *srv_grammars_new(const struct kiln_vocab *v, char *err, size_t errlen);
void srv_grammars_free(struct srv_grammars *c);
/* The grammar a request asks for, as a sampler stage to put first (*stage NULL: none);
 * false with a message naming the field (the client gets a 400). */
bool srv_parse_grammar(struct kiln_server *s, const cJSON *body, enum srv_api api, struct kiln_sampler **stage,
                       char *err, size_t errlen);

/* ---- response bodies (format.c) */
cJSON *srv_format_final(struct kiln_server *s, struct srv_task *t);   /* non-streamed body, under t->mu */
cJSON *srv_format_timings(const struct srv_task *t);
/* One streamed event for text[from, to) and toks[tok0, tok1); final adds finish_reason/timings. */
cJSON *srv_format_chunk(struct kiln_server *s, struct srv_task *t, size_t from, size_t to, int32_t tok0,
                        int32_t tok1, bool final);
cJSON *srv_format_usage(const struct srv_task *t);
/* Append n bytes to the growable *buf (*len used, *cap allocated), keeping a NUL
 * after them; false when memory runs out (the buffer is unchanged then). */
bool srv_bytes_append(char **buf, size_t *len, size_t *cap, const void *data, size_t n);
/* o[key] = s[0, len) as valid UTF-8 (invalid sequences become U+FFFD). */
void srv_add_text(cJSON *o, const char *key, const char *s, size_t len);
double srv_now(void);

/* ---- metrics (metrics.c): counters the engine and the HTTP side bump, GET /metrics */
struct srv_metrics;
struct srv_engine_stats { /* the engine's gauges at one moment */
    int processing, deferred, n_slots, queue_max;
    long long kv_used, kv_total, parked;
};
struct srv_metrics *srv_metrics_new(void);
void srv_metrics_free(struct srv_metrics *m);
/* A response sent: route is a route table path (NULL: unmatched). */
void srv_metrics_response(struct srv_metrics *m, const char *route, unsigned status);
/* One decode: prompt and generated tokens, slots busy, kiln_decode calls, its duration. */
void srv_metrics_step(struct srv_metrics *m, int32_t n_prompt, int32_t n_gen, int n_busy, int n_decode,
                      double seconds);
/* A token sampled (llamacpp:tokens_predicted_total). */
void srv_metrics_sampled(struct srv_metrics *m);
/* A request took a slot: prompt tokens reused, cached tokens of the slot's earlier request dropped,
 * prompt + generation limit. */
void srv_metrics_request(struct srv_metrics *m, int32_t n_cached, int32_t n_evicted, int32_t n_tokens);
void srv_metrics_ttft(struct srv_metrics *m, double seconds);
/* A prompt continued from n_tokens cells another slot decoded (was_miss: its own slot had
 * given it nothing, so srv_metrics_request counted a miss). */
void srv_metrics_shared(struct srv_metrics *m, int32_t n_tokens, bool was_miss);
void srv_metrics_timeout(struct srv_metrics *m);
void srv_metrics_rejected(struct srv_metrics *m);
/* The Prometheus text (malloc'd), NULL when out of memory. */
char *srv_metrics_render(struct srv_metrics *m, const struct srv_engine_stats *es);
/* The engine bumps m from now on (set before the first task is submitted). */
void srv_engine_set_metrics(struct srv_engine *e, struct srv_metrics *m);
void srv_engine_stats(struct srv_engine *e, struct srv_engine_stats *out);
enum MHD_Result srv_route_metrics(struct srv_req *r);
/* An entry of the prefix cache was dropped (n_tokens tokens). */
void srv_metrics_evicted(struct srv_metrics *m, int32_t n_tokens);

/* ---- the prefix cache (prefix_cache.c): runs of tokens parked on spare sequences
 * [first_seq, first_seq + n_seqs), budget_mib of KV cells (-1: no limit); used by the
 * engine's thread only */
struct srv_prefix_cache;
struct srv_prefix_cache *srv_pcache_new(struct kiln_context *ctx, int32_t first_seq, int n_seqs, long long budget_mib,
                                        struct srv_metrics *metrics);
void srv_pcache_free(struct srv_prefix_cache *pc);
void srv_pcache_set_metrics(struct srv_prefix_cache *pc, struct srv_metrics *m);
/* Before seq drops its tokens past keep for the prompt want[0, n_want): keep tokens[0, n)
 * (seq's cells 0 .. n-1) on a spare sequence, never evicting an entry want continues from;
 * true when they are held now. */
bool srv_pcache_park(struct srv_prefix_cache *pc, int32_t seq, const int32_t *tokens, int32_t n, int32_t keep,
                     const int32_t *want, int32_t n_want);
/* The longest prefix of prompt[0, limit) an entry holds, its sequence in *seq (0: none). */
int32_t srv_pcache_best(struct srv_prefix_cache *pc, const int32_t *prompt, int32_t limit, int32_t *seq);
/* Drop the least recently used entry; false when none is left. */
bool srv_pcache_evict_lru(struct srv_prefix_cache *pc);
long long srv_pcache_tokens(const struct srv_prefix_cache *pc);

#endif
