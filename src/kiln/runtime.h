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
#include "memory.h"

#define KILN_MAX_LAYERS 512

/* ---- model */

/* A layer's weights; which of them an architecture has is its row's tensor list
 * (arch.c). Fused tensors are bound once and the per-role pointers view their rows. */
struct kiln_layer {
    struct kt_tensor *attn_norm;                 /* [n_embd] */
    struct kt_tensor *wq, *wk, *wv, *wo;         /* [n_embd, n_q], [n_embd, n_embd_kv] x2, [n_q, n_embd] */
    struct kt_tensor *wqkv;                      /* fused [n_embd, n_q + 2 n_embd_kv] (phi3); wq/wk/wv view it */
    struct kt_tensor *bq, *bk, *bv;              /* q/k/v biases (qwen2) */
    struct kt_tensor *attn_q_norm, *attn_k_norm; /* [n_embd_head]: RMS norm of each q/k head (qwen3, gemma) */
    struct kt_tensor *attn_post_norm;            /* [n_embd]: RMS norm of the attention's output (gemma) */
    struct kt_tensor *ffn_norm;                  /* [n_embd] */
    struct kt_tensor *w_gate, *w_up;             /* [n_embd, n_ff] */
    struct kt_tensor *w_gate_up;                 /* fused [n_embd, 2 n_ff], gate rows then up (phi3) */
    struct kt_tensor *w_down;                    /* [n_ff, n_embd] */
    struct kt_tensor *ffn_post_norm;             /* [n_embd]: RMS norm of the feed-forward's output (gemma) */
    struct kt_tensor *out_scale;                 /* [1]: the layer's output times this (gemma4) */
    /* BERT: biases and LayerNorms after the residuals */
    struct kt_tensor *bo, *b_up, *b_down;        /* [n_embd], [n_ff], [n_embd] */
    struct kt_tensor *attn_out_norm, *attn_out_norm_b;   /* [n_embd]: after attention's residual */
    struct kt_tensor *layer_out_norm, *layer_out_norm_b; /* [n_embd]: after the feed-forward's */
};

struct kiln_arch;

/* What a layer is; it decides the sequence memory the layer keeps (memory.h). */
enum kiln_layer_kind {
    KILN_LAYER_ATTN = 0,    /* causal attention over every earlier position: a full KV cache */
    KILN_LAYER_ATTN_WINDOW, /* attention over the last n_swa positions: a windowed KV cache */
    KILN_LAYER_KIND_COUNT,
};

/* One layer's shape. The public kiln_hparams hold the file's scalar keys (an array's
 * first entry); families whose layers differ (Gemma 4: other head sizes and KV heads on
 * windowed layers, per-layer feed-forward widths) are read here. */
struct kiln_layer_hp {
    enum kiln_layer_kind kind;
    int64_t n_head, n_head_kv, n_embd_head, n_rot, n_ff;
    float rope_freq_base, rope_freq_scale;
};

struct kiln_model {
    const struct kiln_arch *arch;
    struct kiln_hparams hp;
    struct kiln_layer_hp *lhp;  /* n_layer */
    int64_t n_swa;              /* window of the KILN_LAYER_ATTN_WINDOW layers (0: there are none) */
    void *fam;                  /* the row's family hyper-parameters (its keys, arch/families.h), or NULL */
    char name[128];
    struct gguf_file *gguf;
    struct kiln_vocab *vocab;

    struct kt_context *wctx;      /* weight tensors' metadata (no_alloc) */
    struct kt_buffer *wbuf;       /* the file mapping as a host buffer (weights bound zero-copy) */
    struct kt_buffer *cpu_buf[2]; /* the CPU's weights out of the mapping: matrices (in the CPU
                                     device's weight buffer type), the rest; or NULL */
    struct kt_tensor *tok_embd;   /* [n_embd, n_vocab] */
    struct kt_tensor *output_norm;
    struct kt_tensor *output;     /* [n_embd, n_vocab]; == tok_embd when tied */
    struct kt_tensor *rope_freqs; /* [n_rot/2] divisors of each pair's RoPE frequency (Llama 3), or NULL */
    /* BERT: absolute positions, token types (type 0 added to every token), the embeddings' LayerNorm */
    struct kt_tensor *pos_embd;   /* [n_embd, n_ctx_train] */
    struct kt_tensor *type_embd;  /* [n_embd, n_token_types] */
    struct kt_tensor *tok_norm, *tok_norm_b;
    /* the classifier head of rank pooling: cls [n_embd, n_embd] (+ bias), tanh, cls.output */
    struct kt_tensor *cls, *cls_b, *cls_out, *cls_out_b; /* cls_out [n_embd, n_cls_out] */
    struct kiln_layer *layers;    /* n_layer */
    int64_t n_params;
    size_t weight_bytes;

