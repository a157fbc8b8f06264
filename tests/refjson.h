/*
 * refjson.h - just enough JSON reading for the reference files in ../shared:
 * find a key's value anywhere in a document and read it as a number, a string
 * or an array of numbers. Not a validating parser (tests read trusted data).
 */
#ifndef KILN_REFJSON_H
#define KILN_REFJSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* pointer to the first character of the value of "key", or NULL */
static inline const char *rj_find(const char *json, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = json; (p = strchr(p, '"')) != NULL; p++) {
        if (!strncmp(p + 1, key, kl) && p[1 + kl] == '"') {
            const char *q = p + 2 + kl;
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') q++;
            if (*q != ':') continue;
            q++;
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') q++;
            return q;
        }
    }
    return NULL;
}

/* numbers of an array value into out (at most max); returns the count or -1 */
static inline int64_t rj_num_array(const char *json, const char *key, double *out, int64_t max) {
    const char *p = rj_find(json, key);
    if (!p || *p != '[') return -1;
    p++;
    int64_t n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
        if (*p == ']') return n;
        char *end;
        double v = strtod(p, &end);
        if (end == p) return -1;
        if (n < max) out[n] = v;
        n++;
        p = end;
    }
}

static inline bool rj_num(const char *json, const char *key, double *out) {
    const char *p = rj_find(json, key);
    if (!p) return false;
    char *end;
    *out = strtod(p, &end);
    return end != p;
}

/* string value with escapes decoded into buf (NUL-terminated); returns the length or -1 */
static inline int64_t rj_str(const char *json, const char *key, char *buf, size_t size) {
    const char *p = rj_find(json, key);
    if (!p || *p != '"') return -1;
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        unsigned c = (unsigned char)*p;
        if (c == '\\') {
            p++;
            switch (*p) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                unsigned cp = (unsigned)strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
                p += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
                    unsigned lo = (unsigned)strtoul((char[5]){p[3], p[4], p[5], p[6], 0}, NULL, 16);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
                char u[4];
                int k = 0;
                if (cp < 0x80) u[k++] = (char)cp;
                else if (cp < 0x800) { u[k++] = (char)(0xC0 | cp >> 6); u[k++] = (char)(0x80 | (cp & 63)); }
                else if (cp < 0x10000) { u[k++] = (char)(0xE0 | cp >> 12); u[k++] = (char)(0x80 | (cp >> 6 & 63)); u[k++] = (char)(0x80 | (cp & 63)); }
                else { u[k++] = (char)(0xF0 | cp >> 18); u[k++] = (char)(0x80 | (cp >> 12 & 63)); u[k++] = (char)(0x80 | (cp >> 6 & 63)); u[k++] = (char)(0x80 | (cp & 63)); }
                for (int j = 0; j < k; j++) if (n + 1 < size) buf[n++] = u[j];
                continue;
            }
            default: c = (unsigned char)*p;
            }
        }
        if (n + 1 < size) buf[n++] = (char)c;
    }
    if (size) buf[n] = 0;
    return (int64_t)n;
}

/* The fields of one prompt reference (../shared/reference/NAME.json) that the
 * conformance tests compare with: the prompt, its tokens, the positions whose logits
 * the .logits file holds, and the greedy continuation with its margins. */
#define RJ_MAX_TOK 512
#define RJ_MAX_GREEDY 64
struct rj_prompt_ref {
    char prompt[4096];
    double tokens[RJ_MAX_TOK], positions[RJ_MAX_TOK], greedy[RJ_MAX_GREEDY], margins[RJ_MAX_GREEDY];
    int64_t n_tokens, n_positions, n_greedy;
};

/* Reads them; false when one is missing or does not fit. */
static inline bool rj_prompt_ref_read(const char *json, struct rj_prompt_ref *r) {
    r->n_tokens = rj_num_array(json, "prompt_tokens", r->tokens, RJ_MAX_TOK);
    r->n_positions = rj_num_array(json, "logits_positions", r->positions, RJ_MAX_TOK);
    r->n_greedy = rj_num_array(json, "greedy_tokens", r->greedy, RJ_MAX_GREEDY);
    const int64_t n_margins = rj_num_array(json, "greedy_margins", r->margins, RJ_MAX_GREEDY);
    return rj_str(json, "prompt", r->prompt, sizeof r->prompt) >= 0 && r->n_tokens > 0 && r->n_tokens <= RJ_MAX_TOK &&
           r->n_positions > 0 && r->n_positions <= RJ_MAX_TOK && r->n_greedy > 0 && r->n_greedy <= RJ_MAX_GREEDY &&
           n_margins == r->n_greedy;
}

#endif
