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
        if (!(v = tool_arg_path(cmd, argc, argv, i))) return -1;
        a->model_path = v;
    } else if (!strcmp(opt, "-t") || !strcmp(opt, "--threads")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 1, 512, &a->n_threads))
            return -1;
    } else if (!strcmp(opt, "-ngl") || !strcmp(opt, "--n-gpu-layers") || !strcmp(opt, "--gpu-layers")) {
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 0, 1 << 20, &a->n_gpu_layers))
            return -1;
    } else if (!strcmp(opt, "-c") || !strcmp(opt, "--ctx-size")) {
        int n;
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 0, 1 << 24, &n)) return -1;
        a->cparams.n_ctx = (uint32_t)n;
    } else if (!strcmp(opt, "-b") || !strcmp(opt, "--batch-size")) {
        int n;
        if (!(v = tool_arg_value(cmd, argc, argv, i)) || !tool_parse_int(cmd, opt, v, 1, 1 << 24, &n)) return -1;
        a->cparams.n_batch = (uint32_t)n;
        a->batch_set = true;
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
           "  -ngl, --n-gpu-layers N  layers on the GPU (99: all; needs a CUDA build and a GPU)\n"
           "  -c, --ctx-size N        context size (default: the model's, at most 4096 here)\n"
           "  -b, --batch-size N      most tokens per decode (default 512)\n"
           "  -ctk, -ctv TYPE         KV cache types: f16 (default), f32, bf16, q8_0\n";
}

bool model_args_load(struct model_args *a, const char *cmd, uint32_t min_ctx) {
    char err[1024];
    struct tool_progress bar;
    tool_progress_init(&bar, "loading");
    struct kiln_model_params mp = kiln_model_default_params();
    mp.progress = tool_progress_fn;
    mp.progress_data = &bar;
    mp.n_gpu_layers = a->n_gpu_layers;
    tool_legacy_note(cmd, a->model_path);
    a->model = kiln_model_load(a->model_path, mp, err, sizeof err);
    tool_progress_done(&bar);
    if (!a->model) {
        tool_file_error(cmd, a->model_path, err);
        return false;
    }
    if (kiln_model_gpu_note(a->model)[0]) fprintf(stderr, "kiln %s: %s\n", cmd, kiln_model_gpu_note(a->model));
    const struct kiln_hparams *hp = kiln_model_hparams(a->model);
    if (a->cparams.n_ctx == 0) {
        int64_t n = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        a->cparams.n_ctx = (uint32_t)(n > min_ctx ? n : min_ctx);
    }
    a->cparams.n_threads = a->n_threads;
    a->ctx = kiln_context_new(a->model, a->cparams, err, sizeof err);
    if (!a->ctx) { /* the size asked for: what the user can change */
        uint32_t nb = a->cparams.n_batch ? a->cparams.n_batch : 512;
        fprintf(stderr, "kiln %s: %s (asked for a context of %u tokens, batches of %u)\n", cmd, err,
                a->cparams.n_ctx, nb < a->cparams.n_ctx ? nb : a->cparams.n_ctx);
        kiln_model_free(a->model);
        a->model = NULL;
        return false;
    }
    return true;
}

