/*
 * chat.c - chat requests into prompts with the model's own Jinja template
 * (tokenizer.chat_template, and tokenizer.chat_template.tool_use when tools
 * are offered), as llama-server's --jinja renders them: messages normalized
 * (developer as system, null content as "", tool-call arguments as the
 * template wants them), tools, tool_choice, chat_template_kwargs,
 * enable_thinking, bos/eos tokens and today's date. Kiln's native template
 * families stay the fallback (--no-jinja, a file without a template, a family
 * named by --chat-template). Also what the output parser needs to know: the
 * tool-call format, whether the prompt opened a thinking block.
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "kiln-offline.h"

struct tmpl {
    char *src;
    struct kiln_jinja *t;
    enum kiln_tool_format fmt;
    bool obj_args;   /* tool-call arguments go in as objects (else as JSON text) */
    bool system;     /* the template shows a system message (else it joins the first user message) */
    bool thinks;     /* the template writes thinking blocks */
    bool developer;  /* the template has a developer role of its own (harmony) */
};

struct srv_chat_tmpl {
    struct tmpl def, tool;
    bool has_tool;
    char bos[64], eos[64];
};

/* ------------------------------------------------------------------ loading */

static char *gguf_text(const struct kiln_model *m, const char *key) {
    const struct gguf_file *g = kiln_model_gguf(m);
    struct gguf_str v;
    if (!g || gguf_find_key(g, key) < 0 || !gguf_get_str(g, key, &v)) return NULL;
    char *t = malloc(v.len + 1);
    if (!t) return NULL;
    memcpy(t, v.ptr, v.len);
    t[v.len] = 0;
    return t;
}

static void token_text(const struct kiln_vocab *v, int32_t id, char *buf, size_t size) {
    buf[0] = 0;
    if (id == KILN_TOKEN_NULL) return;
    int64_t n = kiln_token_to_piece(v, id, buf, size - 1, true);
    buf[n > 0 ? n : 0] = 0;
}

static char *render_ctx(const struct kiln_jinja *t, const cJSON *ctx, char *err, size_t errlen) {
    char *json = cJSON_PrintUnformatted(ctx);
    if (!json) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct kiln_jinja_opts o = kiln_jinja_default_opts();
    char *out = kiln_jinja_render(t, json, strlen(json), &o, NULL, err, errlen);
    free(json);
    return out;
}

/* A small conversation through the template, to learn what it accepts (as llama.cpp's capability checks do). */
static char *probe(const struct tmpl *tp, const char *bos, const char *eos, const char *messages, bool tools) {
    char err[256];
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemToObject(ctx, "messages", cJSON_Parse(messages));
    if (tools)
        cJSON_AddItemToObject(ctx, "tools",
                              cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"probe_tool\", "
                                          "\"description\": \"A tool.\", \"parameters\": {\"type\": \"object\", "
                                          "\"properties\": {\"arg\": {\"type\": \"string\"}}, \"required\": [\"arg\"]}}}]"));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", true);
    cJSON_AddStringToObject(ctx, "bos_token", bos);
    cJSON_AddStringToObject(ctx, "eos_token", eos);
    char *out = render_ctx(tp->t, ctx, err, sizeof err);
    cJSON_Delete(ctx);
    return out;
}

