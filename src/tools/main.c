/* main.c - the kiln binary: one table of subcommands, dispatched by name. */
#include "tools.h"

#include "gguf.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#define KILN_VERSION "0.1.0"

struct kiln_cmd {
    const char *name;
    kiln_cmd_fn fn;
    const char *help;
};

static int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("kiln %s\n", KILN_VERSION);
    return EXIT_OK;
}

/* One row per subcommand (add yours here, declared in tools.h). */
static const struct kiln_cmd commands[] = {
    {"version", cmd_version, "print kiln's version"},
    {"info", cmd_info, "describe a GGUF file (metadata, tensors); dump a tensor as float32"},
    {"quantize", cmd_quantize, "rewrite a model with quantized weights (llama.cpp's per-tensor mixes)"},
    {"synth", cmd_synth, "write a deterministic synthetic llama model with random weights"},
    {"tokenize", cmd_tokenize, "text to token ids (and pieces) with a model's vocabulary"},
    {"detokenize", cmd_detokenize, "token ids back to text"},
    {"eval", cmd_eval, "evaluate a prompt in one batch: its tokens and (optionally) every position's logits"},
    {"embed", cmd_embed, "embeddings of each line of a text (BERT-family and decoder models), as JSON"},
    {"run", cmd_run, "generate text from a prompt"},
    {"serve", cmd_serve, "an OpenAI- and llama-server-compatible HTTP server with continuous batching"},
    {"chat", cmd_chat, "a multi-turn conversation on stdin/stdout with the model's chat template"},
    {"bench", cmd_bench, "prompt processing and generation speed, like llama-bench"},
    {"perplexity", cmd_perplexity, "perplexity of a text file by llama.cpp's method"},
    {"convert", cmd_convert, "rewrite a legacy GGML/GGMF/GGJT llama file as GGUF"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: kiln COMMAND [options]   (kiln COMMAND --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
}

/* SIGINT/SIGTERM/SIGHUP/SIGQUIT: remove any half-written output, then die of the signal as if
 * unhandled (the shell sees 130 for SIGINT). Installed even where the parent ignored
 * SIGINT (a background job), so an interrupt always leaves no temporary behind. */
static void on_signal(int sig) {
    gguf_outfile_remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL); /* Ctrl-\: still dies of it (131, a core where allowed), temporary gone */
}

/* A command's output that could not be written (a full disk, /dev/full, a closed pipe
 * with SIGPIPE ignored) is a failure, whatever the command itself returned. */
static int check_stdout(const char *cmd, int rc) {
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (!bad) return rc;
    fprintf(stderr, "kiln %s: cannot write the output: %s\n", cmd, e ? strerror(e) : "write error");
    return rc == EXIT_OK ? EXIT_RUNTIME : rc;
}

int main(int argc, char **argv) {
    install_signals();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return check_stdout("help", EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return check_stdout(argv[1], commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