int32_t model_args_n_batch(const struct model_args *a) {
    uint32_t n = a->cparams.n_batch ? a->cparams.n_batch : 512, n_ctx = a->ctx ? kiln_n_ctx(a->ctx) : n;
    return (int32_t)(n < n_ctx ? n : n_ctx); /* the context clamps n_batch to n_ctx the same way */
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

/* ------------------------------------------------------------------ sampling options */

void gen_args_init(struct gen_args *g) {
    memset(g, 0, sizeof *g);
    g->sp = kiln_sampling_default_params();
    g->n_predict = -1;
}

int gen_args_parse(struct gen_args *g, const char *cmd, int argc, char **argv, int *i) {
    const char *o = argv[*i], *v;
    struct kiln_sampling_params *sp = &g->sp;
#define VAL() ((v = tool_arg_value(cmd, argc, argv, i)) != NULL)
    if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) {
        if (!VAL() || !tool_parse_int(cmd, o, v, -1, 1 << 24, &g->n_predict)) return -1;
    } else if (!strcmp(o, "--temp")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, 0.0f, 100.0f, &sp->temp)) return -1;
    } else if (!strcmp(o, "--top-k")) {
        if (!VAL() || !tool_parse_int(cmd, o, v, 0, 1 << 30, &sp->top_k)) return -1;
    } else if (!strcmp(o, "--top-p")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, 1e-6f, 1.0f, &sp->top_p)) return -1;
    } else if (!strcmp(o, "--min-p")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, 0.0f, 1.0f, &sp->min_p)) return -1;
    } else if (!strcmp(o, "--typical")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, 1e-6f, 1.0f, &sp->typical_p)) return -1;
    } else if (!strcmp(o, "--repeat-penalty")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, 1e-3f, 100.0f, &sp->penalty_repeat)) return -1;
    } else if (!strcmp(o, "--repeat-last-n")) {
        if (!VAL() || !tool_parse_int(cmd, o, v, 0, 1 << 20, &sp->penalty_last_n)) return -1;
    } else if (!strcmp(o, "--frequency-penalty")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, -10.0f, 10.0f, &sp->penalty_freq)) return -1;
    } else if (!strcmp(o, "--presence-penalty")) {
        if (!VAL() || !tool_parse_f32(cmd, o, v, -10.0f, 10.0f, &sp->penalty_present)) return -1;
    } else if (!strcmp(o, "-s") || !strcmp(o, "--seed")) {
        int64_t seed;
        if (!VAL() || !tool_parse_i64(cmd, o, v, 0, 0xFFFFFFFFLL, &seed)) return -1;
        sp->seed = (uint32_t)seed;
    } else if (!strcmp(o, "--grammar") || !strcmp(o, "--grammar-file") || !strcmp(o, "-j") ||
               !strcmp(o, "--json-schema") || !strcmp(o, "-jf") || !strcmp(o, "--json-schema-file")) {
        const char **slot = !strcmp(o, "--grammar") ? &g->grammar : !strcmp(o, "--grammar-file") ? &g->grammar_file
                            : o[1] == 'j' && !o[2] ? &g->schema : !strcmp(o, "--json-schema") ? &g->schema
                                                                                               : &g->schema_file;
        if (g->grammar || g->grammar_file || g->schema || g->schema_file) {
            tool_usage_error(cmd, "give one of --grammar, --grammar-file, --json-schema, --json-schema-file");
            return -1;
        }
        if (!(*slot = slot == &g->grammar_file || slot == &g->schema_file ? tool_arg_path(cmd, argc, argv, i)
                                                                           : tool_arg_value(cmd, argc, argv, i)))
            return -1;
    } else {
        return 0;
    }
#undef VAL
    return 1;
}

const char *gen_args_help(void) {
    return "  -n, --n-predict N       tokens to generate (-1: until end of generation or the context is full)\n"
           "  --temp T                temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K, --top-p P, --min-p P, --typical P   (defaults 40, 0.95, 0.05, 1.0)\n"
           "  --repeat-penalty X, --repeat-last-n N, --frequency-penalty X, --presence-penalty X\n"
           "  -s, --seed N            seed of the random draw (same seed and logits, same draw; the\n"
           "                          logits differ in their last bits between CPU kernels)\n"
           "  --grammar GBNF, --grammar-file FILE   output held to a GBNF grammar (llama.cpp's format)\n"
           "  -j, --json-schema SCHEMA, -jf, --json-schema-file FILE   output is JSON valid for the schema\n";
}