    struct kt_device *gpu;     /* where gpu_buf lives, or NULL (everything on the CPU) */
    struct kt_buffer *gpu_buf; /* the offloaded weights */
    int32_t gpu_layer0;        /* first layer on the GPU (n_layer: none) */
    bool gpu_output;           /* output and output_norm on the GPU */
    char gpu_note[192];
};

/* What a graph builder gets for one batch. */
struct kiln_graph_in {
    struct kt_context *ctx;
    const struct kiln_model *model;
    struct kiln_context *kctx;
    struct kt_tensor *tokens;  /* I32 [n_tokens] */
    struct kt_tensor *pos;     /* I32 [n_tokens] */
    struct kt_tensor *out_ids; /* I32 [n_outputs] rows whose logits are wanted */
    int64_t n_tokens, n_outputs;
    bool embeddings; /* the builder returns the last hidden states [n_embd, n_tokens], every token */
    struct kiln_mem_inputs mem[KILN_MEM_MAX_PARTS]; /* per memory part (memory.h): mask, cell order, cells */
};

/* ---- the architecture table (arch.c) */

/* A weight's extent in the units of the hyper-parameters; per-layer tensors take
 * their layer's values (kiln_layer_hp), the others layer 0's. */
enum kiln_dim {
    KILN_DIM_NONE = 0, /* a missing dimension: 1 */
    KILN_DIM_ONE,      /* exactly 1 (a scalar weight such as gemma4's layer_output_scale) */
    KILN_DIM_EMBD,     /* n_embd */
    KILN_DIM_VOCAB,    /* n_vocab */
    KILN_DIM_HEAD,     /* n_embd_head */
    KILN_DIM_ROT_PAIRS,/* n_rot / 2 */
    KILN_DIM_Q,        /* n_embd_head * n_head */
    KILN_DIM_KV,       /* n_embd_head * n_head_kv */
    KILN_DIM_QKV,      /* Q + 2 KV (fused q|k|v rows) */
    KILN_DIM_FF,       /* n_ff */
    KILN_DIM_FF2,      /* 2 n_ff (fused gate|up rows) */
    KILN_DIM_CTX_TRAIN,/* n_ctx_train (absolute position embeddings) */
    KILN_DIM_TOKEN_TYPES, /* n_token_types */
    KILN_DIM_CLS_OUT,  /* n_cls_out (the classifier's outputs) */
};

/* One tensor of an architecture: its GGUF name (per-layer ones without the
 * "blk.N." prefix), shape (up to three dimensions: expert stacks are 3-D), whether
 * a file may lack it, and where it is bound: a field of kiln_model or of
 * kiln_layer (by offset). A fused tensor also splits its rows, in order, into
 * views bound to other fields. */
struct kiln_tensor_spec {
    const char *name;
    bool per_layer;
    bool optional;
    enum kiln_dim ne0, ne1, ne2; /* KILN_DIM_NONE ends the shape */
    size_t field;
    struct {
        size_t field;
        enum kiln_dim rows;
    } split[3]; /* rows == KILN_DIM_NONE ends the list */
};

/* A family hyper-parameter: <arch>.<name>, read by the generic loader (hparams.c)
 * into the row's family struct (arch/families.h) at field: an int64_t, float or bool. */
enum kiln_key_type { KILN_KEY_INT, KILN_KEY_FLOAT, KILN_KEY_BOOL };
struct kiln_key_spec {
    const char *name;
    enum kiln_key_type type;
    bool required;    /* absent: an error naming it; else def */
    double def, lo, hi;
    size_t field;
};

/* Which layers attend over a window (KILN_LAYER_ATTN_WINDOW) and how their RoPE
 * differs. The window is <arch>.<window_key>; absent, window_def (0: no windowed
 * layers; < 0: the key is required). The pattern is <arch>.<pattern_key>: a number
 * n (layer i windowed when i % n < n - 1: n - 1 local layers, then a global one; 0
 * or 1: every layer windowed) or a per-layer bool array; absent, pattern_def
 * (< 0: the key is required). */
struct kiln_window_spec {
    const char *window_key;   /* NULL: every layer attends over every position */
    int64_t window_def;
    const char *pattern_key;
    int64_t pattern_def;
    double freq_base_def;     /* rope.freq_base_swa when absent (0: the global base) */
    bool global_scaling;      /* windowed layers take the file's rope scaling (else none) */
};

/* One row per architecture: everything that says what it is. The common
 * hyper-parameters (context, widths, heads, RoPE, norms) are read for every row;
 * the row adds its family keys, which layers are windowed, its tensors, the
 * builder and its graph budget. An absent output.weight means the output is tied
 * to token_embd.weight. */
