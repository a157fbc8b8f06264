/*
 * runtime.h - the runtime's private structures: model (hyper-parameters,
 * weights bound into the file mapping), architectures table, KV cache and the
 * decode context. Public API: include/kiln.h.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "gguf.h"
#include "kiln.h"
#include "kt-alloc.h"
#include "kt-backend.h"
#include "kt.h"

#define KILN_MAX_LAYERS 512

/* ---- model */

struct kiln_layer {
    struct kt_tensor *attn_norm;         /* [n_embd] */
    struct kt_tensor *wq, *wk, *wv, *wo; /* [n_embd, n_embd], [n_embd, n_embd_kv] x2, [n_embd, n_embd] */
    struct kt_tensor *bq, *bk, *bv;      /* optional biases (qwen2) */
    struct kt_tensor *ffn_norm;          /* [n_embd] */
    struct kt_tensor *w_gate, *w_up;     /* [n_embd, n_ff] */
    struct kt_tensor *w_down;            /* [n_ff, n_embd] */
};

struct kiln_arch;

struct kiln_model {
    const struct kiln_arch *arch;
    struct kiln_hparams hp;
    char name[128];
    struct gguf_file *gguf;
    struct kiln_vocab *vocab;

    struct kt_context *wctx;      /* weight tensors' metadata (no_alloc) */
    struct kt_buffer *wbuf;       /* the file mapping as a host buffer (weights bound zero-copy) */
    struct kt_tensor *tok_embd;   /* [n_embd, n_vocab] */
    struct kt_tensor *output_norm;
    struct kt_tensor *output;     /* [n_embd, n_vocab]; == tok_embd when tied */
    struct kiln_layer *layers;    /* n_layer */
    int64_t n_params;
    size_t weight_bytes;
};

/* One row per architecture: how to read its hyper-parameters, which tensors it
 * has, and how its graph is built. */
struct kiln_graph_in {
    struct kt_context *ctx;
    const struct kiln_model *model;
    struct kiln_context *kctx;
    struct kt_tensor *tokens;  /* I32 [n_tokens] */
    struct kt_tensor *pos;     /* I32 [n_tokens] */
    struct kt_tensor *mask;    /* F32 [n_kv, n_tokens_pad] */
    struct kt_tensor *out_ids; /* I32 [n_outputs] rows whose logits are wanted */
    int64_t n_tokens, n_kv, n_outputs;
    int64_t kv_head; /* first cache cell of this batch */
};

struct kiln_arch {
    const char *name;
    int rope_mode;  /* KT_ROPE_NORMAL / KT_ROPE_NEOX */
    bool qkv_bias;  /* q/k/v biases present */
    /* builds and returns the logits tensor [n_vocab, n_outputs] */
    struct kt_tensor *(*build)(const struct kiln_graph_in *in);
};

const struct kiln_arch *kiln_arch_find(const char *name);
struct kt_tensor *kiln_build_llama(const struct kiln_graph_in *in);

/* ---- KV cache */

struct kiln_kv_cell {
    int32_t pos;      /* -1: empty */
    uint64_t seq;     /* bit s: sequence s uses this cell */
};

struct kiln_kv_cache {
    uint32_t size;    /* cells (n_ctx) */
    uint32_t used;    /* cells holding at least one sequence */
    uint32_t n_layer;
    enum kt_type type_k, type_v;
    bool v_trans;     /* V stored transposed (cells contiguous per dim) */
    struct kiln_kv_cell *cells;
    struct kt_context *ctx;
    struct kt_buffer *buf;
    struct kt_tensor **k, **v; /* per layer: K [n_embd_kv, size], V [size, n_embd_kv] (trans) or [n_embd_kv, size] */
};

bool kiln_kv_init(struct kiln_kv_cache *kv, const struct kiln_model *m, uint32_t size, enum kt_type type_k,
                  enum kt_type type_v, struct kt_buffer_type *buft, char *err, size_t errlen);
void kiln_kv_free(struct kiln_kv_cache *kv);
/* first cell of a run of n free cells, or -1 */
int64_t kiln_kv_find_slot(const struct kiln_kv_cache *kv, uint32_t n);
/* Move the used cells (K/V data and bookkeeping, order kept) to the front so the
 * free ones form one run; false, the cache unchanged, when memory runs out. */
bool kiln_kv_defrag(struct kiln_kv_cache *kv);
/* cells [0, n_kv) cover every used cell, padded */
uint32_t kiln_kv_n_kv(const struct kiln_kv_cache *kv, uint32_t pad);

/* ---- context */

struct kiln_context {
    const struct kiln_model *model;
    struct kiln_context_params params;
    struct kiln_kv_cache kv;

    struct kt_backend *backend;
    struct kt_sched *sched;
    uint8_t *meta_buf;       /* graph metadata arena, reused every decode */
    size_t meta_size;
    int graph_size;

    float *logits;           /* [n_outputs_max, n_vocab] of the last decode */
    int32_t *logits_row;     /* batch index -> row in logits, or -1 */
    int32_t n_outputs;
    int32_t n_batch_last;

    char err[256];
};

#endif