int gen_args_prepare(struct gen_args *g, const char *cmd) {
    struct kiln_sampler *check = kiln_sampler_from_params(&g->sp);
    if (!check) {
        fprintf(stderr, "kiln %s: %s\n", cmd, kiln_sampler_last_error());
        return EXIT_USAGE;
    }
    kiln_sampler_free(check);
    const char *file = g->grammar_file ? g->grammar_file : g->schema_file, *text = g->grammar ? g->grammar : g->schema;
    if (!file && !text) return EXIT_OK;
    char *owned = NULL, err[512];
    size_t len = text ? strlen(text) : 0;
    if (file && !(text = owned = tool_read_file(cmd, file, TOOL_TEXT_MAX, &len))) return EXIT_RUNTIME;
    bool schema = g->schema || g->schema_file;
    g->g = schema ? kiln_grammar_from_json_schema(text, len, err, sizeof err)
                  : kiln_grammar_parse(text, len, NULL, err, sizeof err);
    free(owned);
    if (!g->g) {
        fprintf(stderr, "kiln %s: %s%s: %s\n", cmd, schema ? "--json-schema" : "--grammar", file ? "-file" : "", err);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

struct kiln_sampler *gen_args_sampler(struct gen_args *g, const char *cmd, const struct kiln_vocab *vocab) {
    struct kiln_sampler *s = kiln_sampler_from_params(&g->sp);
    if (!s) {
        fprintf(stderr, "kiln %s: %s\n", cmd, kiln_sampler_last_error());
        return NULL;
    }
    if (!g->g) return s;
    char err[256];
    if (!g->gv && !(g->gv = kiln_grammar_vocab_new(vocab, err, sizeof err))) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        kiln_sampler_free(s);
        return NULL;
    }
    /* the grammar first: the stages after it see allowed tokens only (an add takes
     * its stage in every case, freeing it on failure) */
    struct kiln_sampler *chain = kiln_sampler_chain_new();
    bool ok = chain && kiln_sampler_chain_add(chain, kiln_sampler_init_grammar(g->g, g->gv));
    ok = ok ? kiln_sampler_chain_add(chain, s) : (kiln_sampler_free(s), false);
    if (!ok) {
        fprintf(stderr, "kiln %s: %s\n", cmd, kiln_sampler_last_error());
        kiln_sampler_free(chain);
        return NULL;
    }
    return chain;
}

void gen_args_free(struct gen_args *g) {
    kiln_grammar_free(g->g);
    kiln_grammar_vocab_free(g->gv);
    g->g = NULL;
    g->gv = NULL;
}

/* ------------------------------------------------------------------ generation */

bool gen_push_id(struct gen_out *out, int32_t tok) {
    if (out->n == out->cap) {
        int64_t cap = out->cap ? out->cap * 2 : 256;
        int32_t *ids = realloc(out->ids, sizeof(int32_t) * (size_t)cap);
        if (!ids) return false;
        out->ids = ids;
        out->cap = cap;
    }
    out->ids[out->n++] = tok;
    return true;
}

void gen_out_free(struct gen_out *out) {
    free(out->ids);
    memset(out, 0, sizeof *out);
}

int64_t generate(const char *cmd, struct kiln_context *ctx, const struct kiln_model *model, struct kiln_sampler *s,
                 int32_t n_past, int n_predict, FILE *stream, struct gen_out *out) {
    const struct kiln_vocab *v = kiln_model_vocab(model);
    const int64_t n_vocab = kiln_vocab_n_tokens(v);
    const int32_t n_ctx = (int32_t)kiln_n_ctx(ctx);
    struct kiln_batch b = kiln_batch_init(1);
    if (!b.capacity) {
        fprintf(stderr, "kiln %s: out of memory\n", cmd);
        return -1;
    }
    int64_t n = 0;
    out->hit_eog = out->ctx_full = false;
    char piece[256];
    struct tool_text_out tx;
    if (stream) tool_text_init(&tx, stream);
    for (;;) {
        if (n_predict >= 0 && n >= n_predict) break;
        const float *logits = kiln_get_logits_ith(ctx, -1);
        /* a sampler given NaN picks token 0 or noise: stop instead of emitting it */
        if (!tool_logits_ok(cmd, model, logits, n_vocab, "position %d", n_past - 1)) {
            n = -1;
            break;
        }
        int32_t tok = kiln_sampler_sample(s, logits, n_vocab);
        if (tok < 0) {
            fprintf(stderr, "kiln %s: sampling failed: %s\n", cmd, kiln_sampler_last_error());
            n = -1;
            break;
        }
        kiln_sampler_accept(s, tok);
        if (kiln_vocab_is_eog(v, tok)) {
            out->hit_eog = true;
            break;
        }
        if (!gen_push_id(out, tok)) {
            fprintf(stderr, "kiln %s: out of memory\n", cmd);
            n = -1;
            break;
        }
        n++;
        if (stream) {
            int64_t len = kiln_token_to_piece(v, tok, piece, sizeof piece, false);
            if (len > 0) {
                tool_text_write(&tx, piece, (size_t)len);
            } else if (len < 0 && len != KILN_ERR_INVALID) { /* a piece longer than the buffer */
                char *big = malloc((size_t)-len);
                if (big && (len = kiln_token_to_piece(v, tok, big, (size_t)-len, false)) > 0)
                    tool_text_write(&tx, big, (size_t)len);
                free(big);
            }
            /* output nobody can read (a full disk): stop; main reports the write error */
            if (fflush(stream) != 0 || ferror(stream)) {
                n = -1;
                break;
            }
        }
        if (n_past >= n_ctx) { /* the context is full */
            out->ctx_full = true;
            break;
        }
        kiln_batch_clear(&b);
        kiln_batch_add(&b, tok, n_past++, 0, true);
        if (kiln_decode(ctx, &b) != 0) {
            fprintf(stderr, "\nkiln %s: decode failed: %s\n", cmd, kiln_context_error(ctx));
            n = -1;
            break;
        }
    }
    if (stream) tool_text_flush(&tx);
    kiln_batch_free(&b);
    return n;
}

void gen_note_ctx_full(const char *cmd, const struct kiln_context *ctx, const struct gen_out *out, int64_t n_gen,
                       int n_predict) {
    if (out->ctx_full && n_predict > n_gen)
        fprintf(stderr, "kiln %s: the context is full (%u tokens): generated %lld of the %d tokens asked for "
                        "(raise -c)\n",
                cmd, kiln_n_ctx(ctx), (long long)n_gen, n_predict);
}

/* ------------------------------------------------------------------ prompt */

int prompt_args_parse(struct prompt_args *p, const char *cmd, int argc, char **argv, int *i) {
    const char *o = argv[*i];
    const char **slot = !strcmp(o, "-p") || !strcmp(o, "--prompt") ? &p->prompt
                        : !strcmp(o, "-f") || !strcmp(o, "--file") ? &p->file
                                                                   : NULL;
    if (!slot) return 0;
    *slot = slot == &p->file ? tool_arg_path(cmd, argc, argv, i) : tool_arg_value(cmd, argc, argv, i);
    return *slot ? 1 : -1;
}

const char *prompt_args_text(struct prompt_args *p, const char *cmd, int *rc) {
    if (!p->prompt == !p->file) {
        *rc = tool_usage_error(cmd, "give exactly one of -p PROMPT or -f FILE");
        return NULL;
    }
    if (p->prompt) return p->prompt;
    size_t len;
    p->owned = tool_read_file(cmd, p->file, TOOL_TEXT_MAX, &len);
    *rc = EXIT_RUNTIME;
    if (p->owned && tool_text_has_nul(cmd, p->file, p->owned, len)) prompt_args_free(p);
    return p->owned;
}

void prompt_args_free(struct prompt_args *p) {
    free(p->owned);
    p->owned = NULL;
}
