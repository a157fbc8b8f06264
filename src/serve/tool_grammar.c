/*
 * tool_grammar.c - the GBNF grammar that holds a chat's output to tool calls in
 * the model's own markup (tool_choice "required", a named function, and the lazy
 * grammar of "auto"): the format's call markup around each tool's arguments, the
 * arguments held to the tool's `parameters` schema (one prefixed schema per tool),
 * so that what the model writes always parses back into calls.
 */
#include "chat_api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

struct gb {
    char *p;
    size_t n, cap;
    bool oom;
};

static void put(struct gb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(struct gb *b, const char *s) { put(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void putf(struct gb *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->oom = true;
        return;
    }
    put(b, tmp, (size_t)n);
}

/* text as a GBNF literal "..." */
static void lit(struct gb *b, const char *s) {
    put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        if (*p == '"' || *p == '\\') snprintf(e, sizeof e, "\\%c", *p);
        else if (*p == '\n') snprintf(e, sizeof e, "\\n");
        else if (*p == '\r') snprintf(e, sizeof e, "\\r");
        else if (*p == '\t') snprintf(e, sizeof e, "\\t");
        else if (*p < 0x20) snprintf(e, sizeof e, "\\x%02X", *p);
        else e[0] = (char)*p, e[1] = 0;
        puts_(b, e);
    }
    put(b, "\"", 1);
}

/* a name as the JSON string literal a call writes, as a GBNF literal */
static void json_name_lit(struct gb *b, const char *name) {
    cJSON *s = cJSON_CreateString(name);
    char *j = s ? cJSON_PrintUnformatted(s) : NULL;
    if (j) lit(b, j);
    else b->oom = true;
    free(j);
    cJSON_Delete(s);
}

/* The rules of one schema (prefix "t3-": root becomes t3-root) appended to b; false with a message. */
static bool schema_rules(struct gb *b, const cJSON *schema, const char *prefix, const char *where, char *err,
                         size_t errlen) {
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    char e[512];
    int64_t need = kiln_json_schema_to_gbnf(text, strlen(text), prefix, NULL, 0, e, sizeof e);
    char *g = need < 0 && need != KILN_ERR_INVALID ? malloc((size_t)-need) : NULL;
    bool ok = g && kiln_json_schema_to_gbnf(text, strlen(text), prefix, g, (size_t)-need, e, sizeof e) >= 0;
    if (ok) {
        puts_(b, g);
        puts_(b, "\n");
    } else {
        snprintf(err, errlen, "%s: %s", where, need == KILN_ERR_INVALID || g ? e : "out of memory");
    }
    free(g);
    free(text);
    return ok;
}

/* Text up to and including the first "</parameter>" (Qwen3-Coder's string values): one rule per
 * state of matching it; '<' occurs in it only first, so a mismatch goes back to state 0 or 1. */
static void until_rules(struct gb *b, const char *name, const char *stop) {
    size_t n = strlen(stop);
    for (size_t k = 0; k < n; k++) {
        putf(b, "%s-%zu ::= ", name, k);
        char c = stop[k];
        if (k + 1 == n) put(b, "\"", 1), put(b, &c, 1), put(b, "\"", 1);
        else putf(b, "\"%c\" %s-%zu", c, name, k + 1);
        if (k == 0) {
            putf(b, " | [^%c] %s-0\n", c, name);
        } else {
            putf(b, " | \"%c\" %s-1 | [^%c%c] %s-0\n", stop[0], name, stop[0], c, name);
        }
    }
}

static const char *type_of(const cJSON *schema) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Qwen3-Coder: <function=NAME> then <parameter=P> blocks, the properties in schema order (the required
 * ones always); a string is raw text, an enum of strings its values, anything else JSON held to the
 * property's schema. */
static bool xml_params(struct gb *b, int i, const cJSON *params, const char *where, char *err, size_t errlen) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    struct gb body = {0};
    const cJSON *p;
    int j = 0;
    bool ok = true;
    cJSON_ArrayForEach(p, props) {
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req) required |= cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
        putf(b, "tc%d-arg%d ::= ", i, j);
        struct gb open = {0};
        puts_(&open, "<parameter=");
        puts_(&open, p->string);
        puts_(&open, ">\n");
        lit(b, open.p ? open.p : "");
        free(open.p);
        const char *type = type_of(p);
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
        bool str_enum = cJSON_IsArray(en) && cJSON_GetArraySize(en) > 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) str_enum &= cJSON_IsString(e) && !strchr(e->valuestring, '<');
        if (str_enum) {
            puts_(b, " (");
            int k = 0;
            cJSON_ArrayForEach(e, en) {
                if (k++) puts_(b, " | ");
                lit(b, e->valuestring);
            }
            puts_(b, ") \"\\n</parameter>\\n\"\n");
        } else if (!type || !strcmp(type, "string") || !cJSON_IsObject(p)) {
            /* raw text up to the closing tag; a maxLength (without a pattern) bounds it, '<' then left out */
            const cJSON *max = cJSON_GetObjectItemCaseSensitive(p, "maxLength");
            const cJSON *min = cJSON_GetObjectItemCaseSensitive(p, "minLength");
            if (type && cJSON_IsNumber(max) && max->valuedouble >= 0 && max->valuedouble <= 100000 &&
                !cJSON_GetObjectItemCaseSensitive(p, "pattern") && !cJSON_GetObjectItemCaseSensitive(p, "format")) {
                int lo = cJSON_IsNumber(min) && min->valuedouble > 0 ? (int)min->valuedouble : 0;
                int hi = (int)max->valuedouble;
                putf(b, " [^<]{%d,%d} \"\\n</parameter>\\n\"\n", lo < hi ? lo : hi, hi);
            } else {
                puts_(b, " tc-text\n");
            }
        } else {
            char prefix[32], w[300];
            snprintf(prefix, sizeof prefix, "t%d-p%d-", i, j);
            putf(b, " %sroot \"\\n\"? \"</parameter>\\n\"\n", prefix);
            snprintf(w, sizeof w, "%s.properties.%.60s", where, p->string);
            if (!(ok = schema_rules(b, p, prefix, w, err, errlen))) break;
        }
        putf(&body, required ? " tc%d-arg%d" : " tc%d-arg%d?", i, j);
        j++;
    }
    putf(b, "tc%d-params ::= \"\"%s\n", i, body.p ? body.p : "");
    free(body.p);
    return ok;
}

