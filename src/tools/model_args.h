/* model_args.h - shared model/context options and setup for model-running subcommands. */
#ifndef KILN_MODEL_ARGS_H
#define KILN_MODEL_ARGS_H

#include "kiln.h"
#include "tools.h"

struct model_args {
    const char *model_path;
    int n_threads;
    struct kiln_context_params cparams;
    struct kiln_model *model;
    struct kiln_context *ctx;
};

void model_args_init(struct model_args *a);
/* If argv[*i] is a shared option, consume it (and its value): 1; not ours: 0; bad value: -1 (message printed). */
int model_args_parse(struct model_args *a, const char *cmd, int argc, char **argv, int *i);
const char *model_args_help(void);
/* Load the model and create a context with at least min_ctx cells; false with a message on stderr. */
bool model_args_load(struct model_args *a, const char *cmd, uint32_t min_ctx);
void model_args_free(struct model_args *a);
/* Tokenize a prompt (special tokens parsed); returns the count and a malloc'd array, or -1. */
int64_t model_tokenize(const char *cmd, const struct kiln_vocab *v, const char *text, bool add_special,
                       int32_t **out);

#endif
