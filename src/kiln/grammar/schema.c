/*
 * schema.c - JSON Schema to GBNF, with llama.cpp's json_schema_to_grammar as
 * the reference for behaviour (rule layout, whitespace, property order,
 * additionalProperties false unless asked for) and one difference: a keyword
 * kiln cannot enforce is an error that names it, never a grammar that ignores
 * it. Objects, arrays and strings are built here; numbers, formats and patterns
 * by schema_rules.c and regex.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "grammar_impl.h"
#include "json.h"
#include "schema.h"

const char *sc_fail(struct conv *c, const char *path, const char *fmt, ...) {
    if (c->failed) return NULL;
    c->failed = true;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "JSON Schema at %s: %s", path, msg);
    return NULL;
}

/* ------------------------------------------------------------------ rules */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int32_t find_rule(const struct conv *c, const char *name) {
    if (!c->hash_cap) return -1;
    for (uint64_t k = hash_str(name) & (uint64_t)(c->hash_cap - 1); c->hash[k] >= 0;
         k = (k + 1) & (uint64_t)(c->hash_cap - 1))
        if (!strcmp(c->rules[c->hash[k]].name, name)) return c->hash[k];
    return -1;
}

static bool put_rule(struct conv *c, char *name, char *body) {
    if ((c->n_rules + 1) * 2 > c->hash_cap) {
        int32_t cap = c->hash_cap ? c->hash_cap * 2 : 256;
        int32_t *h = malloc(sizeof *h * (size_t)cap);
        if (!h) return false;
        memset(h, 0xff, sizeof *h * (size_t)cap);
        for (int32_t i = 0; i < c->n_rules; i++) {
            uint64_t k = hash_str(c->rules[i].name) & (uint64_t)(cap - 1);
            while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
            h[k] = i;
        }
        free(c->hash);
        c->hash = h;
        c->hash_cap = cap;
    }
    if (c->n_rules == c->cap_rules) {
        int32_t cap = c->cap_rules ? c->cap_rules * 2 : 64;
        struct rule *r = realloc(c->rules, sizeof *r * (size_t)cap);
        if (!r) return false;
        c->rules = r;
        c->cap_rules = cap;
    }
    uint64_t k = hash_str(name) & (uint64_t)(c->hash_cap - 1);
    while (c->hash[k] >= 0) k = (k + 1) & (uint64_t)(c->hash_cap - 1);
    c->hash[k] = c->n_rules;
    c->rules[c->n_rules++] = (struct rule){name, body};
    return true;
}

/* Add `name ::= body` (name made of letters, digits, '-'); the name it got: name, or
 * name0, name1 ... when name holds another body. NULL on failure. */
/* name with every run of characters other than letters, digits and '-' made one '-' */
static char *sanitize(const char *name, size_t extra) {
    size_t n = strlen(name), k = 0;
    char *esc = malloc(n + extra + 2);
    if (!esc) return NULL;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        if (word) esc[k++] = ch;
        else if (i == 0 || ((name[i - 1] >= 'a' && name[i - 1] <= 'z') || (name[i - 1] >= 'A' && name[i - 1] <= 'Z') ||
                            (name[i - 1] >= '0' && name[i - 1] <= '9') || name[i - 1] == '-'))
            esc[k++] = '-';
    }
    if (k == 0) esc[k++] = '-';
    esc[k] = 0;
    return esc;
}

const char *sc_add_rule(struct conv *c, const char *name, const char *body) {
    if (c->failed) return NULL;
    char *esc = sanitize(name, 24);
    if (!esc) return sc_fail(c, "#", "out of memory");
    size_t k = strlen(esc);
    for (int i = -1;; i++) {
        if (i >= 0) snprintf(esc + k, 24, "%d", i);
        int32_t r = find_rule(c, esc);
        if (r >= 0 && !strcmp(c->rules[r].body, body)) {
            free(esc);
            return c->rules[r].name;
        }
        if (r < 0) {
            char *b = strdup(body);
            if (!b || !put_rule(c, esc, b)) {
                free(b), free(esc);
                return sc_fail(c, "#", "out of memory");
            }
            return esc;
        }
    }
}

