/*
 * auth.c - who a request comes from: API keys (--api-key, --api-key-file with
 * "KEY [TENANT]" lines) and the tenant each maps to, the proxies trusted to name
 * a tenant in X-Tenant, and the table that gives tenant names small ids (the
 * engine compares ids). Tenant 0 is every client of a server without keys.
 */
#include "serve_impl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define KEY_MAX 1024         /* bytes of one API key */
#define TENANTS_MAX 65536    /* distinct tenant names (X-Tenant brings new ones) */

struct key {
    char *text;
    size_t len;
    uint32_t tenant;
};

struct proxy {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
};

struct srv_auth {
    struct key *keys;
    int n_keys;
    struct proxy *proxies;
    int n_proxies;
    pthread_mutex_t mu; /* the tenant table */
    char **names;       /* names[i] has id ids[i] */
    uint32_t *ids;
    uint32_t *slots; /* open addressing: 1 + index into names, 0 empty */
    size_t n_names, cap_names, n_slots;
    uint32_t next_id;
};

/* A tenant or key token: printable ASCII, no space. */
static bool printable(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F) return false;
    return n > 0;
}

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: the table is exact, the hash only spreads */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name, empty or holding it (mu held). */
static size_t find(const struct srv_auth *a, const char *name) {
    size_t i = (size_t)hash(name) & (a->n_slots - 1);
    while (a->slots[i] && strcmp(a->names[a->slots[i] - 1], name)) i = (i + 1) & (a->n_slots - 1);
    return i;
}

/* Intern name (mu held); false when out of memory or full. */
static bool intern(struct srv_auth *a, const char *name, uint32_t *id) {
    if (a->n_slots && a->slots[find(a, name)]) {
        *id = a->ids[a->slots[find(a, name)] - 1];
        return true;
    }
    if (a->n_names >= TENANTS_MAX) return false;
    if (a->n_names == a->cap_names) {
        size_t cap = a->cap_names ? a->cap_names * 2 : 16;
        char **n = realloc(a->names, sizeof *n * cap);
        if (n) a->names = n;
        uint32_t *d = realloc(a->ids, sizeof *d * cap);
        if (d) a->ids = d;
        if (!n || !d) return false;
        a->cap_names = cap;
    }
    if ((a->n_names + 1) * 2 > a->n_slots) { /* rehash at half full */
        size_t ns = a->n_slots ? a->n_slots * 2 : 64;
        uint32_t *s = calloc(ns, sizeof *s);
        if (!s) return false;
        free(a->slots);
        a->slots = s;
        a->n_slots = ns;
        for (size_t k = 0; k < a->n_names; k++) a->slots[find(a, a->names[k])] = (uint32_t)k + 1;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    a->names[a->n_names] = copy;
    a->ids[a->n_names] = *id = ++a->next_id;
    a->slots[find(a, name)] = (uint32_t)++a->n_names;
    return true;
}

bool srv_auth_tenant(struct srv_auth *a, const char *name, uint32_t *id, char *err, size_t errlen) {
    size_t n = strlen(name);
    if (n > SRV_TENANT_MAX || !printable(name, n)) {
        snprintf(err, errlen, "X-Tenant must be 1 to %d printable ASCII bytes without spaces", SRV_TENANT_MAX);
        return false;
    }
    pthread_mutex_lock(&a->mu);
    bool ok = intern(a, name, id);
    pthread_mutex_unlock(&a->mu);
    if (!ok) snprintf(err, errlen, "the server's table of %d tenants is full", TENANTS_MAX);
    return ok;
}

/* Add a key; tenant NULL: a tenant of its own. */
static bool add_key(struct srv_auth *a, const char *key, size_t len, const char *tenant, const char *where,
                    char *err, size_t errlen) {
    if (len > KEY_MAX || !printable(key, len)) {
        snprintf(err, errlen, "%s: a key must be 1 to %d printable ASCII bytes without spaces", where, KEY_MAX);
        return false;
    }
    for (int i = 0; i < a->n_keys; i++)
        if (a->keys[i].len == len && !memcmp(a->keys[i].text, key, len)) {
            snprintf(err, errlen, "%s: the same key is given twice", where);
            return false;
        }
    struct key *k = realloc(a->keys, sizeof *k * (size_t)(a->n_keys + 1));
    if (!k) goto oom;
    a->keys = k;
    k = &a->keys[a->n_keys];
    if (!(k->text = malloc(len + 1))) goto oom;
    memcpy(k->text, key, len);
    k->text[len] = 0;
    k->len = len;
    if (tenant) {
        if (strlen(tenant) > SRV_TENANT_MAX || !printable(tenant, strlen(tenant))) {
            free(k->text);
            snprintf(err, errlen, "%s: a tenant name must be 1 to %d printable ASCII bytes", where, SRV_TENANT_MAX);
            return false;
        }
        if (!intern(a, tenant, &k->tenant)) {
            free(k->text);
            goto oom;
        }
    } else {
        k->tenant = ++a->next_id; /* no name: no X-Tenant can name it */
    }
    a->n_keys++;
    return true;
oom:
    snprintf(err, errlen, "out of memory");
    return false;
}

static bool load_key_file(struct srv_auth *a, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--api-key-file %s: cannot open it", path);
        return false;
    }
    char line[4096], where[600];
    int lineno = 0, before = a->n_keys;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(where, sizeof where, "--api-key-file %s line %d", path, lineno);
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            snprintf(err, errlen, "%s: longer than %zu bytes", where, sizeof line - 2);
            ok = false;
            break;
        }
        char *fields[3] = {0};
        int nf = 0;
        for (char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save))
            if (nf < 3) fields[nf++] = tok;
            else nf++;
        if (nf == 0 || fields[0][0] == '#') continue; /* blank or a comment */
        if (nf > 2) {
            snprintf(err, errlen, "%s: expected KEY or KEY TENANT, found %d fields", where, nf);
            ok = false;
            break;
        }
        ok = add_key(a, fields[0], strlen(fields[0]), nf == 2 ? fields[1] : NULL, where, err, errlen);
    }
    if (ok && ferror(f)) {
        snprintf(err, errlen, "--api-key-file %s: read error", path);
        ok = false;
    }
    fclose(f);
    if (ok && a->n_keys == before) {
        snprintf(err, errlen, "--api-key-file %s holds no key", path);
        ok = false;
    }
    return ok;
}

