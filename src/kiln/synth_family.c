/*
 * synth_family.c - the families kiln synth writes beyond llama's shape: Gemma 2
 * (every other layer windowed, soft-capped attention and logits), Gemma 3 (local
 * layers with their own RoPE base, five to a global one, or one to one in files of
 * fewer than six layers) and Gemma 4 (a per-layer pattern array, windowed layers
 * with half the head size and twice the KV heads of global ones, global layers
 * without a v projection and with proportional RoPE, a scale on each layer's
 * output), BERT (no grouped heads, LayerNorm's epsilon, a pooling type, token types,
 * biases, and with rank pooling a classifier head; weights large enough that attention
 * and the biases move the result), experts (the expert keys) and gpt-oss (a window on
 * every other layer, YaRN, random biases and sinks). Each writes the keys llama.cpp
 * reads and derives the shapes kiln's loader will derive from them.
 */
#include "synth_family.h"

#include "errf.h"

#include <stdio.h>
#include <string.h>

static bool set_u32(struct gguf_writer *w, const char *arch, const char *key, uint32_t v) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return gguf_writer_set_u32(w, k, v);
}
static bool set_f32(struct gguf_writer *w, const char *arch, const char *key, float v) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return gguf_writer_set_f32(w, k, v);
}

static bool is_gemma(const char *arch) { return !strncmp(arch, "gemma", 5); }
static bool is_bert(const char *arch) { return !strcmp(arch, "bert") || !strcmp(arch, "nomic-bert"); }

static bool bert_keys(struct gguf_writer *w, const char *arch, const struct kiln_synth_shape *s,
                      struct kiln_hparams *hp, struct kiln_layer_hp *lhp, char *err, size_t errlen) {
    /* BGE's CLS; nomic-embed's mean */
    const enum kiln_pooling def = strcmp(arch, "bert") ? KILN_POOLING_MEAN : KILN_POOLING_CLS;
    const enum kiln_pooling pooling = s->pooling == KILN_POOLING_UNSPECIFIED ? def : s->pooling;
    for (int64_t il = 0; il < s->n_layer; il++) lhp[il].n_head_kv = s->n_head;
    hp->n_head_kv = s->n_head;
    hp->pooling = pooling;
    hp->n_cls_out = 1;
    hp->n_token_types = 2;
    char k[160];
    snprintf(k, sizeof k, "%s.attention.causal", arch);
    bool ok = set_u32(w, arch, "attention.head_count_kv", (uint32_t)s->n_head) &&
              set_f32(w, arch, "attention.layer_norm_epsilon", 1e-12f) && gguf_writer_set_bool(w, k, false) &&
              set_u32(w, arch, "pooling_type", (uint32_t)pooling);
    if (ok && !s->file_token_types) ok = gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2);
    if (ok && pooling == KILN_POOLING_RANK) {
        const struct gguf_str label = {"LABEL_0", 7};
        snprintf(k, sizeof k, "%s.classifier.output_labels", arch);
        ok = gguf_writer_set_arr_str(w, k, &label, 1);
    }
    if (!ok) return kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    return true;
}

/* gpt-oss: every other layer windowed (from layer 0, llama.cpp's pattern 2), YaRN on every
 * layer (the preset's factor, 4 on the small presets, over an original context of
 * n_ctx / factor, so that the ramp between interpolated and unscaled pairs falls inside a
 * head) */
static bool gpt_oss(struct gguf_writer *w, const char *arch, const struct kiln_synth_shape *s,
                    struct kiln_hparams *hp, struct kiln_layer_hp *lhp, char *err, size_t errlen) {
    const float factor = s->rope_factor > 0.0f ? s->rope_factor : 4.0f;
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    bool ok = set_u32(w, arch, "attention.sliding_window", (uint32_t)s->n_swa) && gguf_writer_set_str(w, k, "yarn") &&
              set_f32(w, arch, "rope.scaling.factor", factor) &&
              set_u32(w, arch, "rope.scaling.original_context_length", (uint32_t)((float)s->n_ctx / factor));
    for (int64_t il = 0; il < s->n_layer; il++) {
        lhp[il].kind = il % 2 == 0 ? KILN_LAYER_ATTN_WINDOW : KILN_LAYER_ATTN;
        lhp[il].rope_freq_scale = 1.0f / factor;
    }
    hp->rope_freq_scale = 1.0f / factor;
    if (!ok) return kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    return true;
}

