/*
 * schema_object.c - the JSON Schema converter's containers: objects (required
 * properties in schema order, then the optional ones, each at most once and in
 * order, then additional properties under keys no property has), allOf of
 * objects (merged) or enums (intersected), arrays and tuples, type lists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "json.h"
#include "schema.h"

struct prop {
    const char *key; /* decoded name */
    size_t key_len;
    const struct jval *schema;
    bool required;
    const char *kv; /* its key-value rule */
};

/* ------------------------------------------------------------------ keys that are not the properties' */

struct trie {
    uint32_t cp;
    int first, next; /* children, siblings (indices, -1) */
    bool end;
};

static int trie_child(struct trie **t, int *n, int *cap, int node, uint32_t cp) {
    for (int k = (*t)[node].first; k >= 0; k = (*t)[k].next)
        if ((*t)[k].cp == cp) return k;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        struct trie *nt = realloc(*t, sizeof *nt * (size_t)*cap);
        if (!nt) return -1;
        *t = nt;
    }
    (*t)[*n] = (struct trie){cp, -1, (*t)[node].first, false};
    (*t)[node].first = *n;
    return (*n)++;
}

/* the strings after a node's path that are no property name, as llama.cpp builds them */
static void not_names(struct sb *b, const struct trie *t, int node, const char *ch) {
    sb_str(b, "(");
    bool first = true;
    struct sb rej = {0};
    for (int k = t[node].first; k >= 0; k = t[k].next) {
        sb_printf(b, "%s[", first ? "" : " | ");
        sb_class_char(b, t[k].cp);
        sb_str(b, "]");
        sb_class_char(&rej, t[k].cp);
        first = false;
        if (t[k].first >= 0) {
            sb_str(b, " ");
            not_names(b, t, k, ch);
        } else {
            sb_printf(b, " %s+", ch);
        }
    }
    /* any other first character: plain, or an escape (a raw backslash would escape the quote) */
    sb_printf(b, " | ([^\"\\\\\\x00-\\x1F%s] | [\\\\] ([\"\\\\bfnrt] | \"u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))) %s*)",
              rej.s ? rej.s : "", ch);
    if (rej.oom) b->oom = true;
    sb_free(&rej);
}

static const char *additional_key(struct conv *c, const struct prop *props, int n, const char *name,
                                  const char *path) {
    if (n == 0) return sc_add_prim(c, "string", "string");
    const char *ch = sc_add_prim(c, "char", "char");
    struct trie *t = malloc(sizeof *t * 64);
    int nt = 1, cap = 64;
    if (!t || !ch) return free(t), sc_fail(c, path, "out of memory");
    t[0] = (struct trie){0, -1, -1, false};
    for (int i = 0; i < n; i++) {
        int node = 0;
        for (size_t k = 0; k < props[i].key_len && node >= 0;) {
            uint32_t cp;
            int l = gutf8_decode((const uint8_t *)props[i].key + k, props[i].key_len - k, &cp);
            if (!l) l = 1, cp = 0xFFFD;
            if (cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F) {
                free(t);
                return sc_fail(c, path, "additional properties beside a property whose name needs escaping are not supported");
            }
            node = trie_child(&t, &nt, &cap, node, cp);
            k += (size_t)l;
        }
        if (node < 0) return free(t), sc_fail(c, path, "out of memory");
        t[node].end = true;
    }
    struct sb b = {0};
    sb_str(&b, "[\"] ");
    not_names(&b, t, 0, ch);
    sb_str(&b, t[0].end ? " [\"]" : "? [\"]"); /* the empty key is fine unless a property has it */
    free(t);
    char *rn = sc_join_name(name, "additional-k");
    const char *r = b.oom || !rn ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rn, b.s);
    free(rn);
    sb_free(&b);
    return r;
}

/* ------------------------------------------------------------------ objects */

