/*
 * tokenize.c - `kiln tokenize` (text -> ids, with each id's piece, or JSON)
 * and `kiln detokenize` (ids -> text) over a model's or a vocabulary-only
 * GGUF file. Usage errors exit 2; unreadable or inconsistent files exit 1.
 */
#include "gguf.h"
#include "kiln.h"
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static void tokenize_help(FILE *f) {
    fprintf(f, "usage: kiln tokenize -m FILE (-p TEXT | -f TEXTFILE) [--no-bos] [--special] [--json]\n"
               "  prints one line per token: id 'piece'\n"
               "  --no-bos    do not add BOS/EOS (add_special off)\n"
               "  --special   parse the text of control tokens as those tokens\n"
               "  --json      print {\"tokens\": [ids]} instead\n");
}

static void detokenize_help(FILE *f) {
    fprintf(f, "usage: kiln detokenize -m FILE [--special] ID...\n"
               "  prints the text of the ids; --special renders control tokens as their text\n");
}

static struct kiln_vocab *open_vocab(const char *cmd, const char *path, struct gguf_file **g) {
    char err[1024];
    *g = gguf_open(path, err, sizeof err);
    if (!*g) {
        tool_file_error(cmd, path, err);
        return NULL;
    }
    struct kiln_vocab *v = kiln_vocab_load(*g, err, sizeof err);
    if (!v) {
        fprintf(stderr, "kiln %s: %s: %s\n", cmd, path, err);
        gguf_close(*g);
        *g = NULL;
    }
    return v;
}

/* A piece between quotes: control bytes escaped, and every byte >= 0x80 too when
 * the piece is not whole UTF-8 (a byte token). */
static void print_piece(const char *p, size_t n) {
    bool utf8 = gguf_utf8_valid_len(p, n) == n;
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f || c == 0x9b || (c >= 0x80 && !utf8)) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *prompt = NULL, *file = NULL;
    bool add_special = true, parse_special = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_help(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = tool_arg_path(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--no-bos")) {
            add_special = false;
        } else if (!strcmp(a, "--special")) {
            parse_special = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            return tool_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    if (!model) return tool_usage_error(cmd, "-m FILE is required");
    if (!prompt == !file) return tool_usage_error(cmd, "give exactly one of -p TEXT and -f FILE");

    char *owned = NULL;
    size_t len = 0;
    if (file) {
        if (!(owned = tool_read_file(cmd, file, TOOL_TEXT_MAX, &len))) return EXIT_RUNTIME;
        prompt = owned;
    } else {
        len = strlen(prompt);
    }
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(cmd, model, &g);
    if (!v) {
        free(owned);
        return EXIT_RUNTIME;
    }
    int rc = EXIT_OK;
    int64_t n = kiln_tokenize(v, prompt, len, NULL, 0, add_special, parse_special);
    int32_t *ids = n < 0 ? malloc((size_t)-n * sizeof *ids) : NULL;
    if (n == KILN_ERR_INVALID || (n < 0 && !ids)) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        rc = EXIT_RUNTIME;
    } else {
        if (n < 0) n = kiln_tokenize(v, prompt, len, ids, -n, add_special, parse_special);
        if (json) {
            fputs("{\"tokens\": [", stdout);
            for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
            fputs("]}\n", stdout);
        } else {
            char small[256];
            for (int64_t i = 0; i < n; i++) {
                char *p = small;
                int64_t m = kiln_token_to_piece(v, ids[i], small, sizeof small, true);
                if (m < 0 && m != KILN_ERR_INVALID && (p = malloc((size_t)-m)))
                    m = kiln_token_to_piece(v, ids[i], p, (size_t)-m, true);
                printf("%d ", ids[i]);
                print_piece(p, m > 0 ? (size_t)m : 0);
                putchar('\n');
                if (p != small) free(p);
            }
        }
    }
    free(ids);
    kiln_vocab_free(v);
    gguf_close(g);
    free(owned);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    const char *cmd = "detokenize", *model = NULL;
    bool special = false;
    int64_t n = 0;
    int32_t *ids = malloc((size_t)argc * sizeof *ids); /* at most argc ids */
    if (!ids) return EXIT_RUNTIME;
    /* options and ids in any order: `detokenize 1 2 -m M` as well as `-m M 1 2` */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(ids);
            detokenize_help(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = tool_arg_path(cmd, argc, argv, &i))) {
                free(ids);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else if (a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
            free(ids);
            return tool_usage_error(cmd, "unknown option '%s'", a);
        } else {
            int64_t x;
            if (!tool_parse_i64(cmd, "ID", a, 0, INT32_MAX, &x)) {
                free(ids);
                return EXIT_USAGE;
            }
            ids[n++] = (int32_t)x;
        }
    }
    if (!model || n == 0) {
        free(ids);
        return tool_usage_error(cmd, !model ? "-m FILE is required" : "give at least one token id");
    }
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(cmd, model, &g);
    if (!v) {
        free(ids);
        return EXIT_RUNTIME;
    }
    int rc = EXIT_OK;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] >= kiln_vocab_n_tokens(v)) {
            rc = tool_usage_error(cmd, "token id %d is out of range (the vocabulary has %d tokens)", ids[i],
                                  kiln_vocab_n_tokens(v));
            break;
        }
    }
    if (rc == EXIT_OK) {
        int64_t m = kiln_detokenize(v, ids, n, NULL, 0, false, special);
        char *text = m < 0 ? malloc((size_t)-m) : NULL;
        if (m < 0 && text) m = kiln_detokenize(v, ids, n, text, (size_t)-m, false, special);
        if (m < 0) {
            fprintf(stderr, "kiln %s: cannot detokenize\n", cmd);
            rc = EXIT_RUNTIME;
        } else {
            struct tool_text_out tx; /* token texts may hold escape codes */
            tool_text_init(&tx, stdout);
            if (m > 0) tool_text_write(&tx, text, (size_t)m); /* empty text: text is NULL */
            tool_text_flush(&tx);
            putchar('\n');
        }
        free(text);
    }
    free(ids);
    kiln_vocab_free(v);
    gguf_close(g);
    return rc;
}