bool kiln_synth_family(struct gguf_writer *w, const char *arch, const struct kiln_synth_shape *s,
                       struct kiln_hparams *hp, struct kiln_layer_hp *lhp, char *err, size_t errlen) {
    const int64_t L = s->n_layer;
    for (int64_t il = 0; il < L; il++)
        lhp[il] = (struct kiln_layer_hp){.kind = KILN_LAYER_ATTN, .n_head = s->n_head, .n_head_kv = s->n_head_kv,
                                         .n_embd_head = s->head_dim, .n_rot = s->head_dim, .n_ff = s->n_ff,
                                         .n_expert = s->n_expert, .n_expert_used = s->n_expert_used,
                                         .n_ff_exp = s->n_ff_exp};
    if (is_bert(arch)) return bert_keys(w, arch, s, hp, lhp, err, errlen);
    if (s->pooling > KILN_POOLING_NONE && !set_u32(w, arch, "pooling_type", (uint32_t)s->pooling))
        return kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    hp->pooling = s->pooling > KILN_POOLING_NONE ? s->pooling : KILN_POOLING_NONE;
    const bool oss = !strcmp(arch, "gpt-oss");
    if (s->n_expert > 0) {
        bool ok = set_u32(w, arch, "expert_count", (uint32_t)s->n_expert) &&
                  set_u32(w, arch, "expert_used_count", (uint32_t)s->n_expert_used);
        /* Mixtral's experts are feed_forward_length wide; the others say */
        if (strcmp(arch, "llama")) ok = ok && set_u32(w, arch, "expert_feed_forward_length", (uint32_t)s->n_ff_exp);
        if (!ok) return kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    }
    if (oss) return gpt_oss(w, arch, s, hp, lhp, err, errlen);
    if (!is_gemma(arch)) return true;
    const bool g2 = !strcmp(arch, "gemma2"), g4 = !strcmp(arch, "gemma4");
    /* local/global: Gemma 2 alternates; 3 and 4 have five local layers to a global one,
     * one to one in a file of fewer than six layers (so that both kinds are there) */
    const int64_t period = g2 || L < 6 ? 2 : 6;
    for (int64_t il = 0; il < L; il++)
        if (il % period < period - 1) lhp[il].kind = KILN_LAYER_ATTN_WINDOW;
    bool ok = set_u32(w, arch, "attention.sliding_window", (uint32_t)s->n_swa);
    if (!g2) ok = ok && set_f32(w, arch, "rope.freq_base", 1e6f) && set_f32(w, arch, "rope.freq_base_swa", 1e4f);
    if (g2) ok = ok && set_f32(w, arch, "attn_logit_softcapping", s->attn_cap);
    if (g2 || s->final_cap > 0.0f) ok = ok && set_f32(w, arch, "final_logit_softcapping", s->final_cap);
    if (!strcmp(arch, "gemma3") && period != 6) ok = ok && set_u32(w, arch, "attention.sliding_window_pattern", 2);
    if (s->rope_factor > 0.0f) {
        char k[160];
        snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
        ok = ok && gguf_writer_set_str(w, k, "linear") && set_f32(w, arch, "rope.scaling.factor", s->rope_factor);
    }
    const float rope_scale = s->rope_factor > 0.0f ? 1.0f / s->rope_factor : 1.0f;
    for (int64_t il = 0; il < L; il++) {
        const bool win = lhp[il].kind == KILN_LAYER_ATTN_WINDOW;
        lhp[il].rope_freq_base = g2 || !win ? (g2 ? 10000.0f : 1e6f) : 1e4f;
        lhp[il].rope_freq_scale = win && !g2 ? 1.0f : rope_scale;
    }
    if (g4) {
        /* windowed layers: the preset's head; global ones: twice the head, half the KV heads */
        const int64_t head_swa = s->head_dim, head_full = 2 * s->head_dim;
        const int64_t kv_full = s->n_head_kv / 2 > 0 ? s->n_head_kv / 2 : 1;
        uint32_t kv[KILN_MAX_LAYERS];
        bool pattern[KILN_MAX_LAYERS];
        for (int64_t il = 0; il < L; il++) {
            const bool win = lhp[il].kind == KILN_LAYER_ATTN_WINDOW;
            pattern[il] = win;
            kv[il] = (uint32_t)(win ? s->n_head_kv : kv_full);
            lhp[il].n_head_kv = kv[il];
            lhp[il].n_embd_head = lhp[il].n_rot = win ? head_swa : head_full;
        }
        char k[160];
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", arch);
        ok = ok && gguf_writer_set_arr(w, k, GGUF_TYPE_BOOL, pattern, (uint64_t)L);
        snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
        ok = ok && gguf_writer_set_arr(w, k, GGUF_TYPE_UINT32, kv, (uint64_t)L) &&
             set_u32(w, arch, "attention.key_length", (uint32_t)head_full) &&
             set_u32(w, arch, "attention.value_length", (uint32_t)head_full) &&
             set_u32(w, arch, "attention.key_length_swa", (uint32_t)head_swa) &&
             set_u32(w, arch, "attention.value_length_swa", (uint32_t)head_swa) &&
             set_u32(w, arch, "rope.dimension_count", (uint32_t)head_full) &&
             set_u32(w, arch, "rope.dimension_count_swa", (uint32_t)head_swa) &&
             set_u32(w, arch, "embedding_length_per_layer_input", 0);
        hp->n_head_kv = lhp[0].n_head_kv;
        hp->n_embd_head = hp->n_rot = head_full;
    }
    if (!ok) return kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    return true;
}

