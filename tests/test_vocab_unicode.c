/*
 * test_vocab_unicode.c - the tokenizers' generated Unicode tables against an
 * independent source: PCRE2's own Unicode properties. For every code point
 * PCRE2 knows as assigned (its tables may be an older Unicode version than
 * the Unicode 15.1 that llama.cpp's and kiln's tables follow, so code points
 * it calls unassigned are skipped), kiln's category group must be PCRE2's.
 * Also: UTF-8 decoding follows llama.cpp's error rule, and the GPT-2 byte map
 * is a bijection onto its 256 characters.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "vocab/vocab_impl.h"
#include "testutil.h"

#include <pcre2.h>

int main(void) {
    static const struct {
        const char *rx;
        uint16_t flag;
    } groups[] = {{"\\p{L}", KV_F_LETTER}, {"\\p{N}", KV_F_NUMBER}, {"\\p{P}", KV_F_PUNCT}, {"\\p{S}", KV_F_SYMBOL},
                  {"\\p{M}", KV_F_MARK},   {"\\p{Z}", KV_F_SEPARATOR}, {"\\p{Cn}", KV_F_UNDEF}, {"\\p{C}", KV_F_CONTROL}};
    enum { NG = sizeof groups / sizeof groups[0] };
    pcre2_code *code[NG];
    pcre2_match_data *md[NG];
    for (int i = 0; i < NG; i++) {
        int ec;
        PCRE2_SIZE eo;
        code[i] = pcre2_compile((PCRE2_SPTR)groups[i].rx, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &ec, &eo, NULL);
        CHECK(code[i] != NULL);
        md[i] = pcre2_match_data_create_from_pattern(code[i], NULL);
    }
    int64_t compared = 0, mismatches = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xd800 && cp < 0xe000) continue; /* not encodable for PCRE2 */
        char u[4];
        size_t n = kv_utf8_encode(cp, u);
        int group = -1;
        for (int i = 0; i < NG && group < 0; i++)
            if (pcre2_match(code[i], (PCRE2_SPTR)u, n, 0, 0, md[i], NULL) > 0) group = i;
        if (group < 0 || groups[group].flag == KV_F_UNDEF) continue; /* unassigned in PCRE2's Unicode */
        compared++;
        uint16_t mine = kv_cpt_flags(cp) & KV_F_CATEGORIES;
        if (mine != groups[group].flag && mismatches++ < 10)
            fprintf(stderr, "U+%04X: kiln flags 0x%x, PCRE2 says %s\n", cp, mine, groups[group].rx);
    }
    CHECKF(mismatches == 0, "%lld of %lld code points differ", (long long)mismatches, (long long)compared);
    CHECKF(compared > 280000, "only %lld code points compared", (long long)compared);
    for (int i = 0; i < NG; i++) {
        pcre2_match_data_free(md[i]);
        pcre2_code_free(code[i]);
    }

    /* White_Space (PropList.txt) */
    static const uint32_t ws[] = {9, 10, 11, 12, 13, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2005, 0x200a, 0x2028, 0x2029,
                                  0x202f, 0x205f, 0x3000};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) CHECKF(kv_cpt_flags(ws[i]) & KV_F_WHITESPACE, "U+%04X", ws[i]);
    CHECK(!(kv_cpt_flags(0x200b) & KV_F_WHITESPACE) && !(kv_cpt_flags(0x180e) & KV_F_WHITESPACE));
    /* simple case and decomposition facts */
    CHECK(kv_tolower('A') == 'a' && kv_tolower(0xc9) == 0xe9 && kv_tolower(0x130) == 'i' && kv_tolower(0x3a3) == 0x3c3);
    CHECK(kv_nfd_first(0xe9) == 'e' && kv_nfd_first(0x1e09) == 'c' && kv_nfd_first(0xac00) == 0x1100 && kv_nfd_first('x') == 'x');

    /* llama.cpp's UTF-8 rule: a bad sequence gives U+FFFD and moves one byte */
    size_t adv;
    CHECK(kv_utf8_decode("\xc3\xa9", 2, &adv) == 0xe9 && adv == 2);
    CHECK(kv_utf8_decode("\xc3", 1, &adv) == 0xfffd && adv == 1);
    CHECK(kv_utf8_decode("\x80z", 2, &adv) == 0xfffd && adv == 1);
    CHECK(kv_utf8_decode("\xe2\x28\xa1", 3, &adv) == 0xfffd && adv == 1);
    CHECK(kv_utf8_decode("\xf0\x9f\x99\x82", 4, &adv) == 0x1f642 && adv == 4);
    CHECK(kv_utf8_decode("\xff", 1, &adv) == 0xfffd && adv == 1);

    /* GPT-2 bytes_to_unicode: printable Latin-1 maps to itself, the rest to U+0100.. in order */
    bool seen[324] = {false};
    bool bij = true;
    for (int b = 0; b < 256; b++) {
        uint32_t c = kv_byte_to_cpt((uint8_t)b);
        bij = bij && c < 324 && !seen[c] && kv_cpt_to_byte(c) == b;
        if (c < 324) seen[c] = true;
    }
    CHECK(bij);
    CHECK(kv_byte_to_cpt(' ') == 0x120 && kv_byte_to_cpt('\n') == 0x10a && kv_byte_to_cpt('A') == 'A' &&
          kv_byte_to_cpt(0xad) == 0x143 && kv_byte_to_cpt(0x7f) == 0x121);
    CHECK(kv_cpt_to_byte(0x144) == -1 && kv_cpt_to_byte(0xad) == -1);
    return tu_finish("test_vocab_unicode");
}
