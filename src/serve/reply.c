/*
 * reply.c - what a route answers, kept as data (status, body, one header) until
 * the connection's own thread sends it: libmicrohttpd queues a response only
 * from the thread that owns the connection, and routes run on workers.
 */
#include "serve_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_TYPE "application/json; charset=utf-8"

void srv_reply_clear(struct srv_reply *rp) {
    free(rp->body);
    *rp = (struct srv_reply){0};
}

static enum MHD_Result set(struct srv_req *r, unsigned status, char *body, const char *type) {
    srv_reply_clear(&r->reply);
    r->reply.status = status;
    r->reply.body = body;
    r->reply.type = type;
    return MHD_YES;
}

enum MHD_Result srv_reply_plain(struct srv_req *r, unsigned status, char *text) {
    if (!text) return srv_reply_error(r, 500, "out of memory");
    return set(r, status, text, "text/plain; version=0.0.4; charset=utf-8");
}

enum MHD_Result srv_reply_json(struct srv_req *r, unsigned status, cJSON *json) {
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (!text) return srv_reply_error(r, 500, "out of memory");
    return set(r, status, text, JSON_TYPE);
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

char *srv_error_body(unsigned status, const char *msg) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddNumberToObject(e, "code", status);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

enum MHD_Result srv_reply_error(struct srv_req *r, unsigned status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *text = srv_error_body(status, msg);
    if (!text) text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}");
    set(r, text ? status : 500, text, JSON_TYPE);
    if (status == 503) { /* busy or loading: come back soon */
        r->reply.hdr = "Retry-After";
        r->reply.hdr_val = "1";
    }
    return MHD_YES;
}

enum MHD_Result srv_reply_over_context(struct srv_req *r, int32_t n_prompt, int32_t n_ctx, const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "exceed_context_size_error");
    cJSON_AddNumberToObject(e, "code", 400);
    cJSON_AddNumberToObject(e, "n_prompt_tokens", n_prompt);
    cJSON_AddNumberToObject(e, "n_ctx", n_ctx);
    return srv_reply_json(r, 400, o);
}