static bool load_one(struct srv_chat_tmpl *c, struct tmpl *tp, char *src, const char *what, char *err, size_t errlen) {
    tp->src = src;
    char e[400];
    tp->t = kiln_jinja_parse(src, strlen(src), e, sizeof e);
    if (!tp->t) {
        snprintf(err, errlen, "%s: %s", what, e);
        return false;
    }
    tp->fmt = kiln_tool_format_detect(src);
    tp->thinks = strstr(src, "<think>") || strstr(src, "</think>") || tp->fmt == KILN_TOOLS_GPT_OSS;
    tp->developer = strstr(src, "<|channel|>") != NULL;
    /* system messages: shown, or refused / dropped (then they join the first user message) */
    char *o = probe(tp, c->bos, c->eos,
                    "[{\"role\": \"system\", \"content\": \"SYSTEM_PROBE_7f3a\"}, {\"role\": \"user\", \"content\": "
                    "\"hi\"}]",
                    false);
    tp->system = o && strstr(o, "SYSTEM_PROBE_7f3a");
    free(o);
    /* tool-call arguments: as an object where the template takes one, else as JSON text */
    static const char call[] =
        "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
        "[{\"id\": \"call00001\", \"type\": \"function\", \"function\": {\"name\": \"probe_tool\", \"arguments\": "
        "{\"arg\": \"ARG_PROBE_7f3a\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call00001\", \"content\": \"ok\"}]";
    o = probe(tp, c->bos, c->eos, call, true);
    tp->obj_args = o && strstr(o, "ARG_PROBE_7f3a");
    free(o);
    return true;
}

struct srv_chat_tmpl *srv_chat_tmpl_load(const struct kiln_model *m, const char *override, char *err,
                                         size_t errlen) {
    err[0] = 0;
    if (override && kiln_chat_template_from_name(override) != KILN_CHAT_UNKNOWN) return NULL; /* native */
    char *def = override ? strdup(override) : gguf_text(m, "tokenizer.chat_template");
    char *tool = override ? NULL : gguf_text(m, "tokenizer.chat_template.tool_use");
    if (!def && tool) def = strdup(tool);
    if (!def) { /* no template in the file: the native fallback */
        free(tool);
        return NULL;
    }
    struct srv_chat_tmpl *c = calloc(1, sizeof *c);
    if (!c) {
        free(def);
        free(tool);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const struct kiln_vocab *v = kiln_model_vocab(m);
    token_text(v, kiln_vocab_bos(v), c->bos, sizeof c->bos);
    token_text(v, kiln_vocab_eos(v), c->eos, sizeof c->eos);
    if (!load_one(c, &c->def, def, override ? "--chat-template" : "the model's chat template", err, errlen)) {
        free(tool);
        srv_chat_tmpl_free(c);
        return NULL;
    }
    if (tool) {
        char e[400];
        c->has_tool = load_one(c, &c->tool, tool, "the model's tool_use chat template", e, sizeof e);
        if (!c->has_tool) { /* as llama.cpp: a broken tool_use template is left out */
            fprintf(stderr, "kiln: %s (using the default template for tools)\n", e);
            kiln_jinja_free(c->tool.t);
            free(c->tool.src);
            memset(&c->tool, 0, sizeof c->tool);
        }
    }
    return c;
}

void srv_chat_tmpl_free(struct srv_chat_tmpl *c) {
    if (!c) return;
    kiln_jinja_free(c->def.t);
    kiln_jinja_free(c->tool.t);
    free(c->def.src);
    free(c->tool.src);
    free(c);
}

const char *srv_chat_tmpl_src(const struct srv_chat_tmpl *c) {
    return c ? c->def.src : "";
}

bool srv_chat_load(struct kiln_server *s, char *err, size_t errlen) {
    s->chat = NULL;
    const char *o = s->p.chat_template;
    if (o && kiln_chat_template_from_name(o) != KILN_CHAT_UNKNOWN)
        s->tmpl = kiln_chat_template_from_name(o); /* a native family by name */
    else if (o && !s->p.jinja) {
        snprintf(err, errlen, "--chat-template with --no-jinja must name one of kiln's native families (chatml, "
                              "llama3, ...); a Jinja template needs --jinja");
        return false;
    }
    if (!s->p.jinja) return true;
    s->chat = srv_chat_tmpl_load(s->model, s->p.chat_template, err, errlen);
    return s->chat || !err[0];
}

void srv_chat_free(struct kiln_server *s) {
    srv_chat_tmpl_free(s->chat);
    s->chat = NULL;
}

char *srv_chat_render(struct kiln_server *s, const cJSON *body, enum srv_body which, struct srv_chat_out *out,
                      int *status, char *err, size_t errlen) {
    struct srv_chat_cfg cfg = {.vocab = s->vocab, .native = s->tmpl, .reasoning = s->p.reasoning,
                               .reasoning_budget = s->p.reasoning_budget, .generating = which == SRV_BODY_CHAT};
    return srv_chat_tmpl_render(s->chat, &cfg, body, out, status, err, errlen);
}

void srv_chat_out_free(struct srv_chat_out *o) {
    free((char *)o->o.think_prefix);
    free((char *)o->o.tools_json);
    free(o->think_end);
    free(o->tool_gbnf);
    memset(o, 0, sizeof *o);
}

/* ------------------------------------------------------------------ messages */

/* A message's content as text: a string, text parts joined, or "" for null (no content) */
static bool content_text(const cJSON *c, int i, const char *role, bool may_be_null, cJSON **out, char *err,
                         size_t errlen) {
    if (cJSON_IsString(c)) {
        *out = cJSON_CreateString(c->valuestring);
        return true;
    }
    if (!c || cJSON_IsNull(c)) {
        if (!may_be_null) {
            snprintf(err, errlen, "'messages'[%d] (%s) needs a 'content'", i, role);
            return false;
        }
        *out = cJSON_CreateString("");
        return true;
    }
    if (!cJSON_IsArray(c)) {
        snprintf(err, errlen, "'messages'[%d].content must be a string or an array of text parts", i);
        return false;
    }
    size_t len = 0;
    const cJSON *part;
    int j = 0;
    cJSON_ArrayForEach(part, c) {
        char where[64];
        snprintf(where, sizeof where, "'messages'[%d].content[%d]", i, j++);
        if (cJSON_IsObject(part) && !srv_check_fields(part, SRV_BODY_CONTENT_PART, where, err, errlen)) return false;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, errlen, "'messages'[%d].content parts must be {\"type\": \"text\", \"text\": string}", i);
            return false;
        }
        len += strlen(text->valuestring);
    }
    char *joined = malloc(len + 1), *p = joined;
    if (!joined) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    cJSON_ArrayForEach(part, c) {
        const char *text = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t l = strlen(text);
        memcpy(p, text, l);
        p += l;
    }
    *p = 0;
    *out = cJSON_CreateString(joined);
    free(joined);
    return true;
}