/* the built-in rules (llama.cpp's, with JSON's \u escapes limited to non-surrogates) */
static const struct {
    const char *name, *body, *deps[6];
} prims[] = {
    {"boolean", "(\"true\" | \"false\")", {NULL}},
    {"decimal-part", "[0-9]{1,16}", {NULL}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {NULL}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?", {"integral-part", "decimal-part", NULL}},
    {"integer", "(\"-\"? integral-part)", {"integral-part", NULL}},
    {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? space \"}\"", {"string", "value", NULL}},
    {"array", "\"[\" space ( value (\",\" space value)* )? space \"]\"", {"value", NULL}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))", {NULL}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char", NULL}},
    {"null", "\"null\"", {NULL}},
};

static int prim_index(const char *name) {
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (!strcmp(prims[i].name, name)) return (int)i;
    return -1;
}

const char *sc_add_prim(struct conv *c, const char *as, const char *which) {
    int p = prim_index(which);
    const char *n = sc_add_rule(c, as, prims[p].body);
    for (int d = 0; d < 6 && prims[p].deps[d] && n; d++)
        if (find_rule(c, prims[p].deps[d]) < 0 && !sc_add_prim(c, prims[p].deps[d], prims[p].deps[d])) return NULL;
    return n;
}

/* A schema that is just a primitive uses the shared rule (named for the primitive), as
 * llama.cpp does: every string property then runs through one `string` rule, whose
 * token classes are computed once for them all. The root gets a rule of its own. */
static const char *visit_prim(struct conv *c, const char *rule_name, const char *which) {
    return sc_add_prim(c, !strcmp(rule_name, "root") ? "root" : which, which);
}

static bool reserved(const char *name) {
    return !strcmp(name, "root") || !strcmp(name, "space") || prim_index(name) >= 0;
}

/* ------------------------------------------------------------------ keywords */

static const char *const annotations[] = {"$schema", "$id", "$comment", "title", "description", "examples", "default",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                                          "contentEncoding", "contentMediaType", NULL};
static const char *const known[] = {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
                                    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
                                    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
                                    "allOf", "$ref", NULL};

static bool in_list(const char *const *l, const char *k, size_t len) {
    for (; *l; l++)
        if (strlen(*l) == len && !memcmp(*l, k, len)) return true;
    return false;
}

/* Every keyword of s is one kiln enforces or an annotation; refused otherwise. */
static bool check_keywords(struct conv *c, const struct jval *s, const char *path) {
    for (size_t k = 0; k < s->n; k++) {
        const char *key = s->keys[k];
        size_t len = s->key_len[k];
        if (in_list(annotations, key, len) || in_list(known, key, len)) continue;
        if (len == 11 && !memcmp(key, "uniqueItems", 11) && s->kids[k].t == J_FALSE) continue;
        sc_fail(c, path, "'%.*s' is not supported (kiln enforces type, properties, required, additionalProperties, "
                       "enum, const, anyOf, oneOf, allOf, items, prefixItems, minItems, maxItems, minLength, maxLength, "
                       "pattern, format, minimum, maximum, exclusiveMinimum, exclusiveMaximum, $ref)",
              (int)(len < 60 ? len : 60), key);
        return false;
    }
    return true;
}

/* keywords beside which only annotations may stand */
static bool only_with_annotations(struct conv *c, const struct jval *s, const char *key, const char *path) {
    for (size_t k = 0; k < s->n; k++) {
        if (!strcmp(s->keys[k], key) || in_list(annotations, s->keys[k], s->key_len[k])) continue;
        if (!strcmp(key, "anyOf") && !strcmp(s->keys[k], "oneOf")) {
            sc_fail(c, path, "'anyOf' and 'oneOf' together are not supported");
            return false;
        }
        if (!strcmp(s->keys[k], "type") && strcmp(key, "$ref")) continue; /* checked against the branches */
        sc_fail(c, path, "'%.40s' beside '%s' is not supported", s->keys[k], key);
        return false;
    }
    return true;
}