bool kiln_synth_wants(const char *arch, const struct kiln_tensor_spec *spec, const struct kiln_layer_hp *l,
                      enum kiln_pooling pooling) {
    if (!strcmp(spec->name, "output.weight")) return true; /* untied */
    /* BERT: every bias and the token types; the classifier head only for rank pooling */
    if (is_bert(arch)) return strncmp(spec->name, "cls.", 4) || pooling == KILN_POOLING_RANK;
    if (!strcmp(arch, "gpt-oss")) return true;             /* q/k/v biases */
    if (strcmp(arch, "gemma4")) return false;
    /* Gemma 4: v projections on windowed layers only (global ones take k), and output scales */
    if (!strcmp(spec->name, "attn_v.weight")) return l && l->kind == KILN_LAYER_ATTN_WINDOW;
    return !strcmp(spec->name, "layer_output_scale.weight");
}

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

float kiln_synth_std(const char *arch, const char *name, int n_dims) {
    if (!is_bert(arch)) return n_dims == 1 ? 0.0f : 0.02f;
    /* BERT: biases random and weights large enough (gain about 1.2 per product at 64 wide)
     * that attention's mask, each bias and the classifier move the embeddings */
    if (n_dims == 1) return ends_with(name, ".bias") ? 0.1f : 0.0f;
    return 0.15f;
}

bool kiln_synth_constant(const char *arch, const char *name, float *value) {
    /* gpt-oss: both norms scaled up, so that random weights' attention scores reach about 1
     * (where YaRN's scale and the sinks move them) and the experts' outputs weigh in the
     * residual (where the routing weights show) */
    if (!strcmp(arch, "gpt-oss") &&
        (ends_with(name, "attn_norm.weight") || ends_with(name, "post_attention_norm.weight"))) {
        *value = ends_with(name, "post_attention_norm.weight") ? 4.0f : 8.0f;
        return true;
    }
    if (!is_gemma(arch)) return false;
    if (ends_with(name, "layer_output_scale.weight")) {
        *value = 0.75f;
        return true;
    }
    /* attention's input norm scaled up: random weights' attention scores grow to about 1,
     * where Gemma 2's soft-cap bends them (at the plain scale they are about 0.03) */
    if (ends_with(name, "attn_norm.weight")) {
        *value = 8.0f;
        return true;
    }
    return false;
}

bool kiln_synth_random_1d(const char *arch, const char *name, float *std) {
    if (strcmp(arch, "gpt-oss") || ends_with(name, "norm.weight")) return false;
    *std = 0.5f;
    return true;
}

bool kiln_synth_rope_freqs(const char *arch, const char *name, int64_t i, int64_t n, float *value) {
    if (strcmp(arch, "gemma4") || strcmp(name, "rope_freqs.weight")) return false;
    *value = i < n / 4 ? 1.0f : 1e30f;
    return true;
}