/* an assistant's tool_calls, checked, with arguments as an object or as JSON text */
static cJSON *tool_calls(const cJSON *tc, int i, bool obj_args, char *err, size_t errlen) {
    if (!cJSON_IsArray(tc)) {
        snprintf(err, errlen, "'messages'[%d].tool_calls must be an array", i);
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    const cJSON *c;
    int k = 0;
    cJSON_ArrayForEach(c, tc) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        char where[80];
        snprintf(where, sizeof where, "'messages'[%d].tool_calls[%d]", i, k);
        if (cJSON_IsObject(c) && !srv_check_fields(c, SRV_BODY_TOOL_CALL, where, err, errlen)) goto bad_field;
        snprintf(where, sizeof where, "'messages'[%d].tool_calls[%d].function", i, k);
        if (cJSON_IsObject(fn) && !srv_check_fields(fn, SRV_BODY_FUNCTION, where, err, errlen)) goto bad_field;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
        if (!cJSON_IsObject(c) || !cJSON_IsString(name) || (type && !(cJSON_IsString(type) &&
                                                                       !strcmp(type->valuestring, "function")))) {
            snprintf(err, errlen, "'messages'[%d].tool_calls[%d] must be {\"type\": \"function\", \"function\": "
                                  "{\"name\", \"arguments\"}}", i, k);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *obj = NULL;
        if (cJSON_IsString(args)) obj = cJSON_Parse(args->valuestring);
        else if (cJSON_IsObject(args)) obj = cJSON_Duplicate(args, true);
        else if (!args || cJSON_IsNull(args)) obj = cJSON_CreateObject();
        if (!cJSON_IsObject(obj)) {
            snprintf(err, errlen, "'messages'[%d].tool_calls[%d].function.arguments must be a JSON object (as text)",
                     i, k);
            cJSON_Delete(obj);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *call = cJSON_CreateObject();
        if (cJSON_IsString(id)) cJSON_AddStringToObject(call, "id", id->valuestring);
        cJSON_AddStringToObject(call, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(call, "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        if (obj_args) {
            cJSON_AddItemToObject(f, "arguments", obj);
        } else {
            char *text = cJSON_PrintUnformatted(obj);
            cJSON_AddStringToObject(f, "arguments", text ? text : "{}");
            free(text);
            cJSON_Delete(obj);
        }
        cJSON_AddItemToArray(out, call);
        k++;
    }
    return out;
bad_field:
    cJSON_Delete(out);
    return NULL;
}

/* function: the deprecated form of a tool result, rendered as one */
static const char *const ROLES[] = {"system", "user", "assistant", "tool", "developer", "function"};

/* messages as the template gets them */
static cJSON *messages_for(const struct tmpl *tp, const cJSON *messages, char *err, size_t errlen) {
    int n = cJSON_GetArraySize(messages);
    if (!cJSON_IsArray(messages) || n == 0) {
        snprintf(err, errlen, "'messages' must be a non-empty array of {\"role\", \"content\"}");
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            snprintf(err, errlen, "'messages'[%d] must be an object with a string 'role'", i);
            goto fail;
        }
        char where[32];
        snprintf(where, sizeof where, "'messages'[%d]", i);
        if (!srv_check_fields(m, SRV_BODY_MESSAGE, where, err, errlen)) goto fail;
        size_t r = 0;
        while (r < sizeof ROLES / sizeof ROLES[0] && strcmp(ROLES[r], role->valuestring)) r++;
        if (r == sizeof ROLES / sizeof ROLES[0]) {
            snprintf(err, errlen,
                     "'messages'[%d].role '%.40s' is not one of system, developer, user, assistant, tool, function", i,
                     role->valuestring);
            goto fail;
        }
        const char *rname = r == 4 && (!tp || !tp->developer) ? "system" /* developer means system */
                            : r == 5                           ? "tool"
                                                               : ROLES[r];
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (calls && cJSON_IsNull(calls)) calls = NULL;
        const cJSON *fcall = cJSON_GetObjectItemCaseSensitive(m, "function_call");
        cJSON *fcalls = NULL; /* the older function_call, as a one-call tool_calls */
        if (fcall && !cJSON_IsNull(fcall)) {
            if (r != 2 || calls) {
                snprintf(err, errlen, "'messages'[%d]: 'function_call' belongs to an assistant message without "
                                      "'tool_calls'", i);
                goto fail;
            }
            fcalls = cJSON_CreateArray();
            cJSON *one = cJSON_CreateObject();
            cJSON_AddItemToArray(fcalls, one);
            cJSON_AddStringToObject(one, "type", "function");
            cJSON_AddItemToObject(one, "function", cJSON_Duplicate(fcall, true));
            calls = fcalls;
        }
        if (calls && r != 2) {
            snprintf(err, errlen, "'messages'[%d]: only an assistant message has 'tool_calls'", i);
            goto fail;
        }
        cJSON *tc = calls ? tool_calls(calls, i, !tp || tp->obj_args, err, errlen) : NULL;
        cJSON_Delete(fcalls);
        if (calls && !tc) goto fail;
        const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
        const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
        if ((call_id && !cJSON_IsNull(call_id) && !cJSON_IsString(call_id)) ||
            (name && !cJSON_IsNull(name) && !cJSON_IsString(name)) ||
            (reasoning && !cJSON_IsNull(reasoning) && !cJSON_IsString(reasoning))) {
            snprintf(err, errlen, "'messages'[%d]: 'tool_call_id', 'name' and 'reasoning_content' must be strings", i);
            cJSON_Delete(tc);
            goto fail;
        }
        cJSON *o = cJSON_CreateObject(), *content = NULL;
        cJSON_AddItemToArray(out, o);
        cJSON_AddStringToObject(o, "role", rname);
        if (!content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), i, ROLES[r], r == 2, &content, err, errlen)) {
            cJSON_Delete(tc);
            goto fail;
        }
        cJSON_AddItemToObject(o, "content", content);
        if (cJSON_IsString(name)) cJSON_AddStringToObject(o, "name", name->valuestring);
        if (tc) cJSON_AddItemToObject(o, "tool_calls", tc);
        tc = NULL;
        if (cJSON_IsString(call_id)) cJSON_AddStringToObject(o, "tool_call_id", call_id->valuestring);
        if (cJSON_IsString(reasoning) && *reasoning->valuestring)
            cJSON_AddStringToObject(o, "reasoning_content", reasoning->valuestring);
        i++;
    }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

/* templates that show no system message: it joins the first user message (as llama.cpp does) */
static void fold_system(cJSON *msgs) {
    cJSON *first = cJSON_GetArrayItem(msgs, 0);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(first, "role");
    if (!cJSON_IsString(role) || strcmp(role->valuestring, "system")) return;
    const char *sys = cJSON_GetObjectItemCaseSensitive(first, "content")->valuestring;
    cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (m == first || strcmp(r->valuestring, "user")) continue;
        const char *user = cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring;
        size_t l = strlen(sys) + strlen(user) + 3;
        char *joined = malloc(l);
        if (!joined) return;
        snprintf(joined, l, "%s\n\n%s", sys, user);
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(joined));
        free(joined);
        break;
    }
    cJSON_DeleteItemFromArray(msgs, 0);
}

