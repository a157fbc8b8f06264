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
#define KILN_MAX_EXPERTS 1024 /* llama.cpp's bound (Kimi K3's 1024 experts) */

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
    /* BERT (bo: gpt-oss too): biases and LayerNorms after the residuals */
    struct kt_tensor *bo, *b_up, *b_down;        /* [n_embd], [n_ff], [n_embd] */
    struct kt_tensor *attn_out_norm, *attn_out_norm_b;   /* [n_embd]: after attention's residual */
    struct kt_tensor *layer_out_norm, *layer_out_norm_b; /* [n_embd]: after the feed-forward's */
    /* mixtures of experts (arch/moe.c): a router and 3-D stacks, one matrix per expert */
    struct kt_tensor *ffn_gate_inp;              /* [n_embd, n_expert]: the router */
    struct kt_tensor *ffn_gate_exps, *ffn_up_exps; /* [n_embd, n_ff_exp, n_expert] */
    struct kt_tensor *ffn_down_exps;             /* [n_ff_exp, n_embd, n_expert] */
    /* gpt-oss: biases of the router and of each expert (its attention output's bias is
     * bo, above), the attention sinks */
    struct kt_tensor *ffn_gate_inp_b;            /* [n_expert] */
    struct kt_tensor *ffn_gate_exps_b, *ffn_up_exps_b; /* [n_ff_exp, n_expert] */
    struct kt_tensor *ffn_down_exps_b;           /* [n_embd, n_expert] */
    struct kt_tensor *attn_sinks;                /* [n_head]: a logit per head in attention's softmax */
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
    /* mixtures of experts (0: a dense feed-forward): experts in the layer, used per token,
     * and each expert's feed-forward width */
    int64_t n_expert, n_expert_used, n_ff_exp;
};

/* YaRN RoPE (rope.scaling.type "yarn", rows that allow it): every layer's angles mix
 * interpolated and unscaled ones over the pairs (kt_rope_params), with llama.cpp's
 * defaults: beta_fast 32, beta_slow 1, ext_factor 1, attn_factor rope.scaling.attn_factor
 * (1), the original context rope.scaling.original_context_length (context_length). */
struct kiln_yarn {
    bool on;
    float ext_factor, attn_factor, beta_fast, beta_slow;
    int64_t n_ctx_orig;
};

struct kiln_model {
    const struct kiln_arch *arch;
    struct kiln_hparams hp;
    struct kiln_layer_hp *lhp;  /* n_layer */
    int64_t n_swa;              /* window of the KILN_LAYER_ATTN_WINDOW layers (0: there are none) */
    struct kiln_yarn yarn;      /* YaRN RoPE on every layer where yarn.on */
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
    KILN_DIM_HEADS,    /* n_head (one value per head: gpt-oss's attention sinks) */
    KILN_DIM_EXPERT,   /* n_expert (a layer's experts) */
    KILN_DIM_FF_EXP,   /* n_ff_exp (one expert's feed-forward width) */
};

/* Which files of an architecture hold a tensor: every one, or only those whose layers
 * have experts (a router and expert stacks) or only those whose layers have none (a
 * dense feed-forward). A tensor of the other kind in a file is refused by name. */
enum kiln_tensor_when { KILN_WHEN_ANY = 0, KILN_WHEN_DENSE, KILN_WHEN_EXPERTS };

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
    enum kiln_tensor_when when;
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

/* Whether and how a family routes its feed-forward through experts (arch/moe.c).
 * <arch>.expert_count experts (absent: 0, a dense model, unless required), of which
 * <arch>.expert_used_count serve each token, each of width <arch>.<ff_key> (NULL or
 * absent: feed_forward_length, or with ff_div_used feed_forward_length / used).
 * Routing: the router's logits, softmax over every expert, the top n_expert_used
 * of them, their probabilities as the experts' weights, renormalized to sum to 1 when
 * norm_weights. */
enum kiln_moe_gating {
    KILN_GATING_SOFTMAX = 0,    /* softmax over every expert, the chosen ones' probabilities */
    KILN_GATING_SOFTMAX_CHOSEN, /* the top logits chosen, softmax over them alone (gpt-oss) */
};
enum kiln_moe_act {
    KILN_MOE_SWIGLU = 0,        /* silu(gate) * up */
    KILN_MOE_SWIGLU_OAI,        /* gpt-oss's clamped form (kt_swiglu_oai, alpha 1.702, limit 7) */
};
struct kiln_moe_spec {
    bool allowed;      /* the family may have experts */
    bool required;     /* ... and must */
    const char *ff_key;
    bool ff_div_used;
    bool ff_required;  /* ff_key must be in the file */
    bool norm_weights;
    enum kiln_moe_gating gating;
    enum kiln_moe_act act;
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
    struct kiln_moe_spec moe;
    bool yarn;     /* the family may scale RoPE by YaRN (else that scaling type is refused) */
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
/* The output head over the final-normed hidden states x [n_embd, T] (arch/llama.c): x
 * itself for embeddings, else the logits of the output rows, soft-capped when softcap > 0 */
struct kt_tensor *kiln_build_head(const struct kiln_graph_in *in, struct kt_tensor *x, float softcap);
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
struct kt_tensor *kiln_build_gpt_oss(const struct kiln_graph_in *in); /* arch/gpt_oss.c */
/* The routed feed-forward of layer il over cur [n_embd, T] (arch/moe.c): the row's
 * routing, SwiGLU experts, their outputs weighted and summed: [n_embd, T]. */
struct kt_tensor *kiln_moe_ffn(const struct kiln_graph_in *in, int il, struct kt_tensor *cur);

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