bool sc_get_count(struct conv *c, const struct jval *s, const char *key, const char *path, int64_t *out) {
    const struct jval *v = json_get(s, key);
    if (!v) return true;
    if (v->t != J_NUM || !v->is_int || v->i < 0) {
        sc_fail(c, path, "'%s' must be a non-negative integer", key);
        return false;
    }
    if (v->i > G_MAX_REP) {
        sc_fail(c, path, "'%s' %lld is over kiln's limit of %d", key, (long long)v->i, G_MAX_REP);
        return false;
    }
    *out = v->i;
    return true;
}

/* ------------------------------------------------------------------ the walk */


char *sc_join_name(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *r = malloc(la + lb + 2);
    if (!r) return NULL;
    if (la) memcpy(r, a, la), r[la] = '-', memcpy(r + la + 1, b, lb + 1);
    else memcpy(r, b, lb + 1);
    return r;
}

char *sc_join_path(const char *path, const char *a, const char *b) {
    size_t n = strlen(path) + strlen(a) + (b ? strlen(b) : 0) + 3;
    char *r = malloc(n);
    if (r) snprintf(r, n, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
    return r;
}

static const char *literal_rule(struct conv *c, const char *rule_name, const struct jval *v) {
    char *txt = NULL;
    size_t n = 0, cap = 0;
    struct sb b = {0};
    if (!json_dump(v, &txt, &n, &cap)) return sc_fail(c, "#", "out of memory");
    sb_literal(&b, txt, n);
    free(txt);
    const char *r = b.oom ? sc_fail(c, "#", "out of memory") : sc_add_rule(c, rule_name, b.s);
    sb_free(&b);
    return r;
}

bool sc_type_matches(const struct jval *v, const char *type) {
    if (!type) return true;
    switch (v->t) {
    case J_NULL: return !strcmp(type, "null");
    case J_TRUE:
    case J_FALSE: return !strcmp(type, "boolean");
    case J_NUM: return !strcmp(type, "number") || (!strcmp(type, "integer") && v->num == floor(v->num) && isfinite(v->num));
    case J_STR: return !strcmp(type, "string");
    case J_ARR: return !strcmp(type, "array");
    case J_OBJ: return !strcmp(type, "object");
    }
    return false;
}

static const char *visit_enum(struct conv *c, const struct jval *e, const char *type, const char *rule_name,
                              const char *path) {
    if (e->t != J_ARR || e->n == 0) return sc_fail(c, path, "'enum' must be a non-empty array");
    struct sb b = {0};
    int n = 0;
    sb_str(&b, "(");
    for (size_t k = 0; k < e->n; k++) {
        if (!sc_type_matches(&e->kids[k], type)) continue; /* a value the type excludes can never be valid */
        char *txt = NULL;
        size_t len = 0, cap = 0;
        if (!json_dump(&e->kids[k], &txt, &len, &cap)) b.oom = true;
        if (n++) sb_str(&b, " | ");
        sb_literal(&b, txt ? txt : "", len);
        free(txt);
    }
    sb_str(&b, ")");
    const char *r = b.oom ? sc_fail(c, path, "out of memory")
                          : n ? sc_add_rule(c, rule_name, b.s)
                              : sc_fail(c, path, "no 'enum' value has the type '%s'", type);
    sb_free(&b);
    return r;
}

/* separator-joined repetition of item, min..max times (max < 0: no limit), llama.cpp's layout */
void sc_repetition(struct sb *b, const char *item, int64_t min, int64_t max, const char *sep) {
    if (max == 0) return;
    if (min == 0 && max == 1) {
        sb_printf(b, "%s?", item);
        return;
    }
    if (!sep) {
        if (min == 1 && max < 0) sb_printf(b, "%s+", item);
        else if (min == 0 && max < 0) sb_printf(b, "%s*", item);
        else if (max < 0) sb_printf(b, "%s{%lld,}", item, (long long)min);
        else sb_printf(b, "%s{%lld,%lld}", item, (long long)min, (long long)max);
        return;
    }
    if (min == 0) sb_str(b, "(");
    sb_printf(b, "%s ", item);
    struct sb rest = {0};
    sb_printf(&rest, "(%s %s)", sep, item);
    sc_repetition(b, rest.s ? rest.s : "", min == 0 ? 0 : min - 1, max < 0 ? -1 : max - 1, NULL);
    if (rest.oom) b->oom = true;
    sb_free(&rest);
    if (min == 0) sb_str(b, ")?");
}


/* ------------------------------------------------------------------ typed schemas */

static const char *visit_string(struct conv *c, const struct jval *s, const char *rule_name, const char *path) {
    const struct jval *pat = json_get(s, "pattern"), *fmt = json_get(s, "format");
    int64_t min = 0, max = -1;
    if (!sc_get_count(c, s, "minLength", path, &min) || !sc_get_count(c, s, "maxLength", path, &max)) return NULL;
    if (max >= 0 && min > max) return sc_fail(c, path, "minLength %lld is over maxLength %lld", (long long)min, (long long)max);
    bool lengths = json_get(s, "minLength") || json_get(s, "maxLength");
    struct sb b = {0};
    const char *r = NULL;
    if (pat && fmt) return sc_fail(c, path, "'pattern' and 'format' together are not supported");
    if (pat) {
        if (pat->t != J_STR) return sc_fail(c, path, "'pattern' must be a string");
        if (lengths) return sc_fail(c, path, "'pattern' together with minLength/maxLength is not supported");
        char err[256];
        sb_str(&b, "\"\\\"\" ");
        if (!regex_to_gbnf(pat->s, pat->len, &b, err, sizeof err)) {
            sb_free(&b);
            return sc_fail(c, path, "%s", err);
        }
        sb_str(&b, " \"\\\"\"");
    } else if (fmt) {
        if (fmt->t != J_STR) return sc_fail(c, path, "'format' must be a string");
        int fmin, fmax;
        const char *g = format_gbnf(fmt->s, &fmin, &fmax);
        if (!g) return sc_fail(c, path, "format '%.40s' is not supported (kiln knows %s)", fmt->s, format_names());
        if (min > fmin || (max >= 0 && (fmax < 0 || fmax > max)))
            return sc_fail(c, path, "minLength/maxLength narrower than format '%s' is not supported", fmt->s);
        sb_printf(&b, "\"\\\"\" (%s) \"\\\"\"", g);
    } else if (lengths) {
        const char *ch = sc_add_prim(c, "char", "char");
        if (!ch) return NULL;
        sb_str(&b, "\"\\\"\" ");
        sc_repetition(&b, ch, min, max, NULL);
        sb_str(&b, " \"\\\"\"");
    } else {
        return visit_prim(c, rule_name, "string");
    }
    r = b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
    sb_free(&b);
    return r;
}

static bool get_bound(struct conv *c, const struct jval *s, const char *key, bool integer, bool round_up,
                      struct nbound *out, const char *path) {
    const struct jval *v = json_get(s, key);
    if (!v) return true;
    if (v->t != J_NUM || !isfinite(v->num) || fabs(v->num) > 9.2e18) {
        sc_fail(c, path, "'%s' must be a number within +-9.2e18", key);
        return false;
    }
    double d = v->num;
    if (d != floor(d)) {
        if (!integer) {
            sc_fail(c, path, "'%s' %.17g: bounds on a number must be whole numbers in kiln", key, d);
            return false;
        }
        /* a fractional bound on an integer: rounded inwards, to the integers it admits */
        d = round_up ? ceil(d) : floor(d);
        if (!strncmp(key, "exclusive", 9)) key = round_up ? "minimum" : "maximum"; /* ceil(1.5) = 2 is allowed */
    }
    bool excl = !strncmp(key, "exclusive", 9);
    if (out->set) { /* both the inclusive and the exclusive bound: the narrower holds */
        bool tighter = round_up ? (d > (double)out->v || (d == (double)out->v && excl)) : (d < (double)out->v || (d == (double)out->v && excl));
        if (!tighter) return true;
    }
    *out = (struct nbound){true, excl, (int64_t)d};
    return true;
}

static const char *visit_number(struct conv *c, const struct jval *s, bool integer, const char *rule_name,
                                const char *path) {
    struct nbound lo = {0}, hi = {0};
    if (!get_bound(c, s, "minimum", integer, true, &lo, path) ||
        !get_bound(c, s, "exclusiveMinimum", integer, true, &lo, path) ||
        !get_bound(c, s, "maximum", integer, false, &hi, path) ||
        !get_bound(c, s, "exclusiveMaximum", integer, false, &hi, path))
        return NULL;
    if (!lo.set && !hi.set) return visit_prim(c, rule_name, integer ? "integer" : "number");
    struct sb b = {0};
    char err[200];
    if (!number_range_gbnf(lo, hi, integer, &b, err, sizeof err)) {
        sb_free(&b);
        return sc_fail(c, path, "%s", err);
    }
    const char *r = b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
    sb_free(&b);
    return r;
}

/* ------------------------------------------------------------------ dispatch */

static const char *visit_any(struct conv *c, const char *rule_name) {
    const char *v = sc_add_prim(c, "value", "value");
    return v ? sc_add_rule(c, rule_name, v) : NULL;
}

const struct jval *sc_resolve(struct conv *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    const struct jval *t = c->doc;
    const char *p = ref + 1;
    while (*p == '/' && t) {
        p++;
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char tok[256];
        size_t k = 0;
        for (size_t i = 0; i < len && k + 1 < sizeof tok; i++) { /* ~1 is '/', ~0 is '~' */
            if (p[i] == '~' && i + 1 < len && (p[i + 1] == '0' || p[i + 1] == '1')) tok[k++] = p[++i] == '0' ? '~' : '/';
            else tok[k++] = p[i];
        }
        tok[k] = 0;
        if (t->t == J_OBJ) {
            t = json_get(t, tok);
        } else if (t->t == J_ARR) {
            char *e;
            long idx = strtol(tok, &e, 10);
            t = *tok && !*e && idx >= 0 && (size_t)idx < t->n ? &t->kids[idx] : NULL;
        } else {
            t = NULL;
        }
        p += len;
    }
    return *p ? NULL : t;
}

/* {"$ref": "#/..."}: a rule for the target, made once (a cycle stops at the name) */
static const char *visit_ref(struct conv *c, const struct jval *ref, const char *rule_name, const char *path) {
    if (ref->t != J_STR) return sc_fail(c, path, "'$ref' must be a string");
    if (ref->s[0] != '#' || (ref->s[1] && ref->s[1] != '/'))
        return sc_fail(c, path, "$ref '%.80s': only references into the same document (#/...) are supported", ref->s);
    const struct jval *t = sc_resolve(c, ref->s);
    if (!t) return sc_fail(c, path, "$ref '%.80s' does not resolve", ref->s);
    struct sb esc = {0};
    sb_str(&esc, "ref");
    char *frag = sanitize(ref->s + 1, 0);
    if (frag && strcmp(frag, "-")) sb_str(&esc, frag);
    free(frag);
    if (esc.oom) return sc_fail(c, path, "out of memory");
    const char *rn = NULL;
    for (int i = 0; i < c->n_resolving; i++)
        if (!strcmp(c->resolving[i], ref->s)) rn = esc.s; /* a cycle: the rule is being made */
    if (!rn && find_rule(c, esc.s) >= 0) rn = esc.s;
    if (!rn) {
        if (c->n_resolving == c->cap_resolving) {
            c->cap_resolving = c->cap_resolving ? c->cap_resolving * 2 : 8;
            const char **nr = realloc(c->resolving, sizeof *nr * (size_t)c->cap_resolving);
            if (!nr) return sc_fail(c, path, "out of memory");
            c->resolving = nr;
        }
        c->resolving[c->n_resolving++] = ref->s;
        rn = sc_visit(c, t, esc.s, ref->s);
        c->n_resolving--;
    }
    const char *r = rn ? sc_add_rule(c, rule_name, rn) : NULL;
    sb_free(&esc);
    return r;
}

static const char *visit_typed(struct conv *c, const struct jval *s, const char *type, const char *name,
                               const char *rule_name, const char *path) {
    const struct jval *ap = json_get(s, "additionalProperties");
    bool has_props = json_get(s, "properties") || (ap && ap->t != J_TRUE);
    if (!strcmp(type, "object")) {
        if (!has_props && json_get(s, "allOf")) return sc_visit_all_of(c, s, name, rule_name, path);
        return sc_visit_object(c, s, name, rule_name, path);
    }
    if (json_get(s, "allOf"))
        return strcmp(type, "string") ? sc_fail(c, path, "'allOf' with type '%s' is not supported", type)
                                      : sc_visit_all_of(c, s, name, rule_name, path);
    if (!strcmp(type, "array")) return sc_visit_array(c, s, name, rule_name, path);
    if (!strcmp(type, "string")) return visit_string(c, s, rule_name, path);
    if (!strcmp(type, "integer")) return visit_number(c, s, true, rule_name, path);
    if (!strcmp(type, "number")) return visit_number(c, s, false, rule_name, path);
    if (!strcmp(type, "boolean")) return visit_prim(c, rule_name, "boolean");
    if (!strcmp(type, "null")) return visit_prim(c, rule_name, "null");
    return sc_fail(c, path, "unknown type '%.40s'", type);
}

/* the JSON types a schema's values can have, as bits (integer within number) */
enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };

