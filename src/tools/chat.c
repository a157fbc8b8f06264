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

/* The longest user line: a message, not a file (-f for those elsewhere). */
#define CHAT_LINE_MAX (1 << 20)

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

/* The text of generated ids; malloc'd, grown to whatever the reply needs. */
static char *detokenize_all(const struct kiln_vocab *v, const int32_t *ids, int64_t n, int64_t *len) {
    int64_t m = kiln_detokenize(v, ids, n, NULL, 0, false, false);
    size_t size = m < 0 && m != KILN_ERR_INVALID ? (size_t)-m + 1 : 1;
    char *text = malloc(size);
    if (!text) return NULL;
    m = m < 0 && m != KILN_ERR_INVALID ? kiln_detokenize(v, ids, n, text, size, false, false) : 0;
    if (m < 0) m = 0;
    text[m] = 0;
    *len = m;
    return text;
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
                   "(chatml, llama2, llama3, mistral-v7, phi3, gemma, zephyr, deepseek, ...). With a\n"
                   "grammar or a JSON schema, every reply is held to it from its start.\n%s%s",
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

    int rc = gen_args_prepare(&ga, cmd);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_RUNTIME;
    struct conversation conv = {0};
    struct kiln_batch batch = {0};
    struct kiln_sampler *smpl = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    struct gen_out cache = {0}; /* the ids the KV cache holds, in order */
    if (!model_args_load(&ma, cmd, 0)) goto done;
    if (!tmpl_name) tmpl = kiln_model_chat_template(ma.model, NULL);
    const struct kiln_vocab *v = kiln_model_vocab(ma.model);
    if (!(smpl = gen_args_sampler(&ga, cmd, v))) goto done;
    const int64_t n_vocab = kiln_model_hparams(ma.model)->n_vocab;
    batch = kiln_batch_init(model_args_n_batch(&ma)); /* longer turns are decoded in chunks */
    if (!batch.capacity) goto done;
    if (system && !conv_add(&conv, "system", system, strlen(system))) goto done;
    const bool tty = isatty(STDIN_FILENO);
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t got = read_line(stdin, &line, &line_cap, CHAT_LINE_MAX);
        if (got == -1) break;
        if (got == -3) goto oom;
        if (got == -2) {
            fprintf(stderr, "kiln %s: an input line is longer than %d KiB\n", cmd, CHAT_LINE_MAX >> 10);
            goto done;
        }
        if (tool_text_has_nul(cmd, "an input line", line, (size_t)got)) goto done;
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
        /* the whole reply, however long, is what the next turn's template sees */
        int64_t rl;
        char *reply = detokenize_all(v, cache.ids + n, n_gen, &rl);
        if (!reply) goto oom;
        bool added = conv_add(&conv, "assistant", reply, (size_t)rl);
        free(reply);
        if (!added) goto oom;
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
    gen_args_free(&ga);
    model_args_free(&ma);
    return rc;
}
