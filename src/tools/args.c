/* args.c - strict command-line value parsing and small output helpers shared by subcommands. */
#include "tools.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

bool tool_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "kiln %s: invalid value '%s' for %s: expected an integer in [%lld, %lld]\n", cmd,
                s ? s : "", flag, (long long)lo, (long long)hi);
        return false;
    }
    *out = v;
    return true;
}

bool tool_parse_int(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out) {
    int64_t v;
    if (!tool_parse_i64(cmd, flag, s, lo, hi, &v)) return false;
    *out = (int)v;
    return true;
}

bool tool_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "kiln %s: invalid value '%s' for %s: expected a number in [%g, %g]\n", cmd, s ? s : "",
                flag, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool tool_parse_f32(const char *cmd, const char *flag, const char *s, float lo, float hi, float *out) {
    double v;
    if (!tool_parse_f64(cmd, flag, s, lo, hi, &v)) return false;
    *out = (float)v;
    return true;
}

const char *tool_arg_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "kiln %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

int tool_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kiln %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'kiln %s --help')\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

char *tool_read_file(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kiln %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "kiln %s: cannot read %s\n", cmd, path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

void tool_json_str(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
    fputc('"', f);
}