static unsigned type_bit(const char *t) {
    return !strcmp(t, "null") ? T_NULL : !strcmp(t, "boolean") ? T_BOOL : !strcmp(t, "integer") ? T_INT
         : !strcmp(t, "number") ? T_INT | T_NUM : !strcmp(t, "string") ? T_STR : !strcmp(t, "array") ? T_ARR
         : !strcmp(t, "object") ? T_OBJ : 0;
}

static unsigned value_bits(const struct jval *v) {
    switch (v->t) {
    case J_NULL: return T_NULL;
    case J_TRUE:
    case J_FALSE: return T_BOOL;
    case J_NUM: return v->num == floor(v->num) ? T_INT : T_NUM;
    case J_STR: return T_STR;
    case J_ARR: return T_ARR;
    case J_OBJ: return T_OBJ;
    }
    return T_ALL;
}

/* The types the anyOf/oneOf branches of s (or s itself) can produce; T_ALL when unsure. */
static unsigned value_types(struct conv *c, const struct jval *s, int depth) {
    if (depth > 32 || !s || s->t != J_OBJ) return T_ALL;
    const struct jval *ref = json_get(s, "$ref"), *alts = json_get(s, "anyOf");
    if (!alts) alts = json_get(s, "oneOf");
    if (ref) return ref->t == J_STR ? value_types(c, sc_resolve(c, ref->s), depth + 1) : T_ALL;
    if (alts && alts->t == J_ARR) {
        unsigned u = 0;
        for (size_t k = 0; k < alts->n; k++) u |= value_types(c, &alts->kids[k], depth + 1);
        return u;
    }
    const struct jval *t = json_get(s, "type"), *cst = json_get(s, "const"), *en = json_get(s, "enum");
    if (t && t->t == J_STR) return type_bit(t->s) ? type_bit(t->s) : T_ALL;
    if (t && t->t == J_ARR) {
        unsigned u = 0;
        for (size_t k = 0; k < t->n; k++) u |= t->kids[k].t == J_STR && type_bit(t->kids[k].s) ? type_bit(t->kids[k].s) : T_ALL;
        return u;
    }
    if (cst) return value_bits(cst);
    if (en && en->t == J_ARR) {
        unsigned u = 0;
        for (size_t k = 0; k < en->n; k++) u |= value_bits(&en->kids[k]);
        return u;
    }
    const struct jval *ap = json_get(s, "additionalProperties");
    if (json_get(s, "properties") || (ap && ap->t != J_TRUE)) return T_OBJ;
    if (json_get(s, "items") || json_get(s, "prefixItems")) return T_ARR;
    if (json_get(s, "pattern") || json_get(s, "format") || json_get(s, "minLength") || json_get(s, "maxLength")) return T_STR;
    return T_ALL;
}

