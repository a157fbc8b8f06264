/*
 * vocab_special.c - llama.cpp's rules for special tokens that the metadata
 * does not spell out: end-of-turn / fill-in-middle tokens found by their text,
 * the end-of-generation set, "unused" control tokens, per-model strip flags,
 * and the list of tokens that special-token parsing looks for.
 */
#include "gguf.h"
#include "vocab_impl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool text_is(const struct kiln_vocab *v, int32_t id, const char *s) {
    return v->tok[id].text_len == strlen(s) && !memcmp(kv_text(v, id), s, v->tok[id].text_len);
}
static bool text_in(const struct kiln_vocab *v, int32_t id, const char *const *list) {
    for (; *list; list++)
        if (text_is(v, id, *list)) return true;
    return false;
}

static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                                        "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                                            "▁<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
                                            "▁<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
                                            "▁<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                        "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[", NULL};

/* Ids are visited in increasing order (llama.cpp walks a hash map, so with two
 * candidates for one role its choice is arbitrary; kiln takes the lowest id). */
static void detect(struct kiln_vocab *v, int32_t *slot, const char *const *texts) {
    if (*slot != KILN_TOKEN_NULL) return;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (text_in(v, id, texts)) {
            *slot = id;
            v->tok[id].attr |= KILN_TOKEN_ATTR_CONTROL;
            return;
        }
    }
}

static bool eog_add(struct kiln_vocab *v, int32_t id) {
    if (id < 0) return true;
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    int32_t *p = realloc(v->eog, (v->n_eog + 1) * sizeof *p);
    if (!p) return false;
    v->eog = p;
    v->eog[v->n_eog++] = id;
    return true;
}

static void eog_remove(struct kiln_vocab *v, int32_t id) {
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}


static bool str_contains(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(hay + i, needle, k)) return true;
    return false;
}

static void set_attr_by_text(struct kiln_vocab *v, const char *text, uint32_t attr, bool on) {
    int32_t id = kv_find(v, text, strlen(text));
    if (id < 0) return; /* llama.cpp would fail the load here; a missing token is harmless */
    if (on) v->tok[id].attr |= attr;
    else v->tok[id].attr &= ~attr;
}

bool kv_special_setup(struct kiln_vocab *v, const struct gguf_file *g, const char *pre, size_t pre_len) {
    detect(v, &v->eot, eot_texts);
    detect(v, &v->eom, eom_texts);
    detect(v, &v->fim_pre, fim_pre_texts);
    detect(v, &v->fim_suf, fim_suf_texts);
    detect(v, &v->fim_mid, fim_mid_texts);
    detect(v, &v->fim_pad, fim_pad_texts);
    detect(v, &v->fim_rep, fim_rep_texts);
    detect(v, &v->fim_sep, fim_sep_texts);

    for (int32_t id = 0; id < v->n_tokens; id++) {
        uint32_t *a = &v->tok[id].attr;
        if ((*a & KILN_TOKEN_ATTR_CONTROL) && strstr(kv_text(v, id), "unused")) *a |= KILN_TOKEN_ATTR_UNUSED;
    }

    if (!eog_add(v, v->fim_pad) || !eog_add(v, v->fim_rep) || !eog_add(v, v->fim_sep)) return false;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (text_in(v, id, eog_texts)) {
            if (!eog_add(v, id)) return false;
            v->tok[id].attr |= KILN_TOKEN_ATTR_CONTROL;
        }
    }
    /* gpt-oss: these are always rendered */
    static const char *const gptoss[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (text_in(v, id, gptoss)) v->tok[id].attr = KILN_TOKEN_ATTR_USER_DEFINED;
    if (!eog_add(v, v->eos) || !eog_add(v, v->eot) || !eog_add(v, v->eom)) return false;

    /* o200k_harmony / solar-open: <|end|> ends a message, not generation */
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = KILN_TOKEN_NULL, s_id = KILN_TOKEN_NULL;
    bool has_tool_response = false;
    for (size_t i = 0; i < v->n_eog; i++) {
        int32_t id = v->eog[i];
        if (text_is(v, id, "<|return|>")) has_return = true;
        else if (text_is(v, id, "<|call|>") || text_is(v, id, "<|calls|>")) has_call = true;
        else if (text_is(v, id, "<|flush|>")) has_flush = true;
        else if (text_is(v, id, "<|end|>")) end_id = id;
        if (text_is(v, id, "<|tool_response>")) has_tool_response = true;
        if (text_is(v, id, "</s>")) s_id = id;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
        eog_remove(v, end_id);
        v->tok[end_id].attr = KILN_TOKEN_ATTR_USER_DEFINED;
    }
    /* gemma4 / paddleocr: </s> is not an end of generation there */
    if (has_tool_response && s_id >= 0) {
        eog_remove(v, s_id);
        v->tok[s_id].attr = KILN_TOKEN_ATTR_NORMAL;
    }
    if (v->n_eog) qsort(v->eog, v->n_eog, sizeof *v->eog, cmp_i32);

    /* tokens that special-token parsing looks for, longest text first */
    v->specials = malloc((size_t)v->n_tokens * sizeof *v->specials);
    if (!v->specials) return false;
    v->n_specials = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_USER_DEFINED | KILN_TOKEN_ATTR_UNKNOWN))
            v->specials[v->n_specials++] = id;
    /* insertion sort keeps equal lengths in id order (stable, and the list is short) */
    for (size_t i = 1; i < v->n_specials; i++) {
        int32_t id = v->specials[i];
        uint32_t len = v->tok[id].text_len;
        size_t j = i;
        while (j > 0 && v->tok[v->specials[j - 1]].text_len < len) {
            v->specials[j] = v->specials[j - 1];
            j--;
        }
        v->specials[j] = id;
    }

    /* per-model strip flags (the metadata does not carry them) */
    struct gguf_str name = {0}, arch = {0};
    if (gguf_find_key(g, "general.name") >= 0) (void)gguf_get_str(g, "general.name", &name);
    if (gguf_find_key(g, "general.architecture") >= 0) (void)gguf_get_str(g, "general.architecture", &arch);
    char lname[256];
    size_t nl = name.len < sizeof lname - 1 ? name.len : sizeof lname - 1;
    for (size_t i = 0; i < nl; i++) lname[i] = (char)tolower((unsigned char)name.ptr[i]);
    lname[nl] = 0;
    if (str_contains(pre, pre_len, "jina-v2-de") || str_contains(pre, pre_len, "jina-v2-es") ||
        str_contains(pre, pre_len, "jina-v2-code") || str_contains(arch.ptr, arch.len, "nomic-bert-moe") ||
        str_contains(arch.ptr, arch.len, "jina-bert-v3")) {
        set_attr_by_text(v, "<mask>", KILN_TOKEN_ATTR_LSTRIP, true);
    } else if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
        for (size_t i = 0; i < v->n_specials; i++) v->tok[v->specials[i]].attr |= KILN_TOKEN_ATTR_RSTRIP;
        set_attr_by_text(v, "</s>", KILN_TOKEN_ATTR_RSTRIP, true);
        set_attr_by_text(v, "<unk>", KILN_TOKEN_ATTR_RSTRIP, false);
        set_attr_by_text(v, "<s>", KILN_TOKEN_ATTR_RSTRIP, false);
        set_attr_by_text(v, "<|endoftext|>", KILN_TOKEN_ATTR_RSTRIP, false);
    } else if (strstr(lname, "modern-bert")) {
        set_attr_by_text(v, "[MASK]", KILN_TOKEN_ATTR_LSTRIP, true);
    }
    return true;
}
