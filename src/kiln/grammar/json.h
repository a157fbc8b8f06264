/* json.h - a small JSON reader for schemas (json.c): the runtime takes no JSON
 * library, and a schema needs only a tree with its keys in document order. */
#ifndef KILN_GRAMMAR_JSON_H
#define KILN_GRAMMAR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
    enum jtype t;
    const char *raw; /* the value's text in the source */
    size_t raw_len;
    /* J_NUM */
    double num;
    bool is_int; /* no fraction or exponent and fits int64 */
    int64_t i;
    /* J_STR: decoded UTF-8 (NUL-terminated; may hold NULs inside) */
    char *s;
    size_t len;
    /* J_ARR, J_OBJ: n children; keys[k] (with key_len[k]) for an object */
    struct jval *kids;
    char **keys;
    size_t *key_len;
    size_t n;
};

struct jdoc {
    struct jval root;
    void *arena; /* every allocation of the tree */
};

/* Parse len bytes of JSON (one value, whitespace around it). false with "line L,
 * column C: ..." in err (bad syntax, duplicate keys, nesting past max_depth). */
bool json_parse(const char *text, size_t len, int max_depth, struct jdoc *doc, char *err, size_t errlen);
void json_free(struct jdoc *doc);
/* o[key], or NULL (o not an object, or no such key) */
const struct jval *json_get(const struct jval *o, const char *key);
bool json_is_number(const struct jval *v);
/* Compact JSON text of v (keys in document order, strings escaped as JSON does:
 * quote, backslash and control characters), appended to *buf; false when out of memory. */
bool json_dump(const struct jval *v, char **buf, size_t *n, size_t *cap);
/* Equal as JSON values (numbers by value, objects by their key sets). */
bool json_equal(const struct jval *a, const struct jval *b);

#endif
