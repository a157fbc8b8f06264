/*
 * info.c - `kiln info`: what a GGUF file holds (architecture and whether kiln
 * can run it, hyper-parameters, tokenizer, tensors by type and size) as text or
 * one JSON object, and
 * `--tensor NAME --dump OUT.f32` to write one tensor dequantized to float32.
 */
#include "tools.h"

#include "gguf.h"
#include "kiln.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CMD "info"
/* Arrays longer than this are summarised (type and length) rather than printed. */
#define TEXT_ARRAY_MAX 8
#define JSON_ARRAY_MAX 64

static void usage(FILE *f) {
    fprintf(f, "usage: kiln info -m FILE [--json] [--tensors]\n"
               "       kiln info -m FILE --tensor NAME --dump OUT.f32\n\n"
               "  -m, --model FILE   the GGUF file\n"
               "  --json             print one JSON object instead of text\n"
               "  --tensors          list every tensor (name, shape, type, offset)\n"
               "  --tensor NAME      with --dump: the tensor to write\n"
               "  --dump OUT.f32     write that tensor dequantized to float32, row-major\n"
               "exit: 0 ok, 1 unreadable or invalid file, 2 usage error\n");
}

/* ---- values */

/* Bytes for a terminal: escapes for control bytes (C0, DEL, C1) and for bytes that are
 * not UTF-8, so nothing from the file can drive the terminal; at most max bytes. */
static void text_bytes(FILE *f, const char *s, uint64_t len, uint64_t max, bool quoted) {
    for (uint64_t i = 0; i < len && i < max;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = gguf_utf8_seq(s, (size_t)i, (size_t)len);
        if (quoted && (c == '"' || c == '\\'))
            fprintf(f, "\\%c", c);
        else if (quoted && c == '\n')
            fputs("\\n", f);
        else if (!n || c < 0x20 || c == 0x7f || (c == 0xc2 && (unsigned char)s[i + 1] < 0xa0))
            fprintf(f, "\\x%02x", c), n = 1;
        else
            fwrite(s + i, 1, n, f);
        i += n ? n : 1;
    }
}

/* A key or tensor name, unquoted. */
static void text_name(FILE *f, const char *s, uint64_t len) {
    text_bytes(f, s, len, len, false);
}

/* A string value, quoted, cut after max bytes. */
static void text_str(FILE *f, const char *s, uint64_t len, uint64_t max) {
    fputc('"', f);
    text_bytes(f, s, len, max, true);
    fputc('"', f);
    if (len > max) fputs("...", f);
}

/* A JSON string from file bytes (untrusted: tool_json_str turns bytes that are not
 * UTF-8 into U+FFFD, so the output stays JSON). */
static void json_text(FILE *f, const char *p, size_t n) {
    tool_json_str(f, p, n);
}

static void print_str(FILE *f, struct gguf_str s, bool json) {
    if (json)
        json_text(f, s.ptr, (size_t)s.len);
    else
        text_str(f, s.ptr, s.len, 120);
}

static void print_double(FILE *f, double v, bool is_f32, bool json) {
    if (json && !isfinite(v))
        fputs("null", f); /* JSON has no NaN or infinity */
    else
        fprintf(f, is_f32 ? "%.9g" : "%.17g", v);
}

