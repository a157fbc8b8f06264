/*
 * quantize.c - `kiln quantize IN OUT TYPE`: rewrite a model with another weight
 * type (llama.cpp's per-tensor mixes, or --pure), a progress bar on a terminal,
 * and one summary line.
 */
#include "tools.h"

#include "kiln.h"
#include "kiln-offline.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD "quantize"

static void usage(FILE *f) {
    fprintf(f, "usage: kiln quantize [options] IN.gguf OUT.gguf TYPE\n\n"
               "  TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M\n"
               "        Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE (any case; Q3_K, Q4_K, Q5_K mean the _M\n"
               "        mix; MXFP4 means MXFP4_MOE: expert stacks MXFP4, other matrices Q8_0)\n"
               "  --pure               every quantizable tensor gets TYPE (no per-tensor mix)\n"
               "  --allow-requantize   accept inputs that are already quantized (with a warning)\n"
               "  -t, --threads N      worker threads (default: all CPUs; same bytes for any N)\n"
               "  -v, --verbose        list every tensor's type change\n"
               "exit: 0 ok, 1 runtime error (OUT is not written), 2 usage error\n");
}

struct ui {
    bool verbose;
    int n_requant;
    struct tool_progress bar;
};

static void on_tensor(const struct kiln_quantize_tensor *t, void *data) {
    struct ui *ui = data;
    if (t->requantized) {
        ui->n_requant++;
        fprintf(stderr, "kiln quantize: warning: %s is already %s: requantizing to %s\n", t->name,
                kt_type_name(t->from), kt_type_name(t->to));
    }
    if (ui->verbose)
        fprintf(stderr, "  %-32s [%lld x %lld] %s -> %s\n", t->name, (long long)t->ne[0],
                (long long)(t->n_dims > 1 ? t->ne[1] : 1), kt_type_name(t->from), kt_type_name(t->to));
}

static double mib(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0.0;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int npos = 0;
    struct kiln_quantize_params p = kiln_quantize_default_params();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p.n_threads = ncpu > 0 ? (int)ncpu : 1;
    struct ui ui = {0};
    tool_progress_init(&ui.bar, "quantizing");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            ui.verbose = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            const char *v = tool_arg_value(CMD, argc, argv, &i);
            if (!v || !tool_parse_int(CMD, a, v, 1, 256, &p.n_threads)) return EXIT_USAGE;
        } else if (a[0] == '-' && a[1] != 0) {
            return tool_usage_error(CMD, "unknown option '%s'", a);
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            return tool_usage_error(CMD, "unexpected argument '%s'", a);
        }
    }
    if (npos < 3) return tool_usage_error(CMD, "needs IN, OUT and TYPE");
    if (!*pos[0] || !*pos[1]) return tool_usage_error(CMD, "IN and OUT need file names, not empty strings");
    if (!kiln_ftype_from_name(pos[2], &p.ftype)) return tool_usage_error(CMD, "unknown TYPE '%s'", pos[2]);
    p.on_tensor = on_tensor;
    p.on_tensor_data = &ui;
    p.progress = tool_progress_fn;
    p.progress_data = &ui.bar;

    char err[1024];
    double in_mib = mib(pos[0]); /* before: OUT may replace IN (quantize a.gguf a.gguf) */
    bool ok = kiln_quantize_file(pos[0], pos[1], &p, err, sizeof err);
    tool_progress_done(&ui.bar);
    if (!ok) {
        fprintf(stderr, "kiln quantize: %s\n", err);
        if (strstr(err, "already quantized")) fprintf(stderr, "kiln quantize: pass --allow-requantize to proceed\n");
        return EXIT_RUNTIME;
    }
    printf("%s: %.2f MiB -> %s: %.2f MiB as %s%s in %.1f s\n", pos[0], in_mib, pos[1], mib(pos[1]),
           kiln_ftype_name(p.ftype), p.pure ? " (pure)" : "", tool_now() - ui.bar.t0);
    return EXIT_OK;
}