/* ------------------------------------------------------------------ tools */

static cJSON *tools_for(const cJSON *tools, char *err, size_t errlen) {
    if (!cJSON_IsArray(tools)) {
        snprintf(err, errlen, "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    const cJSON *t;
    int i = 0;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsObject(fn) || !cJSON_IsString(name) || !*name->valuestring) {
            snprintf(err, errlen, "'tools'[%d] must be {\"type\": \"function\", \"function\": {\"name\": string, ...}}",
                     i);
            goto fail;
        }
        if ((desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) ||
            (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))) {
            snprintf(err, errlen, "'tools'[%d].function: 'description' must be a string, 'parameters' an object", i);
            goto fail;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(o, "function");
        cJSON_AddItemToArray(out, o);
        cJSON_AddStringToObject(f, "name", name->valuestring);
        cJSON_AddStringToObject(f, "description", cJSON_IsString(desc) ? desc->valuestring : "");
        if (cJSON_IsObject(params) && cJSON_GetArraySize(params) > 0)
            cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(params, true));
        else
            cJSON_AddItemToObject(f, "parameters", cJSON_Parse("{\"type\": \"object\", \"properties\": {}}"));
        i++;
    }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

/* tool_choice: auto, none, required, or {"type": "function", "function": {"name"}}; 0 auto, 1 none, 2 forced
 * (*name: the named function, else NULL) */
