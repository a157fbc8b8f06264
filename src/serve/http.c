/*
 * http.c - the HTTP side of the server on libmicrohttpd (a thread per
 * connection, so a handler may wait for its generation): listening, request
 * bodies up to a limit, the route table with 404/405, the API key, JSON and
 * error replies, and the server's life cycle.
 */
#include "serve_impl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
                                       .prefix_share = true,
                                       .cache_ram_mib = 8192};
}

/* ------------------------------------------------------------------ replies */

#define JSON_TYPE "application/json; charset=utf-8"

static enum MHD_Result reply_body(struct srv_req *r, unsigned status, char *text, const char *type,
                                  const char *extra_header, const char *extra_value) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*"); /* browsers' scripts too */
    if (extra_header) MHD_add_response_header(resp, extra_header, extra_value);
    srv_metrics_response(r->srv->metrics, r->route, status);
    /* draining: a kept-alive connection (a balancer's) must not bring more requests */
    if (atomic_load(&r->srv->stopping)) MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result srv_reply_plain(struct srv_req *r, unsigned status, char *text) {
    return reply_body(r, status, text, "text/plain; version=0.0.4; charset=utf-8", NULL, NULL);
}

enum MHD_Result srv_reply_json(struct srv_req *r, unsigned status, cJSON *json) {
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (!text) return MHD_NO;
    return reply_body(r, status, text, JSON_TYPE, NULL, NULL);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed_error";
    case 413: return "request_too_large_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static enum MHD_Result reply_error_hdr(struct srv_req *r, unsigned status, const char *hdr, const char *val,
                                       const char *msg) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddNumberToObject(e, "code", status);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return MHD_NO;
    return reply_body(r, status, text, JSON_TYPE, hdr, val);
}

enum MHD_Result srv_reply_error(struct srv_req *r, unsigned status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_error_hdr(r, status, status == 503 ? "Retry-After" : NULL, "1", msg);
}

bool srv_client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (pfd.revents & POLLIN) { /* data (a pipelined request) or EOF */
        char c;
        return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

/* A browser's CORS preflight: any origin may call with these methods and headers. */
static enum MHD_Result reply_preflight(struct srv_req *r, const char *allow) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Content-Type, Authorization, X-Api-Key");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(r->conn, 204, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ------------------------------------------------------------------ routing */

struct route {
    const char *method, *path;
    enum MHD_Result (*fn)(struct srv_req *r);
    bool needs_model, open; /* open: no API key needed */
};

static const struct route routes[] = {
    {"GET", "/health", srv_route_health, false, true},
    {"GET", "/v1/health", srv_route_health, false, true},
    {"GET", "/v1/models", srv_route_models, true, false},
    {"GET", "/models", srv_route_models, true, false},
    {"GET", "/props", srv_route_props, true, false},
    {"GET", "/slots", srv_route_slots, true, false},
    {"GET", "/metrics", srv_route_metrics, true, false},
    {"POST", "/tokenize", srv_route_tokenize, true, false},
    {"POST", "/detokenize", srv_route_detokenize, true, false},
    {"POST", "/apply-template", srv_route_apply_template, true, false},
    {"POST", "/v1/completions", srv_route_completions, true, false},
    {"POST", "/completions", srv_route_completions, true, false},
    {"POST", "/v1/chat/completions", srv_route_chat, true, false},
    {"POST", "/chat/completions", srv_route_chat, true, false},
    {"POST", "/completion", srv_route_completion, true, false},
};

struct conn_state {
    char *body;
    size_t len, cap;
    bool too_big;
};

static bool key_ok(struct kiln_server *s, struct MHD_Connection *c) {
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (auth && !strncasecmp(auth, "Bearer ", 7) && !strcmp(auth + 7, s->p.api_key)) return true;
    return xkey && !strcmp(xkey, s->p.api_key);
}

static enum MHD_Result dispatch(struct srv_req *r) {
    const struct route *found = NULL;
    bool path_known = false;
    char allow[32] = "";
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].path, r->url)) continue;
        path_known = true;
        snprintf(allow, sizeof allow, "%s", routes[i].method);
        if (!strcmp(routes[i].method, r->method)) found = &routes[i];
    }
    if (!path_known) return srv_reply_error(r, 404, "no route %s %s", r->method, r->url);
    if (!strcmp(r->method, "OPTIONS")) return reply_preflight(r, allow);
    r->route = found ? found->path : NULL;
    if (!found) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s does not take %s (use %s)", r->url, r->method, allow);
        return reply_error_hdr(r, 405, "Allow", allow, msg);
    }
    if (r->srv->p.api_key && !found->open && !key_ok(r->srv, r->conn))
        return srv_reply_error(r, 401, "invalid or missing API key (Authorization: Bearer KEY)");
    if (found->needs_model && !atomic_load(&r->srv->ready)) return srv_reply_error(r, 503, "loading model");
    return found->fn(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    struct kiln_server *s = cls;
    struct srv_req r = {.srv = s, .conn = c, .method = method, .url = url};
    struct conn_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        *con_cls = st;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
            st->too_big = true;
            return srv_reply_error(&r, 413, "request body of %s bytes is over the limit of %zu", cl, s->p.max_body);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (st->too_big || st->len + n > s->p.max_body) {
            st->too_big = true;
            return MHD_YES;
        }
        return srv_bytes_append(&st->body, &st->len, &st->cap, upload, n) ? MHD_YES : MHD_NO;
    }
    if (st->too_big) return srv_reply_error(&r, 413, "request body over the limit of %zu bytes", s->p.max_body);
    r.body = st->body ? st->body : "";
    r.body_len = st->len;
    return dispatch(&r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct conn_state *st = *con_cls;
    if (st) {
        free(st->body);
        free(st);
    }
    *con_cls = NULL;
}