/* Element idx of array i, or the scalar value when idx is -1. */
static void print_elem(FILE *f, const struct gguf_file *g, int64_t i, const char *key, enum gguf_type t,
                       int64_t idx, bool json) {
    int64_t iv;
    double dv;
    struct gguf_str s;
    bool ok = false;
    if (t == GGUF_TYPE_STRING) {
        ok = idx < 0 ? gguf_get_str(g, key, &s) : gguf_arr_get_str(g, i, (uint64_t)idx, &s);
        if (ok) print_str(f, s, json);
    } else if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) {
        ok = idx < 0 ? gguf_get_float(g, key, &dv) : gguf_arr_get_float(g, i, (uint64_t)idx, &dv);
        if (ok) print_double(f, dv, t == GGUF_TYPE_FLOAT32, json);
    } else if (t == GGUF_TYPE_BOOL) {
        size_t size;
        const uint8_t *p = gguf_kv_data(g, i, &size);
        ok = p && (idx < 0 ? size >= 1 : (uint64_t)idx < size);
        if (ok) fputs(p[idx < 0 ? 0 : idx] ? "true" : "false", f);
    } else if (t == GGUF_TYPE_UINT64 && idx < 0) {
        uint64_t u;
        ok = gguf_get_u64(g, key, &u);
        if (ok) fprintf(f, "%llu", (unsigned long long)u);
    } else {
        ok = idx < 0 ? gguf_get_int(g, key, &iv) : gguf_arr_get_int(g, i, (uint64_t)idx, &iv);
        if (ok) fprintf(f, "%lld", (long long)iv);
    }
    if (!ok) fputs(json ? "null" : "?", f); /* u64 array elements above INT64_MAX */
}

/* Value of key i: scalars as they are, short arrays in full, long or nested ones summarised. */
static void print_value(FILE *f, const struct gguf_file *g, int64_t i, const char *key, bool json) {
    enum gguf_type t = gguf_kv_type(g, i);
    if (t != GGUF_TYPE_ARRAY) {
        print_elem(f, g, i, key, t, -1, json);
        return;
    }
    enum gguf_type et = gguf_arr_type(g, i);
    uint64_t n = gguf_arr_n(g, i);
    if (et == GGUF_TYPE_ARRAY || n > (json ? JSON_ARRAY_MAX : TEXT_ARRAY_MAX)) {
        if (json)
            fprintf(f, "{\"type\": \"arr\", \"elem_type\": \"%s\", \"n\": %llu}", gguf_type_name(et),
                    (unsigned long long)n);
        else
            fprintf(f, "[%s x %llu]", gguf_type_name(et), (unsigned long long)n);
        return;
    }
    fputc('[', f);
    for (uint64_t k = 0; k < n; k++) {
        if (k) fputs(", ", f);
        print_elem(f, g, i, key, et, (int64_t)k, json);
    }
    fputc(']', f);
}

/* ---- facts */

struct summary {
    struct gguf_str arch, name, tok_model;
    bool has_arch, has_name, has_tok_model;
    int64_t vocab; /* -1: no token list */
    int64_t count[KT_TYPE_COUNT];
    uint64_t bytes[KT_TYPE_COUNT];
    uint64_t total_bytes, total_elements;
    bool runs;          /* kiln_model_load accepts the file */
    int64_t n_expert, n_expert_used;   /* experts per layer, used per token (0: dense) */
    int64_t n_params, n_params_active; /* of a file kiln runs: parameters, and those one token reads */
    size_t size_active;                /* the bytes one token reads */
    char why_not[256];  /* its error when not */
};

static void summarize(const char *path, const struct gguf_file *g, struct summary *s) {
    memset(s, 0, sizeof *s);
    /* the runtime's own loader decides: architecture row, hyper-parameters, every tensor */
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), s->why_not, sizeof s->why_not);
    s->runs = m != NULL;
    if (m) {
        kiln_model_experts(m, &s->n_expert, &s->n_expert_used);
        s->n_params = kiln_model_n_params(m);
        s->n_params_active = kiln_model_n_params_active(m);
        s->size_active = kiln_model_size_active(m);
    }
    kiln_model_free(m);
    s->has_arch = gguf_get_str(g, "general.architecture", &s->arch);
    s->has_name = gguf_get_str(g, "general.name", &s->name);
    s->has_tok_model = gguf_get_str(g, "tokenizer.ggml.model", &s->tok_model);
    int64_t tk = gguf_find_key(g, "tokenizer.ggml.tokens");
    s->vocab = tk >= 0 && gguf_kv_type(g, tk) == GGUF_TYPE_ARRAY ? (int64_t)gguf_arr_n(g, tk) : -1;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        s->count[t->type]++;
        s->bytes[t->type] += t->size;
        s->total_bytes += t->size;
        s->total_elements += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
}

