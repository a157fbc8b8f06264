/*
 * utf8.c - strict UTF-8 validation (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF) for the reader's keys and tensor names, and for the
 * tools that must not pass invalid bytes to JSON or a terminal.
 */
#include "gguf.h"

size_t gguf_utf8_seq(const char *p, size_t i, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n - i || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[i + k] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0))) return 0;
    if (len == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90))) return 0;
    return len;
}

size_t gguf_utf8_valid_len(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len = gguf_utf8_seq(s, i, n);
        if (!len) break;
        i += len;
    }
    return i;
}
