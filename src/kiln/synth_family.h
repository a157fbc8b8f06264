/*
 * synth_family.h - what kiln_synth (synth.c) asks of synth_family.c: the keys a
 * family's files carry beyond the common ones, every layer's shape as the loader
 * (hparams.c) will read it back, which optional tensors a file of the family
 * holds, and the values of tensors that are neither weights nor norms.
 */
#ifndef KILN_SYNTH_FAMILY_H
#define KILN_SYNTH_FAMILY_H

#include "gguf.h"
#include "runtime.h"

/* A preset's shape as synth writes it. */
struct kiln_synth_shape {
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    int64_t head_dim;   /* of full-attention layers */
    int64_t n_swa;      /* the sliding window, for families that have one */
    float final_cap;    /* Gemma's soft-caps (0: none written where the family allows) */
    float attn_cap;
    float rope_factor;  /* linear RoPE scaling of global layers (0: none) */
    enum kiln_pooling pooling; /* <arch>.pooling_type to write (UNSPECIFIED: the family's default) */
    bool file_token_types; /* the vocabulary file gave tokenizer.ggml.token_type_count */
    int64_t n_expert, n_expert_used, n_ff_exp; /* experts (0: a dense feed-forward) */
};

/* Write arch's own keys into w (after the common ones, replacing any it redefines) and
 * fill hp (public values) and lhp[n_layer] (each layer's kind and shape). */
bool kiln_synth_family(struct gguf_writer *w, const char *arch, const struct kiln_synth_shape *s,
                       struct kiln_hparams *hp, struct kiln_layer_hp *lhp, char *err, size_t errlen);
/* Whether a file of arch holds optional tensor spec (of layer l, or NULL) */
bool kiln_synth_wants(const char *arch, const struct kiln_tensor_spec *spec, const struct kiln_layer_hp *l,
                      enum kiln_pooling pooling);
/* A random tensor's standard deviation; 0: a tensor of ones (norm weights) */
float kiln_synth_std(const char *arch, const char *name, int n_dims);
/* A tensor's fixed value instead of random weights or ones (true with *value set) */
bool kiln_synth_constant(const char *arch, const char *name, float *value);
/* A 1-D tensor with random values of this std instead of ones (gpt-oss's biases and sinks) */
bool kiln_synth_random_1d(const char *arch, const char *name, float *std);
/* rope_freqs of Gemma 4's proportional RoPE: 1 for the first quarter of the pairs, 1e30 (no turn) after */
bool kiln_synth_rope_freqs(const char *arch, const char *name, int64_t i, int64_t n, float *value);

#endif
