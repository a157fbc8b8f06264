/*
 * synth.c - `kiln synth --preset NAME -o OUT.gguf`: write a deterministic model
 * with random weights (llama by default, or another architecture kiln runs) for
 * tests and benchmarks, streamed to the file with a progress bar on a terminal.
 */
#include "tools.h"

#include "gguf.h"
#include "kiln.h"
#include "kiln-offline.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD "synth"

static void usage(FILE *f) {
    fprintf(f, "usage: kiln synth --preset NAME -o OUT.gguf [options]\n\n"
               "  --preset NAME      tiny (2 layers, 64 embd), small (8 layers, 256 embd, GQA 4),\n"
               "                     tinyllama-1.1b, llama-7b, gemma3-4b (gemma3 unless --arch says),\n"
               "                     bge-small (bert unless --arch says: BGE-small's shape),\n"
               "                     qwen3-30b-a3b (qwen3moe: 128 experts, 8 used), gpt-oss-20b (gpt-oss:\n"
               "                     32 experts, 4 used)\n"
               "  -o, --output FILE  the GGUF file to write\n"
               "  --arch NAME        llama (default), qwen2, qwen3, phi3, gemma2, gemma3, gemma4, bert,\n"
               "                     nomic-bert, qwen3moe, gpt-oss, mixtral (a llama file with experts):\n"
               "                     that architecture's tensors and keys (Gemma: a sliding window of 16\n"
               "                     tokens on tiny, 32 on small; experts: 4, 2 used per token, on the\n"
               "                     presets without their own)\n"
               "  --layers N         N layers instead of the preset's (1-512)\n"
               "  --pooling P        the file's pooling type: none, mean, cls, last, rank (default: none;\n"
               "                     bert: cls, nomic-bert: mean); rank writes bert's classifier head\n"
               "  --type TYPE        F32, F16 (default), BF16, Q8_0, Q4_0, MXFP4 (llama.cpp's mix for that\n"
               "                     type; MXFP4: expert stacks MXFP4, other matrices Q8_0)\n"
               "  --vocab FILE       take the tokenizer from this GGUF file (default: a synthetic\n"
               "                     byte-fallback SentencePiece vocabulary)\n"
               "  --seed N           random seed (default 0); same seed, same bytes on any machine\n"
               "  -t, --threads N    worker threads (default: all CPUs; same bytes for any N)\n"
               "exit: 0 ok, 1 runtime error (OUT is not written), 2 usage error\n");
}

int cmd_synth(int argc, char **argv) {
    struct kiln_synth_params p = kiln_synth_default_params();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p.n_threads = ncpu > 0 ? (int)ncpu : 1;
    p.preset = NULL;
    const char *out = NULL;
    struct tool_progress bar;
    tool_progress_init(&bar, "synth");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--preset")) {
            if (!(p.preset = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out = tool_arg_path(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--arch")) {
            if (!(p.arch = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
            if (!kiln_synth_arch_known(p.arch)) {
                char list[160];
                kiln_arch_list(list, sizeof list);
                return tool_usage_error(CMD, "unknown --arch '%s' (%s, mixtral)", p.arch, list);
            }
        } else if (!strcmp(a, "--pooling")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
            if (!kiln_pooling_from_name(v, &p.pooling))
                return tool_usage_error(CMD, "unknown --pooling '%s' (none, mean, cls, last, rank)", v);
        } else if (!strcmp(a, "--layers")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i)) || !tool_parse_i64(CMD, a, v, 1, 512, &p.n_layers))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--vocab")) {
            if (!(p.vocab_path = tool_arg_path(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--type")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
            if (!kt_type_from_name(v, &p.type) ||
                (p.type != KT_TYPE_F32 && p.type != KT_TYPE_F16 && p.type != KT_TYPE_BF16 &&
                 p.type != KT_TYPE_Q8_0 && p.type != KT_TYPE_Q4_0 && p.type != KT_TYPE_MXFP4))
                return tool_usage_error(CMD, "unknown --type '%s' (F32, F16, BF16, Q8_0, Q4_0, MXFP4)", v);
        } else if (!strcmp(a, "--seed")) {
            int64_t s;
            if (!(v = tool_arg_value(CMD, argc, argv, &i)) || !tool_parse_i64(CMD, a, v, 0, INT64_MAX, &s))
                return EXIT_USAGE;
            p.seed = (uint64_t)s;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = tool_arg_value(CMD, argc, argv, &i)) || !tool_parse_int(CMD, a, v, 1, 256, &p.n_threads))
                return EXIT_USAGE;
        } else {
            return tool_usage_error(CMD, "unexpected argument '%s'", a);
        }
    }
    if (!p.preset) return tool_usage_error(CMD, "--preset is required");
    if (!out) return tool_usage_error(CMD, "-o OUT.gguf is required");
    bool known = false;
    for (const char *const *n = kiln_synth_presets(); *n; n++) known |= !strcmp(*n, p.preset);
    if (!known) return tool_usage_error(CMD, "unknown preset '%s'", p.preset);
    if (p.pooling == KILN_POOLING_RANK && (!p.arch || strcmp(p.arch, "bert")))
        return tool_usage_error(CMD, "--pooling rank needs --arch bert (its classifier head)");
    p.progress = tool_progress_fn;
    p.progress_data = &bar;

    char err[1024];
    /* the vocabulary file is an input: -o onto it would replace it with the synthetic model */
    if (!gguf_outfile_check_inputs(out, &p.vocab_path, 1, err, sizeof err)) {
        fprintf(stderr, "kiln synth: %s\n", err);
        return EXIT_RUNTIME;
    }
    bool ok = kiln_synth(&p, out, err, sizeof err);
    tool_progress_done(&bar);
    if (!ok) {
        fprintf(stderr, "kiln synth: %s\n", err);
        return EXIT_RUNTIME;
    }
    struct stat st;
    double mb = stat(out, &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0.0;
    printf("%s: preset %s%s%s, %s, seed %llu: %.2f MiB in %.1f s\n", out, p.preset, p.arch ? " " : "",
           p.arch ? p.arch : "", kt_type_name(p.type), (unsigned long long)p.seed, mb, tool_now() - bar.t0);
    return EXIT_OK;
}
