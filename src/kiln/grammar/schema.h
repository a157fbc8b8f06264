/* schema.h - what the JSON Schema converter's files share (schema.c, schema_rules.c,
 * regex.c): a growable string and the pieces of grammar text each file makes. */
#ifndef KILN_GRAMMAR_SCHEMA_H
#define KILN_GRAMMAR_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sb {
    char *s;
    size_t n, cap;
    bool oom;
};

void sb_add(struct sb *b, const char *s, size_t n);
void sb_str(struct sb *b, const char *s);
void sb_printf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(struct sb *b);
/* s as a GBNF literal ("..." with \\ \" \n \r \t and \xHH escaped). */
void sb_literal(struct sb *b, const char *s, size_t n);
/* One code point inside a GBNF character class, escaped where the class syntax needs it. */
void sb_class_char(struct sb *b, uint32_t cp);

/* ---- the converter (schema.c), shared with schema_object.c */

struct jval;

struct rule {
    char *name, *body;
};

struct conv {
    const struct jval *doc;
    struct rule *rules;
    int32_t n_rules, cap_rules;
    int32_t *hash; /* rule indices by name, open addressing */
    int32_t hash_cap;
    const char **resolving; /* $refs being converted (a cycle stops at them) */
    int n_resolving, cap_resolving;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
};

/* Fail the conversion with "JSON Schema at PATH: ..." (the first failure wins); NULL. */
const char *sc_fail(struct conv *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* `name ::= body`: the rule's name (name, or name0, name1 ... when name has another body). */
const char *sc_add_rule(struct conv *c, const char *name, const char *body);
/* A built-in rule (string, number, value ...) named `as`, with the rules it uses. */
const char *sc_add_prim(struct conv *c, const char *as, const char *which);
/* The rule for schema s (a property "a" of "b" is named "b-a"); NULL on failure. */
const char *sc_visit(struct conv *c, const struct jval *s, const char *name, const char *path);
const struct jval *sc_resolve(struct conv *c, const char *ref); /* "#/..." in the document, or NULL */
char *sc_join_name(const char *a, const char *b);               /* "a-b", or "b" when a is "" (malloc'd) */
char *sc_join_path(const char *path, const char *a, const char *b); /* "path/a/b" (malloc'd) */
bool sc_get_count(struct conv *c, const struct jval *s, const char *key, const char *path, int64_t *out);
bool sc_type_matches(const struct jval *v, const char *type);
/* item repeated min..max times (max < 0: no limit), sep between them (or NULL) */
void sc_repetition(struct sb *b, const char *item, int64_t min, int64_t max, const char *sep);

/* ---- schema_object.c: objects, allOf, arrays, type lists */
const char *sc_visit_object(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                            const char *path);
const char *sc_visit_all_of(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                            const char *path);
const char *sc_visit_array(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                           const char *path);
const char *sc_visit_type_list(struct conv *c, const struct jval *s, const struct jval *types, const char *name,
                               const char *rule_name, const char *path);

/* ---- regex.c: a JSON Schema pattern (ECMAScript with the u flag, the subset
 * below) as a GBNF expression for the text between a JSON string's quotes: each
 * character as JSON writes it (quote, backslash and control characters escaped).
 * Unanchored patterns match anywhere, as JSON Schema says. Refused, naming the
 * feature: lookaround, backreferences, \b, \p{...}, anchors inside the pattern. */
bool regex_to_gbnf(const char *pat, size_t len, struct sb *out, char *err, size_t errlen);
/* The code points of a set (lo, hi pairs, sorted, disjoint) as JSON string text:
 * a GBNF expression (raw characters in a class, quote/backslash/controls escaped). */
void json_chars_gbnf(struct sb *b, const uint32_t *r, int n);

/* ---- schema_rules.c: number ranges and string formats */

/* A bound: present, its value (an integer), exclusive. */
struct nbound {
    bool set, excl;
    int64_t v;
};
/* GBNF for JSON numbers in [lo, hi] (each bound optional): integers only (no fraction)
 * when integer, else with an optional fraction (no exponent). false when no number
 * fits (the message says so). */
bool number_range_gbnf(struct nbound lo, struct nbound hi, bool integer, struct sb *out, char *err, size_t errlen);
/* The GBNF of a string format between the quotes, NULL for an unknown format; its
 * shortest and longest length in characters in *min_len / *max_len. */
const char *format_gbnf(const char *name, int *min_len, int *max_len);
/* The names kiln knows, for messages. */
const char *format_names(void);

#endif