/* Is key one of the architecture's hyper-parameters ("<arch>.")? */
static bool is_hparam(const struct summary *s, struct gguf_str key) {
    return s->has_arch && key.len > s->arch.len && key.ptr[s->arch.len] == '.' &&
           memcmp(key.ptr, s->arch.ptr, (size_t)s->arch.len) == 0;
}

static void human_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024)
        snprintf(buf, n, "%.2f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%llu B", (unsigned long long)b);
}

/* A key as a C string for the getters (keys are counted strings in the file). */
static char *key_cstr(struct gguf_str k) {
    char *s = malloc((size_t)k.len + 1);
    if (s) {
        memcpy(s, k.ptr, (size_t)k.len);
        s[k.len] = 0;
    }
    return s;
}

static void print_kv_line(FILE *f, const struct gguf_file *g, int64_t i) {
    struct gguf_str k = gguf_key(g, i);
    char *key = key_cstr(k);
    if (!key) return;
    fputs("  ", f);
    text_name(f, k.ptr, k.len);
    fputs(" = ", f);
    print_value(f, g, i, key, false);
    fputc('\n', f);
    free(key);
}

static void print_text(FILE *f, const char *path, const struct gguf_file *g, const struct summary *s,
                       bool tensors) {
    char hb[32];
    fprintf(f, "file: %s\n", path);
    if (gguf_legacy_format(g)) /* no GGUF header of its own: say what it is */
        fprintf(f, "legacy %s file, read as GGUF in memory (tensor offsets are the file's own)\n",
                gguf_legacy_format(g));
    else
        fprintf(f, "gguf version %u, %zu bytes, alignment %zu, data section at byte %zu\n", gguf_version(g),
                gguf_size(g), gguf_alignment(g), gguf_data_offset(g));
    fputs("architecture: ", f);
    if (s->has_arch)
        print_str(f, s->arch, false);
    else
        fputs("(none)", f);
    fprintf(f, "\nkiln runs it: %s%s", s->runs ? "yes" : "no: ", s->runs ? "" : s->why_not);
    if (s->runs && s->n_expert > 0) {
        human_bytes(hb, sizeof hb, s->size_active);
        fprintf(f, "\nexperts: %lld per layer, %lld used per token; parameters %.2f M, active per token %.2f M (%s)",
                (long long)s->n_expert, (long long)s->n_expert_used, (double)s->n_params / 1e6,
                (double)s->n_params_active / 1e6, hb);
    }
    fputs("\nname: ", f);
    if (s->has_name)
        print_str(f, s->name, false);
    else
        fputs("(none)", f);
    fputs("\ntokenizer: ", f);
    if (s->has_tok_model)
        print_str(f, s->tok_model, false);
    else
        fputs("(none)", f);
    if (s->vocab >= 0) fprintf(f, ", %lld tokens", (long long)s->vocab);
    fputs("\nhyper-parameters:\n", f);
    for (int64_t i = 0; i < gguf_n_kv(g); i++)
        if (is_hparam(s, gguf_key(g, i))) print_kv_line(f, g, i);
    fputs("other metadata:\n", f);
    for (int64_t i = 0; i < gguf_n_kv(g); i++)
        if (!is_hparam(s, gguf_key(g, i))) print_kv_line(f, g, i);
    human_bytes(hb, sizeof hb, s->total_bytes);
    fprintf(f, "tensors: %lld, %llu elements, %llu bytes (%s)\n", (long long)gguf_n_tensors(g),
            (unsigned long long)s->total_elements, (unsigned long long)s->total_bytes, hb);
    for (int t = 0; t < KT_TYPE_COUNT; t++) {
        if (!s->count[t]) continue;
        human_bytes(hb, sizeof hb, s->bytes[t]);
        fprintf(f, "  %-8s %6lld tensors  %s\n", kt_type_name((enum kt_type)t), (long long)s->count[t], hb);
    }
    if (!tensors) return;
    fprintf(f, "%6s  %-40s %-28s %-8s %12s\n", "#", "name", "shape", "type", "offset");
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        char shape[128];
        int n = 0;
        for (int d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, d ? " x %lld" : "%lld", (long long)t->ne[d]);
        fprintf(f, "%6lld  ", (long long)i);
        text_name(f, t->name.ptr, t->name.len);
        fprintf(f, "%*s %-28s %-8s %12llu\n", t->name.len < 40 ? 40 - (int)t->name.len : 0, "", shape,
                kt_type_name(t->type), (unsigned long long)t->offset);
    }
}

