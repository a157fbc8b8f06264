/*
 * chat.c - `kiln chat`: a multi-turn conversation on stdin/stdout. Each user
 * line is added to the conversation, the conversation is rendered with the
 * model's chat template family (or --template NAME; ChatML when the model has
 * none) and tokenized, and only the tokens after the prefix the KV cache already
 * holds are decoded: the cache is kept across turns.
 */
#include "model_args.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct conversation {
    struct kiln_chat_msg *msgs;
    char **owned; /* contents we allocated */
    size_t n, cap;
};

static bool conv_add(struct conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct kiln_chat_msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o) return false;
        c->owned = o;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, content, len);
    copy[len] = 0;
    c->owned[c->n] = copy;
    c->msgs[c->n++] = (struct kiln_chat_msg){role, copy};
    return true;
}

static void conv_free(struct conversation *c) {
    for (size_t i = 0; i < c->n; i++) free(c->owned[i]);
    free(c->owned);
    free(c->msgs);
}

/* Render the conversation (with the assistant's opening when add_assistant); malloc'd. */
static char *render(enum kiln_chat_template t, const struct conversation *c, bool add_assistant, int64_t *len) {
    int64_t n = kiln_chat_apply(t, c->msgs, c->n, add_assistant, NULL, 0);
    size_t size = n < 0 ? (size_t)-n + 1 : (size_t)n + 1;
    char *buf = malloc(size);
    if (!buf) return NULL;
    n = kiln_chat_apply(t, c->msgs, c->n, add_assistant, buf, size);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    struct model_args ma;
    struct gen_args ga;
    model_args_init(&ma);
    gen_args_init(&ga);
    ga.n_predict = 256;
    const char *tmpl_name = NULL, *system = NULL;
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r == 0) r = gen_args_parse(&ga, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln chat -m MODEL [--template NAME] [--system TEXT] [-n N] [sampling options]\n"
                   "A conversation on stdin/stdout: one user message per line; each reply ends with a\n"
                   "newline. Works interactively and with a pipe. The model's tokenizer.chat_template\n"
                   "picks the format (ChatML when there is none); --template NAME overrides it\n"
                   "(chatml, llama2, llama3, mistral-v7, phi3, gemma, zephyr, deepseek, ...).\n%s%s",
                   model_args_help(), gen_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "--template")) {
            if (!(tmpl_name = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--system") || !strcmp(o, "-sys")) {
            if (!(system = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    enum kiln_chat_template tmpl = KILN_CHAT_UNKNOWN;
    if (tmpl_name) {
        tmpl = kiln_chat_template_from_name(tmpl_name);
        if (tmpl == KILN_CHAT_UNKNOWN) return tool_usage_error(cmd, "unknown chat template '%s'", tmpl_name);
    }

    int rc = EXIT_RUNTIME;
    struct conversation conv = {0};
    struct kiln_batch batch = {0};
    struct kiln_sampler *smpl = gen_args_sampler(&ga, cmd);
    char *line = NULL;
    size_t line_cap = 0;
    struct gen_out cache = {0}; /* the ids the KV cache holds, in order */
    if (!smpl || !model_args_load(&ma, cmd, 0)) goto done;
    if (!tmpl_name) tmpl = kiln_model_chat_template(ma.model, NULL);
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    batch = kiln_batch_init(512);
    if (!batch.capacity) goto done;
    if (system && !conv_add(&conv, "system", system, strlen(system))) goto done;
    const bool tty = isatty(STDIN_FILENO);
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (got == 0) continue;
        if (!conv_add(&conv, "user", line, (size_t)got)) goto oom;
        int64_t len;
        char *text = render(tmpl, &conv, true, &len);
        if (!text) goto oom;
        /* tokenize the whole conversation and reuse the cached prefix it shares: exact
         * even where a template trims or rewrites earlier turns */
        int32_t *ids = NULL;
        int64_t n = model_tokenize(cmd, v, text, kiln_vocab_add_bos(v), &ids);
        free(text);
        if (n < 0) goto done;
        if (n >= (int64_t)kiln_n_ctx(ma.ctx)) {
            free(ids);
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
                goto oom;
            }
        bool ok = decode_prompt(cmd, ma.ctx, &batch, ids + keep, n - keep, (int32_t)keep, false, NULL, n_vocab);
        free(ids);
        if (!ok) goto done;
        /* generated tokens are appended to the cache's ids (the end-of-generation token
         * that stops it is not: it was never decoded) */
        int64_t n_gen = generate(cmd, ma.ctx, v, smpl, (int32_t)n, ga.n_predict, stdout, &cache);
        fputc('\n', stdout);
        fflush(stdout);
        if (n_gen < 0) goto done;
        char reply[1 << 16];
        int64_t rl = kiln_detokenize(v, cache.ids + n, n_gen, reply, sizeof reply, false, false);
        if (rl < 0) rl = 0;
        if (!conv_add(&conv, "assistant", reply, (size_t)rl)) goto oom;
        kiln_sampler_reset(smpl);
    }
    rc = EXIT_OK;
    goto done;
oom:
    fprintf(stderr, "kiln %s: out of memory\n", cmd);
done:
    free(line);
    gen_out_free(&cache);
    conv_free(&conv);
    kiln_batch_free(&batch);
    kiln_sampler_free(smpl);
    model_args_free(&ma);
    return rc;
}