/* optional keys from props[i] on: each at most once, in order ("*": additional ones, any number) */
static const char *optional_chain(struct conv *c, struct prop *const *opt, int n, int i, bool first_optional,
                                  const char *name, struct sb *b) {
    const struct prop *p = opt[i];
    bool star = p->key == NULL;
    if (first_optional) sb_printf(b, "( \",\" space %s )%s", p->kv, star ? "*" : "?");
    else if (star) sb_printf(b, "%s ( \",\" space %s )*", p->kv, p->kv);
    else sb_str(b, p->kv);
    if (i + 1 < n) {
        struct sb rest = {0};
        optional_chain(c, opt, n, i + 1, true, name, &rest);
        struct sb rn = {0};
        sb_printf(&rn, "%s%s%.*s-rest", name, *name ? "-" : "", star ? 1 : (int)p->key_len, star ? "*" : p->key);
        const char *r = rest.oom || rn.oom ? sc_fail(c, "#", "out of memory") : sc_add_rule(c, rn.s, rest.s);
        if (r) sb_printf(b, " %s", r);
        sb_free(&rest), sb_free(&rn);
    }
    return c->failed ? NULL : "";
}

static const char *build_object(struct conv *c, struct prop *props, int n, const struct jval *additional,
                                bool additional_any, const char *name, const char *rule_name, const char *path) {
    struct prop extra = {0};
    struct prop **req = malloc(sizeof *req * (size_t)(n + 1)), **opt = malloc(sizeof *opt * (size_t)(n + 1));
    int n_req = 0, n_opt = 0;
    const char *r = NULL;
    struct sb b = {0};
    if (!req || !opt) goto oom;
    for (int i = 0; i < n && !c->failed; i++) {
        struct prop *p = &props[i];
        char key[512];
        snprintf(key, sizeof key, "%.*s", (int)(p->key_len < 400 ? p->key_len : 400), p->key);
        char *sub = sc_join_name(name, key), *sp = sc_join_path(path, "properties", key);
        const char *value = sub && sp ? sc_visit(c, p->schema, sub, sp) : sc_fail(c, path, "out of memory");
        if (value) {
            /* "\"key\"" space ":" space value, the key as JSON writes it */
            struct sb kv = {0}, kn = {0};
            char *txt = NULL;
            size_t tl = 0, tc = 0;
            struct jval kj = {.t = J_STR, .s = (char *)p->key, .len = p->key_len};
            if (!json_dump(&kj, &txt, &tl, &tc)) kv.oom = true;
            sb_literal(&kv, txt ? txt : "", tl);
            sb_printf(&kv, " space \":\" space %s", value);
            sb_printf(&kn, "%s-kv", sub);
            p->kv = kv.oom || kn.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, kn.s, kv.s);
            free(txt), sb_free(&kv), sb_free(&kn);
            if (p->required) req[n_req++] = p;
            else opt[n_opt++] = p;
        }
        free(sub), free(sp);
    }
    if (c->failed) goto done;
    if (additional || additional_any) {
        char *vn = sc_join_name(name, "additional-value"), *kn = sc_join_name(name, "additional-kv");
        char *sp = sc_join_path(path, "additionalProperties", NULL);
        const char *value = !vn || !kn || !sp ? sc_fail(c, path, "out of memory")
                            : additional ? sc_visit(c, additional, vn, sp)
                                         : sc_add_prim(c, "value", "value");
        const char *key = value ? additional_key(c, props, n, name, path) : NULL;
        if (key) {
            struct sb kv = {0};
            sb_printf(&kv, "%s \":\" space %s", key, value);
            extra.kv = kv.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, kn, kv.s);
            opt[n_opt++] = &extra; /* key NULL: the additional ones */
            sb_free(&kv);
        }
        free(vn), free(kn), free(sp);
        if (c->failed) goto done;
    }
    sb_str(&b, "\"{\" space ");
    for (int i = 0; i < n_req; i++) sb_printf(&b, "%s%s", i ? " \",\" space " : "", req[i]->kv);
    if (n_opt > 0) {
        sb_str(&b, n_req ? " ( \",\" space ( " : " (");
        for (int i = 0; i < n_opt && !c->failed; i++) {
            if (i) sb_str(&b, " | ");
            optional_chain(c, opt, n_opt, i, false, name, &b);
        }
        sb_str(&b, n_req ? " ) )?" : " )?");
    }
    sb_str(&b, " space \"}\"");
    if (n_req == 0 && n_opt == 0) {
        b.n = 0;
        sb_str(&b, "\"{\" space \"}\"");
    }
    if (!c->failed) r = b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
    goto done;
oom:
    sc_fail(c, path, "out of memory");
done:
    sb_free(&b);
    free(req), free(opt);
    return r;
}

