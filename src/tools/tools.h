/*
 * tools.h - what the kiln subcommands share: the handler signature, exit codes,
 * and strict parsing of command-line values (an impossible flag is a usage
 * error that names the flag, never a silent default).
 */
#ifndef KILN_TOOLS_H
#define KILN_TOOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* argv[0] is the subcommand name. Returns an exit code. */
typedef int (*kiln_cmd_fn)(int argc, char **argv);

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_convert(int argc, char **argv);

/* If path is a legacy GGML/GGMF/GGJT file: a note on stderr that it is converted in
 * memory with default settings, suggesting `kiln convert` (convert.c). */
void tool_legacy_note(const char *cmd, const char *path);

/* Strict number parsing: the whole string must be a number in [lo, hi].
 * On failure prints "kiln NAME: invalid value 'V' for FLAG: ..." to stderr and returns false. */
bool tool_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool tool_parse_int(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out);
bool tool_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
bool tool_parse_f32(const char *cmd, const char *flag, const char *s, float lo, float hi, float *out);
/* The value after a flag: argv[*i + 1], advancing *i; prints a usage error if missing. */
const char *tool_arg_value(const char *cmd, int argc, char **argv, int *i);
/* Like tool_arg_value for a file name: an empty one is a usage error too. */
const char *tool_arg_path(const char *cmd, int argc, char **argv, int *i);
/* "kiln CMD: PATH: ERR" for a file that cannot be used (ERR from the gguf reader or the
 * model loader); the path is left out when ERR already names it. */
void tool_file_error(const char *cmd, const char *path, const char *err);
/* Usage error helper: prints "kiln CMD: MESSAGE\n(see 'kiln CMD --help')" and returns EXIT_USAGE. */
int tool_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whole file into malloc'd NUL-terminated memory, at most max bytes (a larger file, a
 * pipe or /dev/zero that goes past it is an error); NULL (with a message on stderr) on failure. */
char *tool_read_file(const char *cmd, const char *path, size_t max, size_t *len);
/* The limit on text inputs (prompt files, perplexity text, one chat line). */
#define TOOL_TEXT_MAX ((size_t)64 << 20)
/* True (with "kiln CMD: WHAT holds a NUL byte at offset N") if s[0..len) holds a NUL:
 * text for the C-string APIs (templates, tokenizer entry points) would be cut there. */
bool tool_text_has_nul(const char *cmd, const char *what, const char *s, size_t len);
/* Monotonic seconds. */
double tool_now(void);

/* A progress bar on stderr, shown only on a terminal and only after a second. */
struct tool_progress {
    const char *label;
    bool tty, shown;
    double t0;
};
void tool_progress_init(struct tool_progress *p, const char *label);
void tool_progress_update(struct tool_progress *p, float fraction);
void tool_progress_done(struct tool_progress *p); /* ends the bar's line if it was shown */
/* kiln_progress_fn adapter: data is a struct tool_progress; never cancels */
bool tool_progress_fn(float fraction, void *data);

/* JSON string escaping to f (with the quotes); bytes that are not UTF-8 become U+FFFD. */
void tool_json_str(FILE *f, const char *s, size_t len);

/* Text for a terminal: generated or file-borne text may hold escape sequences that
 * would drive the terminal. When the stream is a terminal, C0 controls other than
 * newline and tab, DEL and the C1 controls (U+0080..U+009F, 0x9b is CSI) are shown as
 * \xNN; elsewhere (a pipe, a file) the bytes pass unchanged. Stateful across calls
 * so a character split between two tokens is judged whole. */
struct tool_text_out {
    FILE *f;
    bool tty;
    unsigned char held; /* a 0xc2 lead byte waiting for its continuation */
};
void tool_text_init(struct tool_text_out *t, FILE *f);
void tool_text_write(struct tool_text_out *t, const char *s, size_t len);
void tool_text_flush(struct tool_text_out *t); /* writes a held byte */

#endif
