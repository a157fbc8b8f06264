/*
 * pretok_custom.c - hand-written scanners for the pre-tokenizer patterns that
 * llama.cpp does not give to a regex engine. They repeat llama.cpp's decisions,
 * including where those differ from the regex they stand for (e.g. a run of
 * whitespace before a non-space keeps its last space for the next piece only
 * when something follows inside the same chunk).
 */
#include "pretok_custom.h"

#include <string.h>

enum kv_custom kv_custom_for(const char *rx) {
    if (!strcmp(rx, RX_GPT2)) return KV_CUSTOM_GPT2;
    if (!strcmp(rx, RX_LLAMA3) ||
        !strcmp(rx, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"))
        return KV_CUSTOM_LLAMA3;
    if (!strcmp(rx, RX_QWEN2)) return KV_CUSTOM_QWEN2;
    if (!strcmp(rx, RX_QWEN35)) return KV_CUSTOM_QWEN35;
    if (!strcmp(rx, "\\p{Han}+")) return KV_CUSTOM_KIMI_K2;
    if (!strcmp(rx, "\\p{AFMoE_digits}") || !strcmp(rx, "\\d{1,3}(?=(?:\\d{3})*\\b)")) return KV_CUSTOM_DIGITS3;
    if (!strcmp(rx, RX_NEWLINES)) return KV_CUSTOM_NEWLINES;
    return KV_CUSTOM_NONE;
}

#define OOR 0xFFFFFFFFu
#define WLN (KV_F_WHITESPACE | KV_F_LETTER | KV_F_NUMBER)

/* one chunk [a, b) of the code points */
struct chunk {
    const uint32_t *c;
    size_t a, b, prev;
    struct kv_pieces *out;
};

static inline uint32_t CP(const struct chunk *k, size_t i) { return i >= k->a && i < k->b ? k->c[i] : OOR; }
static inline uint16_t FL(const struct chunk *k, size_t i) {
    return i >= k->a && i < k->b ? kv_cpt_flags(k->c[i]) : 0;
}
static inline bool emit(struct chunk *k, size_t end) {
    size_t len = end - k->prev;
    k->prev = end;
    return kv_pieces_push(k->out, len);
}
static inline bool is_rn(uint32_t c) { return c == '\r' || c == '\n'; }

static bool is_han(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0x2CEB0 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* 's 't 're 've 'm 'll 'd at pos: the length matched (0 if none) */
static size_t contraction(const struct chunk *k, size_t pos, bool fold) {
    if (CP(k, pos) != '\'' || pos + 1 >= k->b) return 0;
    uint32_t n1 = CP(k, pos + 1);
    if (fold) n1 = kv_tolower(n1);
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if (pos + 2 >= k->b) return 0;
    uint32_t n2 = CP(k, pos + 2);
    if (fold) n2 = kv_tolower(n2);
    if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
    return 0;
}

/* the whitespace tail shared by all scanners; with_rn: \s*[\r\n]+ comes first */
static bool whitespace(struct chunk *k, size_t *pos, bool with_rn) {
    size_t p = *pos, nws = 0, last_rn = 0;
    while (FL(k, p + nws) & KV_F_WHITESPACE) {
        if (is_rn(CP(k, p + nws))) last_rn = p + nws + 1;
        nws++;
    }
    if (with_rn && last_rn > 0) p = last_rn;
    else if (nws > 1 && p + nws < k->b) p += nws - 1; /* \s+(?!\S) leaves one space */
    else if (nws > 0) p += nws;
    else p++; /* nothing matched: one code point alone */
    *pos = p;
    return emit(k, p);
}

static bool scan_gpt2(struct chunk *k) {
    for (size_t pos = k->a; pos < k->b;) {
        uint32_t c = CP(k, pos);
        size_t n = contraction(k, pos, false);
        if (n) {
            pos += n;
            if (!emit(k, pos)) return false;
            continue;
        }
        uint16_t f2 = c == ' ' ? FL(k, pos + 1) : FL(k, pos);
        uint16_t want = (f2 & KV_F_LETTER) ? KV_F_LETTER : (f2 & KV_F_NUMBER) ? KV_F_NUMBER : 0;
        if (want) { /* ' ?\p{L}+' and ' ?\p{N}+' */
            pos += c == ' ';
            while (f2 & want) f2 = FL(k, ++pos);
            if (!emit(k, pos)) return false;
            continue;
        }
        if (!(f2 & WLN) && f2) { /* ' ?[^\s\p{L}\p{N}]+' */
            pos += c == ' ';
            while (!(f2 & WLN) && f2) f2 = FL(k, ++pos);
            if (!emit(k, pos)) return false;
            continue;
        }
        if (!whitespace(k, &pos, false)) return false;
    }
    return true;
}

/* llama3 (digits = 3), qwen2 (digits = 1), qwen3.5 (digits = 1, marks join words) */
static bool scan_llama3(struct chunk *k, int digits, bool marks) {
    const uint16_t word = KV_F_LETTER | (marks ? KV_F_MARK : 0);
    const uint16_t notother = WLN | (marks ? KV_F_MARK : 0);
    for (size_t pos = k->a; pos < k->b;) {
        uint32_t c = CP(k, pos);
        uint16_t f = FL(k, pos);
        size_t n = contraction(k, pos, true);
        if (n) {
            pos += n;
            if (!emit(k, pos)) return false;
            continue;
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(is_rn(c) || (f & KV_F_NUMBER)) && ((f & word) || (FL(k, pos + 1) & word))) {
            pos++;
            while (FL(k, pos) & word) pos++;
            if (!emit(k, pos)) return false;
            continue;
        }
        if (f & KV_F_NUMBER) { /* \p{N}{1,3} or \p{N} */
            size_t ini = pos;
            while (FL(k, pos) & KV_F_NUMBER) {
                if (++pos - ini >= (size_t)digits) {
                    if (!emit(k, pos)) return false;
                    ini = pos;
                }
            }
            if (!emit(k, pos)) return false;
            continue;
        }
        /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' (entered on the current code point's flags) */
        uint16_t f2 = c == ' ' ? FL(k, pos + 1) : f;
        if (!(f2 & notother) && f) {
            pos += c == ' ';
            while (!(f2 & notother) && f2) f2 = FL(k, ++pos);
            while (is_rn(CP(k, pos))) pos++;
            if (!emit(k, pos)) return false;
            continue;
        }
        if (!whitespace(k, &pos, true)) return false;
    }
    return true;
}

static bool scan_kimi(struct chunk *k) {
    for (size_t pos = k->a; pos < k->b;) {
        uint32_t c = CP(k, pos);
        uint16_t f = FL(k, pos);
        if (is_han(c)) { /* [\p{Han}]+ */
            while (is_han(CP(k, pos))) pos++;
            if (!emit(k, pos)) return false;
            continue;
        }
        bool lead_ok = !(is_rn(c) || (f & (KV_F_LETTER | KV_F_NUMBER)));
        if (((f & KV_F_LETTER) && !is_han(c)) || (lead_ok && (FL(k, pos + 1) & KV_F_LETTER) && !is_han(CP(k, pos + 1)))) {
            bool has_lead = false, has_letters = false;
            if (lead_ok) {
                has_lead = true;
                pos++;
            }
            while ((FL(k, pos) & KV_F_LETTER) && !is_han(CP(k, pos))) {
                has_letters = true;
                pos++;
            }
            if (has_letters || (!has_lead && (FL(k, pos) & KV_F_LETTER) && !is_han(CP(k, pos)))) {
                if (!has_letters) pos++;
                while ((FL(k, pos) & KV_F_LETTER) && !is_han(CP(k, pos))) pos++;
                pos += contraction(k, pos, true);
                if (!emit(k, pos)) return false;
                continue;
            }
            if (has_lead) pos--;
        }
        if (f & KV_F_NUMBER) {
            size_t ini = pos;
            while (FL(k, pos) & KV_F_NUMBER) {
                if (++pos - ini >= 3) {
                    if (!emit(k, pos)) return false;
                    ini = pos;
                }
            }
            if (!emit(k, pos)) return false;
            continue;
        }
        uint16_t f2 = c == ' ' ? FL(k, pos + 1) : f;
        if (!(f2 & WLN) && f2) {
            pos += c == ' ';
            while (!(f2 & WLN) && f2) f2 = FL(k, ++pos);
            while (is_rn(CP(k, pos))) pos++;
            if (!emit(k, pos)) return false;
            continue;
        }
        if (!whitespace(k, &pos, true)) return false;
    }
    return true;
}

/* Digit runs in groups of three from the right; what precedes a run joins its
 * first group (llama.cpp's afmoe scanner does so). */
static bool scan_digits3(struct chunk *k) {
    for (size_t pos = k->a; pos < k->b;) {
        if (!(FL(k, pos) & KV_F_NUMBER)) {
            pos++;
            continue;
        }
        size_t start = pos;
        while (pos < k->b && (FL(k, pos) & KV_F_NUMBER)) pos++;
        size_t cnt = pos - start, cur = start, rem = cnt % 3;
        if (rem > 0) {
            cur += rem;
            if (!emit(k, cur)) return false;
        }
        while (cur < start + cnt) {
            cur += 3;
            if (!emit(k, cur)) return false;
        }
    }
    return k->prev < k->b ? emit(k, k->b) : true;
}

static bool scan_newlines(struct chunk *k) {
    for (size_t pos = k->a; pos < k->b;) {
        bool nl = k->c[pos] == '\n';
        while (pos < k->b && (k->c[pos] == '\n') == nl) pos++;
        if (!emit(k, pos)) return false;
    }
    return true;
}

bool kv_custom_split(enum kv_custom kind, const uint32_t *cpts, const struct kv_pieces *in, struct kv_pieces *out) {
    size_t start = 0;
    for (size_t i = 0; i < in->n; i++) {
        struct chunk k = {cpts, start, start + in->len[i], start, out};
        start = k.b;
        bool ok = false;
        switch (kind) {
        case KV_CUSTOM_GPT2: ok = scan_gpt2(&k); break;
        case KV_CUSTOM_LLAMA3: ok = scan_llama3(&k, 3, false); break;
        case KV_CUSTOM_QWEN2: ok = scan_llama3(&k, 1, false); break;
        case KV_CUSTOM_QWEN35: ok = scan_llama3(&k, 1, true); break;
        case KV_CUSTOM_KIMI_K2: ok = scan_kimi(&k); break;
        case KV_CUSTOM_DIGITS3: ok = scan_digits3(&k); break;
        case KV_CUSTOM_NEWLINES: ok = scan_newlines(&k); break;
        case KV_CUSTOM_NONE: break;
        }
        if (!ok) return false;
    }
    return true;
}