static const char *visit_inner(struct conv *c, const struct jval *s, const char *name, const char *path) {
    /* a property named like a built-in rule gets a '-': "number" -> "number-" */
    char *rule_name = !*name ? strdup("root") : reserved(name) ? sc_join_name(name, "") : strdup(name);
    if (!rule_name) return sc_fail(c, path, "out of memory");
    const char *r = NULL;
    const struct jval *ref = json_get(s, "$ref"), *any = json_get(s, "anyOf"), *one = json_get(s, "oneOf");
    const struct jval *type = json_get(s, "type"), *cst = json_get(s, "const"), *en = json_get(s, "enum");
    if (s->t == J_TRUE) {
        r = visit_any(c, rule_name);
    } else if (s->t == J_FALSE) {
        r = sc_fail(c, path, "the schema false allows no value");
    } else if (s->t != J_OBJ) {
        r = sc_fail(c, path, "a schema must be an object or a boolean");
    } else if (!check_keywords(c, s, path)) {
    } else if (ref) {
        if (only_with_annotations(c, s, "$ref", path)) r = visit_ref(c, ref, rule_name, path);
    } else if (any || one) {
        const struct jval *alts = any ? any : one;
        const char *key = any ? "anyOf" : "oneOf";
        if (!only_with_annotations(c, s, key, path)) goto done;
        /* a type beside the branches is fine where every branch has it anyway */
        if (type && (type->t != J_STR || (value_types(c, s, 0) & ~type_bit(type->s)))) goto done_type_beside;
        if (alts->t != J_ARR || alts->n == 0) {
            r = sc_fail(c, path, "'%s' must be a non-empty array of schemas", key);
            goto done;
        }
        struct sb b = {0};
        for (size_t k = 0; k < alts->n && !c->failed; k++) {
            char idx[48];
            snprintf(idx, sizeof idx, "%s%zu", *name ? "" : "alternative-", k);
            char *sub = *name ? sc_join_name(name, idx) : strdup(idx);
            char *sp = sc_join_path(path, key, idx + (*name ? 0 : 12));
            const char *alt = sub && sp ? sc_visit(c, &alts->kids[k], sub, sp) : sc_fail(c, path, "out of memory");
            if (alt) sb_printf(&b, "%s%s", k ? " | " : "", alt);
            free(sub), free(sp);
        }
        if (!c->failed) r = b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
        sb_free(&b);
    } else if (type && type->t == J_ARR) {
        r = sc_visit_type_list(c, s, type, name, rule_name, path);
    } else if (type && type->t != J_STR) {
        r = sc_fail(c, path, "'type' must be a string or an array of strings");
    } else if (cst) {
        if (!sc_type_matches(cst, type ? type->s : NULL)) r = sc_fail(c, path, "'const' does not have the type '%s'", type->s);
        else r = literal_rule(c, rule_name, cst);
    } else if (en) {
        r = visit_enum(c, en, type ? type->s : NULL, rule_name, path);
    } else if (type) {
        r = visit_typed(c, s, type->s, name, rule_name, path);
    } else {
        /* no type: the structural keywords tell, in llama.cpp's order */
        const struct jval *ap = json_get(s, "additionalProperties");
        if (json_get(s, "properties") || (ap && ap->t != J_TRUE)) r = sc_visit_object(c, s, name, rule_name, path);
        else if (json_get(s, "allOf")) r = sc_visit_all_of(c, s, name, rule_name, path);
        else if (json_get(s, "items") || json_get(s, "prefixItems")) r = sc_visit_array(c, s, name, rule_name, path);
        else if (json_get(s, "pattern") || json_get(s, "minLength") || json_get(s, "maxLength") || json_get(s, "format"))
            r = visit_string(c, s, rule_name, path);
        else {
            static const char *const typed[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                "minItems", "maxItems", "required", NULL};
            for (int k = 0; typed[k]; k++)
                if (json_get(s, typed[k])) {
                    r = sc_fail(c, path, "'%s' without a 'type' is not supported (say which type it bounds)", typed[k]);
                    goto done;
                }
            r = visit_any(c, rule_name);
        }
    }
    goto done;
done_type_beside:
    r = sc_fail(c, path, "'type' beside 'anyOf'/'oneOf' is not supported (put the type in each branch)");
done:
    free(rule_name);
    return r;
}

