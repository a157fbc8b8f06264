/*
 * http.c - the HTTP side on libmicrohttpd: listening, the route table, each
 * request's exchange from its headers to its answer, and the server's life cycle.
 *
 * No thread per connection: libmicrohttpd polls every socket with epoll in a
 * few threads (--threads-http) and a handler never blocks, so an idle or slow
 * socket costs a descriptor and a table entry (conn.c), not a thread. A
 * request is judged on its headers (gate.c: framing, key, tenant; 404, 405; a
 * Content-Length over --max-body) before a byte of its body is read. A route
 * with a body then runs on a worker (work.c) while its connection is
 * suspended, and a generation waits for the engine suspended too: the task
 * resumes it (srv_exchange_wake) when it ends, or for a stream whenever it has
 * tokens. Suspend/resume is what libmicrohttpd offers for a handler to wait
 * without a thread and without busy polling; a response callback alone would
 * still be called in a loop while it has nothing to give.
 */
#include "serve_impl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct kiln_server_params kiln_server_default_params(void) {
    return (struct kiln_server_params){.host = "127.0.0.1",
                                       .port = 8080,
                                       .n_parallel = 1,
                                       .timeout_s = 600,
                                       .api_key = NULL,
                                       .n_predict = -1,
                                       .queue_max = 64,
                                       .max_body = 4u << 20,
                                       .prefill_chunk = 128,
                                       .request_timeout_s = 0,
                                       .drain_s = 0,
                                       .prefix_share = KILN_PREFIX_SHARE_TENANT,
                                       .cache_ram_mib = 8192,
                                       .max_connections = 0,
                                       .threads_http = 0,
                                       .header_timeout_s = 30,
                                       .body_timeout_s = 60,
                                       .cors_origins = "*",
                                       .jinja = true,
                                       .reasoning = true,
                                       .reasoning_budget = -1,
                                       .sampling = kiln_sampling_default_params(),
                                       .slots = true};
}

/* ------------------------------------------------------------------ routes */

static const struct srv_route routes[] = {
    {"GET", "/health", srv_route_health, false, true, false},
    {"GET", "/v1/health", srv_route_health, false, true, false},
    {"GET", "/v1/models", srv_route_models, true, false, false},
    {"GET", "/models", srv_route_models, true, false, false},
    {"GET", "/props", srv_route_props, true, false, false},
    {"GET", "/slots", srv_route_slots, true, false, false},
    {"GET", "/metrics", srv_route_metrics, true, false, false},
    {"POST", "/tokenize", srv_route_tokenize, true, false, true},
    {"POST", "/detokenize", srv_route_detokenize, true, false, true},
    {"POST", "/apply-template", srv_route_apply_template, true, false, true},
    {"POST", "/v1/completions", srv_route_completions, true, false, true},
    {"POST", "/completions", srv_route_completion, true, false, true}, /* llama-server: the native form */
    {"POST", "/v1/chat/completions", srv_route_chat, true, false, true},
    {"POST", "/chat/completions", srv_route_chat, true, false, true},
    {"POST", "/completion", srv_route_completion, true, false, true},
    {"POST", "/v1/embeddings", srv_route_embeddings_oai, true, false, true},
    {"POST", "/embeddings", srv_route_embedding, true, false, true},
    {"POST", "/embedding", srv_route_embedding, true, false, true},
    {"POST", "/v1/rerank", srv_route_rerank, true, false, true},
    {"POST", "/rerank", srv_route_rerank, true, false, true},
    {"POST", "/v1/reranking", srv_route_rerank, true, false, true},
    {"POST", "/reranking", srv_route_rerank, true, false, true},
    {"POST", "/v1/messages", srv_route_messages, true, false, true},
    {"POST", "/v1/messages/count_tokens", srv_route_count_tokens, true, false, true},
    {"POST", "/v1/responses", srv_route_responses, true, false, true},
    {"POST", "/responses", srv_route_responses, true, false, true},
};

/* ------------------------------------------------------------------ exchanges */

