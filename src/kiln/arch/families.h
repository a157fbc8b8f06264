/*
 * families.h - the family structs that architecture rows' keys fill (arch.c) for
 * families whose hyper-parameters the common ones do not cover; the loader
 * (hparams.c) writes them, the row's prepare hook derives the rest, and the
 * family's builder reads them from kiln_model.fam.
 */
#ifndef KILN_ARCH_FAMILIES_H
#define KILN_ARCH_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kiln_model;

/* ---- Gemma 2, 3 and 4 (arch/gemma.c) */
struct kiln_gemma_hp {
    float final_softcap;      /* final_logit_softcapping: logits become c tanh(logits / c); 0: none */
    float attn_softcap;       /* attn_logit_softcapping (Gemma 2): the same on attention scores */
    int64_t n_embd_per_layer; /* Gemma 4 embedding_length_per_layer_input (E2B/E4B): refused when > 0 */
    int64_t n_expert;         /* Gemma 4 expert_count (26B-A4B): refused when > 0 */
    int64_t n_kv_shared;      /* Gemma 4 attention.shared_kv_layers: refused when > 0 */
    /* derived by the row's prepare hook */
    float attn_scale;         /* the q.k scale */
    bool v_norm;              /* Gemma 4: each v head RMS-normed (without a weight) */
};
bool kiln_gemma2_prepare(struct kiln_model *m, char *err, size_t errlen);
bool kiln_gemma3_prepare(struct kiln_model *m, char *err, size_t errlen);
bool kiln_gemma4_prepare(struct kiln_model *m, char *err, size_t errlen);

/* ---- BERT (arch/bert.c) */
struct kiln_bert_hp {
    float norm_eps; /* attention.layer_norm_epsilon: every LayerNorm's */
    bool causal;    /* attention.causal: refused when true (BERT attends over the whole sequence) */
};
bool kiln_bert_prepare(struct kiln_model *m, char *err, size_t errlen);

#endif