/* the grammar literal of pre, name and post as one string */
static void name_lit(struct gb *b, const char *pre, const char *name, const char *post) {
    struct gb o = {0};
    puts_(&o, pre);
    puts_(&o, name);
    puts_(&o, post);
    lit(b, o.p ? o.p : "");
    free(o.p);
}

/* the call of tool i in the format's markup: rule t<i>-call */
static void call_rule(struct gb *b, enum kiln_tool_format f, bool mistral_args, int i, const char *name) {
    putf(b, "tc%d-call ::= ", i);
    switch (f) {
    case KILN_TOOLS_QWEN3_CODER:
        name_lit(b, "<function=", name, ">\n");
        putf(b, " tc%d-params \"</function>\"\n", i);
        return;
    case KILN_TOOLS_LLAMA3:
        puts_(b, "\"{\" tc-sp \"\\\"name\\\"\" tc-sp \":\" tc-sp ");
        json_name_lit(b, name);
        putf(b, " tc-sp \",\" tc-sp \"\\\"parameters\\\"\" tc-sp \":\" tc-sp t%d-root tc-sp \"}\"\n", i);
        return;
    case KILN_TOOLS_MISTRAL:
        if (mistral_args) {
            puts_(b, "\"[TOOL_CALLS]\" ");
            lit(b, name);
            putf(b, " \"[ARGS]\" t%d-root\n", i);
            return;
        }
        puts_(b, "\"{\" tc-sp \"\\\"name\\\"\" tc-sp \":\" tc-sp ");
        json_name_lit(b, name);
        putf(b, " tc-sp \",\" tc-sp \"\\\"arguments\\\"\" tc-sp \":\" tc-sp t%d-root tc-sp \",\" tc-sp "
                "\"\\\"id\\\"\" tc-sp \":\" tc-sp \"\\\"\" [a-zA-Z0-9]{9} \"\\\"\" tc-sp \"}\"\n", i);
        return;
    case KILN_TOOLS_GPT_OSS:
        name_lit(b, "<|channel|>commentary to=functions.", name, " <|constrain|>json<|message|>");
        putf(b, " t%d-root\n", i);
        return;
    case KILN_TOOLS_DEEPSEEK_R1:
        name_lit(b, DS_CALL "function" DS_SEP, name, "\n```json\n");
        putf(b, " t%d-root \"\\n\"? \"```\" \"" DS_CALL_END "\"\n", i);
        return;
    case KILN_TOOLS_DEEPSEEK_V3:
        name_lit(b, DS_CALL, name, DS_SEP);
        putf(b, " t%d-root \"" DS_CALL_END "\"\n", i);
        return;
    default: /* Hermes and generic: {"name": ..., "arguments": ...} */
        puts_(b, "\"{\" tc-sp \"\\\"name\\\"\" tc-sp \":\" tc-sp ");
        json_name_lit(b, name);
        putf(b, " tc-sp \",\" tc-sp \"\\\"arguments\\\"\" tc-sp \":\" tc-sp t%d-root tc-sp \"}\"\n", i);
        return;
    }
}

