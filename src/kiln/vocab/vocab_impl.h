/*
 * vocab_impl.h - what the files of src/kiln/vocab share: the vocabulary
 * struct, Unicode helpers (tables in unicode_data.c), the text->id and
 * merge->rank hash maps, the pre-tokenizer table and the per-model tokenizers.
 */
#ifndef KILN_VOCAB_IMPL_H
#define KILN_VOCAB_IMPL_H

#include "kiln.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Unicode (category groups as llama.cpp's unicode tables define them) */
enum {
    KV_F_UNDEF = 0x01,
    KV_F_NUMBER = 0x02,
    KV_F_LETTER = 0x04,
    KV_F_SEPARATOR = 0x08,
    KV_F_MARK = 0x10,
    KV_F_PUNCT = 0x20,
    KV_F_SYMBOL = 0x40,
    KV_F_CONTROL = 0x80,
    KV_F_CATEGORIES = 0xff,
    KV_F_WHITESPACE = 0x100,
};
uint16_t kv_cpt_flags(uint32_t cp);
uint32_t kv_tolower(uint32_t cp);
uint32_t kv_nfd_first(uint32_t cp); /* first code point of the canonical decomposition */
extern const uint32_t kv_lower_map[][2];
extern const size_t kv_lower_map_n;
extern const uint32_t kv_nfd_ranges[][3];
extern const size_t kv_nfd_ranges_n;

/* Length of a UTF-8 sequence from its lead byte (1 for continuation/invalid bytes). */
static inline size_t kv_utf8_len(unsigned char c) {
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}
/* Decode one code point at s[0..n); invalid sequences give U+FFFD and advance 1 byte
 * (llama.cpp's rule, which also lets overlong forms and surrogates through). */
uint32_t kv_utf8_decode(const char *s, size_t n, size_t *adv);
/* Encode cp (must be < 0x200000); returns the byte count (1..4). */
size_t kv_utf8_encode(uint32_t cp, char out[4]);
/* Whole text to code points; *n_out is the count. NULL on allocation failure. */
uint32_t *kv_utf8_to_cpts(const char *s, size_t n, size_t *n_out);
/* GPT-2 byte-level mapping: byte -> code point, and back (-1 if cp is not one). */
uint32_t kv_byte_to_cpt(uint8_t b);
int kv_cpt_to_byte(uint32_t cp);

/* ---- growable byte / int buffers for per-call scratch */
struct kv_buf {
    char *p;
    size_t n, cap;
};
bool kv_buf_put(struct kv_buf *b, const void *data, size_t n);
static inline bool kv_buf_putc(struct kv_buf *b, char c) { return kv_buf_put(b, &c, 1); }
struct kv_ids {
    int32_t *p;
    size_t n, cap;
};
bool kv_ids_push(struct kv_ids *a, int32_t id);

/* ---- candidate merges of adjacent symbols (merge_heap.c), drained lowest key
 * first, ties to the leftmost: BPE keys by merge rank, SPM by minus the merged
 * token's score (exact in a double either way). ln/rn are the symbols' sizes
 * when queued, so the caller can tell a pair that has gone stale. */
struct kv_merge {
    int left, right;
    double key;
    size_t ln, rn;
};
struct kv_merge_heap {
    struct kv_merge *p;
    size_t n, cap;
};
bool kv_merge_push(struct kv_merge_heap *h, struct kv_merge m);
/* h must not be empty */
struct kv_merge kv_merge_pop(struct kv_merge_heap *h);

/* ---- hash maps */
/* text -> token id, keys are the vocab's own copies of the token texts */
struct kv_textmap {
    int32_t *slots; /* id or -1 */
    size_t mask;
};
/* (left id, right id) -> merge rank */
struct kv_pairmap {
    uint64_t *keys; /* (left << 32 | right) + 1, 0 = empty */
    int32_t *ranks;
    size_t mask;
};
uint64_t kv_hash_bytes(const char *s, size_t n);

