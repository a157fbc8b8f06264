/*
 * grammar.c - structured output in requests: `response_format` (OpenAI:
 * json_object, json_schema) and llama-server's `grammar` / `json_schema`,
 * compiled into a sampler stage that goes first in the task's chain. Compiled
 * grammars are kept (by text, most recently used) so that a client sending the
 * same schema again skips the compile and reuses the token classes its earlier
 * requests computed.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_N 16

struct entry {
    char *key; /* "g:" GBNF text or "s:" schema JSON */
    struct kiln_grammar *g;
    unsigned long long used;
};

struct srv_grammars {
    struct kiln_grammar_vocab *gv;
    pthread_mutex_t mu;
    struct entry e[CACHE_N];
    unsigned long long tick;
};

struct srv_grammars *srv_grammars_new(const struct kiln_vocab *v, char *err, size_t errlen) {
    struct srv_grammars *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(c->gv = kiln_grammar_vocab_new(v, err, errlen))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void srv_grammars_free(struct srv_grammars *c) {
    if (!c) return;
    for (int i = 0; i < CACHE_N; i++) {
        free(c->e[i].key);
        kiln_grammar_free(c->e[i].g);
    }
    kiln_grammar_vocab_free(c->gv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The sampler stage for a GBNF text or a schema (kind 'g' or 's'); lazy from the triggers when there are
 * some; NULL with a message. */
static struct kiln_sampler *stage_for(struct srv_grammars *c, char kind, const char *text, const char *field,
                                      const char *const *triggers, size_t n_triggers, char *err, size_t errlen) {
    size_t n = strlen(text);
    char *key = malloc(n + 3);
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    key[0] = kind, key[1] = ':';
    memcpy(key + 2, text, n + 1);
    pthread_mutex_lock(&c->mu);
    struct entry *hit = NULL, *lru = &c->e[0];
    for (int i = 0; i < CACHE_N && !hit; i++) {
        if (c->e[i].key && !strcmp(c->e[i].key, key)) hit = &c->e[i];
        else if (!c->e[i].key || (lru->key && c->e[i].used < lru->used)) lru = &c->e[i];
    }
    struct kiln_sampler *stage = NULL;
    if (!hit) {
        char gerr[400];
        struct kiln_grammar *g = kind == 's' ? kiln_grammar_from_json_schema(text, n, gerr, sizeof gerr)
                                             : kiln_grammar_parse(text, n, NULL, gerr, sizeof gerr);
        if (!g) {
            snprintf(err, errlen, "'%s': %s", field, gerr);
            goto done;
        }
        free(lru->key);
        kiln_grammar_free(lru->g); /* samplers made from it keep it alive */
        *lru = (struct entry){key, g, 0};
        key = NULL;
        hit = lru;
    }
    hit->used = ++c->tick;
    stage = n_triggers ? kiln_sampler_init_grammar_lazy(hit->g, c->gv, triggers, n_triggers)
                       : kiln_sampler_init_grammar(hit->g, c->gv);
    if (!stage)
        snprintf(err, errlen, "'%s': %s", field, kiln_sampler_last_error());
done:
    pthread_mutex_unlock(&c->mu);
    free(key);
    return stage;
}

static bool only_keys(const cJSON *o, const char *field, const char *const *keys, char *err, size_t errlen) {
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        size_t k = 0;
        while (keys[k] && strcmp(keys[k], it->string)) k++;
        if (!keys[k]) {
            snprintf(err, errlen, "'response_format': %s.%.60s is not supported", field, it->string);
            return false;
        }
    }
    return true;
}

/* response_format -> a schema (NULL: plain text) or an error */
static bool response_format(const cJSON *rf, const cJSON **schema, bool *any_object, char *err, size_t errlen) {
    static const char *const rf_keys[] = {"type", "json_schema", "schema", NULL};
    static const char *const js_keys[] = {"name", "description", "schema", "strict", NULL};
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type)) {
        snprintf(err, errlen, "'response_format' must be an object with a string 'type'");
        return false;
    }
    if (!only_keys(rf, "response_format", rf_keys, err, errlen)) return false;
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema"),
                *inner = cJSON_GetObjectItemCaseSensitive(rf, "schema");
    if (!strcmp(type->valuestring, "text")) {
        if (js || inner) {
            snprintf(err, errlen, "'response_format': type 'text' takes no schema");
            return false;
        }
        return true;
    }
    if (!strcmp(type->valuestring, "json_object")) {
        if (js) {
            snprintf(err, errlen, "'response_format': 'json_schema' goes with type 'json_schema'");
            return false;
        }
        if (inner && !(cJSON_IsObject(inner) && !inner->child)) *schema = inner; /* llama-server's: a schema for it */
        else *any_object = true;
        return true;
    }
    if (!strcmp(type->valuestring, "json_schema")) {
        if (inner || !cJSON_IsObject(js)) {
            snprintf(err, errlen, "'response_format': type 'json_schema' needs a 'json_schema' object");
            return false;
        }
        if (!only_keys(js, "json_schema", js_keys, err, errlen)) return false;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name"), *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
        if ((name && !cJSON_IsString(name)) || (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))) {
            snprintf(err, errlen, "'response_format': json_schema.name must be a string, json_schema.strict a boolean");
            return false;
        }
        *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (cJSON_IsObject(*schema) && !(*schema)->child) { /* {} is any object here, as llama-server has it */
            *schema = NULL;
            *any_object = true;
            return true;
        }
        if (!*schema || !(cJSON_IsObject(*schema) || cJSON_IsBool(*schema))) {
            snprintf(err, errlen, "'response_format': json_schema.schema must be a JSON Schema (an object)");
            return false;
        }
        return true;
    }
    snprintf(err, errlen, "'response_format': type must be text, json_object or json_schema, not '%.40s'",
             type->valuestring);
    return false;
}