/* root: the calls in the format's frame (one, or one or more with parallel) */
static void root_rule(struct gb *b, enum kiln_tool_format f, bool mistral_args, bool parallel, const char *before) {
    puts_(b, "root ::= ");
    if (before && *before) {
        lit(b, before);
        puts_(b, " ");
    }
    switch (f) {
    case KILN_TOOLS_HERMES:
        puts_(b, parallel ? "tc-one (tc-sp tc-one)*\ntc-one ::= \"<tool_call>\" tc-sp tc-call tc-sp \"</tool_call>\"\n"
                          : "\"<tool_call>\" tc-sp tc-call tc-sp \"</tool_call>\"\n");
        return;
    case KILN_TOOLS_QWEN3_CODER:
        puts_(b, parallel ? "tc-one (\"\\n\" tc-one)*\n" : "tc-one\n");
        puts_(b, "tc-one ::= \"<tool_call>\\n\" tc-call \"\\n</tool_call>\"\n");
        return;
    case KILN_TOOLS_LLAMA3: puts_(b, parallel ? "tc-call (\";\" tc-sp tc-call)*\n" : "tc-call\n"); return;
    case KILN_TOOLS_MISTRAL:
        if (mistral_args) puts_(b, parallel ? "tc-call+\n" : "tc-call\n");
        else puts_(b, parallel ? "\"[TOOL_CALLS][\" tc-call (\",\" tc-sp tc-call)* \"]\"\n" : "\"[TOOL_CALLS][\" tc-call \"]\"\n");
        return;
    case KILN_TOOLS_GPT_OSS: puts_(b, "tc-call\n"); return; /* one call a message: <|call|> ends the turn */
    case KILN_TOOLS_DEEPSEEK_R1:
    case KILN_TOOLS_DEEPSEEK_V3:
        puts_(b, parallel ? "\"" DS_CALLS "\" tc-call (\"\\n\"? tc-call)* \"" DS_CALLS_END "\"\n"
                          : "\"" DS_CALLS "\" tc-call \"" DS_CALLS_END "\"\n");
        return;
    default: /* generic */
        puts_(b, parallel ? "\"{\" tc-sp \"\\\"tool_calls\\\"\" tc-sp \":\" tc-sp \"[\" tc-sp tc-call (\",\" tc-sp "
                            "tc-call)* tc-sp \"]\" tc-sp \"}\"\n"
                          : "\"{\" tc-sp \"\\\"tool_calls\\\"\" tc-sp \":\" tc-sp \"[\" tc-sp tc-call tc-sp \"]\" tc-sp "
                            "\"}\"\n");
        return;
    }
}

enum kiln_tool_format srv_tool_grammar_format(enum kiln_tool_format f) {
    return f == KILN_TOOLS_CONTENT ? KILN_TOOLS_GENERIC : f;
}

const char *const *srv_tool_triggers(enum kiln_tool_format f, size_t *n) {
    static const char *const tc[] = {"<tool_call>"}, *const mi[] = {"[TOOL_CALLS]"}, *const ds[] = {DS_CALLS};
    *n = 1;
    switch (f) {
    case KILN_TOOLS_HERMES:
    case KILN_TOOLS_QWEN3_CODER: return tc;
    case KILN_TOOLS_MISTRAL: return mi;
    case KILN_TOOLS_DEEPSEEK_R1:
    case KILN_TOOLS_DEEPSEEK_V3: return ds;
    default: *n = 0; return NULL; /* calls that are the whole reply (JSON) or open with control tokens */
    }
}

char *srv_tool_grammar(const struct srv_tool_grammar_opts *o, char *err, size_t errlen) {
    enum kiln_tool_format f = srv_tool_grammar_format(o->format);
    bool mistral_args = f == KILN_TOOLS_MISTRAL && o->template_src && strstr(o->template_src, "[ARGS]");
    struct gb b = {0};
    root_rule(&b, f, mistral_args, o->parallel, o->before);
    puts_(&b, "tc-sp ::= | \" \" | \"\\n\"\n");
    if (f == KILN_TOOLS_QWEN3_CODER) {
        puts_(&b, "tc-text ::= tc-until-0 \"\\n\"\n"); /* the value up to its closing tag */
        until_rules(&b, "tc-until", "</parameter>");
    }
    puts_(&b, "tc-call ::= ");
    const cJSON *t;
    int i = 0, n = 0;
    cJSON_ArrayForEach(t, o->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (!o->only || !strcmp(o->only, name)) putf(&b, n++ ? " | tc%d-call" : "tc%d-call", i);
        i++;
    }
    puts_(&b, "\n");
    if (!n) {
        snprintf(err, errlen, "'tool_choice' names function '%.60s', which is not one of 'tools'", o->only);
        free(b.p);
        return NULL;
    }
    i = 0;
    cJSON_ArrayForEach(t, o->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        char where[96], prefix[16];
        snprintf(where, sizeof where, "'tools'[%d].function.parameters (%.40s)", i, name);
        snprintf(prefix, sizeof prefix, "t%d-", i);
        if (o->only && strcmp(o->only, name)) {
            i++;
            continue;
        }
        call_rule(&b, f, mistral_args, i, name);
        bool ok = f == KILN_TOOLS_QWEN3_CODER ? xml_params(&b, i, params, where, err, errlen)
                                              : schema_rules(&b, params, prefix, where, err, errlen);
        if (!ok) {
            free(b.p);
            return NULL;
        }
        i++;
    }
    if (b.oom) {
        free(b.p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return b.p;
}