static int tool_choice(const cJSON *tc, const char **name, char *err, size_t errlen) {
    *name = NULL;
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (cJSON_IsString(tc)) {
        if (!strcmp(tc->valuestring, "auto")) return 0;
        if (!strcmp(tc->valuestring, "none")) return 1;
        if (!strcmp(tc->valuestring, "required")) return 2;
    } else if (cJSON_IsObject(tc)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *it;
        bool only_name = cJSON_IsObject(fn);
        cJSON_ArrayForEach(it, fn) only_name &= !strcmp(it->string, "name");
        bool only_keys = true;
        cJSON_ArrayForEach(it, tc) only_keys &= !strcmp(it->string, "type") || !strcmp(it->string, "function");
        if (only_keys && only_name && cJSON_IsString(type) && !strcmp(type->valuestring, "function") &&
            cJSON_IsString(n) && *n->valuestring) {
            *name = n->valuestring;
            return 2;
        }
    }
    snprintf(err, errlen, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                          "\"function\": {\"name\": ...}}");
    return -1;
}

/* The grammar that holds the calls: from the first token for "required" or a named function (a thinking
 * block the prompt opened is closed first), from the format's call opener for "auto" (where the format has
 * one in text). A schema kiln refuses fails a forced choice; with "auto" the calls are then parsed, not held. */