/* ---- pre-tokenizers: one row per kind llama.cpp knows */
#define KV_MAX_REGEX 8
struct kv_pretok {
    const char *names;   /* the tokenizer.ggml.pre values that select it, '|'-separated */
    const char *regex[KV_MAX_REGEX]; /* applied in order, each to the pieces of the previous */
    bool byte_encode;    /* GPT-2 byte mapping (false: raw UTF-8 with <0xXX> fallback) */
    bool ignore_merges;  /* a piece that is a whole token is taken as is */
    bool clean_spaces;   /* detokenize removes spaces before punctuation */
    bool add_bos;        /* default add_bos before tokenizer.ggml.add_bos_token */
    bool escape_ws;      /* spaces -> U+2581 before BPE (SPM-style BPE) */
    bool no_bos;         /* the kind has no BOS by default (chatglm) */
    bool add_sep;
};
const struct kv_pretok *kv_pretok_find(const char *name, size_t len);
const struct kv_pretok *kv_pretok_default(void);

/* A compiled pre-tokenizer: one step per regex (custom splitter or PCRE2 code). */
struct kv_splitter;
struct kv_splitter *kv_splitter_new(const struct kv_pretok *p, char *err, size_t errlen);
void kv_splitter_free(struct kv_splitter *s);
/* Split text (code points cpts[0..n)) into pieces: *lens gets the piece lengths in
 * code points (malloc'd, caller frees; empty pieces are left out). false when memory
 * or the regex engine fails. */
bool kv_split(const struct kv_splitter *s, const uint32_t *cpts, size_t n, size_t **lens, size_t *n_lens);

/* ---- the vocabulary */
struct kv_token {
    uint32_t text_off, text_len; /* into v->text */
    uint32_t piece_off, piece_len; /* into v->pieces (with special = true) */
    float score;
    uint32_t attr;
};

struct kiln_vocab {
    enum kiln_vocab_type type;
    int32_t n_tokens;
    struct kv_token *tok;
    char *text;   /* all token texts, each NUL-terminated */
    char *pieces; /* all decoded pieces */
    struct kv_textmap map;
    struct kv_pairmap merges;
    int32_t max_token_len;

    const struct kv_pretok *pre;
    char pre_name[64];
    struct kv_splitter *splitter;
    bool gemma4_model;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_sep, add_space_prefix, remove_extra_ws;
    bool escape_ws, clean_spaces, ignore_merges, byte_encode;
    bool wpm_lowercase, wpm_strip_accents;
    bool spm_cut_before_space; /* no token has an ASCII byte followed by U+2581 */

    int32_t *eog; /* sorted */
    size_t n_eog;
    int32_t *specials; /* control/user-defined/unknown ids, longest text first */
    size_t n_specials;
};

static inline const char *kv_text(const struct kiln_vocab *v, int32_t id) { return v->text + v->tok[id].text_off; }
int32_t kv_find(const struct kiln_vocab *v, const char *s, size_t n);
int32_t kv_merge_rank(const struct kiln_vocab *v, int32_t left, int32_t right);
bool kv_maps_build(struct kiln_vocab *v, char *err, size_t errlen);
bool kv_pairmap_add(struct kiln_vocab *v, int32_t left, int32_t right, int32_t rank);
bool kv_pairmap_init(struct kiln_vocab *v, size_t n);
void kv_maps_free(struct kiln_vocab *v);

/* ---- tokenizers: append the ids of one raw-text fragment to out */
bool kv_tokenize_spm(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out);
bool kv_tokenize_bpe(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out);
bool kv_tokenize_wpm(const struct kiln_vocab *v, const char *text, size_t len, struct kv_ids *out);
/* SPM/BPE byte fallback: the token of one byte, or KILN_TOKEN_NULL */
int32_t kv_byte_token(const struct kiln_vocab *v, uint8_t b);
/* Whole tokenize into a growable array (used by load for the newline token too). */
bool kv_tokenize_all(const struct kiln_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                     struct kv_ids *out);
/* The piece of a token as llama.cpp builds its cache (special = true), into b. */
bool kv_build_piece(const struct kiln_vocab *v, int32_t id, struct kv_buf *b);

#endif