static void json_opt_str(FILE *f, bool has, struct gguf_str s) {
    if (has)
        json_text(f, s.ptr, (size_t)s.len);
    else
        fputs("null", f);
}

static void print_json(FILE *f, const char *path, const struct gguf_file *g, const struct summary *s,
                       bool tensors) {
    fputs("{\"file\": ", f);
    json_text(f, path, strlen(path));
    fprintf(f, ", \"version\": %u, \"file_size\": %zu, \"alignment\": %zu, \"data_offset\": %zu",
            gguf_version(g), gguf_size(g), gguf_alignment(g), gguf_data_offset(g));
    if (gguf_legacy_format(g)) fprintf(f, ", \"legacy\": \"%s\"", gguf_legacy_format(g));
    fputs(",\n \"architecture\": ", f);
    json_opt_str(f, s->has_arch, s->arch);
    fprintf(f, ", \"runnable\": %s, \"not_runnable_because\": ", s->runs ? "true" : "false");
    if (s->runs)
        fputs("null", f);
    else
        json_text(f, s->why_not, strlen(s->why_not));
    if (s->runs)
        fprintf(f, ", \"n_expert\": %lld, \"n_expert_used\": %lld, \"n_params\": %lld, \"n_params_active\": %lld, "
                   "\"size_active\": %zu",
                (long long)s->n_expert, (long long)s->n_expert_used, (long long)s->n_params,
                (long long)s->n_params_active, s->size_active);
    fputs(", \"name\": ", f);
    json_opt_str(f, s->has_name, s->name);
    fputs(",\n \"tokenizer\": {\"model\": ", f);
    json_opt_str(f, s->has_tok_model, s->tok_model);
    fputs(", \"vocab_size\": ", f);
    if (s->vocab >= 0)
        fprintf(f, "%lld}", (long long)s->vocab);
    else
        fputs("null}", f);
    fputs(",\n \"hparams\": {", f);
    bool first = true;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        struct gguf_str k = gguf_key(g, i);
        if (!is_hparam(s, k)) continue;
        char *key = key_cstr(k);
        if (!key) continue;
        fputs(first ? "" : ", ", f);
        first = false;
        json_text(f, k.ptr, (size_t)k.len);
        fputs(": ", f);
        print_value(f, g, i, key, true);
        free(key);
    }
    fprintf(f, "},\n \"n_kv\": %lld, \"n_tensors\": %lld, \"n_elements\": %llu, \"tensor_bytes\": %llu",
            (long long)gguf_n_kv(g), (long long)gguf_n_tensors(g), (unsigned long long)s->total_elements,
            (unsigned long long)s->total_bytes);
    fputs(",\n \"tensor_types\": {", f);
    first = true;
    for (int t = 0; t < KT_TYPE_COUNT; t++) {
        if (!s->count[t]) continue;
        fprintf(f, "%s\"%s\": {\"count\": %lld, \"bytes\": %llu}", first ? "" : ", ",
                kt_type_name((enum kt_type)t), (long long)s->count[t], (unsigned long long)s->bytes[t]);
        first = false;
    }
    fputs("},\n \"metadata\": {", f);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        struct gguf_str k = gguf_key(g, i);
        char *key = key_cstr(k);
        if (!key) continue;
        fputs(i ? ",\n  " : "\n  ", f);
        json_text(f, k.ptr, (size_t)k.len);
        fprintf(f, ": {\"type\": \"%s\", \"value\": ", gguf_type_name(gguf_kv_type(g, i)));
        print_value(f, g, i, key, true);
        fputc('}', f);
        free(key);
    }
    fputc('}', f);
    if (tensors) {
        fputs(",\n \"tensors\": [", f);
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor_info *t = gguf_tensor(g, i);
            fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
            json_text(f, t->name.ptr, (size_t)t->name.len);
            fputs(", \"shape\": [", f);
            for (int d = 0; d < t->n_dims; d++) fprintf(f, d ? ", %lld" : "%lld", (long long)t->ne[d]);
            fprintf(f, "], \"type\": \"%s\", \"offset\": %llu, \"size\": %zu}", kt_type_name(t->type),
                    (unsigned long long)t->offset, t->size);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}

