/*
 * quant_mix.h - private to src/kiln: which type each tensor of a model gets for
 * a file type (llama.cpp's per-tensor mixes: output and token embedding, the
 * attn_v / ffn_down "more bits" layers of the _S/_M/_L variants, the fallback
 * for rows that are not whole blocks). Shared by quantize.c and synth.c.
 */
#ifndef KILN_QUANT_MIX_H
#define KILN_QUANT_MIX_H

#include "kiln.h"
#include "kiln-offline.h"

/* What the rules need to know about the model, and the counters they keep.
 * Tensors must be presented in kiln_qmix_order (llama.cpp's loader order), as the
 * attn_v and ffn_down rules count tensors. */
struct kiln_qmix {
    enum kiln_ftype ftype;
    enum kt_type default_type;
    bool pure;
    bool falcon;        /* general.architecture == "falcon": its own rules */
    bool is_70b;        /* llama with 80 layers and grouped-query attention */
    bool tied;          /* no output.weight: token_embd is also the output projection */
    int64_t n_layer;
    int64_t n_gqa;      /* n_head / n_head_kv, 0 if unknown */
    int64_t n_expert;
    int64_t n_attn_v, i_attn_v, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;     /* tensors whose rows were not whole blocks of the chosen type */
};

/* The tensor type a file type stands for (Q4_K for Q4_K_M ...); false if unknown. */
bool kiln_ftype_default_type(enum kiln_ftype ftype, enum kt_type *out);

/* Reset for a model whose tensors are names[0 .. n_names) (to count attn_v tensors
 * and see whether the output projection is tied to the token embedding). */
void kiln_qmix_init(struct kiln_qmix *m, enum kiln_ftype ftype, bool pure, const char *arch, int64_t n_layer,
                    int64_t n_head, int64_t n_head_kv, int64_t n_expert, const char *const *names, int64_t n_names);

/* Does this tensor get (re)quantized at all (2-D+ weights except norms, gates, ...)? */
bool kiln_qmix_allows(const char *name, int n_dims);

/* Type for tensor `name` of shape ne (n_dims effective dims) now stored as cur. */
enum kt_type kiln_qmix_type(struct kiln_qmix *m, const char *name, int n_dims, const int64_t *ne, enum kt_type cur);

/* llama.cpp's loader order: tensors outside blocks first, then by block number, by name within. */
int kiln_qmix_order(const char *a, const char *b);

/* ---- rows_par.c: row-parallel loops for the quantize and synth writers */

/* Work on rows [r0, r1); false with a message in err on failure. */
typedef bool (*kiln_rows_fn)(void *ctx, int64_t r0, int64_t r1, char *err, size_t errlen);
/* Split rows [r0, r1) into n_threads contiguous shares run at once (the caller's
 * thread takes the first). false with the message of the first failing share. */
bool kiln_rows_parallel(int n_threads, int64_t r0, int64_t r1, kiln_rows_fn fn, void *ctx, char *err, size_t errlen);

#endif