static struct srv_exchange *exchange_new(struct kiln_server *s, struct MHD_Connection *c) {
    struct srv_exchange *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->srv = s;
    x->conn = c;
    atomic_init(&x->refs, 1);
    atomic_init(&x->prepared, false);
    atomic_init(&x->gone, false);
    pthread_mutex_init(&x->mu, NULL);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    x->cn = ci ? ci->socket_context : NULL;
    return x;
}

void srv_exchange_ref(struct srv_exchange *x) { atomic_fetch_add(&x->refs, 1); }

void srv_exchange_release_group(struct srv_exchange *x) {
    struct kiln_server *s = x->srv;
    for (int i = 0; i < x->g.n; i++) {
        struct srv_task *t = x->g.t[i];
        pthread_mutex_lock(&t->mu);
        t->x = NULL; /* the engine wakes nobody through it from now on */
        const bool done = t->done;
        pthread_mutex_unlock(&t->mu);
        if (!done) {
            atomic_store(&t->cancel, true);
            if (s->engine) srv_engine_poke(s->engine);
        }
        srv_task_unref(t);
    }
    x->g.n = 0;
    if (x->in_flight) atomic_fetch_sub(&s->in_flight, 1);
    x->in_flight = false;
}

void srv_exchange_unref(struct srv_exchange *x) {
    if (!x || atomic_fetch_sub(&x->refs, 1) != 1) return;
    srv_exchange_release_group(x);
    srv_reply_clear(&x->reply);
    free(x->body);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

void srv_exchange_wake(struct srv_exchange *x) {
    pthread_mutex_lock(&x->mu);
    if (x->suspended && x->conn) {
        x->suspended = false;
        MHD_resume_connection(x->conn);
    } else {
        x->news = true;
    }
    pthread_mutex_unlock(&x->mu);
}

bool srv_exchange_suspend(struct srv_exchange *x) {
    pthread_mutex_lock(&x->mu);
    if (x->news || atomic_load(&x->gone)) { /* woken since the caller looked: look again */
        x->news = false;
        pthread_mutex_unlock(&x->mu);
        return false;
    }
    x->suspended = true;
    MHD_suspend_connection(x->conn);
    pthread_mutex_unlock(&x->mu);
    return true;
}

/* ------------------------------------------------------------------ sending */

static void add_cors(struct kiln_server *s, struct MHD_Connection *c, struct MHD_Response *resp) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *allow = srv_cors_allow(s, origin);
    if (allow) MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    if (origin) MHD_add_response_header(resp, "Vary", "Origin");
}

void srv_response_headers(struct kiln_server *s, struct MHD_Connection *c, struct MHD_Response *resp, bool close) {
    add_cors(s, c, resp);
    /* draining: a kept-alive connection (a balancer's) must not bring more requests */
    if (close || atomic_load(&s->stopping)) MHD_add_response_header(resp, "Connection", "close");
}

/* Queue rp on c (its body is taken). */
static enum MHD_Result send_reply(struct kiln_server *s, struct MHD_Connection *c, struct srv_reply *rp,
                                  const char *route) {
    unsigned status = rp->body ? rp->status : 500; /* a reply without a body is a bug: say so */
    char *body = rp->body ? rp->body : srv_error_body(500, "no answer");
    if (!body) return MHD_NO;
    rp->body = NULL;
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", rp->type ? rp->type : "application/json; charset=utf-8");
    if (rp->hdr) MHD_add_response_header(resp, rp->hdr, rp->hdr_val);
    srv_response_headers(s, c, resp, rp->close);
    srv_metrics_response(s->metrics, route, status);
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    srv_reply_clear(rp);
    return ret;
}

__attribute__((format(printf, 5, 6))) static enum MHD_Result send_error(struct kiln_server *s, struct MHD_Connection *c,
                                                                      const char *route, unsigned status,
                                                                      const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct srv_req r = {.srv = s};
    srv_reply_error(&r, status, "%s", msg);
    return send_reply(s, c, &r.reply, route);
}

