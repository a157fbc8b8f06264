/*
 * serve_impl.h - what the server's files share: a generation task (request
 * fields, then the text and tokens the decode loop publishes under the task's
 * lock), the engine (slots and the continuous-batching loop), the HTTP glue
 * (an exchange per request, the connection table, keys and tenants).
 */
#ifndef KILN_SERVE_IMPL_H
#define KILN_SERVE_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cJSON.h>

#include "chat_api.h"
#include "serve.h"

#define SRV_MAX_STOP 16
#define SRV_MAX_STOP_LEN 256  /* bytes of one stop string */
#define SRV_MAX_MODEL_LEN 256 /* bytes of 'model' */
#define SRV_MAX_TOP 20
#define SRV_MAX_PROMPTS 64 /* prompts in one request's list */
#define SRV_MAX_EMBD_INPUTS 2048 /* inputs of one embedding request, documents of one rerank */

enum srv_api {
    SRV_API_COMPLETIONS, /* POST /v1/completions */
    SRV_API_CHAT,        /* POST /v1/chat/completions */
    SRV_API_LLAMA,       /* POST /completion (llama-server's fields) */
};

/* Whose API shape a chat task answers in (its body was converted to a chat before) */
enum srv_wire {
    SRV_WIRE_OPENAI,    /* as its srv_api says */
    SRV_WIRE_ANTHROPIC, /* POST /v1/messages: a message of content blocks, named stream events */
    SRV_WIRE_RESPONSES, /* POST /v1/responses: a response of output items, named stream events */
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
    enum srv_wire wire;
    int32_t *prompt;
    int32_t n_prompt;
    int32_t n_predict; /* -1: until the slot's context is full */
    struct kiln_sampler *smpl;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int n_probs;        /* top alternatives per token */
    bool want_logprobs; /* a logprob per token */
    bool stream, cache_prompt, include_usage;
    struct kiln_sampling_params sp; /* what smpl was made from (its logit_bias in bias) */
    struct kiln_logit_bias *bias;   /* malloc'd: logit_bias and ignore_eos's bans */
    size_t n_bias;
    bool ignore_eos, return_tokens;  /* return_tokens: /completion's body lists the generated ids */
    int index; /* the choice it answers, for a list of prompts */
    bool special;            /* control tokens written into the text as their markup (the chat parser reads them) */
    struct srv_chat_out chat; /* chat: how the output is read back */
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
    int32_t n_over;      /* refused: a prompt of (at least) this many tokens is over the slot's context */
    int slot;
    double t_queued, t_start, t_first, t_end;
    double deadline; /* srv_now() past which the engine stops it (504); 0: none */

    atomic_bool cancel; /* the client is gone */
    atomic_int refs;

    /* ---- who waits: woken (under mu) when the task publishes; NULL once it stopped waiting */
    struct srv_exchange *x;
    uint32_t tenant; /* whose cached cells it may continue from (0: the keyless clients) */

    /* ---- the engine's own (its thread only, after submission) */
    uint64_t group;         /* the request it came in (fairness between requests) */
    int32_t *seq, n_seq;    /* tokens the cache must hold before its next sample: the prompt, or
                             * after a preemption the prompt, what it generated and the token to decode */
    bool started;           /* has held a slot (timings and tokens_cached are the first start's) */
    bool prompt_accepted;   /* the sampler has seen the prompt */
    int32_t n_gen_resume;   /* tokens generated before a preemption */
    uint64_t step_submit;   /* the engine's step count when it was queued */
    int32_t queue_steps;    /* steps it waited before its prompt first entered a batch (-1: not yet) */
};

/* ---- tasks (task.c) */
struct srv_task *srv_task_new(void); /* one reference, the caller's */
void srv_task_unref(struct srv_task *t);
/* Under t->mu: fail the task with an HTTP status and message, wake its waiter. */
void srv_task_fail_locked(struct srv_task *t, int status, const char *msg);
/* Under t->mu: the task published something (done: it ended); wakes its exchange. */
void srv_task_notify_locked(struct srv_task *t);
/* Seconds on the monotonic clock (the tasks' and the metrics' times). */
double srv_now(void);

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
/* {"id", "n_ctx", "is_processing"} per slot (GET /slots); with isolate, what a slot holds
 * for another tenant than this one is left out. */
