/*
 * schema_rules.c - grammar text the schema converter builds from pieces: a
 * growable string, GBNF literals and class characters, numbers within bounds
 * (decimal digit ranges, no leading zeros), and the string formats kiln knows.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

/* ------------------------------------------------------------------ strings */

void sb_add(struct sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void sb_str(struct sb *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_printf(struct sb *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

void sb_free(struct sb *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

void sb_literal(struct sb *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_add(b, "\\\"", 2);
        else if (c == '\\') sb_add(b, "\\\\", 2);
        else if (c == '\n') sb_add(b, "\\n", 2);
        else if (c == '\r') sb_add(b, "\\r", 2);
        else if (c == '\t') sb_add(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&s[i], 1);
    }
    sb_add(b, "\"", 1);
}

void sb_class_char(struct sb *b, uint32_t cp) {
    if (cp == '\\' || cp == ']' || cp == '-' || cp == '[' || cp == '"') {
        sb_printf(b, "\\%c", (char)cp);
    } else if (cp == '^') {
        sb_str(b, "\\x5E");
    } else if (cp < 0x20 || cp == 0x7F) {
        sb_printf(b, "\\x%02X", cp);
    } else if (cp < 0x80) {
        char c = (char)cp;
        sb_add(b, &c, 1);
    } else if (cp < 0x10000) {
        sb_printf(b, "\\u%04X", cp);
    } else {
        sb_printf(b, "\\U%08X", cp);
    }
}

/* ------------------------------------------------------------------ numbers in a range */

/* decimal digit strings of equal length n, a <= b: the numbers between them */
static void same_len(struct sb *o, const char *a, const char *b, int n) {
    int p = 0;
    while (p < n && a[p] == b[p]) p++;
    if (p > 0) sb_literal(o, a, (size_t)p);
    if (p == n) return;
    if (p > 0) sb_str(o, " ");
    a += p, b += p, n -= p;
    if (n == 1) {
        sb_printf(o, "[%c-%c]", a[0], b[0]);
        return;
    }
    bool lo_zeros = true, hi_nines = true;
    for (int i = 1; i < n; i++) lo_zeros &= a[i] == '0', hi_nines &= b[i] == '9';
    char from = lo_zeros ? a[0] : (char)(a[0] + 1), to = hi_nines ? b[0] : (char)(b[0] - 1);
    bool first = true;
    sb_str(o, "(");
    if (!lo_zeros) {
        char nines[24];
        memset(nines, '9', (size_t)(n - 1));
        sb_printf(o, "[%c] (", a[0]);
        same_len(o, a + 1, nines, n - 1);
        sb_str(o, ")");
        first = false;
    }
    if (from <= to) {
        sb_printf(o, "%s[%c-%c] [0-9]{%d}", first ? "" : " | ", from, to, n - 1);
        first = false;
    }
    if (!hi_nines) {
        char zeros[24];
        memset(zeros, '0', (size_t)(n - 1));
        sb_printf(o, "%s[%c] (", first ? "" : " | ", b[0]);
        same_len(o, zeros, b + 1, n - 1);
        sb_str(o, ")");
    }
    sb_str(o, ")");
}

/* the canonical decimals (no leading zero) of the integers in [s, e], 0 <= s <= e */
static void uint_range(struct sb *o, uint64_t s, uint64_t e) {
    char a[24], z[24];
    int ls = snprintf(a, sizeof a, "%llu", (unsigned long long)s), le = snprintf(z, sizeof z, "%llu", (unsigned long long)e);
    sb_str(o, "(");
    for (int d = ls; d <= le; d++) {
        char lo[24], hi[24];
        if (d == ls) memcpy(lo, a, (size_t)d + 1);
        else lo[0] = '1', memset(lo + 1, '0', (size_t)d - 1), lo[d] = 0;
        if (d == le) memcpy(hi, z, (size_t)d + 1);
        else memset(hi, '9', (size_t)d), hi[d] = 0;
        if (d > ls) sb_str(o, " | ");
        bool full = d > 1 && lo[0] == '1' && strspn(lo + 1, "0") == (size_t)d - 1 && strspn(hi, "9") == (size_t)d;
        if (!full) {
            same_len(o, lo, hi, d);
            continue;
        }
        /* every number of d .. d2 digits: one repetition */
        int d2 = d;
        while (d2 + 1 < le || (d2 + 1 == le && strspn(z, "9") == (size_t)le)) d2++;
        sb_printf(o, "[1-9] [0-9]{%d,%d}", d - 1, d2 - 1);
        d = d2;
    }
    sb_str(o, ")");
}

/* Is v = I + f (I integer >= 0, f in [0, 1), f > 0 when frac) within [lo, hi]? */
static bool fits(int64_t I, bool frac, struct nbound lo, struct nbound hi) {
    /* compare I + f with an integer bound b: below when I < b, equal when I == b and !frac */
    if (lo.set) {
        if (I < lo.v) return false;
        if (I == lo.v && !frac && lo.excl) return false;
    }
    if (hi.set) {
        if (I > hi.v) return false;
        if (I == hi.v && (frac || hi.excl)) return false;
    }
    return true;
}

#define UNBOUNDED_DIGITS 16 /* as llama.cpp: at most 16 digits where no bound limits them */

/* The non-negative magnitudes I(.F)? with lo <= value <= hi, as alternatives added
 * to o (separated by " | "); returns how many were added. */
static int magnitudes(struct sb *o, struct nbound lo, struct nbound hi, bool integer, const char *sign, int added) {
    /* breakpoints split I >= 0 into segments where fits() is the same for every I */
    int64_t cuts[6];
    int nc = 0;
    cuts[nc++] = 0;
    const struct nbound bs[2] = {lo, hi};
    for (int k = 0; k < 2; k++)
        if (bs[k].set) {
            if (bs[k].v >= 0) cuts[nc++] = bs[k].v;
            if (bs[k].v >= -1 && bs[k].v < INT64_MAX) cuts[nc++] = bs[k].v + 1;
        }
    for (int i = 0; i < nc; i++) /* sort, unique */
        for (int j = i + 1; j < nc; j++)
            if (cuts[j] < cuts[i]) {
                int64_t t = cuts[i];
                cuts[i] = cuts[j];
                cuts[j] = t;
            }
    int m = 0;
    for (int i = 0; i < nc; i++)
        if (m == 0 || cuts[i] != cuts[m - 1]) cuts[m++] = cuts[i];
    uint64_t cap = 9999999999999999ull; /* 16 digits */
    for (int i = 0; i < m; i++) {
        int64_t s = cuts[i];
        uint64_t e = i + 1 < m ? (uint64_t)cuts[i + 1] - 1 : 0;
        if (i + 1 == m) { /* no upper end: 16 digits, or as many as s has */
            if ((uint64_t)s <= cap) {
                e = cap;
            } else {
                e = 1;
                for (uint64_t t = (uint64_t)s; t; t /= 10) e *= 10;
                e -= 1;
            }
        }
        bool whole = fits(s, false, lo, hi), part = !integer && fits(s, true, lo, hi);
        if (!whole && !part) continue;
        sb_printf(o, "%s%s", added++ ? " | " : "", sign);
        uint_range(o, (uint64_t)s, e);
        if (part && whole) sb_str(o, " (\".\" [0-9]{1,16})?");
        else if (part) sb_str(o, " \".\" [0-9]{0,15} [1-9]"); /* a fraction that is not zero */
        else if (!integer) sb_str(o, " (\".\" \"0\"{1,16})?");
    }
    return added;
}

bool number_range_gbnf(struct nbound lo, struct nbound hi, bool integer, struct sb *out, char *err, size_t errlen) {
    /* value >= 0: the magnitude itself; value <= 0: "-" and the magnitude within [-hi, -lo] */
    struct nbound nlo = {hi.set, hi.excl, hi.set ? -hi.v : 0}, nhi = {lo.set, lo.excl, lo.set ? -lo.v : 0};
    if ((lo.set && lo.v == INT64_MIN) || (hi.set && hi.v == INT64_MIN)) {
        snprintf(err, errlen, "a bound of -2^63 is out of range");
        return false;
    }
    sb_str(out, "(");
    int n = magnitudes(out, lo, hi, integer, "", 0);
    /* values <= 0 written with '-': "-0" too where 0 fits, as llama.cpp's grammars allow it */
    struct nbound pos = nlo;
    if (!pos.set || pos.v < 0) pos = (struct nbound){true, !lo.set, 0}; /* "-0" only beside a negative minimum */
    if (!lo.set || lo.v < 0) n = magnitudes(out, pos, nhi, integer, "\"-\" ", n);
    sb_str(out, ")");
    if (n == 0) {
        snprintf(err, errlen, "no %s lies within the bounds", integer ? "integer" : "number");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ formats */

#define HEX "[0-9a-fA-F]"
#define D09 "[0-9]"
#define DATE \
    D09 "{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))"
#define TIME \
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | [+\\-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"
#define EMAIL_ATOM "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\-]+"
#define LABEL "[a-zA-Z0-9] ([a-zA-Z0-9\\-]* [a-zA-Z0-9])?"
#define OCTET "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])"

static const struct {
    const char *name, *gbnf;
    int min_len, max_len; /* -1: no maximum */
} formats[] = {
    {"date", DATE, 10, 10},
    {"time", TIME, 9, 18},
    {"date-time", DATE " \"T\" " TIME, 20, 29},
    {"uuid", HEX "{8} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{12}", 36, 36},
    {"email", EMAIL_ATOM " (\".\" " EMAIL_ATOM ")* \"@\" (" LABEL " \".\")+ " LABEL, 5, -1},
    {"ipv4", OCTET " \".\" " OCTET " \".\" " OCTET " \".\" " OCTET, 7, 15},
};

const char *format_gbnf(const char *name, int *min_len, int *max_len) {
    /* uuid1 .. uuid5 are uuid, as llama.cpp takes them */
    if (!strncmp(name, "uuid", 4) && strlen(name) == 5 && name[4] >= '1' && name[4] <= '5') name = "uuid";
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(formats[i].name, name)) {
            *min_len = formats[i].min_len;
            *max_len = formats[i].max_len;
            return formats[i].gbnf;
        }
    return NULL;
}

const char *format_names(void) { return "date, time, date-time, uuid, email, ipv4"; }
