/*
 * json_strict.c - request bodies parsed as strictly as the languages clients
 * are written in read them, so that kiln and whatever stands in front of it
 * agree on what was sent: one JSON object and nothing after it, no key twice
 * in an object (cJSON would take the first, Python and JavaScript the last),
 * no NUL ("\u0000" would end the string early here and not there) and no raw
 * control character inside a string (RFC 8259 forbids them).
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The strings' bytes: false with a message at the first control character or escaped NUL. */
static bool scan_strings(const char *s, size_t n, char *err, size_t errlen) {
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!in) {
            in = c == '"';
            continue;
        }
        if (c == '"') {
            in = false;
        } else if (c < 0x20) {
            snprintf(err, errlen, "the body is not valid JSON (control character 0x%02x in a string at byte %zu)", c, i);
            return false;
        } else if (c == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) {
                snprintf(err, errlen, "a string holds NUL (\\u0000) at byte %zu: text may not contain NUL", i);
                return false;
            }
            i++; /* the escaped character: an escaped quote does not end the string */
        }
    }
    return true;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every object under o has each key once; false with a message naming the first repeated. */
static bool unique_keys(const cJSON *o, char *err, size_t errlen) {
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) return true;
    if (cJSON_IsObject(o)) {
        size_t n = 0;
        for (const cJSON *it = o->child; it; it = it->next) n++;
        if (n > 1) {
            const char **names = malloc(sizeof *names * n);
            if (!names) {
                snprintf(err, errlen, "out of memory");
                return false;
            }
            size_t k = 0;
            for (const cJSON *it = o->child; it; it = it->next) names[k++] = it->string ? it->string : "";
            qsort(names, n, sizeof *names, by_name);
            for (k = 1; k < n && strcmp(names[k - 1], names[k]); k++) {}
            if (k < n) snprintf(err, errlen, "the key '%.64s' appears twice in one object", names[k]);
            free(names);
            if (k < n) return false;
        }
    }
    for (const cJSON *it = o->child; it; it = it->next)
        if (!unique_keys(it, err, errlen)) return false;
    return true;
}

cJSON *srv_parse_json(const char *body, size_t len, char *err, size_t errlen) {
    if (!scan_strings(body, len, err, errlen)) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        snprintf(err, errlen, "the body is not valid JSON (error near byte %zu)", at);
        return NULL;
    }
    /* trailing bytes other than whitespace are an error too */
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            snprintf(err, errlen, "the body is not valid JSON (trailing data at byte %zu)", (size_t)(p - body));
            cJSON_Delete(root);
            return NULL;
        }
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "the body must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    if (!unique_keys(root, err, errlen)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