cJSON *srv_engine_slots_json(struct srv_engine *e, uint32_t tenant, bool isolate);

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
    struct srv_chat_tmpl *chat; /* the Jinja templates (NULL: native families, s->tmpl) */
    char model_id[256]; /* the first --alias, else the file name, as /v1/models reports it */
    char start_unix[24]; /* when the server started, Unix seconds (/metrics' Process-Start-Time-Unix) */
    char *model_path;
    atomic_ullong next_id; /* response ids */
    atomic_int in_flight;  /* generation responses not yet sent completely */
    struct srv_metrics *metrics;
    int32_t n_ctx_slot;    /* a slot's context (set when the model is attached) */
    int32_t max_piece;     /* bytes of the vocabulary's longest token: n tokens cover at most n * max_piece bytes */
    struct srv_auth *auth;
    struct srv_conns *conns;
    struct srv_work *work;
    char warnings[4][320];
    int n_warnings;
    pthread_mutex_t log_mu; /* libmicrohttpd's messages, rate-limited */
    pthread_mutex_t embd_mu; /* --embeddings: one request at a time on ctx (embed.c) */
    long long log_second;
    int log_count, log_dropped;
    struct srv_grammars *grammars; /* the vocabulary's token index and recent grammars */
};

/* ---- replies (reply.c): a route fills one; the connection's own thread sends it */
struct srv_reply {
    unsigned status; /* 0: none yet */
    char *body;      /* malloc'd */
    const char *type;
    const char *hdr, *hdr_val; /* one more header (Allow, Retry-After), or NULL */
    bool close;                /* Connection: close (the request's framing cannot be trusted) */
};
void srv_reply_clear(struct srv_reply *rp);

