/*
 * cursor.c - the bounds-checked cursor that both readers (reader.c for GGUF,
 * legacy.c for GGML/GGMF/GGJT) walk untrusted bytes with: every read checks the
 * bytes left first, and every failure names the problem and its byte offset.
 */
#include "gguf_impl.h"

bool gguf_cur_fail(struct gguf_cursor *c, size_t at, const char *fmt, ...) {
    char msg[GGUF_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    gguf_vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gguf_fmt(c->err, c->errlen, "%s at byte %zu", msg, at);
    return false;
}

size_t gguf_cur_left(const struct gguf_cursor *c) {
    return c->size - c->pos;
}

bool gguf_cur_need(struct gguf_cursor *c, size_t n, const char *what) {
    if (gguf_cur_left(c) < n)
        return gguf_cur_fail(c, c->pos, "truncated: %s needs %zu bytes but only %zu remain", what, n,
                             gguf_cur_left(c));
    return true;
}

uint32_t gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t gguf_le64(const uint8_t *p) {
    return (uint64_t)gguf_le32(p) | (uint64_t)gguf_le32(p + 4) << 32;
}

bool gguf_cur_u32(struct gguf_cursor *c, uint32_t *v, const char *what) {
    if (!gguf_cur_need(c, 4, what)) return false;
    *v = gguf_le32(c->base + c->pos);
    c->pos += 4;
    return true;
}

bool gguf_cur_u64(struct gguf_cursor *c, uint64_t *v, const char *what) {
    if (!gguf_cur_need(c, 8, what)) return false;
    *v = gguf_le64(c->base + c->pos);
    c->pos += 8;
    return true;
}

bool gguf_cur_str(struct gguf_cursor *c, struct gguf_str *s, const char *what) {
    size_t at = c->pos;
    uint64_t len;
    if (!gguf_cur_u64(c, &len, what)) return false;
    if (len > gguf_cur_left(c))
        return gguf_cur_fail(c, at, "%s length %llu exceeds the %zu bytes left in the file", what,
                             (unsigned long long)len, gguf_cur_left(c));
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

const char *gguf_printable(struct gguf_str s, char *buf, size_t n) {
    size_t m = s.len < n - 4 ? (size_t)s.len : n - 4, i;
    for (i = 0; i < m; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (m < s.len) buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
    buf[i] = 0;
    return buf;
}
