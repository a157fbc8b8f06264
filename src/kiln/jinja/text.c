/*
 * text.c - UTF-8 for the interpreter: decoding (bad bytes count as U+FFFD and
 * one byte, never read past the end), whitespace as JavaScript's \s sees it
 * (the reference engine's trim and split), trimming, case mapping for the
 * scripts with simple one-to-one case pairs, and substring search.
 */
#include <string.h>

#include "jinja_impl.h"

size_t ju_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) {
        *cp = 0xFFFD;
        return 1;
    }
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    size_t len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 0;
    if (len == 0 || len > n || u[0] > 0xF4) {
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t c = u[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = c;
    return len;
}

size_t ju_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ju_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; c++) {
        uint32_t cp;
        i += ju_decode(s + i, n - i, &cp);
    }
    return c;
}

static bool js_space(uint32_t c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

bool ju_space_at(const char *s, size_t n, size_t *len) {
    if (n == 0) return false;
    uint32_t cp;
    size_t l = ju_decode(s, n, &cp);
    if (!js_space(cp)) return false;
    *len = l;
    return true;
}

/* the code point that ends just before s[end] */
static size_t prev_len(const char *s, size_t end, uint32_t *cp) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
    size_t l = ju_decode(s + start, end - start, cp);
    if (start + l != end) { /* not one whole sequence: the last byte alone */
        *cp = 0xFFFD;
        return 1;
    }
    return l;
}

static bool in_chars(uint32_t cp, struct jv chars) {
    if (chars.k != JV_STR) return js_space(cp);
    for (size_t i = 0; i < chars.s.n;) {
        uint32_t c;
        i += ju_decode(chars.s.p + i, chars.s.n - i, &c);
        if (c == cp) return true;
    }
    return false;
}

struct jv ju_trim(struct jx *x, struct jv s, bool left, bool right, struct jv chars) {
    (void)x;
    size_t a = 0, b = s.s.n;
    while (left && a < b) {
        uint32_t cp;
        size_t l = ju_decode(s.s.p + a, b - a, &cp);
        if (!in_chars(cp, chars)) break;
        a += l;
    }
    while (right && b > a) {
        uint32_t cp;
        size_t l = prev_len(s.s.p, b, &cp);
        if (b - l < a || !in_chars(cp, chars)) break;
        b -= l;
    }
    return jv_str(s.s.p + a, b - a);
}

/* one-to-one case pairs: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic */
static uint32_t to_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 0 : (c & 1) == 1) return c - 1;
        return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static uint32_t to_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 1 : (c & 1) == 0) return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static bool ascii_word(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* 'u' upper, 'l' lower; 't' title and 'c' capitalize as the reference engine has them:
 * a word's first ASCII word character (or the string's first character) upper-cased,
 * the rest left as it is */
struct jv ju_case(struct jx *x, struct jv s, int mode) {
    char *out = jx_alloc(x, s.s.n * 2 + 1), *o = out;
    bool prev_word = false;
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        size_t l = ju_decode(s.s.p + i, s.s.n - i, &cp);
        uint32_t c = cp;
        if (mode == 'u')
            c = to_upper(cp);
        else if (mode == 'l')
            c = to_lower(cp);
        else if (mode == 't' && ascii_word(cp) && !prev_word)
            c = to_upper(cp);
        else if (mode == 'c' && i == 0)
            c = to_upper(cp);
        prev_word = ascii_word(cp);
        if (c == cp && cp != 0xFFFD) {
            memcpy(o, s.s.p + i, l);
            o += l;
        } else {
            o += ju_encode(c, o);
        }
        i += l;
    }
    *o = 0;
    return jv_str(out, (size_t)(o - out));
}

bool ju_find(const char *h, size_t hn, const char *n, size_t nn, size_t from, size_t *at) {
    if (from > hn) return false;
    if (nn == 0) {
        *at = from;
        return true;
    }
    for (size_t i = from; i + nn <= hn; i++) {
        const char *p = memchr(h + i, n[0], hn - nn + 1 - i);
        if (!p) return false;
        i = (size_t)(p - h);
        if (memcmp(p, n, nn) == 0) {
            *at = i;
            return true;
        }
    }
    return false;
}
