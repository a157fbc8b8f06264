/*
 * serve.h - the HTTP server behind `kiln serve`, as the tool sees it: start it
 * listening (GET /health answers 503 while the model loads), hand it the loaded
 * model and context, stop it. Everything else is private to src/serve.
 */
#ifndef KILN_SERVE_H
#define KILN_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln.h"

/* Which requests may continue from KV cells another request decoded (the prefix cache,
 * other slots' cells, a slot's own cells). Tenants are API keys (--api-key-file maps
 * several keys to one) or X-Tenant from a trusted proxy; without keys every client is
 * one tenant. */
enum kiln_prefix_share {
    KILN_PREFIX_SHARE_TENANT, /* within one tenant only: nothing one tenant sent shows in another's answers */
    KILN_PREFIX_SHARE_GLOBAL, /* every request may continue from every other's cells */
    KILN_PREFIX_SHARE_OFF,    /* only a slot's own cells, left by the same tenant (llama-server's reuse) */
};

struct kiln_server_params {
    const char *host;     /* address to bind ("127.0.0.1", "::1", "0.0.0.0" ...) */
    int port;             /* 0: any free port (kiln_server_port says which) */
    int n_parallel;       /* slots: sequences decoded together (the context's n_seq_max) */
    int timeout_s;        /* inactivity limit of a connection (a client that neither sends nor reads) */
    const char *api_key;  /* NULL: no authentication (with api_key_file: one more key) */
    const char *api_key_file; /* NULL, or a file of keys, one a line, each "KEY [TENANT]" */
    int n_predict;        /* default token limit per request (-1: the slot's context) */
    int queue_max;        /* requests waiting for a slot before 503 */
    size_t max_body;      /* request body limit in bytes (413 beyond) */
    int prefill_chunk;    /* most prompt tokens per step while other slots generate */
    int request_timeout_s; /* a generation still running (or waiting) after this many seconds: 504; 0: none */
    int drain_s;           /* on stop: stop accepting, let what runs finish for up to this many seconds */
    enum kiln_prefix_share prefix_share;
    int cache_ram_mib;     /* KV cells kept for prefixes after their slot moved on, MiB (-1: no limit, 0: none);
                            * they live on the context's sequences past n_parallel */
    int max_connections;   /* open connections before idle ones are closed and then 503 (0: from the
                            * file-descriptor limit) */
    int threads_http;      /* threads polling the sockets (0: from the cores) */
    int header_timeout_s;  /* a request's headers must arrive within this many seconds of the connection
                            * opening or the previous answer (idle keep-alive included) */
    int body_timeout_s;    /* its body within this many seconds of its headers */
    const char *trusted_proxies; /* NULL, or comma-separated numeric addresses whose X-Tenant header is believed */
    const char *cors_origins;    /* "*" (default), "localhost", or comma-separated origins allowed to call */
    bool jinja;                /* render chats with the model's Jinja template (llama-server's --jinja); false:
                                * kiln's native template families */
    const char *chat_template; /* --chat-template: a native family's name or a Jinja template's text (NULL: the
                                * model's own) */
    bool reasoning;      /* --reasoning-format deepseek (the default): thinking goes to reasoning_content; false: none */
    bool embeddings;     /* --embeddings: the context makes embeddings (its params.embeddings); the embedding
                          * and rerank routes answer, generation does not */
    int reasoning_budget; /* --reasoning-budget: tokens of thinking before </think> is forced (-1: no limit,
                           * 0: thinking off) */
    struct kiln_sampling_params sampling; /* --temp, --top-k, ..., --seed: what a request that sets none gets
                                           * (seed KILN_SEED_RANDOM: a new draw per request) */
    const char *alias; /* --alias: comma-separated names of the model (NULL: its file name); the first in
                        * byte order is its id, as llama-server */
    const char *tags;  /* --tags: comma-separated tags /v1/models lists (NULL: none) */
    bool slots;        /* GET /slots answers (--no-slots: 501, as llama-server) */
    bool metrics;      /* GET /metrics answers (--metrics; off: 501, as llama-server) */
};
struct kiln_server_params kiln_server_default_params(void);

struct kiln_server;

/* Listen; NULL with a message in err (address in use, bad host ...). */
struct kiln_server *kiln_server_start(const struct kiln_server_params *p, char *err, size_t errlen);
int kiln_server_port(const struct kiln_server *s);
/* The i-th start-up warning (no API key with every origin allowed, no key on a
 * non-loopback address, a --queue that the connection limit cannot reach ...),
 * NULL past the last. */
const char *kiln_server_warning(const struct kiln_server *s, int i);
/* Serve this model (the server borrows both until kiln_server_stop; the context
 * must have n_seq_max >= n_parallel). Starts the decode loop; /health turns 200. */
bool kiln_server_attach(struct kiln_server *s, const struct kiln_model *model, struct kiln_context *ctx,
                        const char *model_path, char *err, size_t errlen);
/* Stop accepting, cancel what runs or waits (clients get an error), close every
 * connection, join the threads, free the server. */
void kiln_server_stop(struct kiln_server *s);

#endif