/* A browser's CORS preflight: the route's method and the headers a client sends. */
static enum MHD_Result send_preflight(struct kiln_server *s, struct MHD_Connection *c, const char *allow) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    (void)allow;
    add_cors(s, c, resp);
    /* llama-server's preflight: 200, the methods of its whole API, credentials allowed (kiln takes
     * keys as bearer tokens, never cookies); the headers are named, since a wildcard never covers
     * Authorization in a browser */
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                            "Content-Type, Authorization, X-Api-Key, Anthropic-Version");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A body past --max-body after it began (chunked, or longer than announced): libmicrohttpd
 * only queues a response before or after the body, so the 413 is written to the socket
 * as is and the connection closed; nothing more of the body is read. */
static enum MHD_Result refuse_body(struct kiln_server *s, struct MHD_Connection *c) {
    char msg[96], head[256];
    snprintf(msg, sizeof msg, "request body over the limit of %zu bytes", s->p.max_body);
    char *body = srv_error_body(413, msg);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (body && ci) {
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json; charset=utf-8\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                         strlen(body));
        if (send(ci->connect_fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
            (void)!send(ci->connect_fd, body, strlen(body), MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(ci->connect_fd, SHUT_WR);
    }
    free(body);
    srv_metrics_response(s->metrics, NULL, 413);
    return MHD_NO;
}

/* ------------------------------------------------------------------ a request */

/* The worker's half: run the route, then wake the connection to send what it made. */
static void run_route(struct srv_exchange *x) {
    struct srv_req r = {.srv = x->srv, .x = x, .method = x->route->method, .url = x->route->path,
                        .body = x->body ? x->body : "", .body_len = x->len, .route = x->route->path,
                        .tenant = x->tenant};
    x->route->fn(&r);
    x->reply = r.reply;
    atomic_store(&x->prepared, true);
    srv_exchange_wake(x);
}

/* Headers complete: judge the request before its body. */
static enum MHD_Result on_headers(struct kiln_server *s, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, void **con_cls) {
    struct srv_exchange *x = exchange_new(s, c);
    if (!x) return MHD_NO;
    *con_cls = x;
    srv_conn_phase(s->conns, x->cn, SRV_PHASE_BODY, x);
    const struct srv_route *found = NULL;
    bool path_known = false;
    char allow[32] = "", msg[256] = "";
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].path, url)) continue;
        path_known = true;
        snprintf(allow, sizeof allow, "%s", routes[i].method);
        if (!strcmp(routes[i].method, method)) found = &routes[i];
    }
    const char *route = found ? found->path : NULL;
    if (srv_conn_overflow(x->cn) && !(found && found->fn == srv_route_health)) {
        srv_metrics_conn(s->metrics, SRV_CONN_OVERFLOW);
        struct srv_req r = {.srv = s};
        srv_reply_error(&r, 503, "the server holds its limit of %d connections (--max-connections)",
                        s->p.max_connections);
        r.reply.close = true;
        return send_reply(s, c, &r.reply, route);
    }
    unsigned st = srv_gate_framing(c, version, msg, sizeof msg);
    if (st) {
        struct srv_req r = {.srv = s};
        srv_reply_error(&r, st, "%s", msg);
        r.reply.close = true; /* what follows on this connection cannot be told apart */
        return send_reply(s, c, &r.reply, route);
    }
    if (!path_known) return send_error(s, c, NULL, 404, "no route %s %.200s", method, url);
    if (!strcmp(method, "OPTIONS")) return send_preflight(s, c, allow);
    if (!found) {
        struct srv_req r = {.srv = s};
        srv_reply_error(&r, 405, "%.200s does not take %s (use %s)", url, method, allow);
        r.reply.hdr = "Allow";
        r.reply.hdr_val = allow;
        return send_reply(s, c, &r.reply, NULL);
    }
    if ((st = srv_gate_who(s, c, found->open, &x->tenant, msg, sizeof msg)) != 0)
        return send_error(s, c, route, st, "%s", msg);
    if (found->needs_model && !atomic_load(&s->ready)) return send_error(s, c, route, 503, "loading model");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > s->p.max_body)
        return send_error(s, c, route, 413, "request body of %s bytes is over the limit of %zu", cl, s->p.max_body);
    x->route = found;
    return MHD_YES;
}