struct kiln_arch {
    const char *name;
    int rope_mode; /* KT_ROPE_NORMAL / KT_ROPE_NEOX */
    bool encoder;  /* attention over the whole sequence, not causal; no output head: embeddings only */
    const struct kiln_tensor_spec *tensors; /* every tensor a file of this architecture may hold */
    size_t n_tensors;
    const struct kiln_key_spec *keys;       /* family hyper-parameters, into a struct of fam_size bytes */
    size_t n_keys, fam_size;
    struct kiln_window_spec window;
    /* after every key is read: derived family values, and what the row refuses, by name (may be NULL) */
    bool (*prepare)(struct kiln_model *m, char *err, size_t errlen);
    /* builds and returns the logits tensor [n_vocab, n_outputs] */
    struct kt_tensor *(*build)(const struct kiln_graph_in *in);
    int graph_per_layer, graph_extra; /* graph nodes: at most n_layer * per_layer + extra */
};

const struct kiln_arch *kiln_arch_find(const char *name);
/* a dimension's size for a tensor of layer l (NULL: a global tensor: layer 0's values) */
int64_t kiln_dim_size(const struct kiln_hparams *hp, const struct kiln_layer_hp *l, enum kiln_dim d);
/* The common keys (vocab_size checked against the vocabulary's n_vocab tokens), the
 * layers' kinds and shapes, and the row's family keys (hparams.c). */
bool kiln_load_hparams(struct kiln_model *m, const char *arch, int64_t n_vocab, char *err, size_t errlen);
struct kt_tensor *kiln_build_llama(const struct kiln_graph_in *in);
struct kt_tensor *kiln_build_gemma(const struct kiln_graph_in *in); /* arch/gemma.c */
struct kt_tensor *kiln_build_bert(const struct kiln_graph_in *in);  /* arch/bert.c */

/* ---- pooling (pooling.c): embeddings out of a builder's hidden states */

/* Pooling's graph inputs (created with the graph; reserve: the largest batch) */
struct kiln_pool_inputs {
    struct kt_tensor *rows; /* I32 [n_seq]: each sequence's first (cls, rank) or last token */
    struct kt_tensor *mean; /* F32 [n_tokens, n_seq]: 1/len where token t is in sequence s */
    int64_t n_seq;
};
/* The pooled embeddings [n_embd_out, n_seq] (none: x itself) of hidden states x [n_embd, T] */
struct kt_tensor *kiln_pool_build(const struct kiln_graph_in *in, struct kiln_pool_inputs *pi, struct kt_tensor *x,
                                  enum kiln_pooling pooling, int64_t n_seq);
/* Which sequences the batch holds, in order of first appearance: seq_row[s] their row (-1:
 * absent); returns how many. */
int32_t kiln_pool_seqs(const struct kiln_batch *b, int32_t n_seq_max, int32_t *seq_row);
/* The inputs' values for batch b */
bool kiln_pool_set_inputs(const struct kiln_pool_inputs *pi, const struct kiln_batch *b, enum kiln_pooling pooling,
                          const int32_t *seq_row);

/* ---- KV cache (the memory's KV kinds: memory.h, kv_cache.c) */

struct kiln_kv_cell {
    int32_t pos;      /* -1: empty */
    uint64_t seq;     /* bit s: sequence s uses this cell */
};

/* Graph side (kv_graph.c): store this batch's k [D, Hkv, T] (contiguous) and v
 * [D*Hkv, T] in the cells layer il's memory part placed them in and return what
 * attention reads, ordered after those stores: k and v [D, n_kv, Hkv] in the
 * cache's types (one row per cell, for kt_attn_ext), with the part's mask and cell
 * order. Every builder goes through this. */
struct kiln_kv_views {
    struct kt_tensor *k, *v;
    struct kt_tensor *mask, *order;
};
struct kiln_kv_views kiln_kv_store(const struct kiln_graph_in *in, int il, struct kt_tensor *k,
                                   struct kt_tensor *v);

/* ---- context */

struct kiln_context {
    const struct kiln_model *model;
    struct kiln_context_params params;
    struct kiln_memory mem;

    struct kt_backend *backend; /* the CPU */
    struct kt_backend *gpu;     /* the model's GPU, or NULL */
    struct kt_sched *sched;
    uint8_t *meta_buf;       /* graph metadata arena, reused every decode */
    size_t meta_size;
    int graph_size;

    float *logits;           /* [n_outputs_max, n_vocab] of the last decode (NULL with embeddings) */
    enum kiln_pooling pooling; /* with embeddings: the one in force */
    float *embd;             /* [rows, n_embd_out]: per sequence pooled, per token with pooling none */
    int32_t *embd_seq_row;   /* n_seq_max: sequence -> row of embd, or -1 */
    int64_t n_embd_out;
    struct kiln_pool_inputs pool;
    int32_t *logits_row;     /* batch index -> row in logits, or -1 */
    int32_t n_outputs;
    int32_t n_batch_last;

    char err[256];
};

#endif