const char *sc_visit_object(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                            const char *path) {
    const struct jval *props = json_get(s, "properties"), *reqs = json_get(s, "required");
    const struct jval *ap = json_get(s, "additionalProperties");
    if (props && props->t != J_OBJ) return sc_fail(c, path, "'properties' must be an object");
    if (reqs && reqs->t != J_ARR) return sc_fail(c, path, "'required' must be an array of names");
    if (ap && ap->t != J_TRUE && ap->t != J_FALSE && ap->t != J_OBJ)
        return sc_fail(c, path, "'additionalProperties' must be a boolean or a schema");
    /* llama.cpp's default: no additional properties beside declared ones */
    bool any_extra = ap ? ap->t == J_TRUE : !props;
    const struct jval *extra = ap && ap->t == J_OBJ ? ap : NULL;
    size_t np = props ? props->n : 0;
    for (size_t k = 0; reqs && k < reqs->n; k++) {
        const struct jval *r = &reqs->kids[k];
        if (r->t != J_STR) return sc_fail(c, path, "'required' must be an array of names");
        if (!json_get(props, r->s) || strlen(r->s) != r->len)
            return sc_fail(c, path, "required property '%.60s' is not in 'properties'", r->s);
    }
    if (np == 0 && any_extra) return sc_add_rule(c, rule_name, sc_add_prim(c, "object", "object"));
    struct prop *p = calloc(np + 1, sizeof *p);
    if (!p) return sc_fail(c, path, "out of memory");
    for (size_t k = 0; k < np; k++) {
        p[k] = (struct prop){props->keys[k], props->key_len[k], &props->kids[k], false, NULL};
        for (size_t j = 0; reqs && j < reqs->n; j++)
            if (reqs->kids[j].len == p[k].key_len && !memcmp(reqs->kids[j].s, p[k].key, p[k].key_len)) p[k].required = true;
    }
    const char *r = build_object(c, p, (int)np, extra, any_extra, name, rule_name, path);
    free(p);
    return r;
}

/* ------------------------------------------------------------------ allOf */

struct merge {
    struct prop *p;
    int n, cap;
    const struct jval **enums; /* the enum arrays met */
    int n_enums, cap_enums;
    int n_parts; /* components that count for the enum intersection */
};

static bool add_component(struct conv *c, struct merge *m, const struct jval *comp, bool required, const char *path) {
    for (int hops = 0; comp && comp->t == J_OBJ && json_get(comp, "$ref"); hops++) {
        const struct jval *ref = json_get(comp, "$ref");
        if (hops > 32 || ref->t != J_STR) return sc_fail(c, path, "'allOf': a $ref that does not resolve"), false;
        comp = sc_resolve(c, ref->s);
    }
    if (!comp || comp->t != J_OBJ) return sc_fail(c, path, "'allOf' holds a component that is not an object schema"), false;
    const struct jval *props = json_get(comp, "properties"), *en = json_get(comp, "enum");
    if (props && props->t == J_OBJ) {
        for (size_t k = 0; k < props->n; k++) {
            for (int i = 0; i < m->n; i++)
                if (m->p[i].key_len == props->key_len[k] && !memcmp(m->p[i].key, props->keys[k], props->key_len[k])) {
                    if (!json_equal(m->p[i].schema, &props->kids[k]))
                        return sc_fail(c, path, "property '%.60s' has two different schemas in 'allOf'", props->keys[k]), false;
                    m->p[i].required |= required;
                    goto next;
                }
            if (m->n == m->cap) {
                m->cap = m->cap ? m->cap * 2 : 16;
                struct prop *np = realloc(m->p, sizeof *np * (size_t)m->cap);
                if (!np) return sc_fail(c, path, "out of memory"), false;
                m->p = np;
            }
            m->p[m->n++] = (struct prop){props->keys[k], props->key_len[k], &props->kids[k], required, NULL};
        next:;
        }
        return true;
    }
    if (en && en->t == J_ARR) {
        if (m->n_enums == m->cap_enums) {
            m->cap_enums = m->cap_enums ? m->cap_enums * 2 : 8;
            const struct jval **ne = realloc(m->enums, sizeof *ne * (size_t)m->cap_enums);
            if (!ne) return sc_fail(c, path, "out of memory"), false;
            m->enums = ne;
        }
        m->enums[m->n_enums++] = en;
        return true;
    }
    return sc_fail(c, path, "'allOf' is supported for objects with properties (merged) and enums (intersected)"), false;
}