static bool tool_grammar(const struct tmpl *tp, const cJSON *tools, int choice, const char *name, bool parallel,
                         struct srv_chat_out *out, char *err, size_t errlen) {
    struct srv_tool_grammar_opts go = {.format = tp->fmt, .tools = tools, .only = name, .parallel = parallel,
                                       .template_src = tp->src};
    if (choice == 2) {
        go.before = out->in_think ? "</think>\n\n" : NULL;
        out->o.format = srv_tool_grammar_format(tp->fmt);
        out->tool_gbnf = srv_tool_grammar(&go, err, errlen);
        return out->tool_gbnf != NULL;
    }
    size_t n = 0;
    const char *const *trig = srv_tool_triggers(tp->fmt, &n);
    if (!n) return true;
    char e[256];
    if ((out->tool_gbnf = srv_tool_grammar(&go, e, sizeof e))) {
        out->tool_triggers = trig;
        out->n_tool_triggers = n;
    }
    return true;
}

/* ------------------------------------------------------------------ rendering */

static bool get_flag(const cJSON *o, const char *key, bool *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) {
        snprintf(err, errlen, "'%s' must be true or false", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

char *srv_chat_tmpl_render(const struct srv_chat_tmpl *c, const struct srv_chat_cfg *cfg, const cJSON *body,
                           struct srv_chat_out *out, int *status, char *err, size_t errlen) {
    *status = 400;
    bool add = true, parallel = true, thinking = cfg->reasoning_budget != 0;
    if (!get_flag(body, "add_generation_prompt", &add, err, errlen) ||
        !get_flag(body, "parallel_tool_calls", &parallel, err, errlen))
        return NULL;
    const cJSON *tools_in = cJSON_GetObjectItemCaseSensitive(body, "tools");
    if (tools_in && cJSON_IsNull(tools_in)) tools_in = NULL;
    const char *forced_name = NULL;
    int choice = tool_choice(cJSON_GetObjectItemCaseSensitive(body, "tool_choice"), &forced_name, err, errlen);
    if (choice < 0) return NULL;
    bool reasoning = cfg->reasoning;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(body, "reasoning_format");
    if (rf && !cJSON_IsNull(rf)) {
        if (!cJSON_IsString(rf) || (strcmp(rf->valuestring, "none") && strcmp(rf->valuestring, "deepseek") &&
                                    strcmp(rf->valuestring, "auto"))) {
            snprintf(err, errlen, "'reasoning_format' must be \"none\", \"deepseek\" or \"auto\"");
            return NULL;
        }
        reasoning = strcmp(rf->valuestring, "none") != 0;
    }
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(body, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw)) {
        snprintf(err, errlen, "'chat_template_kwargs' must be an object");
        return NULL;
    }
    const cJSON *et = kw ? cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking") : NULL;
    if (et && !cJSON_IsBool(et)) {
        snprintf(err, errlen, "'chat_template_kwargs'.enable_thinking must be true or false");
        return NULL;
    }
    if (et) thinking = cJSON_IsTrue(et);
    cJSON *tools = tools_in ? tools_for(tools_in, err, errlen) : NULL;
    if (tools_in && !tools) return NULL;
    if (tools && cJSON_GetArraySize(tools) == 0) {
        cJSON_Delete(tools);
        tools = NULL;
    }
    if (choice == 2 && !tools) {
        snprintf(err, errlen, "'tool_choice' %s needs a non-empty 'tools'", forced_name ? "naming a function" : "\"required\"");
        return NULL;
    }
    const struct tmpl *tp = !c ? NULL : tools && c->has_tool ? &c->tool : &c->def;
    cJSON *msgs = NULL;
    char *prompt = NULL;
    if (!tp) {
        if (tools) {
            snprintf(err, errlen, "'tools' needs a Jinja chat template (this server renders with the native '%s' "
                                  "family: start it without --no-jinja, with a model that has a template, or with "
                                  "--chat-template-file)", kiln_chat_template_name(cfg->native));
            goto done;
        }
        if (kw) {
            snprintf(err, errlen, "'chat_template_kwargs' needs a Jinja chat template (this server renders with the "
                                  "native '%s' family)", kiln_chat_template_name(cfg->native));
            goto done;
        }
        prompt = srv_render_native(cfg->native, cJSON_GetObjectItemCaseSensitive(body, "messages"), add, err, errlen);
        goto done;
    }
    if (!(msgs = messages_for(tp, cJSON_GetObjectItemCaseSensitive(body, "messages"), err, errlen))) goto done;
    if (!tp->system) fold_system(msgs);
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemToObject(ctx, "messages", msgs);
    msgs = NULL;
    if (tools) cJSON_AddItemReferenceToObject(ctx, "tools", tools);
    if (add) cJSON_AddBoolToObject(ctx, "add_generation_prompt", true);
    cJSON_AddStringToObject(ctx, "bos_token", c->bos);
    cJSON_AddStringToObject(ctx, "eos_token", c->eos);
    cJSON_AddBoolToObject(ctx, "enable_thinking", thinking);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    cJSON_AddStringToObject(ctx, "date_string", date);
    const cJSON *k;
    if (kw) cJSON_ArrayForEach(k, kw) { /* the request's own variables win */
            cJSON_DeleteItemFromObjectCaseSensitive(ctx, k->string);
            cJSON_AddItemToObject(ctx, k->string, cJSON_Duplicate(k, true));
        }
    char e[400];
    prompt = render_ctx(tp->t, ctx, e, sizeof e);
    cJSON_Delete(ctx);
    if (!prompt) {
        snprintf(err, errlen, "chat template: %s", e);
        goto done;
    }
    /* the tokenizer adds the BOS the template may have written */
    size_t bl = strlen(c->bos);
    if (bl && kiln_vocab_add_bos(cfg->vocab) && !strncmp(prompt, c->bos, bl))
        memmove(prompt, prompt + bl, strlen(prompt) - bl + 1);
    if (out) {
        memset(out, 0, sizeof *out);
        out->parallel = parallel;
        out->think_budget = cfg->reasoning_budget;
        out->o.format = tp->fmt;
        out->o.parse_tools = tools && choice != 1;
        out->o.reasoning = reasoning;
        /* a prompt that ends inside <think>: the output starts as reasoning */
        size_t pl = strlen(prompt);
        while (pl && (prompt[pl - 1] == '\n' || prompt[pl - 1] == ' ')) pl--;
        if (tp->thinks && pl >= 7 && !memcmp(prompt + pl - 7, "<think>", 7)) {
            out->o.think_prefix = strdup(prompt + pl - 7);
            out->in_think = true;
        }
        if (out->o.parse_tools) out->o.tools_json = cJSON_PrintUnformatted(tools);
        out->parse = out->o.parse_tools || tp->thinks;
        if (out->o.parse_tools && cfg->generating && !tool_grammar(tp, tools, choice, forced_name, parallel, out, err,
                                                                   errlen))
            goto fail_out;
    }
    *status = 200;
    goto done;
fail_out:
    srv_chat_out_free(out);
    free(prompt);
    prompt = NULL;
done:
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    return prompt;
}