const char *sc_visit(struct conv *c, const struct jval *s, const char *name, const char *path) {
    if (c->failed) return NULL;
    if (++c->depth > G_MAX_DEPTH) return sc_fail(c, path, "schemas nested deeper than %d", G_MAX_DEPTH);
    const char *r = visit_inner(c, s, name, path);
    c->depth--;
    return r;
}

/* ------------------------------------------------------------------ output */

static int cmp_rule(const void *a, const void *b) {
    return strcmp(((const struct rule *)a)->name, ((const struct rule *)b)->name);
}

/* Rule names in body get prefix (outside literals, classes and counts). */
static void prefixed(struct sb *o, const char *body, const char *prefix) {
    for (const char *p = body; *p;) {
        char ch = *p;
        if (ch == '"' || ch == '[') {
            char close = ch == '"' ? '"' : ']';
            const char *q = p + 1;
            while (*q && *q != close) q += *q == '\\' && q[1] ? 2 : 1;
            if (*q) q++;
            sb_add(o, p, (size_t)(q - p));
            p = q;
        } else if (ch == '{') {
            const char *q = strchr(p, '}');
            q = q ? q + 1 : p + strlen(p);
            sb_add(o, p, (size_t)(q - p));
            p = q;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-') {
            const char *q = p;
            while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-') q++;
            sb_str(o, prefix);
            sb_add(o, p, (size_t)(q - p));
            p = q;
        } else {
            sb_add(o, p++, 1);
        }
    }
}

