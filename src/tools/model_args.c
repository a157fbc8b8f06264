/*
 * model_args.c - the options every model-running subcommand shares (-m, -t, -c,
 * -b, --ctk/--ctv) parsed in one place, and model + context creation with
 * errors reported the same way everywhere.
 */
#include "model_args.h"

#include <stdlib.h>
#include <string.h>

void model_args_init(struct model_args *a) {
    memset(a, 0, sizeof *a);
    a->cparams = kiln_context_default_params();
    a->cparams.n_ctx = 0;
    a->n_threads = 2;
}

static bool parse_kv_type(const char *cmd, const char *flag, const char *s, enum kt_type *out) {
    enum kt_type t;
    if (!kt_type_from_name(s, &t) || (t != KT_TYPE_F16 && t != KT_TYPE_F32 && t != KT_TYPE_BF16 && t != KT_TYPE_Q8_0)) {
        fprintf(stderr, "kiln %s: invalid value '%s' for %s: expected f16, f32, bf16 or q8_0\n", cmd, s, flag);
        return false;
    }
    *out = t;
    return true;
}

int model_args_parse(struct model_args *a, const char *cmd, int argc, char **argv, int *i) {
    const char *opt = argv[*i];
    const char *v;
    if (!strcmp(opt, "-m") || !strcmp(opt, "--model")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i))) return -1;
        a->model_path = v;
    } else if (!strcmp(opt, "-t") || !strcmp(opt, "--threads")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 1, 512, &a->n_threads))
            return -1;
    } else if (!strcmp(opt, "-c") || !strcmp(opt, "--ctx-size")) {
        int n;
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 0, 1 << 24, &n)) return -1;
        a->cparams.n_ctx = (uint32_t)n;
    } else if (!strcmp(opt, "-b") || !strcmp(opt, "--batch-size")) {
        int n;
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 1, 1 << 24, &n)) return -1;
        a->cparams.n_batch = (uint32_t)n;
    } else if (!strcmp(opt, "-ctk") || !strcmp(opt, "--cache-type-k")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !parse_kv_type(cmd, opt, v, &a->cparams.type_k)) return -1;
    } else if (!strcmp(opt, "-ctv") || !strcmp(opt, "--cache-type-v")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !parse_kv_type(cmd, opt, v, &a->cparams.type_v)) return -1;
    } else {
        return 0;
    }
    return 1;
}

const char *model_args_help(void) {
    return "  -m, --model FILE        GGUF model (required)\n"
           "  -t, --threads N         threads (default 2)\n"
           "  -c, --ctx-size N        context size (default: the model's, at most 4096 here)\n"
           "  -b, --batch-size N      most tokens per decode (default 512)\n"
           "  -ctk, -ctv TYPE         KV cache types: f16 (default), f32, bf16, q8_0\n";
}

bool model_args_load(struct model_args *a, const char *cmd, uint32_t min_ctx) {
    char err[512];
    a->model = kiln_model_load(a->model_path, kiln_model_default_params(), err, sizeof err);
    if (!a->model) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        return false;
    }
    const struct kiln_hparams *hp = kiln_model_hparams(a->model);
    if (a->cparams.n_ctx == 0) {
        int64_t n = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        a->cparams.n_ctx = (uint32_t)(n > min_ctx ? n : min_ctx);
    }
    a->cparams.n_threads = a->n_threads;
    a->ctx = kiln_context_new(a->model, a->cparams, err, sizeof err);
    if (!a->ctx) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        kiln_model_free(a->model);
        a->model = NULL;
        return false;
    }
    return true;
}

void model_args_free(struct model_args *a) {
    kiln_context_free(a->ctx);
    kiln_model_free(a->model);
    a->ctx = NULL;
    a->model = NULL;
}

int64_t model_tokenize(const char *cmd, const struct kiln_vocab *v, const char *text, bool add_special,
                       int32_t **out) {
    size_t len = strlen(text);
    int64_t cap = (int64_t)len + 8;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        return -1;
    }
    int64_t n = kiln_tokenize(v, text, len, ids, cap, add_special, true);
    if (n < 0 && n != KILN_ERR_INVALID) {
        cap = -n;
        int32_t *more = realloc(ids, sizeof(int32_t) * (size_t)cap);
        if (!more) {
            free(ids);
            fprintf(stderr, "kiln %s: out of memory\n", cmd);
            return -1;
        }
        ids = more;
        n = kiln_tokenize(v, text, len, ids, cap, add_special, true);
    }
    if (n < 0) {
        free(ids);
        fprintf(stderr, "kiln %s: cannot tokenize the prompt\n", cmd);
        return -1;
    }
    *out = ids;
    return n;
}
