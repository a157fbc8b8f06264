/*
 * unicode.c - UTF-8 decoding with llama.cpp's error rule, lowercase and NFD
 * lookups over unicode_data.c's tables, the GPT-2 byte<->code point mapping,
 * and the small growable buffers the tokenizers use for per-call scratch.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

uint32_t kv_utf8_decode(const char *s, size_t n, size_t *adv) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    if (!(c & 0x80)) {
        *adv = 1;
        return c;
    }
    /* a lone continuation byte, or a sequence cut short / broken: one U+FFFD per byte */
    if (!(c & 0x40)) goto bad;
    if (!(c & 0x20)) {
        if (n < 2 || (u[1] & 0xc0) != 0x80) goto bad;
        *adv = 2;
        return ((uint32_t)(c & 0x1f) << 6) | (u[1] & 0x3f);
    }
    if (!(c & 0x10)) {
        if (n < 3 || (u[1] & 0xc0) != 0x80 || (u[2] & 0xc0) != 0x80) goto bad;
        *adv = 3;
        return ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
    }
    if (!(c & 0x08)) {
        if (n < 4 || (u[1] & 0xc0) != 0x80 || (u[2] & 0xc0) != 0x80 || (u[3] & 0xc0) != 0x80) goto bad;
        uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) |
                      ((uint32_t)(u[2] & 0x3f) << 6) | (u[3] & 0x3f);
        /* llama.cpp decodes these but cannot encode them again (it throws);
         * kiln makes them U+FFFD so that every later step stays defined */
        if (cp > 0x10ffff) goto bad;
        *adv = 4;
        return cp;
    }
bad:
    *adv = 1;
    return 0xfffd;
}

size_t kv_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | ((cp >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

uint32_t *kv_utf8_to_cpts(const char *s, size_t n, size_t *n_out) {
    uint32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        c[k++] = kv_utf8_decode(s + i, n - i, &adv);
        i += adv;
    }
    *n_out = k;
    return c;
}

uint32_t kv_tolower(uint32_t cp) {
    size_t lo = 0, hi = kv_lower_map_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (kv_lower_map[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < kv_lower_map_n && kv_lower_map[lo][0] == cp ? kv_lower_map[lo][1] : cp;
}

uint32_t kv_nfd_first(uint32_t cp) {
    /* last range starting at or before cp */
    size_t lo = 0, hi = kv_nfd_ranges_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (kv_nfd_ranges[mid][0] <= cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return cp;
    const uint32_t *r = kv_nfd_ranges[lo - 1];
    return cp <= r[1] ? r[2] : cp;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 bytes to U+0100.. in byte order. */
static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t kv_byte_to_cpt(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* the unprintable bytes in order: 0x00-0x20, 0x7f-0xa0, 0xad */
    unsigned n = b <= 0x20 ? b : b <= 0xa0 ? 33u + (b - 0x7fu) : 67u;
    return 0x100 + n;
}

int kv_cpt_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t n = cp - 0x100;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7f + n - 33);
    return n == 67 ? 0xad : -1;
}

bool kv_buf_put(struct kv_buf *b, const void *data, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool kv_ids_push(struct kv_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->p, cap * sizeof *p);
        if (!p) return false;
        a->p = p;
        a->cap = cap;
    }
    a->p[a->n++] = id;
    return true;
}