static bool parse_proxy(const char *text, struct proxy *out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
    if (getaddrinfo(text, NULL, &hints, &ai) != 0 || !ai) return false;
    out->family = ai->ai_family;
    if (ai->ai_family == AF_INET) memcpy(out->addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
    else memcpy(out->addr, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
    freeaddrinfo(ai);
    return out->family == AF_INET || out->family == AF_INET6;
}

static bool load_proxies(struct srv_auth *a, const char *list, char *err, size_t errlen) {
    char *copy = strdup(list);
    if (!copy) return false;
    bool ok = true;
    for (char *save = NULL, *tok = strtok_r(copy, ", ", &save); ok && tok; tok = strtok_r(NULL, ", ", &save)) {
        struct proxy *p = realloc(a->proxies, sizeof *p * (size_t)(a->n_proxies + 1));
        if (!p) {
            snprintf(err, errlen, "out of memory");
            ok = false;
            break;
        }
        a->proxies = p;
        if (!parse_proxy(tok, &p[a->n_proxies])) {
            snprintf(err, errlen, "--trusted-proxy '%.64s' is not a numeric IPv4/IPv6 address", tok);
            ok = false;
            break;
        }
        a->n_proxies++;
    }
    free(copy);
    if (ok && a->n_proxies == 0) {
        snprintf(err, errlen, "--trusted-proxy names no address");
        ok = false;
    }
    return ok;
}

struct srv_auth *srv_auth_new(const struct kiln_server_params *p, char *err, size_t errlen) {
    struct srv_auth *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    bool ok = true;
    if (p->api_key) ok = add_key(a, p->api_key, strlen(p->api_key), NULL, "--api-key", err, errlen);
    if (ok && p->api_key_file) ok = load_key_file(a, p->api_key_file, err, errlen);
    if (ok && p->trusted_proxies) ok = load_proxies(a, p->trusted_proxies, err, errlen);
    if (!ok) {
        srv_auth_free(a);
        return NULL;
    }
    return a;
}

void srv_auth_free(struct srv_auth *a) {
    if (!a) return;
    for (int i = 0; i < a->n_keys; i++) {
        memset(a->keys[i].text, 0, a->keys[i].len);
        free(a->keys[i].text);
    }
    free(a->keys);
    free(a->proxies);
    for (size_t i = 0; i < a->n_names; i++) free(a->names[i]);
    free(a->names);
    free(a->ids);
    free(a->slots);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

bool srv_auth_has_keys(const struct srv_auth *a) { return a && a->n_keys > 0; }
bool srv_auth_has_proxies(const struct srv_auth *a) { return a && a->n_proxies > 0; }

bool srv_auth_key(const struct srv_auth *a, const char *key, uint32_t *tenant) {
    size_t n = strlen(key);
    bool found = false;
    /* every key compared to its end, whatever matched: the time says nothing of their bytes */
    for (int i = 0; i < a->n_keys; i++) {
        const struct key *k = &a->keys[i];
        unsigned char diff = k->len != n;
        for (size_t j = 0; j < k->len; j++) diff |= (unsigned char)(k->text[j] ^ (j < n ? key[j] : 0));
        if (!diff && !found) {
            found = true;
            *tenant = k->tenant;
        }
    }
    return found;
}

bool srv_auth_trusted(const struct srv_auth *a, const struct sockaddr *peer) {
    if (!a || !peer) return false;
    struct proxy got = {0};
    if (peer->sa_family == AF_INET) {
        got.family = AF_INET;
        memcpy(got.addr, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    } else if (peer->sa_family == AF_INET6) {
        const unsigned char *b = ((const struct sockaddr_in6 *)peer)->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(b, mapped, 12)) { /* an IPv4 client of an IPv6 socket */
            got.family = AF_INET;
            memcpy(got.addr, b + 12, 4);
        } else {
            got.family = AF_INET6;
            memcpy(got.addr, b, 16);
        }
    } else {
        return false;
    }
    for (int i = 0; i < a->n_proxies; i++)
        if (a->proxies[i].family == got.family &&
            !memcmp(a->proxies[i].addr, got.addr, got.family == AF_INET ? 4 : 16))
            return true;
    return false;
}