/* The GBNF of a schema into *out (malloc'd); false with a message. */
static bool convert(const char *schema, size_t len, const char *prefix, char **out, char *err, size_t errlen) {
    struct jdoc doc;
    if (len > G_MAX_TEXT) return kiln_errf(err, errlen, "the schema is %zu bytes; at most %zu", len, G_MAX_TEXT);
    if (!json_parse(schema, len, G_MAX_DEPTH, &doc, err, errlen)) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "JSON Schema: %s", err);
        snprintf(err, errlen, "%s", tmp);
        return false;
    }
    struct conv c = {.doc = &doc.root, .err = err, .errlen = errlen};
    struct sb o = {0};
    c.failed = !sc_add_rule(&c, "space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}");
    const char *root = c.failed ? NULL : sc_visit(&c, &doc.root, "", "#");
    if (root && strcmp(root, "root")) root = sc_add_rule(&c, "root", root);
    if (root && !c.failed) {
        qsort(c.rules, (size_t)c.n_rules, sizeof *c.rules, cmp_rule);
        for (int32_t i = 0; i < c.n_rules; i++) {
            if (prefix && *prefix) {
                sb_printf(&o, "%s%s ::= ", prefix, c.rules[i].name);
                prefixed(&o, c.rules[i].body, prefix);
                sb_str(&o, "\n");
            } else {
                sb_printf(&o, "%s ::= %s\n", c.rules[i].name, c.rules[i].body);
            }
        }
        if (o.oom) sc_fail(&c, "#", "out of memory");
    }
    for (int32_t i = 0; i < c.n_rules; i++) free(c.rules[i].name), free(c.rules[i].body);
    free(c.rules), free(c.hash), free(c.resolving);
    json_free(&doc);
    if (c.failed || !root) {
        sb_free(&o);
        if (!c.failed) kiln_errf(err, errlen, "JSON Schema: conversion failed");
        return false;
    }
    *out = o.s;
    return true;
}

int64_t kiln_json_schema_to_gbnf(const char *schema, size_t len, const char *prefix, char *buf, size_t size,
                                 char *err, size_t errlen) {
    char *g = NULL;
    if (!schema) return kiln_errf(err, errlen, "no schema"), KILN_ERR_INVALID;
    if (prefix)
        for (const char *p = prefix; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
                return kiln_errf(err, errlen, "the rule prefix may hold letters, digits and '-' only"), KILN_ERR_INVALID;
    if (!convert(schema, len, prefix, &g, err, errlen)) return KILN_ERR_INVALID;
    size_t n = strlen(g);
    int64_t r = (int64_t)n;
    if (!buf || size < n + 1) r = -(int64_t)(n + 1);
    else memcpy(buf, g, n + 1);
    free(g);
    return r;
}

struct kiln_grammar *kiln_grammar_from_json_schema(const char *schema, size_t len, char *err, size_t errlen) {
    char *g = NULL;
    if (!schema) return kiln_errf(err, errlen, "no schema"), NULL;
    if (!convert(schema, len, NULL, &g, err, errlen)) return NULL;
    struct kiln_grammar *gr = kiln_grammar_parse(g, strlen(g), "root", err, errlen);
    free(g);
    return gr;
}