/* The body is in (or the connection was resumed): answer, or wait suspended. */
static enum MHD_Result on_ready(struct kiln_server *s, struct srv_exchange *x, struct MHD_Connection *c) {
    const char *route = x->route->path;
    if (!x->route->worker) {
        struct srv_req r = {.srv = s, .x = x, .method = x->route->method, .url = route, .body = "", .route = route,
                            .tenant = x->tenant};
        x->route->fn(&r);
        return send_reply(s, c, &r.reply, route);
    }
    for (;;) {
        if (atomic_load(&x->gone)) return MHD_NO; /* reset by its peer, or the server stops: close */
        if (!atomic_load(&x->prepared)) {
            if (srv_exchange_suspend(x)) return MHD_YES;
            continue;
        }
        if (x->reply.status) {
            srv_exchange_release_group(x);
            return send_reply(s, c, &x->reply, route);
        }
        if (!x->g.n) return send_error(s, c, route, 500, "the route gave no answer");
        if (x->stream) return srv_send_stream(x, c);
        struct srv_req r = {.srv = s, .x = x, .route = route, .tenant = x->tenant};
        if (srv_group_reply(x, &r)) {
            srv_exchange_release_group(x);
            return send_reply(s, c, &r.reply, route);
        }
        if (srv_exchange_suspend(x)) return MHD_YES;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    struct kiln_server *s = cls;
    struct srv_exchange *x = *con_cls;
    if (!x) return on_headers(s, c, url, method, version, con_cls);
    if (!x->route) return MHD_NO; /* answered on its headers */
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (x->len + n > s->p.max_body) return refuse_body(s, c);
        return srv_bytes_append(&x->body, &x->len, &x->cap, upload, n) ? MHD_YES : MHD_NO;
    }
    if (x->route->worker && !x->queued) { /* the whole body is in */
        x->queued = true;
        srv_conn_phase(s->conns, x->cn, SRV_PHASE_WORK, x);
        if (!srv_work_submit(s->work, x))
            return send_error(s, c, x->route->path, 503, "the server is shutting down");
    } else if (!x->route->worker) {
        srv_conn_phase(s->conns, x->cn, SRV_PHASE_WORK, x);
    }
    return on_ready(s, x, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    struct kiln_server *s = cls;
    struct srv_exchange *x = *con_cls;
    *con_cls = NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn_phase(s->conns, ci ? ci->socket_context : NULL, SRV_PHASE_HEADERS, NULL); /* keep-alive: next request */
    if (!x) return;
    pthread_mutex_lock(&x->mu);
    x->conn = NULL; /* nothing resumes it from now on */
    pthread_mutex_unlock(&x->mu);
    /* its tasks go now, unless a worker still fills them in (its reference releases them then)
     * or a stream's end does */
    if (atomic_load(&x->prepared) && !x->stream) srv_exchange_release_group(x);
    srv_exchange_unref(x);
}

/* ------------------------------------------------------------------ life cycle */

/* libmicrohttpd's own messages (a client gone mid-response ...), marked as ours; at most
 * LOG_PER_S a second, the rest counted: 600 hostile sockets must not write 600 lines */
#define LOG_PER_S 5
static void on_log(void *cls, const char *fmt, va_list ap) {
    struct kiln_server *s = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') msg[--n] = 0;
    pthread_mutex_lock(&s->log_mu);
    long long now = (long long)srv_now();
    if (now != s->log_second) {
        if (s->log_dropped) fprintf(stderr, "kiln serve: http: (%d more such messages)\n", s->log_dropped);
        s->log_second = now;
        s->log_count = s->log_dropped = 0;
    }
    if (s->log_count++ < LOG_PER_S) fprintf(stderr, "kiln serve: http: %s\n", msg);
    else s->log_dropped++;
    pthread_mutex_unlock(&s->log_mu);
}

static bool is_loopback(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss_family == AF_INET6) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(in6) || (IN6_IS_ADDR_V4MAPPED(in6) && in6->s6_addr[12] == 127);
    }
    return false;
}