const char *sc_visit_all_of(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                            const char *path) {
    const struct jval *all = json_get(s, "allOf");
    if (!all || all->t != J_ARR || all->n == 0) return sc_fail(c, path, "'allOf' must be a non-empty array of schemas");
    struct merge m = {0};
    const char *r = NULL;
    for (size_t k = 0; k < all->n && !c->failed; k++) {
        const struct jval *child = &all->kids[k], *any = json_get(child, "anyOf");
        if (any && any->t == J_ARR) { /* the properties of anyOf branches are optional */
            for (size_t j = 0; j < any->n; j++)
                if (!add_component(c, &m, &any->kids[j], false, path)) break;
        } else {
            add_component(c, &m, child, true, path);
        }
    }
    if (!c->failed && m.n_enums > 0) {
        if (m.n > 0) {
            sc_fail(c, path, "'allOf' mixing objects and enums is not supported");
        } else if (m.n_enums != (int)all->n) {
            sc_fail(c, path, "'allOf' mixing enums with other schemas is not supported");
        } else {
            /* the values every enum holds */
            struct sb b = {0};
            int kept = 0;
            sb_str(&b, "(");
            for (size_t v = 0; v < m.enums[0]->n; v++) {
                bool everywhere = true;
                for (int e = 1; e < m.n_enums && everywhere; e++) {
                    bool found = false;
                    for (size_t w = 0; w < m.enums[e]->n && !found; w++)
                        found = json_equal(&m.enums[0]->kids[v], &m.enums[e]->kids[w]);
                    everywhere = found;
                }
                if (!everywhere) continue;
                char *txt = NULL;
                size_t tl = 0, tc = 0;
                if (!json_dump(&m.enums[0]->kids[v], &txt, &tl, &tc)) b.oom = true;
                sb_str(&b, kept++ ? " | " : "");
                sb_literal(&b, txt ? txt : "", tl);
                free(txt);
            }
            sb_str(&b, ")");
            r = kept == 0   ? sc_fail(c, path, "the enums of 'allOf' have no value in common")
                : b.oom     ? sc_fail(c, path, "out of memory")
                            : sc_add_rule(c, rule_name, b.s);
            sb_free(&b);
        }
    } else if (!c->failed) {
        r = build_object(c, m.p, m.n, NULL, false, name, rule_name, path);
    }
    free(m.p);
    free(m.enums);
    return r;
}

/* ------------------------------------------------------------------ arrays */

