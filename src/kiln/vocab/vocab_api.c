/*
 * vocab_api.c - the read-only queries of include/kiln.h's vocabulary section:
 * sizes, kinds, special ids, per-token attributes, texts and scores. Every id
 * from a caller is range-checked.
 */
#include "vocab_impl.h"

#include <string.h>

static bool valid(const struct kiln_vocab *v, int32_t id) { return v && id >= 0 && id < v->n_tokens; }

int32_t kiln_vocab_n_tokens(const struct kiln_vocab *v) { return v ? v->n_tokens : 0; }
enum kiln_vocab_type kiln_vocab_type(const struct kiln_vocab *v) { return v ? v->type : KILN_VOCAB_NONE; }

const char *kiln_vocab_type_name(enum kiln_vocab_type t) {
    switch (t) {
    case KILN_VOCAB_SPM: return "SPM";
    case KILN_VOCAB_BPE: return "BPE";
    case KILN_VOCAB_WPM: return "WPM";
    case KILN_VOCAB_NONE: break;
    }
    return "none";
}

const char *kiln_vocab_pre(const struct kiln_vocab *v) { return v ? v->pre_name : "default"; }

int32_t kiln_vocab_bos(const struct kiln_vocab *v) { return v ? v->bos : KILN_TOKEN_NULL; }
int32_t kiln_vocab_eos(const struct kiln_vocab *v) { return v ? v->eos : KILN_TOKEN_NULL; }
int32_t kiln_vocab_eot(const struct kiln_vocab *v) { return v ? v->eot : KILN_TOKEN_NULL; }
int32_t kiln_vocab_eom(const struct kiln_vocab *v) { return v ? v->eom : KILN_TOKEN_NULL; }
int32_t kiln_vocab_unk(const struct kiln_vocab *v) { return v ? v->unk : KILN_TOKEN_NULL; }
int32_t kiln_vocab_sep(const struct kiln_vocab *v) { return v ? v->sep : KILN_TOKEN_NULL; }
int32_t kiln_vocab_pad(const struct kiln_vocab *v) { return v ? v->pad : KILN_TOKEN_NULL; }
int32_t kiln_vocab_mask(const struct kiln_vocab *v) { return v ? v->mask : KILN_TOKEN_NULL; }
int32_t kiln_vocab_nl(const struct kiln_vocab *v) { return v ? v->nl : KILN_TOKEN_NULL; }
bool kiln_vocab_add_bos(const struct kiln_vocab *v) { return v && v->add_bos; }
bool kiln_vocab_add_eos(const struct kiln_vocab *v) { return v && v->add_eos; }
bool kiln_vocab_add_sep(const struct kiln_vocab *v) { return v && v->add_sep; }

bool kiln_vocab_is_eog(const struct kiln_vocab *v, int32_t id) {
    if (!valid(v, id)) return false;
    size_t lo = 0, hi = v->n_eog;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->eog[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n_eog && v->eog[lo] == id;
}

uint32_t kiln_vocab_attr(const struct kiln_vocab *v, int32_t id) { return valid(v, id) ? v->tok[id].attr : 0; }
bool kiln_vocab_is_control(const struct kiln_vocab *v, int32_t id) {
    return (kiln_vocab_attr(v, id) & KILN_TOKEN_ATTR_CONTROL) != 0;
}
bool kiln_vocab_is_byte(const struct kiln_vocab *v, int32_t id) {
    return (kiln_vocab_attr(v, id) & KILN_TOKEN_ATTR_BYTE) != 0;
}

const char *kiln_vocab_text(const struct kiln_vocab *v, int32_t id, size_t *len) {
    if (!valid(v, id)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tok[id].text_len;
    return kv_text(v, id);
}

float kiln_vocab_score(const struct kiln_vocab *v, int32_t id) { return valid(v, id) ? v->tok[id].score : 0.0f; }

int32_t kiln_vocab_find(const struct kiln_vocab *v, const char *text, size_t len) {
    if (!v || (!text && len)) return KILN_TOKEN_NULL;
    return kv_find(v, text ? text : "", len);
}
