/*
 * chat.c - `kiln chat`: a multi-turn conversation on stdin/stdout. Each user
 * line is added to the conversation, the conversation is rendered with the
 * model's own Jinja chat template (as kiln serve renders it; kiln's native
 * family with --no-jinja or --template NAME, or when the model has no template)
 * and tokenized, and only the tokens after the prefix the KV cache already
 * holds are decoded: the cache is kept across turns. With --tools FILE the
 * model may call tools: its calls are printed as a JSON line, and a line that
 * is a JSON message ({"role": "tool", ...}) answers them.
 */
#include "chat_api.h"
#include "model_args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The longest user line: a message, not a file (-f for those elsewhere). */
#define CHAT_LINE_MAX (1 << 20)

/* One line of at most max bytes (newline not counted): its length, -1 at end of input,
 * -2 when the line goes past max (stdin may be /dev/zero or a pipe that never ends one). */
static ssize_t read_line(FILE *in, char **buf, size_t *cap, size_t max) {
    size_t n = 0;
    int c = EOF;
    while ((c = getc(in)) != EOF && c != '\n') {
        if (n >= max) return -2;
        if (n + 2 > *cap) {
            size_t ncap = *cap ? *cap * 2 : 256;
            char *nb = realloc(*buf, ncap);
            if (!nb) return -3;
            *buf = nb;
            *cap = ncap;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return -1;
    if (!*buf && !(*buf = malloc(*cap = 1))) return -3;
    (*buf)[n] = 0;
    return (ssize_t)n;
}

/* the reply read back: content to stdout, thinking to stderr, tool calls as one JSON line; the
 * assistant's message (with its calls) joins the conversation */
static bool show_reply(const char *text, size_t len, const struct srv_chat_out *out, cJSON *msgs, int *n_calls) {
    struct kiln_chat_reply r;
    if (kiln_chat_parse(text, len, &out->o, &r) != 0) return false;
    if (r.reasoning[0]) fprintf(stderr, "[thinking] %s\n", r.reasoning);
    fputs(r.content, stdout);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "content", r.content);
    if (r.n_calls) {
        cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
        for (size_t i = 0; i < r.n_calls && (out->parallel || i == 0); i++) {
            char id[16];
            snprintf(id, sizeof id, "call%05d", ++*n_calls % 100000);
            cJSON *c = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(c, "id", r.calls[i].id ? r.calls[i].id : id);
            cJSON_AddStringToObject(c, "type", "function");
            f = cJSON_AddObjectToObject(c, "function");
            cJSON_AddStringToObject(f, "name", r.calls[i].name ? r.calls[i].name : "");
            cJSON_AddStringToObject(f, "arguments", r.calls[i].arguments);
            cJSON_AddItemToArray(calls, c);
        }
        cJSON *line = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(line, "tool_calls", calls);
        char *json = cJSON_PrintUnformatted(line);
        if (r.content[0]) fputc('\n', stdout);
        fputs(json ? json : "{}", stdout);
        free(json);
        cJSON_Delete(line);
    }
    if (r.reasoning[0]) cJSON_AddStringToObject(m, "reasoning_content", r.reasoning);
    cJSON_AddItemToArray(msgs, m);
    kiln_chat_reply_free(&r);
    return true;
}

/* A turn's sampler for tool calls held by out's grammar: the grammar's stage, then the options' own. */
static struct kiln_sampler *tool_sampler(const char *cmd, struct gen_args *ga, const struct kiln_vocab *v,
                                         const struct srv_chat_out *out) {
    char err[400];
    if (!ga->gv && !(ga->gv = kiln_grammar_vocab_new(v, err, sizeof err))) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        return NULL;
    }
    struct kiln_grammar *g = kiln_grammar_parse(out->tool_gbnf, strlen(out->tool_gbnf), NULL, err, sizeof err);
    if (!g) {
        fprintf(stderr, "kiln %s: the tools' grammar: %s\n", cmd, err);
        return NULL;
    }
    struct kiln_sampler *stage = out->n_tool_triggers
                                     ? kiln_sampler_init_grammar_lazy(g, ga->gv, out->tool_triggers, out->n_tool_triggers)
                                     : kiln_sampler_init_grammar(g, ga->gv);
    kiln_grammar_free(g);
    if (!stage) {
        fprintf(stderr, "kiln %s: %s\n", cmd, kiln_sampler_last_error());
        return NULL;
    }
    struct kiln_sampler *rest = gen_args_sampler(ga, cmd, v);
    if (!rest) {
        kiln_sampler_free(stage);
        return NULL;
    }
    /* an add takes its stage in every case */
    struct kiln_sampler *chain = kiln_sampler_chain_new();
    bool ok = chain && kiln_sampler_chain_add(chain, stage);
    if (!chain) kiln_sampler_free(stage);
    ok = ok ? kiln_sampler_chain_add(chain, rest) : (kiln_sampler_free(rest), false);
    if (!ok) {
        fprintf(stderr, "kiln %s: %s\n", cmd, chain ? kiln_sampler_last_error() : "out of memory");
        kiln_sampler_free(chain);
        return NULL;
    }
    return chain;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    struct model_args ma;
    struct gen_args ga;
    model_args_init(&ma);
    gen_args_init(&ga);
    ga.n_predict = 256;
    const char *tmpl_name = NULL, *system = NULL, *tools_path = NULL, *tmpl_path = NULL, *choice = NULL;
    bool jinja = true, reasoning = true;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r == 0) r = gen_args_parse(&ga, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln chat -m MODEL [--system TEXT] [--tools FILE.json] [-n N] [sampling options]\n"
                   "A conversation on stdin/stdout: one user message per line; each reply ends with a\n"
                   "newline. Works interactively and with a pipe. The model's own Jinja chat template\n"
                   "(tokenizer.chat_template) renders it, as kiln serve does.\n"
                   "  --tools FILE.json       tools the model may call (OpenAI's 'tools' array): its calls\n"
                   "                          are printed as one JSON line {\"tool_calls\": [...]}; answer\n"
                   "                          with a JSON line {\"role\": \"tool\", \"tool_call_id\": ..., \"content\": ...}\n"
                   "  --tool-choice C         auto (the default: calls, once begun, are held to the tools'\n"
                   "                          schemas), required (every reply is a call), none, or a tool's\n"
                   "                          name (every reply calls it); one call a reply\n"
                   "  --chat-template-file F  a Jinja chat template from a file\n"
                   "  --no-jinja              kiln's native template family instead of the model's template\n"
                   "  --template NAME         a native family (chatml, llama2, llama3, mistral-v7, phi3, gemma,\n"
                   "                          zephyr, deepseek, ...); also what renders when the model has no\n"
                   "                          template (ChatML then)\n"
                   "  --reasoning-format F    deepseek (the default): a reply's thinking goes to stderr;\n"
                   "                          none: it stays in the reply\n"
                   "With a grammar or a JSON schema, every reply is held to it from its start.\n%s%s",
                   model_args_help(), gen_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "--template")) {
            if (!(tmpl_name = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--system") || !strcmp(o, "-sys")) {
            if (!(system = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--tools")) {
            if (!(tools_path = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--tool-choice")) {
            if (!(choice = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!*choice) return tool_usage_error(cmd, "--tool-choice needs auto, required, none or a tool's name");
        } else if (!strcmp(o, "--chat-template-file")) {
            if (!(tmpl_path = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--jinja")) {
            jinja = true;
        } else if (!strcmp(o, "--no-jinja")) {
            jinja = false;
        } else if (!strcmp(o, "--reasoning-format")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (strcmp(v, "none") && strcmp(v, "deepseek") && strcmp(v, "auto"))
                return tool_usage_error(cmd, "--reasoning-format must be none, deepseek or auto, not '%s'", v);
            reasoning = strcmp(v, "none") != 0;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (choice && !tools_path) return tool_usage_error(cmd, "--tool-choice needs --tools FILE.json");
    bool forced = choice && strcmp(choice, "auto") && strcmp(choice, "none");
    if (forced && (ga.grammar || ga.grammar_file || ga.schema || ga.schema_file))
        return tool_usage_error(cmd, "--tool-choice %s holds every reply to tool calls: it cannot go with a grammar or "
                                     "a JSON schema", choice);
    enum kiln_chat_template family = KILN_CHAT_UNKNOWN;
    if (tmpl_name) {
        family = kiln_chat_template_from_name(tmpl_name);
        if (family == KILN_CHAT_UNKNOWN) return tool_usage_error(cmd, "unknown chat template '%s'", tmpl_name);
        jinja = false;
    }
    if (tmpl_path && !jinja) return tool_usage_error(cmd, "--chat-template-file needs Jinja (not --no-jinja or --template)");

    /* the conversation comes on stdin: one that cannot be read is said before the model
     * loads (a closed stdin would otherwise be the next file opened: the model's) */
    struct stat in_st;
    const char *no_input = fstat(STDIN_FILENO, &in_st) != 0 ? (errno == EBADF ? "it is closed" : strerror(errno))
                           : S_ISDIR(in_st.st_mode)          ? "it is a directory"
                                                             : NULL;
    if (no_input) {
        fprintf(stderr, "kiln %s: cannot read the conversation from stdin: %s\n", cmd, no_input);
        return EXIT_RUNTIME;
    }
    int rc = gen_args_prepare(&ga, cmd);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_RUNTIME;
    struct kiln_batch batch = {0};
    struct kiln_sampler *smpl = NULL;
    char *line = NULL, *tmpl_text = NULL, *tools_text = NULL;
    size_t line_cap = 0;
    struct gen_out cache = {0}; /* the ids the KV cache holds, in order */
    struct srv_chat_tmpl *tmpl = NULL;
    cJSON *msgs = cJSON_CreateArray(), *tools = NULL;
    cJSON *choice_json = NULL; /* --tool-choice as the request's tool_choice */
    int n_calls = 0;
    if (!msgs) goto oom;
    if (tools_path) {
        size_t tl;
        if (!(tools_text = tool_read_file(cmd, tools_path, TOOL_TEXT_MAX, &tl))) goto done;
        tools = cJSON_ParseWithLength(tools_text, tl);
        if (!cJSON_IsArray(tools)) {
            fprintf(stderr, "kiln %s: %s is not a JSON array of tools\n", cmd, tools_path);
            goto done;
        }
    }
    if (tmpl_path) {
        size_t tl;
        if (!(tmpl_text = tool_read_file(cmd, tmpl_path, 4u << 20, &tl))) goto done;
        if (tool_text_has_nul(cmd, tmpl_path, tmpl_text, tl)) goto done;
    }
    if (!model_args_load(&ma, cmd, 0)) goto done;
    if (jinja) {
        char err[512];
        tmpl = srv_chat_tmpl_load(ma.model, tmpl_text, err, sizeof err);
        if (!tmpl && err[0]) {
            fprintf(stderr, "kiln %s: %s\n", cmd, err);
            goto done;
        }
    }
    if (!tmpl_name) family = kiln_model_chat_template(ma.model, NULL);
    if (!tmpl && tools) {
        fprintf(stderr, "kiln %s: --tools needs a Jinja chat template (the model has none: --chat-template-file)\n", cmd);
        goto done;
    }
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    if (!(smpl = gen_args_sampler(&ga, cmd, v))) goto done;
    struct srv_chat_cfg cfg = {.vocab = v, .native = family, .reasoning = reasoning, .reasoning_budget = -1,
                               .generating = tools != NULL && !ga.g}; /* tool calls held by a grammar */
    if (choice && (!strcmp(choice, "auto") || !strcmp(choice, "none") || !strcmp(choice, "required"))) {
        choice_json = cJSON_CreateString(choice);
    } else if (choice) {
        choice_json = cJSON_CreateObject();
        cJSON_AddStringToObject(choice_json, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(choice_json, "function"), "name", choice);
    }
    batch = kiln_batch_init(model_args_n_batch(&ma)); /* longer turns are decoded in chunks */
    if (!batch.capacity) goto done;
    if (system) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", system);
        cJSON_AddItemToArray(msgs, m);
    }
    const bool tty = isatty(STDIN_FILENO);
    for (;;) {
        if (tty) fputs("> ", stderr);
        errno = 0;
        ssize_t got = read_line(stdin, &line, &line_cap, CHAT_LINE_MAX);
        if (got == -1 && ferror(stdin)) {
            fprintf(stderr, "kiln %s: cannot read stdin: %s\n", cmd, errno ? strerror(errno) : "read error");
            goto done;
        }
        if (got == -1) break;
        if (got == -3) goto oom;
        if (got == -2) {
            fprintf(stderr, "kiln %s: an input line is longer than %d KiB\n", cmd, CHAT_LINE_MAX >> 10);
            goto done;
        }
        if (tool_text_has_nul(cmd, "an input line", line, (size_t)got)) goto done;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (got == 0) continue;
        cJSON *m = line[0] == '{' ? cJSON_Parse(line) : NULL; /* a message of its own ({"role": "tool", ...}) */
        if (m && !(cJSON_IsObject(m) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")))) {
            cJSON_Delete(m);
            m = NULL;
        }
        if (!m) {
            m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", line);
        }
        cJSON_AddItemToArray(msgs, m);
        char err[512];
        int status;
        struct srv_chat_out out;
        cJSON *body = cJSON_CreateObject(); /* references: they see the arrays as they are now */
        cJSON_AddItemReferenceToObject(body, "messages", msgs);
        if (tools) cJSON_AddItemReferenceToObject(body, "tools", tools);
        if (choice_json) cJSON_AddItemReferenceToObject(body, "tool_choice", choice_json);
        if (tools) cJSON_AddBoolToObject(body, "parallel_tool_calls", false); /* a reply calls one tool */
        char *text = srv_chat_tmpl_render(tmpl, &cfg, body, &out, &status, err, sizeof err);
        cJSON_Delete(body);
        if (!text) {
            fprintf(stderr, "kiln %s: %s\n", cmd, err);
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1); /* that message is not taken */
            if (!tty) goto done;
            continue;
        }
        if (!tmpl) out = (struct srv_chat_out){0};
        /* this turn's sampler: the tool calls' grammar (lazy for auto) before the options' stages */
        struct kiln_sampler *turn = smpl;
        if (out.tool_gbnf && !(turn = tool_sampler(cmd, &ga, v, &out))) {
            free(text);
            srv_chat_out_free(&out);
            goto done;
        }
        /* tokenize the whole conversation and reuse the cached prefix it shares: exact
         * even where a template trims or rewrites earlier turns */
        int32_t *ids = NULL;
        int64_t n = model_tokenize(cmd, v, text, kiln_vocab_add_bos(v), &ids);
        free(text);
        if (n < 0 || n >= (int64_t)kiln_n_ctx(ma.ctx)) {
            if (turn != smpl) kiln_sampler_free(turn);
        }
        if (n < 0) {
            srv_chat_out_free(&out);
            goto done;
        }
        if (n >= (int64_t)kiln_n_ctx(ma.ctx)) {
            free(ids);
            srv_chat_out_free(&out);
            fprintf(stderr, "kiln %s: the conversation is longer than the context (%u tokens)\n", cmd,
                    kiln_n_ctx(ma.ctx));
            goto done;
        }
        int64_t keep = 0;
        while (keep < n && keep < cache.n && cache.ids[keep] == ids[keep]) keep++;
        if (keep == n) keep--; /* decode at least the last token to get fresh logits */
        kiln_kv_seq_rm(ma.ctx, 0, (int32_t)keep, -1);
        cache.n = 0;
        for (int64_t i = 0; i < n; i++)
            if (!gen_push_id(&cache, ids[i])) {
                free(ids);
                srv_chat_out_free(&out);
                if (turn != smpl) kiln_sampler_free(turn);
                goto oom;
            }
        bool ok = decode_prompt(cmd, ma.ctx, ma.model, &batch, ids + keep, n - keep, (int32_t)keep, false, NULL, NULL);
        free(ids);
        if (!ok) {
            srv_chat_out_free(&out);
            if (turn != smpl) kiln_sampler_free(turn);
            goto done;
        }
        /* generated tokens are appended to the cache's ids (the end-of-generation token
         * that stops it is not: it was never decoded); a reply to read back is shown once whole */
        int64_t n_gen = generate(cmd, ma.ctx, ma.model, turn, (int32_t)n, ga.n_predict, out.parse ? NULL : stdout, &cache);
        if (turn != smpl) kiln_sampler_free(turn);
        if (n_gen < 0) {
            srv_chat_out_free(&out);
            goto done;
        }
        gen_note_ctx_full(cmd, ma.ctx, &cache, n_gen, ga.n_predict);
        /* the whole reply, however long, is what the next turn's template sees (control tokens
         * as their markup where the reply is read back: tool calls are written in them) */
        int64_t m_len = kiln_detokenize(v, cache.ids + n, n_gen, NULL, 0, false, out.parse);
        size_t size = m_len < 0 && m_len != KILN_ERR_INVALID ? (size_t)-m_len + 1 : 1;
        char *reply = malloc(size);
        if (!reply) {
            srv_chat_out_free(&out);
            goto oom;
        }
        m_len = size > 1 ? kiln_detokenize(v, cache.ids + n, n_gen, reply, size, false, out.parse) : 0;
        reply[m_len > 0 ? m_len : 0] = 0;
        bool shown = true;
        if (out.parse) {
            shown = show_reply(reply, strlen(reply), &out, msgs, &n_calls);
        } else {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "role", "assistant");
            cJSON_AddStringToObject(a, "content", reply);
            cJSON_AddItemToArray(msgs, a);
        }
        free(reply);
        srv_chat_out_free(&out);
        if (!shown) goto oom;
        fputc('\n', stdout);
        fflush(stdout);
        kiln_sampler_reset(smpl);
    }
    rc = EXIT_OK;
    goto done;
oom:
    fprintf(stderr, "kiln %s: out of memory\n", cmd);
done:
    free(line);
    free(tmpl_text);
    free(tools_text);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    cJSON_Delete(choice_json);
    srv_chat_tmpl_free(tmpl);
    gen_out_free(&cache);
    kiln_batch_free(&batch);
    kiln_sampler_free(smpl);
    gen_args_free(&ga);
    model_args_free(&ma);
    return rc;
}
