/*
 * gate.c - what is decided on a request's headers, before any byte of its body
 * is read: framing a proxy in front could read differently (two differing
 * Content-Length headers, Content-Length with Transfer-Encoding, HTTP/1.1
 * without Host) is a 400 that closes the connection; the API key and the tenant
 * (a key's, or X-Tenant from a trusted proxy); and which origins a browser may
 * call from (CORS, as llama-server's --cors-origins).
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ framing */

struct hdr_count {
    const char *name;
    int n;
    const char *first;
    bool differ;
};

static enum MHD_Result count_hdr(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    struct hdr_count *h = cls;
    if (!key || strcasecmp(key, h->name)) return MHD_YES;
    if (h->n++ == 0) h->first = value ? value : "";
    else if (strcmp(h->first, value ? value : "")) h->differ = true;
    return MHD_YES;
}

static struct hdr_count count(struct MHD_Connection *c, const char *name) {
    struct hdr_count h = {.name = name};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_hdr, &h);
    return h;
}

static bool all_digits(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 19) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

unsigned srv_gate_framing(struct MHD_Connection *c, const char *version, char *msg, size_t msglen) {
    struct hdr_count host = count(c, "Host"), cl = count(c, "Content-Length"), te = count(c, "Transfer-Encoding");
    if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) && host.n == 0) {
        snprintf(msg, msglen, "an HTTP/1.1 request needs a Host header");
        return 400;
    }
    if (host.n > 1) {
        snprintf(msg, msglen, "%d Host headers: one is allowed", host.n);
        return 400;
    }
    if (cl.differ) { /* which one a proxy in front believed is anyone's guess: request smuggling */
        snprintf(msg, msglen, "differing Content-Length headers");
        return 400;
    }
    if (cl.n && !all_digits(cl.first)) {
        snprintf(msg, msglen, "Content-Length '%.32s' is not a decimal byte count", cl.first);
        return 400;
    }
    if (te.n && cl.n) {
        snprintf(msg, msglen, "both Content-Length and Transfer-Encoding: the body's length is ambiguous");
        return 400;
    }
    if (te.n > 1 || (te.n && strcasecmp(te.first, "chunked"))) {
        snprintf(msg, msglen, "Transfer-Encoding '%.32s' is not supported (only chunked)", te.first);
        return 400;
    }
    return 0;
}

/* ------------------------------------------------------------------ who */

unsigned srv_gate_who(struct kiln_server *s, struct MHD_Connection *c, bool open, uint32_t *tenant, char *msg,
                      size_t msglen) {
    *tenant = 0;
    if (!open && srv_auth_has_keys(s->auth)) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
        bool ok = false;
        if (auth && !strncasecmp(auth, "Bearer ", 7)) ok = srv_auth_key(s->auth, auth + 7, tenant);
        if (!ok && xkey) ok = srv_auth_key(s->auth, xkey, tenant);
        if (!ok) {
            snprintf(msg, msglen, "invalid or missing API key (Authorization: Bearer KEY)");
            return 401;
        }
    }
    struct hdr_count xt = count(c, "X-Tenant");
    if (xt.n == 0 || open) return 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!srv_auth_trusted(s->auth, ci ? ci->client_addr : NULL)) {
        snprintf(msg, msglen, "X-Tenant is accepted only from a --trusted-proxy address");
        return 400;
    }
    if (xt.n > 1) {
        snprintf(msg, msglen, "%d X-Tenant headers: one is allowed", xt.n);
        return 400;
    }
    return srv_auth_tenant(s->auth, xt.first, tenant, msg, msglen) ? 0 : 400;
}

/* ------------------------------------------------------------------ CORS */

/* scheme://host[:port] whose host is localhost, 127.x.x.x or [::1] */
static bool origin_is_localhost(const char *o) {
    const char *p = strstr(o, "://");
    if (!p) return false;
    p += 3;
    size_t n = strcspn(p, ":/");
    if (*p == '[') n = strcspn(p, "]") + 1;
    return (n == 9 && !strncasecmp(p, "localhost", 9)) || (n >= 9 && !strncmp(p, "127.", 4)) ||
           (n == 5 && !strncmp(p, "[::1]", 5));
}

const char *srv_cors_allow(const struct kiln_server *s, const char *origin) {
    const char *list = s->p.cors_origins ? s->p.cors_origins : "*";
    if (!strcmp(list, "*")) return origin && *origin ? origin : "*"; /* echoed, as llama-server does */
    if (!origin || !*origin) return NULL;
    if (!strcmp(list, "localhost")) return origin_is_localhost(origin) ? origin : NULL;
    size_t n = strlen(origin);
    for (const char *p = list; *p;) { /* comma-separated, spaces around names ignored */
        while (*p == ',' || *p == ' ') p++;
        size_t len = strcspn(p, ",");
        size_t trim = len;
        while (trim > 0 && p[trim - 1] == ' ') trim--;
        if (trim == n && !strncasecmp(p, origin, n)) return origin;
        p += len;
    }
    return NULL;
}

bool srv_cors_valid(const char *list, char *err, size_t errlen) {
    if (!list || !strcmp(list, "*") || !strcmp(list, "localhost")) return true;
    bool any = false;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        size_t len = strcspn(p, ", ");
        if (!len) break;
        const char *sep = memmem(p, len, "://", 3);
        if (!sep || sep == p || sep + 3 == p + len || memchr(sep + 3, '/', (size_t)(p + len - (sep + 3)))) {
            snprintf(err, errlen, "--cors-origins '%.*s' is not an origin (scheme://host[:port], no path)",
                     (int)(len > 64 ? 64 : len), p);
            return false;
        }
        any = true;
        p += len;
    }
    if (!any) snprintf(err, errlen, "--cors-origins names no origin");
    return any;
}