__attribute__((format(printf, 2, 3))) static void warn(struct kiln_server *s, const char *fmt, ...) {
    if (s->n_warnings == (int)(sizeof s->warnings / sizeof s->warnings[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->warnings[s->n_warnings++], sizeof s->warnings[0], fmt, ap);
    va_end(ap);
}

const char *kiln_server_warning(const struct kiln_server *s, int i) {
    return i >= 0 && i < s->n_warnings ? s->warnings[i] : NULL;
}

/* Connections the file-descriptor limit allows, and what --max-connections becomes. */
static bool size_connections(struct kiln_server *s, unsigned *mhd_limit, char *err, size_t errlen) {
    struct rlimit rl = {0};
    long long fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long long)rl.rlim_cur
                                                                                       : 65536;
    long long avail = fds - 64; /* the model, logs, epoll and wake-up descriptors */
    long long reserve = avail / 8 > 8 ? avail / 8 : 8; /* room to answer 503 past the limit */
    if (avail - reserve < 16) {
        snprintf(err, errlen, "%lld file descriptors (ulimit -n) leave no room for connections", fds);
        return false;
    }
    if (s->p.max_connections <= 0) {
        long long m = avail - reserve;
        s->p.max_connections = (int)(m > 8192 ? 8192 : m);
    } else if (s->p.max_connections + reserve > avail) {
        snprintf(err, errlen,
                 "--max-connections %d needs %lld file descriptors and the limit is %lld (raise ulimit -n)",
                 s->p.max_connections, s->p.max_connections + reserve + 64, fds);
        return false;
    }
    reserve = s->p.max_connections / 8 > 8 ? s->p.max_connections / 8 : 8;
    *mhd_limit = (unsigned)(s->p.max_connections + reserve);
    return true;
}

struct kiln_server *kiln_server_start(const struct kiln_server_params *p, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST},
                    *ai = NULL;
    if (p->port < 0 || p->port > 65535) {
        snprintf(err, errlen, "port %d out of range (0..65535)", p->port);
        return NULL;
    }
    if (!srv_cors_valid(p->cors_origins, err, errlen)) return NULL;
    int gai = getaddrinfo(p->host, NULL, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "host '%s' is not a numeric IPv4/IPv6 address: %s", p->host, gai_strerror(gai));
        return NULL;
    }
    struct sockaddr_storage addr;
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (v6) ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)p->port);
    else ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)p->port);

    struct kiln_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->p = *p;
    snprintf(s->start_unix, sizeof s->start_unix, "%lld", (long long)time(NULL));
    atomic_init(&s->ready, false);
    atomic_init(&s->stopping, false);
    atomic_init(&s->in_flight, 0);
    atomic_init(&s->next_id, 0);
    pthread_mutex_init(&s->log_mu, NULL);
    pthread_mutex_init(&s->embd_mu, NULL);
    unsigned mhd_limit = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = p->threads_http > 0 ? p->threads_http : cores > 4 ? 4 : cores < 2 ? 2 : (int)cores;
    if (!size_connections(s, &mhd_limit, err, errlen) || !(s->metrics = srv_metrics_new()) ||
        !(s->auth = srv_auth_new(p, err, errlen)) || !(s->conns = srv_conns_new(s, s->p.max_connections, err, errlen)) ||
        !(s->work = srv_work_new(threads, run_route))) {
        if (!err[0]) snprintf(err, errlen, "out of memory");
        goto fail;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (v6 ? MHD_USE_IPv6 : 0);
    unsigned backlog = mhd_limit < 4096 ? mhd_limit : 4096; /* a burst of clients waits, not refused */
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, s, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, srv_conns_notify, s->conns,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(p->timeout_s > 0 ? p->timeout_s : 0), MHD_OPTION_CONNECTION_LIMIT,
        mhd_limit, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_LISTEN_BACKLOG_SIZE, backlog,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine?)", p->host,
                 p->port);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;

    bool keys = srv_auth_has_keys(s->auth);
    const char *cors = p->cors_origins ? p->cors_origins : "*";
    if (!keys && !strcmp(cors, "*"))
        warn(s, "no API key is set and every origin may call (CORS): any web page a browser here opens can use "
                "this server; set --api-key or --cors-origins");
    if (!keys && !is_loopback(&addr))
        warn(s, "no API key is set and %s is not a loopback address: anyone who reaches it can use this server",
             p->host);
    if (p->queue_max + p->n_parallel > s->p.max_connections)
        warn(s, "--queue %d cannot fill: each waiting request holds a connection and --max-connections is %d",
             p->queue_max, s->p.max_connections);
    return s;
