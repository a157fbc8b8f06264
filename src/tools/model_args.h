/* model_args.h - shared model/context options and setup for model-running subcommands. */
#ifndef KILN_MODEL_ARGS_H
#define KILN_MODEL_ARGS_H

#include "kiln.h"
#include "tools.h"

struct model_args {
    const char *model_path;
    int n_threads;
    int n_gpu_layers; /* -ngl */
    struct kiln_context_params cparams;
    struct kiln_model *model;
    struct kiln_context *ctx;
    bool batch_set; /* -b was given */
};

void model_args_init(struct model_args *a);
/* If argv[*i] is a shared option, consume it (and its value): 1; not ours: 0; bad value: -1 (message printed). */
int model_args_parse(struct model_args *a, const char *cmd, int argc, char **argv, int *i);
const char *model_args_help(void);
/* Load the model and create a context with at least min_ctx cells; false with a message on stderr. */
bool model_args_load(struct model_args *a, const char *cmd, uint32_t min_ctx);
void model_args_free(struct model_args *a);
/* Tokens per decode call: -b (default 512) as the context clamps it to n_ctx. */
int32_t model_args_n_batch(const struct model_args *a);
/* Tokenize a prompt (special tokens parsed); returns the count and a malloc'd array, or -1. */
int64_t model_tokenize(const char *cmd, const struct kiln_vocab *v, const char *text, bool add_special,
                       int32_t **out);

/* Decode ids[0..n) of sequence 0 from position pos0 in batches of the batch's capacity;
 * logits for every position when all (written to logits_out, named logits_name in
 * messages, if given), else for the last. With a model, every row of logits it gets is
 * checked (tool_logits_ok); without one (bench) none is. */
bool decode_prompt(const char *cmd, struct kiln_context *ctx, const struct kiln_model *model,
                   struct kiln_batch *batch, const int32_t *ids, int64_t n, int32_t pos0, bool all, FILE *logits_out,
                   const char *logits_name);
/* True when l[0..n) are a prediction: all finite and not all equal. Otherwise prints
 * "kiln CMD: the logits at WHERE are not finite (...)" (or "all equal") with the first
 * weight of the model file that holds a non-finite value and its layer (the file is
 * damaged), or that every weight is finite, and returns false. WHERE is a printf
 * format (finite.c). */
bool tool_logits_ok(const char *cmd, const struct kiln_model *model, const float *l, int64_t n,
                    const char *where_fmt, ...) __attribute__((format(printf, 5, 6)));
/* ---- the prompt: -p TEXT or -f FILE, exactly one */
struct prompt_args {
    const char *prompt, *file;
    char *owned; /* the file's text */
};
/* like model_args_parse: 1 consumed, 0 not ours, -1 bad value */
int prompt_args_parse(struct prompt_args *p, const char *cmd, int argc, char **argv, int *i);
/* The prompt text, or NULL with a message and *rc set (EXIT_USAGE: neither or both given;
 * EXIT_RUNTIME: the file cannot be read). */
const char *prompt_args_text(struct prompt_args *p, const char *cmd, int *rc);
void prompt_args_free(struct prompt_args *p);
void print_ids_json(FILE *f, const int32_t *ids, int64_t n);

/* ---- sampling options shared by run and chat, and the output grammar */
struct gen_args {
    struct kiln_sampling_params sp;
    int n_predict;
    /* at most one of: GBNF text, a GBNF file, a JSON Schema (text or file) */
    const char *grammar, *grammar_file, *schema, *schema_file;
    struct kiln_grammar *g;          /* compiled by gen_args_prepare */
    struct kiln_grammar_vocab *gv;   /* made by gen_args_sampler from the model's vocabulary */
};
void gen_args_init(struct gen_args *g);
/* like model_args_parse: 1 consumed, 0 not ours, -1 bad value */
int gen_args_parse(struct gen_args *g, const char *cmd, int argc, char **argv, int *i);
const char *gen_args_help(void);
/* Check the sampling options and compile the grammar, before the model loads (a bad
 * grammar fails at once): an exit code, EXIT_OK when all is well. */
int gen_args_prepare(struct gen_args *g, const char *cmd);
/* The sampler chain for these options (the grammar first, on vocab's tokens); NULL with
 * a message on stderr. */
struct kiln_sampler *gen_args_sampler(struct gen_args *g, const char *cmd, const struct kiln_vocab *vocab);
void gen_args_free(struct gen_args *g);

/* Generation after a decode left the last token's logits current with n_past tokens of
 * sequence 0 in the cache: sample (from logits tool_logits_ok accepts), stream the piece
 * (to stream, if not NULL), decode it, until an end-of-generation token, n_predict
 * tokens (< 0: until the context is full), or an error. Generated ids are appended to
 * out (capacity grows). Returns the count, -1 on error (message printed). */
struct gen_out {
    int32_t *ids;
    int64_t n, cap;
    bool hit_eog;
    bool ctx_full; /* stopped because the context had no room left */
};
int64_t generate(const char *cmd, struct kiln_context *ctx, const struct kiln_model *model, struct kiln_sampler *s,
                 int32_t n_past, int n_predict, FILE *stream, struct gen_out *out);
/* After generate: when the context filled before n_predict tokens, say so on stderr. */
void gen_note_ctx_full(const char *cmd, const struct kiln_context *ctx, const struct gen_out *out, int64_t n_gen,
                       int n_predict);
void gen_out_free(struct gen_out *out);

/* `kiln bench --json-schema FILE` / `--grammar-file FILE` (bench_grammar.c): n tokens without
 * and with the grammar, reps times after a warm-up; an exit code. */
int bench_grammar(struct model_args *ma, const char *cmd, const char *path, bool schema, int n, int reps, bool json);
bool gen_push_id(struct gen_out *out, int32_t tok);

#endif
