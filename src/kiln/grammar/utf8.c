/*
 * utf8.c - code points and their UTF-8 bytes for the grammar compiler: a range
 * of code points becomes a few byte-range sequences (so that the automata work
 * on bytes, as tokens are bytes), plus strict encode/decode.
 */
#include "grammar_impl.h"

int gutf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int gutf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

/* [lo, hi] of one encoded length: split where the trailing bytes would not
 * cover their whole range, until each piece is a product of byte ranges. */
static bool split(uint32_t lo, uint32_t hi, bool (*fn)(const struct gutf8_seq *, void *), void *data) {
    int n = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) return split(lo, lo | m, fn, data) && split((lo | m) + 1, hi, fn, data);
            if ((hi & m) != m) return split(lo, (hi & ~m) - 1, fn, data) && split(hi & ~m, hi, fn, data);
        }
    }
    struct gutf8_seq s;
    uint8_t a[4], b[4];
    s.n = gutf8_encode(lo, a);
    gutf8_encode(hi, b);
    for (int i = 0; i < s.n; i++) {
        s.lo[i] = a[i];
        s.hi[i] = b[i];
    }
    return fn(&s, data);
}

bool gutf8_ranges(uint32_t lo, uint32_t hi, bool (*fn)(const struct gutf8_seq *s, void *data), void *data) {
    static const uint32_t bounds[][2] = {
        {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF},
    };
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        uint32_t a = lo > bounds[k][0] ? lo : bounds[k][0];
        uint32_t b = hi < bounds[k][1] ? hi : bounds[k][1];
        if (a <= b && !split(a, b, fn, data)) return false;
    }
    return true;
}