/* One request as a route sees it. */
struct srv_req {
    struct kiln_server *srv;
    struct srv_exchange *x; /* its exchange (NULL: parsed without a connection, as the fuzzer does) */
    const char *method, *url;
    const char *body;
    size_t body_len;
    const char *route; /* the matched route's path (metrics), NULL before routing */
    uint32_t tenant;
    struct srv_reply reply;
};
enum MHD_Result srv_reply_json(struct srv_req *r, unsigned status, cJSON *json); /* takes json */
enum MHD_Result srv_reply_plain(struct srv_req *r, unsigned status, char *text);  /* takes malloc'd text */
enum MHD_Result srv_reply_error(struct srv_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 400 for a prompt over the slot's context, in llama-server's shape: type exceed_context_size_error
 * with n_prompt_tokens (at least) and n_ctx (the slot's). */
enum MHD_Result srv_reply_over_context(struct srv_req *r, int32_t n_prompt, int32_t n_ctx, const char *msg);
/* The error body every 4xx/5xx carries: {"error": {"message", "type", "code"}} (malloc'd). */
char *srv_error_body(unsigned status, const char *msg);

/* A row of the route table (http.c). */
/* A comma-separated list (--alias, --tags) as a JSON array of strings: trimmed, without empty
 * names, sorted and unique (routes.c). */
cJSON *srv_name_list(const char *csv);

struct srv_route {
    const char *method, *path;
    enum MHD_Result (*fn)(struct srv_req *r);
    bool needs_model, open; /* open: no API key needed */
    bool worker;            /* runs on a worker (it parses a body), not on the socket's thread */
};

/* ---- exchanges (http.c): one request and its answer, shared by reference count
 * between the connection's thread, a worker and the tasks' waker */
struct srv_group { /* one request's tasks: one per prompt, answered as choices 0..n-1 */
    struct srv_task *t[SRV_MAX_PROMPTS];
    int n;
};
struct srv_exchange {
    struct kiln_server *srv;
    struct MHD_Connection *conn; /* NULL once the connection is done with it */
    struct srv_conn *cn;
    const struct srv_route *route;
    uint32_t tenant;
    char *body; /* the request body, NUL-terminated */
    size_t len, cap;
    struct srv_reply reply;  /* a worker's answer */
    struct srv_group g;      /* a generation's tasks (their x points here) */
    bool stream, in_flight;
    bool queued;             /* handed to a worker */
    atomic_bool prepared;    /* the worker is done: reply or g is set */
    atomic_int refs;
    pthread_mutex_t mu;      /* the suspend/wake hand-over: a leaf lock (MHD's own lock only inside) */
    bool suspended, news;
    atomic_bool gone;        /* the peer reset the connection (net thread) */
};
/* Wake x's connection (any thread; news is kept when it is not suspended). */
void srv_exchange_wake(struct srv_exchange *x);
/* On the connection's thread, in a handler or content reader: suspend it unless woken
 * since (then false: look again). */
bool srv_exchange_suspend(struct srv_exchange *x);
void srv_exchange_ref(struct srv_exchange *x);
void srv_exchange_unref(struct srv_exchange *x);
/* Stop waiting for x's tasks: detach them, cancel the unfinished, drop them. */
void srv_exchange_release_group(struct srv_exchange *x);
/* The headers every answer carries: CORS, and Connection: close when asked or stopping. */
void srv_response_headers(struct kiln_server *s, struct MHD_Connection *c, struct MHD_Response *resp, bool close);
/* generate.c: queue x's stream (its tasks are submitted); fill r with x's whole answer
 * when every task ended (false: not yet). */
enum MHD_Result srv_send_stream(struct srv_exchange *x, struct MHD_Connection *c);
bool srv_group_reply(struct srv_exchange *x, struct srv_req *r);

/* ---- what is decided on the headers (gate.c) */
/* Framing another reader could take differently: 400 with a message, or 0. */
unsigned srv_gate_framing(struct MHD_Connection *c, const char *version, char *msg, size_t msglen);
/* The key (unless open) and the tenant: 0, or 401/400 with a message. */
unsigned srv_gate_who(struct kiln_server *s, struct MHD_Connection *c, bool open, uint32_t *tenant, char *msg,
                      size_t msglen);
/* Access-Control-Allow-Origin for a request from origin (NULL: none may be sent). */
const char *srv_cors_allow(const struct kiln_server *s, const char *origin);
bool srv_cors_valid(const char *list, char *err, size_t errlen);

/* ---- the connection table (conn.c): limits, idle eviction, header and body deadlines,
 * and a thread that watches suspended connections for resets */
enum srv_phase { SRV_PHASE_HEADERS, SRV_PHASE_BODY, SRV_PHASE_WORK };
struct srv_conns;
struct srv_conns *srv_conns_new(struct kiln_server *s, int max, char *err, size_t errlen);
void srv_conns_free(struct srv_conns *cs);
/* MHD's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the table). */
void srv_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* The connection's phase (and which exchange it serves, NULL between requests). */
void srv_conn_phase(struct srv_conns *cs, struct srv_conn *cn, enum srv_phase ph, struct srv_exchange *x);
/* Accepted past --max-connections with no idle connection to close for it. */
bool srv_conn_overflow(const struct srv_conn *cn);
/* Wake every suspended exchange (stopping: none may stay suspended). */
int srv_conns_wake_all(struct srv_conns *cs);
int srv_conns_count(struct srv_conns *cs);

/* ---- keys and tenants (auth.c) */
#define SRV_TENANT_MAX 128 /* bytes of a tenant name (X-Tenant) */
struct srv_auth;
struct srv_auth *srv_auth_new(const struct kiln_server_params *p, char *err, size_t errlen);
void srv_auth_free(struct srv_auth *a);
bool srv_auth_has_keys(const struct srv_auth *a);
bool srv_auth_has_proxies(const struct srv_auth *a);
/* The tenant of a presented key (compared in time independent of the keys' bytes); false: no such key. */
bool srv_auth_key(const struct srv_auth *a, const char *key, uint32_t *tenant);
/* The peer is a --trusted-proxy address. */
bool srv_auth_trusted(const struct srv_auth *a, const struct sockaddr *peer);
/* The id of a tenant name (X-Tenant), added when new; false with a message when the name is not
 * one (1..SRV_TENANT_MAX printable bytes, no spaces) or the table is full. */
bool srv_auth_tenant(struct srv_auth *a, const char *name, uint32_t *id, char *err, size_t errlen);

/* ---- workers (work.c): request bodies are parsed, tokenized and submitted off the
 * sockets' threads, so that a big body never holds up /health */
struct srv_work;
struct srv_work *srv_work_new(int n_threads, void (*fn)(struct srv_exchange *x));
/* Queue x (a reference is taken and dropped after fn ran). */
bool srv_work_submit(struct srv_work *w, struct srv_exchange *x);
/* Refuse more, run what is queued, join the threads. */
void srv_work_stop(struct srv_work *w);
void srv_work_free(struct srv_work *w);

/* ---- routes (routes.c: model-free routes; generate.c: generation) */
enum MHD_Result srv_route_health(struct srv_req *r);
enum MHD_Result srv_route_models(struct srv_req *r);
enum MHD_Result srv_route_props(struct srv_req *r);
enum MHD_Result srv_route_slots(struct srv_req *r);
enum MHD_Result srv_route_metrics(struct srv_req *r);
enum MHD_Result srv_route_tokenize(struct srv_req *r);
/* embed.c: --embeddings / --reranking */
enum MHD_Result srv_route_embeddings_oai(struct srv_req *r);
enum MHD_Result srv_route_embedding(struct srv_req *r);
enum MHD_Result srv_route_rerank(struct srv_req *r);
enum MHD_Result srv_route_detokenize(struct srv_req *r);
enum MHD_Result srv_route_apply_template(struct srv_req *r);
enum MHD_Result srv_route_completions(struct srv_req *r);
enum MHD_Result srv_route_chat(struct srv_req *r);
enum MHD_Result srv_route_completion(struct srv_req *r);
/* A generation from a parsed body (generate.c): the routes above, and the APIs converted to a chat
 * body (anthropic.c); think_budget >= -1 replaces the server's --reasoning-budget. */
enum MHD_Result srv_generate(struct srv_req *r, const cJSON *body, enum srv_api api, enum srv_wire wire,
                             int32_t think_budget);

/* ---- Anthropic's Messages API (anthropic.c) */
enum MHD_Result srv_route_messages(struct srv_req *r);
enum MHD_Result srv_route_count_tokens(struct srv_req *r);
/* from's member name, unless absent or null, copied into to as member as (anthropic.c; the
 * foreign APIs' converters); whether from has it */
bool srv_json_copy(const cJSON *from, const char *name, cJSON *to, const char *as);
/* The chat body's tool_choice naming one function (anthropic.c; both converters) */
void srv_chat_named_tool(cJSON *chat, const char *name);
/* A /v1/messages body as a chat body (count_tokens: !generating, only what the prompt needs; jinja:
 * the server renders with a Jinja template, which 'thinking' is passed to as enable_thinking);
 * *think_budget from 'thinking' (-2: the server's); NULL with a message naming the field. */
cJSON *srv_anthropic_to_chat(const cJSON *body, bool generating, bool jinja, int32_t *think_budget, char *err,
                             size_t errlen);
/* A finished chat task as Anthropic's message. */
cJSON *srv_anthropic_final(struct kiln_server *s, struct srv_task *t);
/* Streaming: each chat.completion.chunk the chat path makes becomes Anthropic's events (objects
 * whose "type" names the event) appended to events; the chunk with a finish_reason ends the message. */
enum srv_ant_kind { SRV_ANT_NONE, SRV_ANT_THINKING, SRV_ANT_TEXT, SRV_ANT_TOOL };
struct srv_anthropic_stream {
    bool started;
    enum srv_ant_kind kind; /* the open block's */
    int index, next;        /* the open block's index; the next block's */
    int tool;               /* the open tool_use block's call index */
};
void srv_anthropic_chunk(struct srv_anthropic_stream *a, struct kiln_server *s, struct srv_task *t, const cJSON *chunk,
                         cJSON *events);

/* ---- OpenAI's Responses API (responses.c), the same way */
enum MHD_Result srv_route_responses(struct srv_req *r);
cJSON *srv_responses_to_chat(const cJSON *body, char *err, size_t errlen);
cJSON *srv_responses_final(struct kiln_server *s, struct srv_task *t);
enum srv_resp_kind { SRV_RESP_NONE, SRV_RESP_REASONING, SRV_RESP_TEXT, SRV_RESP_CALL };
struct srv_responses_stream {
    bool started;
    int seq;                 /* sequence_number of the next event */
    enum srv_resp_kind kind; /* the open item's */
    int index, next, call;   /* its output_index; the next one's; its call index */
    char call_id[96], name[128];
    char *text; /* the open item's text so far (its .done events repeat it) */
    size_t len, cap;
    cJSON *done; /* the items closed, for the final response */
};
void srv_responses_chunk(struct srv_responses_stream *a, struct kiln_server *s, struct srv_task *t, const cJSON *chunk,
                         cJSON *events);
void srv_responses_stream_free(struct srv_responses_stream *a);

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
    SRV_BODY_TOOL_CALL,      /* messages[i].tool_calls[j] */
    SRV_BODY_FUNCTION,       /* messages[i].tool_calls[j].function, messages[i].function_call */
    SRV_BODY_EMBEDDINGS,     /* /v1/embeddings, /embedding(s) */
    SRV_BODY_RERANK,         /* /v1/rerank, /rerank */
    SRV_BODY_MESSAGES,       /* POST /v1/messages (Anthropic) and /v1/messages/count_tokens */
    SRV_BODY_MESSAGES_MSG,   /* its messages[i] */
    SRV_BODY_BLOCK,          /* its content blocks (and system's) */
    SRV_BODY_MESSAGES_TOOL,  /* its tools[i] */
    SRV_BODY_RESPONSES,      /* POST /v1/responses (OpenAI) */
    SRV_BODY_RESP_ITEM,      /* its input[i] */
    SRV_BODY_RESP_PART,      /* an input item's content parts */
    SRV_BODY_RESP_TOOL,      /* its tools[i] */
};
/* Every member of obj must be a field this body implements, or a field kiln does not
 * implement given the value that asks for nothing; false with a message naming the
 * first other one. where names obj in the message (NULL: the body's route). */
bool srv_check_fields(const cJSON *obj, enum srv_body body, const char *where, char *err, size_t errlen);

/* Bytes of the vocabulary's longest token (special ones as their text): the most text one token covers. */
int32_t srv_longest_piece(const struct kiln_vocab *v);

/* ---- request parsing (params.c): each returns false with a message naming the field */
cJSON *srv_parse_body(struct srv_req *r, char *err, size_t errlen); /* an object, or NULL */
/* messages[i] (m) into what native family renders: its role as the template knows it and
 * its content (malloc'd into *content) with an assistant's tool calls after it (roles.c). */
bool srv_message_lower(enum kiln_chat_template family, const cJSON *m, int i, struct kiln_chat_msg *out,
                       char **content, char *err, size_t errlen);
/* The conversation in messages, rendered with a native template family (malloc'd; roles.c). */
char *srv_render_native(enum kiln_chat_template family, const cJSON *messages, bool add_assistant, char *err,
                        size_t errlen);
/* ---- chats (chat.c, chat_api.h): the model's template, messages, tools; chat_reply.c: the output read back */
/* The templates of the attached model (or the --chat-template override); false with a message naming
 * the template line. */
bool srv_chat_load(struct kiln_server *s, char *err, size_t errlen);
void srv_chat_free(struct kiln_server *s);
/* A chat body rendered with the server's templates (srv_chat_tmpl_render) */
char *srv_chat_render(struct kiln_server *s, const cJSON *body, enum srv_body which, struct srv_chat_out *out,
                      int *status, char *err, size_t errlen);
/* The assistant's message of a finished chat task ({"role", "content", "reasoning_content", "tool_calls"}),
 * its finish reason in *finish. */
cJSON *srv_chat_message(struct kiln_server *s, struct srv_task *t, const char **finish);
/* Streaming a parsed chat: what was sent of each part */
struct srv_chat_sent {
    size_t content, reasoning, n_calls;
    size_t args[64]; /* bytes of each call's arguments sent (calls past 64 go out whole) */
    bool named[64];
    bool any_call;
    int32_t toks; /* tokens whose logprobs were sent */
};
/* Under t->mu: the deltas for what the task's text adds since *sent (chat.completion.chunk objects
 * appended to events); final: the whole text, read as finished. */
bool srv_chat_deltas(struct kiln_server *s, struct srv_task *t, struct srv_chat_sent *sent, bool final,
                     cJSON *events);
/* Tokenize text (special tokens parsed); malloc'd ids, or -1. */
int32_t srv_tokenize(const struct kiln_vocab *v, const char *text, size_t len, bool add_special, int32_t **ids);
/* Parse a body, strictly: one JSON object, no duplicate key, no NUL or raw control
 * character in a string (json_strict.c); NULL with a message. */
cJSON *srv_parse_json(const char *body, size_t len, char *err, size_t errlen);
/* Tokenize a prompt of len bytes for a slot: refused without tokenizing it whole when it cannot
 * fit n_ctx_slot tokens (-2 - N, N the tokens it has at least; message in err); malloc'd ids, or
 * -1 when it cannot be tokenized. */
int32_t srv_tokenize_prompt(struct kiln_server *s, const char *field, const char *text, size_t len,
                            bool add_special, int32_t **ids, char *err, size_t errlen);
/* The same against a context of n_ctx tokens (/tokenize: the whole context). */
int32_t srv_tokenize_bounded(struct kiln_server *s, const char *field, const char *text, size_t len,
                             bool add_special, int64_t n_ctx, int32_t **ids, char *err, size_t errlen);
/* One request's tasks from its body (prompts tokenized, fields checked), not yet submitted;
 * false with the status and message to answer. */
bool srv_build_group(struct kiln_server *s, const cJSON *body, enum srv_api api, const char *url, uint32_t tenant,
                     struct srv_group *g, unsigned *status, int32_t *n_over, char *err, size_t errlen);
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
bool srv_parse_grammar(struct kiln_server *s, const cJSON *body, enum srv_api api, const struct srv_chat_out *chat,
                       struct kiln_sampler **stage,
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

/* ---- metrics (metrics.c): counters the engine and the HTTP side bump, GET /metrics */
struct srv_metrics;
struct srv_engine_stats { /* the engine's gauges at one moment */
    int processing, deferred, n_slots, queue_max, connections;
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
/* A running task gave its slot to a request that had none (fairness). */
void srv_metrics_preempted(struct srv_metrics *m);
/* Connections: closed idle for a newcomer past --max-connections, answered 503 past it,
 * cut at the header or body deadline, reset by the peer while waiting. */
enum srv_conn_event { SRV_CONN_EVICTED, SRV_CONN_OVERFLOW, SRV_CONN_DEADLINE, SRV_CONN_RESET, SRV_CONN_EVENTS };
void srv_metrics_conn(struct srv_metrics *m, enum srv_conn_event ev);
/* The Prometheus text (malloc'd), NULL when out of memory. */
char *srv_metrics_render(struct srv_metrics *m, const struct srv_engine_stats *es);
/* The engine bumps m from now on (set before the first task is submitted). */
void srv_engine_set_metrics(struct srv_engine *e, struct srv_metrics *m);
void srv_engine_stats(struct srv_engine *e, struct srv_engine_stats *out);
/* An entry of the prefix cache was dropped (n_tokens tokens). */
void srv_metrics_evicted(struct srv_metrics *m, int32_t n_tokens);
/* n_tokens of a cached prefix recomputed instead of reused: a sliding-window cache no
 * longer held the cells needed to resume after them (kiln_kv_seq_resumable). */
void srv_metrics_window_lost(struct srv_metrics *m, int32_t n_tokens);

/* ---- the prefix cache (prefix_cache.c): runs of tokens parked on spare sequences
 * [first_seq, first_seq + n_seqs), budget_mib of KV cells (-1: no limit); used by the
 * engine's thread only */
struct srv_prefix_cache;
struct srv_prefix_cache *srv_pcache_new(struct kiln_context *ctx, int32_t first_seq, int n_seqs, long long budget_mib,
                                        struct srv_metrics *metrics);
void srv_pcache_free(struct srv_prefix_cache *pc);
void srv_pcache_set_metrics(struct srv_prefix_cache *pc, struct srv_metrics *m);
/* Before seq drops its tokens past keep for the prompt want[0, n_want): keep tokens[0, n)
 * (seq's cells 0 .. n-1, decoded for tenant) on a spare sequence, never evicting an entry
 * want continues from; true when they are held now. */
bool srv_pcache_park(struct srv_prefix_cache *pc, int32_t seq, const int32_t *tokens, int32_t n, int32_t keep,
                     const int32_t *want, int32_t n_want, uint32_t tenant);
/* The longest prefix of prompt[0, limit) an entry of tenant holds and can resume from (a
 * sliding-window cache may have let the cells before a shorter cut go), its sequence in *seq
 * (0: none); *lost (if not NULL): how much longer the match was by tokens alone. */
int32_t srv_pcache_best(struct srv_prefix_cache *pc, const int32_t *prompt, int32_t limit, uint32_t tenant,
                        int32_t *seq, int32_t *lost);
/* Drop the least recently used entry; false when none is left. */
bool srv_pcache_evict_lru(struct srv_prefix_cache *pc);
long long srv_pcache_tokens(const struct srv_prefix_cache *pc);

#endif
