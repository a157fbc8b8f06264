/*
 * convert.c - `kiln convert IN OUT.gguf`: a legacy GGML/GGMF/GGJT llama file
 * rewritten as GGUF (tensor bytes unchanged), with options for what the legacy
 * header cannot say; and the note the model-running tools print when given one.
 */
#include "tools.h"

#include "gguf.h"

#include <string.h>
#include <sys/stat.h>

#define CMD "convert"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kiln convert [options] IN OUT.gguf\n"
            "Converts a legacy llama weight file (GGML 'lmgg' F32/F16, GGMF v1, GGJT v1-v3) to GGUF.\n"
            "Tensor bytes are copied unchanged; quantized files older than GGJT v3 are refused\n"
            "(their block layouts changed).\n"
            "  --gqa N              heads per KV head (default: read from the K projection's shape;\n"
            "                       if given, it must agree with it; 8 for llama 2 70B)\n"
            "  --eps X              RMS norm epsilon (default %g; 1e-5 for llama 2, 1e-6 for llama 1)\n"
            "  -c, --ctx-size N     context length to record (default %d)\n"
            "  --name S             general.name (default: IN's file name)\n"
            "exit: 0 ok, 1 runtime error (OUT is not written), 2 usage error\n",
            GGUF_LEGACY_DEFAULT_EPS, GGUF_LEGACY_DEFAULT_CTX);
}

void tool_legacy_note(const char *cmd, const char *path) {
    const char *fmt = gguf_legacy_probe(path);
    if (!fmt) return;
    fprintf(stderr,
            "kiln %s: note: %s is a legacy %s file, converted in memory with the defaults (RMS eps %g, context %d, "
            "KV heads from the tensor shapes); `kiln convert %s OUT.gguf [--eps X] [-c N]` writes a GGUF once\n",
            cmd, path, fmt, GGUF_LEGACY_DEFAULT_EPS, GGUF_LEGACY_DEFAULT_CTX, path);
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int64_t meta_int(const struct gguf_file *g, const char *key) {
    int64_t v = 0;
    return gguf_get_int(g, key, &v) ? v : -1;
}

int cmd_convert(int argc, char **argv) {
    const char *pos[2];
    int npos = 0;
    struct gguf_legacy_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--gqa")) {
            const char *v = tool_arg_value(CMD, argc, argv, &i);
            if (!v || !tool_parse_i64(CMD, a, v, 1, 1 << 14, &o.gqa)) return EXIT_USAGE;
        } else if (!strcmp(a, "--eps")) {
            const char *v = tool_arg_value(CMD, argc, argv, &i);
            if (!v || !tool_parse_f64(CMD, a, v, 1e-12, 0.5, &o.eps)) return EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            const char *v = tool_arg_value(CMD, argc, argv, &i);
            if (!v || !tool_parse_i64(CMD, a, v, 1, UINT32_MAX, &o.n_ctx)) return EXIT_USAGE;
        } else if (!strcmp(a, "--name")) {
            if (!(o.name = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (a[0] == '-' && a[1] != 0) {
            return tool_usage_error(CMD, "unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return tool_usage_error(CMD, "unexpected argument '%s'", a);
        }
    }
    if (npos != 2) return tool_usage_error(CMD, "IN and OUT.gguf are required");
    if (same_file(pos[0], pos[1])) return tool_usage_error(CMD, "OUT would replace IN (%s)", pos[0]);

    char err[512];
    struct gguf_file *g = gguf_open_legacy(pos[0], &o, err, sizeof err);
    if (!g) {
        fprintf(stderr, "kiln %s: %s: %s\n", CMD, pos[0], err);
        return EXIT_RUNTIME;
    }
    if (!gguf_write_copy(g, pos[1], err, sizeof err)) {
        fprintf(stderr, "kiln %s: %s\n", CMD, err);
        gguf_close(g);
        return EXIT_RUNTIME;
    }
    float eps = 0;
    gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps);
    struct stat st;
    double mib = stat(pos[1], &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0.0;
    printf("%s (%s) -> %s: %lld tensors, %lld layers, %lld heads / %lld KV heads, feed-forward %lld, "
           "RMS eps %g, context %lld, %.2f MiB\n",
           pos[0], gguf_legacy_format(g), pos[1], (long long)gguf_n_tensors(g), (long long)meta_int(g, "llama.block_count"),
           (long long)meta_int(g, "llama.attention.head_count"), (long long)meta_int(g, "llama.attention.head_count_kv"),
           (long long)meta_int(g, "llama.feed_forward_length"), (double)eps,
           (long long)meta_int(g, "llama.context_length"), mib);
    gguf_close(g);
    return EXIT_OK;
}