bool srv_parse_grammar(struct kiln_server *s, const cJSON *body, enum srv_api api, const struct srv_chat_out *chat,
                       struct kiln_sampler **stage, char *err, size_t errlen) {
    *stage = NULL;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(body, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(body, "grammar");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(body, "json_schema");
    if (rf && cJSON_IsNull(rf)) rf = NULL;
    if (gbnf && cJSON_IsNull(gbnf)) gbnf = NULL;
    if (js && cJSON_IsNull(js)) js = NULL;
    if (api == SRV_API_LLAMA) rf = NULL; /* the field table lets only {"type": "text"} through there */
    if ((rf != NULL) + (gbnf != NULL) + (js != NULL) > 1) {
        snprintf(err, errlen, "give only one of 'response_format', 'grammar' and 'json_schema'");
        return false;
    }
    if (chat && chat->tool_gbnf) {
        bool lazy = chat->n_tool_triggers > 0;
        if (!rf && !gbnf && !js) {
            *stage = stage_for(s->grammars, 'g', chat->tool_gbnf, "tools", chat->tool_triggers, chat->n_tool_triggers,
                               err, errlen);
            if (!*stage && lazy) err[0] = 0; /* "auto" asked for no constraint: its calls are then parsed, not held */
            return *stage != NULL || lazy;
        }
        if (!lazy) { /* both would hold the whole reply */
            snprintf(err, errlen, "'tool_choice' \"required\" or a named function holds the reply to tool calls: it "
                                  "cannot go with '%s'", rf ? "response_format" : gbnf ? "grammar" : "json_schema");
            return false;
        }
        /* "auto": the reply's own grammar holds from the start, the calls are parsed but not held */
    }
    const cJSON *schema = js;
    bool any_object = false;
    if (rf && !response_format(rf, &schema, &any_object, err, errlen)) return false;
    if (gbnf) {
        if (!cJSON_IsString(gbnf)) {
            snprintf(err, errlen, "'grammar' must be a string (GBNF)");
            return false;
        }
        if (!*gbnf->valuestring) return true; /* llama-server: an empty grammar is none */
        return (*stage = stage_for(s->grammars, 'g', gbnf->valuestring, "grammar", NULL, 0, err, errlen)) != NULL;
    }
    if (any_object) return (*stage = stage_for(s->grammars, 's', "{\"type\":\"object\"}", "response_format", NULL, 0, err, errlen));
    if (!schema) return true;
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) {
        snprintf(err, errlen, "'json_schema' must be a JSON Schema (an object)");
        return false;
    }
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    *stage = stage_for(s->grammars, 's', text, rf ? "response_format" : "json_schema", NULL, 0, err, errlen);
    free(text);
    return *stage != NULL;
}
