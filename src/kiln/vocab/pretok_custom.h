/*
 * pretok_custom.h - the hand-written pre-tokenizer scanners (llama.cpp runs
 * these patterns with dedicated code, whose decisions kiln must repeat) and
 * the piece list both engines fill.
 */
#ifndef KILN_PRETOK_CUSTOM_H
#define KILN_PRETOK_CUSTOM_H

#include "vocab_impl.h"

/* lengths (in code points) of consecutive pieces of the text */
struct kv_pieces {
    size_t *len;
    size_t n, cap;
};
bool kv_pieces_push(struct kv_pieces *p, size_t len);

/* the patterns llama.cpp runs with dedicated code (compared as strings) */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3                                                                                  \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                 "\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                 "\\s+(?!\\S)|\\s+"
#define RX_QWEN35                                                                                          \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                 "\\s+(?!\\S)|\\s+"
#define RX_NEWLINES "[^\\n]+|[\\n]+"

enum kv_custom {
    KV_CUSTOM_NONE = 0,
    KV_CUSTOM_GPT2,
    KV_CUSTOM_LLAMA3, /* numbers in runs of up to 3 */
    KV_CUSTOM_QWEN2,  /* single-digit numbers */
    KV_CUSTOM_QWEN35, /* qwen2 with combining marks inside words */
    KV_CUSTOM_KIMI_K2,
    KV_CUSTOM_DIGITS3, /* digits grouped by three from the right (afmoe, tiny_aya) */
    KV_CUSTOM_NEWLINES,
};
enum kv_custom kv_custom_for(const char *regex);
/* Split every piece of in, appending the results to out. */
bool kv_custom_split(enum kv_custom kind, const uint32_t *cpts, const struct kv_pieces *in, struct kv_pieces *out);

#endif