/* ------------------------------------------------------------------ life cycle */

/* libmicrohttpd's own messages (a client gone mid-response ...), marked as ours */
static void on_log(void *cls, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') msg[--n] = 0;
    fprintf(stderr, "kiln serve: http: %s\n", msg);
}

struct kiln_server *kiln_server_start(const struct kiln_server_params *p, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST},
                    *ai = NULL;
    if (p->port < 0 || p->port > 65535) {
        snprintf(err, errlen, "port %d out of range (0..65535)", p->port);
        return NULL;
    }
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
    atomic_init(&s->ready, false);
    atomic_init(&s->stopping, false);
    atomic_init(&s->in_flight, 0);
    atomic_init(&s->next_id, 0);
    s->metrics = srv_metrics_new();
    if (!s->metrics) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
                                 MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)(p->timeout_s > 0 ? p->timeout_s : 0), MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)256, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)128, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine?)", p->host,
                 p->port);
        srv_metrics_free(s->metrics);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    return s;
}

int kiln_server_port(const struct kiln_server *s) { return s->port; }

bool kiln_server_attach(struct kiln_server *s, const struct kiln_model *model, struct kiln_context *ctx,
                        const char *model_path, char *err, size_t errlen) {
    s->model = model;
    s->vocab = kiln_model_vocab(model);
    s->ctx = ctx;
    s->tmpl = kiln_model_chat_template(model, NULL);
    const char *base = strrchr(model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : model_path);
    s->model_path = strdup(model_path);
    if (!(s->grammars = srv_grammars_new(s->vocab, err, errlen))) return false;
    s->engine = srv_engine_new(model, ctx, &s->p, err, errlen);
    if (s->engine) srv_engine_set_metrics(s->engine, s->metrics); /* before /health turns 200: no task yet */
    if (!s->engine || !s->model_path) {
        if (s->engine && !s->model_path) snprintf(err, errlen, "out of memory");
        return false;
    }
    atomic_store(&s->ready, true);
    return true;
}

void kiln_server_stop(struct kiln_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(s->daemon); /* no new connections */
    /* closed now, not after the drain: a connecting client (a balancer) is refused at
     * once and goes elsewhere instead of waiting in the backlog */
    if (ls != MHD_INVALID_SOCKET) close(ls);
    /* graceful: what runs may finish within --drain seconds (new requests get 503) */
    for (long i = 0; i < s->p.drain_s * 100L && atomic_load(&s->in_flight) > 0; i++)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    if (s->engine) srv_engine_shutdown(s->engine); /* waiters get their error now */
    /* let them send it (bounded: a client that does not read is cut off) */
    for (int i = 0; i < 300 && atomic_load(&s->in_flight) > 0; i++) nanosleep(&(struct timespec){0, 10000000L}, NULL);
    MHD_stop_daemon(s->daemon);                    /* closes connections, joins their threads */
    srv_engine_free(s->engine);
    srv_grammars_free(s->grammars);
    srv_metrics_free(s->metrics);
    free(s->model_path);
    free(s);
}
