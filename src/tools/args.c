/* args.c - strict command-line value parsing and small output helpers shared by subcommands. */
#include "tools.h"

#include "gguf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The whole string as a finite number. */
static bool parse_finite(const char *s, double *v) {
    char *end = NULL;
    errno = 0;
    *v = s ? strtod(s, &end) : 0;
    return s && *s && !*end && errno != ERANGE && isfinite(*v);
}

static bool bad_number(const char *cmd, const char *flag, const char *s, double lo, double hi) {
    fprintf(stderr, "kiln %s: invalid value '%s' for %s: expected a number in [%g, %g]\n", cmd, s ? s : "", flag,
            lo, hi);
    return false;
}

bool tool_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    double v;
    if (!parse_finite(s, &v) || v < lo || v > hi) return bad_number(cmd, flag, s, lo, hi);
    *out = v;
    return true;
}

bool tool_parse_f32(const char *cmd, const char *flag, const char *s, float lo, float hi, float *out) {
    /* checked as the float it becomes: the bounds are floats, and 0.001 as a double is
     * below 0.001f, so a double comparison would refuse the printed lower bound */
    double v;
    if (!parse_finite(s, &v)) return bad_number(cmd, flag, s, lo, hi);
    float f = (float)v;
    if (!isfinite(f) || f < lo || f > hi) return bad_number(cmd, flag, s, lo, hi);
    *out = f;
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

const char *tool_arg_path(const char *cmd, int argc, char **argv, int *i) {
    const char *v = tool_arg_value(cmd, argc, argv, i);
    if (v && !*v) {
        tool_usage_error(cmd, "%s needs a file name, not an empty string", argv[*i - 1]);
        return NULL;
    }
    return v;
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

void tool_file_error(const char *cmd, const char *path, const char *err) {
    if (path && *path && !strstr(err, path)) fprintf(stderr, "kiln %s: %s: %s\n", cmd, path, err);
    else fprintf(stderr, "kiln %s: %s\n", cmd, err);
}

char *tool_read_file(const char *cmd, const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kiln %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    /* read in growing steps up to max + 1 bytes: a pipe or /dev/zero has no size to trust */
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    bool too_big = false;
    while (buf) {
        size_t want = cap - n - 1;
        if (want > max + 1 - n) want = max + 1 - n;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (n > max) {
            too_big = true;
            break;
        }
        if (got < want) break;
        if (n + 1 < cap) continue;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int e = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf || e || too_big) {
        if (too_big)
            fprintf(stderr, "kiln %s: %s is larger than the %zu MiB limit for a text input\n", cmd, path,
                    max >> 20);
        else
            fprintf(stderr, "kiln %s: cannot read %s: %s\n", cmd, path, strerror(e ? e : ENOMEM));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool tool_text_has_nul(const char *cmd, const char *what, const char *s, size_t len) {
    const char *z = memchr(s, 0, len);
    if (!z) return false;
    fprintf(stderr, "kiln %s: %s holds a NUL byte at offset %zu: not text\n", cmd, what, (size_t)(z - s));
    return true;
}

/* JSON text must be UTF-8: bytes that are not (a piece of a character cut by a token
 * boundary, a damaged file) become U+FFFD rather than invalid JSON. */
void tool_json_str(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = gguf_utf8_seq(s, i, len);
        if (!n) {
            fputs("\xef\xbf\xbd", f);
            i++;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
            else fwrite(s + i, 1, n, f);
        }
        i += n;
    }
    fputc('"', f);
}

void tool_text_init(struct tool_text_out *t, FILE *f) {
    t->f = f;
    t->tty = isatty(fileno(f)) != 0;
    t->held = 0;
}

void tool_text_write(struct tool_text_out *t, const char *s, size_t len) {
    if (!t->tty) {
        fwrite(s, 1, len, t->f);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (t->held) { /* C2 80..C2 9F encode the C1 controls */
            t->held = 0;
            if (c >= 0x80 && c <= 0x9f) {
                fprintf(t->f, "\\xc2\\x%02x", c);
                continue;
            }
            fputc(0xc2, t->f);
        }
        if (c == 0xc2) t->held = c;
        else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == 0x9b) fprintf(t->f, "\\x%02x", c);
        else fputc(c, t->f);
    }
}

void tool_text_flush(struct tool_text_out *t) {
    if (t->held) fputc(t->held, t->f);
    t->held = 0;
    fflush(t->f);
}