const char *sc_visit_array(struct conv *c, const struct jval *s, const char *name, const char *rule_name,
                           const char *path) {
    const struct jval *items = json_get(s, "items"), *prefix = json_get(s, "prefixItems");
    int64_t min = 0, max = -1;
    if (!sc_get_count(c, s, "minItems", path, &min) || !sc_get_count(c, s, "maxItems", path, &max)) return NULL;
    if (max >= 0 && min > max) return sc_fail(c, path, "minItems %lld is over maxItems %lld", (long long)min, (long long)max);
    const struct jval *tuple = prefix && prefix->t == J_ARR ? prefix : items && items->t == J_ARR ? items : NULL;
    const struct jval *rest = tuple == prefix ? items : NULL; /* 2020-12: items after prefixItems */
    if (!tuple) { /* a schema as prefixItems is taken as items, as llama.cpp does */
        rest = items ? items : prefix;
    } else if (tuple == items) {
        rest = NULL;
    }
    struct sb b = {0};
    const char *r = NULL;
    char *sub = NULL, *sp = NULL;
    if (!tuple) {
        bool any = !rest || rest->t == J_TRUE || (rest->t == J_OBJ && rest->n == 0);
        if (rest && rest->t == J_FALSE) {
            if (min > 0) return sc_fail(c, path, "'items': false allows no item, minItems wants %lld", (long long)min);
            return sc_add_rule(c, rule_name, "\"[\" space \"]\"");
        }
        if (any && min == 0 && max < 0) return sc_add_rule(c, rule_name, sc_add_prim(c, "array", "array"));
        sub = sc_join_name(name, "item");
        sp = sc_join_path(path, "items", NULL);
        const char *item = sub && sp ? sc_visit(c, rest ? rest : &(struct jval){.t = J_TRUE}, sub, sp)
                                     : sc_fail(c, path, "out of memory");
        if (item) {
            sb_str(&b, "\"[\" space ");
            sc_repetition(&b, item, min, max, "\",\" space");
            sb_str(&b, " space \"]\"");
        }
    } else {
        int64_t n = (int64_t)tuple->n;
        if (max >= 0 && max < n) return sc_fail(c, path, "maxItems %lld below the %lld prefixItems is not supported", (long long)max, (long long)n);
        sb_str(&b, "\"[\" space ");
        for (int64_t k = 0; k < n && !c->failed; k++) {
            char idx[32];
            snprintf(idx, sizeof idx, "tuple-%lld", (long long)k);
            free(sub), free(sp);
            sub = sc_join_name(name, idx);
            sp = sc_join_path(path, tuple == prefix ? "prefixItems" : "items", idx + 6);
            const char *t = sub && sp ? sc_visit(c, &tuple->kids[k], sub, sp) : sc_fail(c, path, "out of memory");
            if (t) sb_printf(&b, "%s%s", k ? " \",\" space " : "", t);
        }
        /* more items: what `items` allows after the prefix (none when it is absent or false) */
        int64_t rmin = min > n ? min - n : 0, rmax = max < 0 ? -1 : max - n;
        if (!c->failed && (rmin > 0 || (rest && rest->t != J_FALSE && rmax != 0))) {
            if (rest && rest->t == J_FALSE) return sb_free(&b), free(sub), free(sp), sc_fail(c, path, "'items': false after prefixItems, minItems wants more");
            free(sub), free(sp);
            sub = sc_join_name(name, "rest");
            sp = sc_join_path(path, "items", NULL);
            const char *item = sub && sp ? sc_visit(c, rest ? rest : &(struct jval){.t = J_TRUE}, sub, sp)
                                         : sc_fail(c, path, "out of memory");
            if (item && n == 0) {
                sc_repetition(&b, item, rmin, rmax, "\",\" space");
            } else if (item) {
                struct sb rep = {0};
                sb_printf(&rep, "(\",\" space %s)", item);
                sb_str(&b, " ");
                sc_repetition(&b, rep.s ? rep.s : "", rmin, rmax, NULL);
                if (rep.oom) b.oom = true;
                sb_free(&rep);
            }
        }
        sb_str(&b, " space \"]\"");
    }
    if (!c->failed) r = b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
    sb_free(&b);
    free(sub), free(sp);
    return r;
}

/* ------------------------------------------------------------------ {"type": [...]} */

const char *sc_visit_type_list(struct conv *c, const struct jval *s, const struct jval *types, const char *name,
                               const char *rule_name, const char *path) {
    if (types->n == 0) return sc_fail(c, path, "'type' must not be an empty array");
    /* one branch per type: the schema with that type alone */
    struct jval *kids = malloc(sizeof *kids * s->n);
    size_t at = 0;
    if (!kids) return sc_fail(c, path, "out of memory");
    for (size_t k = 0; k < s->n; k++)
        if (!strcmp(s->keys[k], "type")) at = k;
    struct jval copy = *s;
    memcpy(kids, s->kids, sizeof *kids * s->n);
    copy.kids = kids;
    struct sb b = {0};
    for (size_t k = 0; k < types->n && !c->failed; k++) {
        if (types->kids[k].t != J_STR) {
            sc_fail(c, path, "'type' must be a string or an array of strings");
            break;
        }
        kids[at] = types->kids[k];
        char idx[48];
        snprintf(idx, sizeof idx, "%s%zu", *name ? "" : "alternative-", k);
        char *sub = *name ? sc_join_name(name, idx) : strdup(idx);
        char *sp = sc_join_path(path, "type", *name ? idx : idx + 12);
        const char *alt = sub && sp ? sc_visit(c, &copy, sub, sp) : sc_fail(c, path, "out of memory");
        if (alt) sb_printf(&b, "%s%s", k ? " | " : "", alt);
        free(sub), free(sp);
    }
    const char *r = c->failed ? NULL : b.oom ? sc_fail(c, path, "out of memory") : sc_add_rule(c, rule_name, b.s);
    sb_free(&b);
    free(kids);
    return r;
}