/* ---- dump */

static int dump_tensor(const struct gguf_file *g, const char *path, const char *name, const char *out) {
    int64_t ti = gguf_find_tensor(g, name);
    if (ti < 0) {
        fprintf(stderr, "kiln %s: %s: no tensor named '%s'\n", CMD, path, name);
        return EXIT_RUNTIME;
    }
    const struct gguf_tensor_info *t = gguf_tensor(g, ti);
    const struct kt_type_traits *tr = kt_get_type_traits(t->type);
    if (t->type != KT_TYPE_F32 && (!tr || !tr->to_float)) {
        fprintf(stderr, "kiln %s: no dequantizer for type %s (tensor '%s')\n", CMD, kt_type_name(t->type),
                name);
        return EXIT_RUNTIME;
    }
    int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t row_bytes = kt_row_size(t->type, ne0);
    float *buf = malloc((size_t)ne0 * sizeof *buf);
    char err[1024];
    struct gguf_outfile of;
    if (!buf) {
        fprintf(stderr, "kiln %s: out of memory\n", CMD);
        return EXIT_RUNTIME;
    }
    /* never onto the model itself: the dump would replace it */
    if (!gguf_outfile_open(&of, out, path, err, sizeof err)) {
        fprintf(stderr, "kiln %s: %s\n", CMD, err);
        free(buf);
        return EXIT_RUNTIME;
    }
    bool ok = true;
    int e = 0;
    for (int64_t r = 0; ok && r < rows; r++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r * row_bytes;
        if (t->type == KT_TYPE_F32)
            memcpy(buf, src, row_bytes); /* unaligned in the mapping: copy */
        else
            tr->to_float(src, buf, ne0);
        errno = 0;
        ok = fwrite(buf, sizeof *buf, (size_t)ne0, of.f) == (size_t)ne0;
        e = errno;
    }
    free(buf);
    if (!ok || !gguf_outfile_commit(&of, err, sizeof err)) {
        if (!ok) snprintf(err, sizeof err, "cannot write %s: %s", out, e ? strerror(e) : "write error");
        gguf_outfile_abort(&of);
        fprintf(stderr, "kiln %s: %s\n", CMD, err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

int cmd_info(int argc, char **argv) {
    const char *model = NULL, *tensor = NULL, *dump = NULL;
    bool json = false, tensors = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = tool_arg_path(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--tensor")) {
            if (!(tensor = tool_arg_value(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--dump")) {
            if (!(dump = tool_arg_path(CMD, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--tensors")) {
            tensors = true;
        } else {
            return tool_usage_error(CMD, "unknown argument '%s'", a);
        }
    }
    if (!model) return tool_usage_error(CMD, "-m FILE is required");
    if (!tensor != !dump) return tool_usage_error(CMD, "--tensor NAME and --dump OUT.f32 go together");
    if (dump && (json || tensors))
        return tool_usage_error(CMD, "--dump does not combine with --json or --tensors");

    char err[1024];
    struct gguf_file *g = gguf_open(model, err, sizeof err);
    if (!g) {
        fprintf(stderr, "kiln %s: %s: %s\n", CMD, model, err);
        return EXIT_RUNTIME;
    }
    if (gguf_legacy_format(g)) tool_legacy_note(CMD, model);
    int rc = EXIT_OK;
    if (dump) {
        rc = dump_tensor(g, model, tensor, dump);
    } else {
        struct summary s;
        summarize(model, g, &s);
        if (json)
            print_json(stdout, model, g, &s, tensors);
        else
            print_text(stdout, model, g, &s, tensors);
        if (fflush(stdout) != 0) rc = EXIT_RUNTIME;
    }
    gguf_close(g);
    return rc;
}