fail:
    srv_work_stop(s->work);
    srv_work_free(s->work);
    srv_conns_free(s->conns);
    srv_auth_free(s->auth);
    srv_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->log_mu);
    pthread_mutex_destroy(&s->embd_mu);
    free(s);
    return NULL;
}

int kiln_server_port(const struct kiln_server *s) { return s->port; }

int32_t srv_longest_piece(const struct kiln_vocab *v) {
    int32_t n = kiln_vocab_n_tokens(v), best = 1;
    for (int32_t id = 0; id < n; id++) {
        int64_t len = kiln_token_to_piece(v, id, NULL, 0, true);
        if (len < 0 && len != KILN_ERR_INVALID && -len > best) best = (int32_t)(-len > INT32_MAX ? INT32_MAX : -len);
    }
    return best;
}

bool kiln_server_attach(struct kiln_server *s, const struct kiln_model *model, struct kiln_context *ctx,
                        const char *model_path, char *err, size_t errlen) {
    s->model = model;
    s->vocab = kiln_model_vocab(model);
    s->ctx = ctx;
    s->tmpl = kiln_model_chat_template(model, NULL);
    s->max_piece = srv_longest_piece(s->vocab);
    const char *base = strrchr(model_path, '/');
    if (s->p.embeddings) { /* no slots, no engine: embed.c decodes on ctx itself */
        snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : model_path);
        s->model_path = strdup(model_path);
        s->n_ctx_slot = (int32_t)kiln_n_ctx(ctx);
        if (!s->model_path) return snprintf(err, errlen, "out of memory"), false;
        atomic_store(&s->ready, true);
        return true;
    }
    if (!srv_chat_load(s, err, errlen)) return false;
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : model_path);
    cJSON *aliases = srv_name_list(s->p.alias);
    if (cJSON_GetArraySize(aliases) > 0) snprintf(s->model_id, sizeof s->model_id, "%s", aliases->child->valuestring);
    cJSON_Delete(aliases);
    s->model_path = strdup(model_path);
    if (!(s->grammars = srv_grammars_new(s->vocab, err, errlen))) return false;
    s->engine = srv_engine_new(model, ctx, &s->p, err, errlen);
    if (s->engine) {
        srv_engine_set_metrics(s->engine, s->metrics); /* before /health turns 200: no task yet */
        s->n_ctx_slot = srv_engine_n_ctx_slot(s->engine);
    }
    if (!s->engine || !s->model_path) {
        if (s->engine && !s->model_path) snprintf(err, errlen, "out of memory");
        return false;
    }
    atomic_store(&s->ready, true);
    return true;
}

static void wait_in_flight(struct kiln_server *s, long ms) {
    for (long i = 0; i < ms / 10 && atomic_load(&s->in_flight) > 0; i++)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
}

void kiln_server_stop(struct kiln_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(s->daemon); /* no new connections */
    /* closed now, not after the drain: a connecting client (a balancer) is refused at
     * once and goes elsewhere instead of waiting in the backlog */
    if (ls != MHD_INVALID_SOCKET) close(ls);
    /* graceful: what runs may finish within --drain seconds (new requests get 503) */
    wait_in_flight(s, s->p.drain_s * 1000L);
    srv_work_stop(s->work);                        /* what is queued runs (and answers 503) */
    if (s->engine) srv_engine_shutdown(s->engine); /* waiters get their error now */
    wait_in_flight(s, 3000); /* let them send it (bounded: a client that does not read is cut off) */
    /* libmicrohttpd must not be stopped with a connection suspended */
    for (int i = 0; i < 100 && srv_conns_wake_all(s->conns) > 0; i++)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    MHD_stop_daemon(s->daemon); /* closes the connections: every exchange is released */
    srv_conns_free(s->conns);
    srv_work_free(s->work);
    srv_engine_free(s->engine);
    srv_auth_free(s->auth);
    srv_chat_free(s);
    srv_grammars_free(s->grammars);
    srv_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->log_mu);
    free(s->model_path);
    free(s);
}
