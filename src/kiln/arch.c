/*
 * arch.c - the architectures kiln runs, one row each (struct kiln_arch in
 * runtime.h). A row is everything that makes a family:
 *
 *   name, rope_mode       general.architecture and the RoPE layout (normal / NeoX)
 *   tensors               every tensor a file may hold: name, per layer or not, required or
 *                         optional, shape in hyper-parameter units (up to 3-D: expert stacks),
 *                         the model/layer field it binds, fused tensors split into views
 *   keys, fam_size        the family's own <arch>.* keys with defaults and ranges, read by the
 *                         one loader (hparams.c) into a family struct (arch/families.h), never
 *                         into the public kiln_hparams
 *   window                which layers attend over a sliding window: from a key, a pattern
 *                         number or a per-layer array (kiln_layer_hp.kind), and their RoPE
 *   prepare               derived family values and refusals by name, after the keys
 *   build                 the graph builder (arch/<family>.c)
 *   graph_per_layer/extra the graph's node budget
 *
 * A file tensor no row names is refused (model.c), so a new architecture is a row
 * here plus, where the graph differs, one builder file in arch/.
 */
#include "arch/families.h"
#include "runtime.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define FIELD_M(f) offsetof(struct kiln_model, f)
#define FIELD_L(f) offsetof(struct kiln_layer, f)
/* global and per-layer tensors: name, optional, ne0, ne1, field */
#define G(nm, opt, d0, d1, f) {.name = nm, .per_layer = false, .optional = opt, .ne0 = d0, .ne1 = d1, .field = FIELD_M(f)}
#define L(nm, opt, d0, d1, f) {.name = nm, .per_layer = true, .optional = opt, .ne0 = d0, .ne1 = d1, .field = FIELD_L(f)}
/* a 3-D per-layer tensor (an expert stack [d0, d1, experts]) */
#define L3(nm, opt, d0, d1, d2, f) \
    {.name = nm, .per_layer = true, .optional = opt, .ne0 = d0, .ne1 = d1, .ne2 = d2, .field = FIELD_L(f)}

enum { REQ = false, OPT = true };

/* shared by every row: embeddings, final norm, the output projection (tied to
 * token_embd when absent, as in Qwen2.5-0.5B or Llama-3.2-1B) */
#define HEAD_TENSORS                                                        \
    G("token_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, tok_embd),  \
    G("output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, output_norm), \
    G("output.weight", OPT, KILN_DIM_EMBD, KILN_DIM_VOCAB, output)

#define ATTN_NORM L("attn_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_norm)
#define ATTN_QKV                                                 \
    L("attn_q.weight", REQ, KILN_DIM_EMBD, KILN_DIM_Q, wq),     \
    L("attn_k.weight", REQ, KILN_DIM_EMBD, KILN_DIM_KV, wk),    \
    L("attn_v.weight", REQ, KILN_DIM_EMBD, KILN_DIM_KV, wv)
/* q/k/v biases: required (qwen2) or optional (gpt-oss, bert) */
#define QKV_BIAS(req)                                            \
    L("attn_q.bias", req, KILN_DIM_Q, KILN_DIM_NONE, bq),       \
    L("attn_k.bias", req, KILN_DIM_KV, KILN_DIM_NONE, bk),      \
    L("attn_v.bias", req, KILN_DIM_KV, KILN_DIM_NONE, bv)
#define ATTN_OUT L("attn_output.weight", REQ, KILN_DIM_Q, KILN_DIM_EMBD, wo)
#define FFN_NORM L("ffn_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, ffn_norm)
#define FFN_DOWN L("ffn_down.weight", REQ, KILN_DIM_FF, KILN_DIM_EMBD, w_down)
#define FFN_GATE_UP                                              \
    L("ffn_gate.weight", REQ, KILN_DIM_EMBD, KILN_DIM_FF, w_gate), \
    L("ffn_up.weight", REQ, KILN_DIM_EMBD, KILN_DIM_FF, w_up)

/* a required per-layer tensor held only by dense layers or only by routed ones */
#define LW(nm, d0, d1, d2, f, w) \
    {.name = nm, .per_layer = true, .ne0 = d0, .ne1 = d1, .ne2 = d2, .when = w, .field = FIELD_L(f)}
#define FFN_DENSE                                                                                 \
    LW("ffn_gate.weight", KILN_DIM_EMBD, KILN_DIM_FF, KILN_DIM_NONE, w_gate, KILN_WHEN_DENSE),   \
    LW("ffn_up.weight", KILN_DIM_EMBD, KILN_DIM_FF, KILN_DIM_NONE, w_up, KILN_WHEN_DENSE),       \
    LW("ffn_down.weight", KILN_DIM_FF, KILN_DIM_EMBD, KILN_DIM_NONE, w_down, KILN_WHEN_DENSE)
/* the routed feed-forward (arch/moe.c): a router and SwiGLU experts, one matrix per expert */
#define EXPERTS KILN_WHEN_EXPERTS
#define FFN_EXPERTS                                                                                 \
    LW("ffn_gate_inp.weight", KILN_DIM_EMBD, KILN_DIM_EXPERT, KILN_DIM_NONE, ffn_gate_inp, EXPERTS),   \
    LW("ffn_gate_exps.weight", KILN_DIM_EMBD, KILN_DIM_FF_EXP, KILN_DIM_EXPERT, ffn_gate_exps, EXPERTS), \
    LW("ffn_up_exps.weight", KILN_DIM_EMBD, KILN_DIM_FF_EXP, KILN_DIM_EXPERT, ffn_up_exps, EXPERTS),     \
    LW("ffn_down_exps.weight", KILN_DIM_FF_EXP, KILN_DIM_EMBD, KILN_DIM_EXPERT, ffn_down_exps, EXPERTS)

static const struct kiln_tensor_spec llama_tensors[] = {
    HEAD_TENSORS,
    /* Llama 3.1+: per RoPE pair, a divisor of its frequency (one tensor for all layers) */
    G("rope_freqs.weight", OPT, KILN_DIM_ROT_PAIRS, KILN_DIM_NONE, rope_freqs),
    /* Mixtral's layout: experts in place of the dense feed-forward where expert_count > 0 */
    ATTN_NORM, ATTN_QKV, ATTN_OUT, FFN_NORM, FFN_DENSE, FFN_EXPERTS,
};

static const struct kiln_tensor_spec qwen2_tensors[] = {
    HEAD_TENSORS,
    ATTN_NORM, ATTN_QKV,
    QKV_BIAS(REQ),
    ATTN_OUT, FFN_NORM, FFN_GATE_UP, FFN_DOWN,
};

static const struct kiln_tensor_spec qwen3_tensors[] = {
    HEAD_TENSORS,
    ATTN_NORM, ATTN_QKV,
    /* RMS norm over each q and each k head before RoPE */
    L("attn_q_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_q_norm),
    L("attn_k_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_k_norm),
    ATTN_OUT, FFN_NORM, FFN_GATE_UP, FFN_DOWN,
};

/* Qwen3-MoE: qwen3's attention, every layer routed */
static const struct kiln_tensor_spec qwen3moe_tensors[] = {
    HEAD_TENSORS,
    ATTN_NORM, ATTN_QKV,
    L("attn_q_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_q_norm),
    L("attn_k_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_k_norm),
    ATTN_OUT, FFN_NORM, FFN_EXPERTS,
};

static const struct kiln_tensor_spec phi3_tensors[] = {
    HEAD_TENSORS,
    ATTN_NORM,
    /* one matrix: q rows, then k, then v; the three are views of its rows */
    {.name = "attn_qkv.weight", .per_layer = true, .ne0 = KILN_DIM_EMBD, .ne1 = KILN_DIM_QKV, .field = FIELD_L(wqkv),
     .split = {{FIELD_L(wq), KILN_DIM_Q}, {FIELD_L(wk), KILN_DIM_KV}, {FIELD_L(wv), KILN_DIM_KV}}},
    ATTN_OUT, FFN_NORM,
    /* gate rows, then up rows: SwiGLU over the two halves */
    {.name = "ffn_up.weight", .per_layer = true, .ne0 = KILN_DIM_EMBD, .ne1 = KILN_DIM_FF2, .field = FIELD_L(w_gate_up),
     .split = {{FIELD_L(w_gate), KILN_DIM_FF}, {FIELD_L(w_up), KILN_DIM_FF}}},
    FFN_DOWN,
};

#define TENSORS(list) .tensors = list, .n_tensors = sizeof list / sizeof list[0]
#define KEYS(list, fam) .keys = list, .n_keys = sizeof list / sizeof list[0], .fam_size = sizeof(fam)
/* llama's graph: about 40 nodes a layer */
#define FIELD_F(st, f) offsetof(struct st, f)
/* a family key: name, default, accepted range, the family struct's field */
#define KEY_F(nm, d, l, h, st, f) \
    {.name = nm, .type = KILN_KEY_FLOAT, .def = d, .lo = l, .hi = h, .field = FIELD_F(st, f)}
#define KEY_I(nm, d, l, h, st, f) \
    {.name = nm, .type = KILN_KEY_INT, .def = d, .lo = l, .hi = h, .field = FIELD_F(st, f)}
#define ROW(nm, rope, list) \
    {.name = nm, .rope_mode = rope, TENSORS(list), .build = kiln_build_llama, .graph_per_layer = 48, .graph_extra = 64}

/* ---- Gemma (arch/gemma.c): norms after attention and feed-forward, GeGLU */

#define GEMMA_POST_NORMS                                                                   \
    L("post_attention_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_post_norm),   \
    L("post_ffw_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, ffn_post_norm)
#define QK_NORMS                                                                   \
    L("attn_q_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_q_norm),      \
    L("attn_k_norm.weight", REQ, KILN_DIM_HEAD, KILN_DIM_NONE, attn_k_norm)

/* the output is always the embedding (llama.cpp loads no output.weight for gemma2) */
static const struct kiln_tensor_spec gemma2_tensors[] = {
    G("token_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, tok_embd),
    G("output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, output_norm),
    ATTN_NORM, ATTN_QKV, ATTN_OUT, FFN_NORM, FFN_GATE_UP, FFN_DOWN, GEMMA_POST_NORMS,
};

static const struct kiln_tensor_spec gemma3_tensors[] = {
    HEAD_TENSORS,
    ATTN_NORM, ATTN_QKV, QK_NORMS, ATTN_OUT, FFN_NORM, FFN_GATE_UP, FFN_DOWN, GEMMA_POST_NORMS,
};

/* Gemma 4 (dense text): global layers may have no v projection (v = k), per-layer head
 * sizes and KV heads (dims resolve per layer), one rope_freqs for every global layer, an
 * optional scale of each layer's output */
static const struct kiln_tensor_spec gemma4_tensors[] = {
    HEAD_TENSORS,
    G("rope_freqs.weight", REQ, KILN_DIM_ROT_PAIRS, KILN_DIM_NONE, rope_freqs),
    ATTN_NORM,
    L("attn_q.weight", REQ, KILN_DIM_EMBD, KILN_DIM_Q, wq),
    L("attn_k.weight", REQ, KILN_DIM_EMBD, KILN_DIM_KV, wk),
    L("attn_v.weight", OPT, KILN_DIM_EMBD, KILN_DIM_KV, wv),
    QK_NORMS, ATTN_OUT, FFN_NORM, FFN_GATE_UP, FFN_DOWN, GEMMA_POST_NORMS,
    L("layer_output_scale.weight", OPT, KILN_DIM_ONE, KILN_DIM_NONE, out_scale),
};

static const struct kiln_key_spec gemma2_keys[] = {
    KEY_F("attn_logit_softcapping", 50.0, 0.0, 1e6, kiln_gemma_hp, attn_softcap),
    KEY_F("final_logit_softcapping", 30.0, 0.0, 1e6, kiln_gemma_hp, final_softcap),
};
static const struct kiln_key_spec gemma3_keys[] = {
    KEY_F("final_logit_softcapping", 0.0, 0.0, 1e6, kiln_gemma_hp, final_softcap),
};
static const struct kiln_key_spec gemma4_keys[] = {
    KEY_F("final_logit_softcapping", 30.0, 0.0, 1e6, kiln_gemma_hp, final_softcap),
    KEY_I("embedding_length_per_layer_input", 0, 0, 1 << 20, kiln_gemma_hp, n_embd_per_layer),
    KEY_I("expert_count", 0, 0, 1 << 16, kiln_gemma_hp, n_expert),
    KEY_I("attention.shared_kv_layers", 0, 0, KILN_MAX_LAYERS, kiln_gemma_hp, n_kv_shared),
};

/* ---- gpt-oss (arch/gpt_oss.c): biases, attention sinks, a norm before the routed
 * feed-forward named post_attention_norm, biased router and experts */
#define BIAS(nm, d0, d1, f) LW(nm, d0, d1, KILN_DIM_NONE, f, EXPERTS)
static const struct kiln_tensor_spec gpt_oss_tensors[] = {
    G("token_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, tok_embd),
    G("output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, output_norm),
    G("output.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, output),
    ATTN_NORM, ATTN_QKV,
    QKV_BIAS(OPT),
    ATTN_OUT,
    L("attn_output.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, bo),
    L("attn_sinks.weight", REQ, KILN_DIM_HEADS, KILN_DIM_NONE, attn_sinks),
    L("post_attention_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_post_norm),
    FFN_EXPERTS,
    BIAS("ffn_gate_inp.bias", KILN_DIM_EXPERT, KILN_DIM_NONE, ffn_gate_inp_b),
    BIAS("ffn_gate_exps.bias", KILN_DIM_FF_EXP, KILN_DIM_EXPERT, ffn_gate_exps_b),
    BIAS("ffn_up_exps.bias", KILN_DIM_FF_EXP, KILN_DIM_EXPERT, ffn_up_exps_b),
    BIAS("ffn_down_exps.bias", KILN_DIM_EMBD, KILN_DIM_EXPERT, ffn_down_exps_b),
};

/* the window's keys; llama.cpp's defaults when they are absent */
#define SWA_KEYS .window_key = "attention.sliding_window", .pattern_key = "attention.sliding_window_pattern"
#define GEMMA_ROW(nm, list, keys, prep, ...)                                                                    \
    {.name = nm, .rope_mode = KT_ROPE_NEOX, TENSORS(list), KEYS(keys, struct kiln_gemma_hp), .window = {__VA_ARGS__}, \
     .prepare = prep, .build = kiln_build_gemma, .graph_per_layer = 56, .graph_extra = 64}

/* ---- BERT (arch/bert.c): learned positions and token types, LayerNorms with biases after
 * each residual, GELU, attention over the whole sequence; an optional classifier head */

#define CLS_HEAD                                                                    \
    G("cls.weight", OPT, KILN_DIM_EMBD, KILN_DIM_EMBD, cls),                        \
    G("cls.bias", OPT, KILN_DIM_EMBD, KILN_DIM_NONE, cls_b),                        \
    G("cls.output.weight", OPT, KILN_DIM_EMBD, KILN_DIM_CLS_OUT, cls_out),          \
    G("cls.output.bias", OPT, KILN_DIM_CLS_OUT, KILN_DIM_NONE, cls_out_b)

static const struct kiln_tensor_spec bert_tensors[] = {
    G("token_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, tok_embd),
    G("token_types.weight", OPT, KILN_DIM_EMBD, KILN_DIM_TOKEN_TYPES, type_embd),
    G("position_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_CTX_TRAIN, pos_embd),
    G("token_embd_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, tok_norm),
    G("token_embd_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, tok_norm_b),
    CLS_HEAD,
    ATTN_QKV,
    QKV_BIAS(OPT),
    ATTN_OUT,
    L("attn_output.bias", OPT, KILN_DIM_EMBD, KILN_DIM_NONE, bo),
    L("attn_output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_out_norm),
    L("attn_output_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_out_norm_b),
    L("ffn_up.weight", REQ, KILN_DIM_EMBD, KILN_DIM_FF, w_up),
    L("ffn_up.bias", OPT, KILN_DIM_FF, KILN_DIM_NONE, b_up),
    FFN_DOWN,
    L("ffn_down.bias", OPT, KILN_DIM_EMBD, KILN_DIM_NONE, b_down),
    L("layer_output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, layer_out_norm),
    L("layer_output_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, layer_out_norm_b),
};

/* nomic-bert: rotary positions (NeoX) instead of learned ones, one fused q|k|v matrix,
 * a SwiGLU feed-forward (gate and up, no biases) */
static const struct kiln_tensor_spec nomic_bert_tensors[] = {
    G("token_embd.weight", REQ, KILN_DIM_EMBD, KILN_DIM_VOCAB, tok_embd),
    G("token_types.weight", OPT, KILN_DIM_EMBD, KILN_DIM_TOKEN_TYPES, type_embd),
    G("token_embd_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, tok_norm),
    G("token_embd_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, tok_norm_b),
    {.name = "attn_qkv.weight", .per_layer = true, .ne0 = KILN_DIM_EMBD, .ne1 = KILN_DIM_QKV, .field = FIELD_L(wqkv),
     .split = {{FIELD_L(wq), KILN_DIM_Q}, {FIELD_L(wk), KILN_DIM_KV}, {FIELD_L(wv), KILN_DIM_KV}}},
    ATTN_OUT,
    L("attn_output.bias", OPT, KILN_DIM_EMBD, KILN_DIM_NONE, bo),
    L("attn_output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_out_norm),
    L("attn_output_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, attn_out_norm_b),
    FFN_GATE_UP, FFN_DOWN,
    L("layer_output_norm.weight", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, layer_out_norm),
    L("layer_output_norm.bias", REQ, KILN_DIM_EMBD, KILN_DIM_NONE, layer_out_norm_b),
};

static const struct kiln_key_spec bert_keys[] = {
    KEY_F("attention.layer_norm_epsilon", 1e-12, 0.0, 1.0, kiln_bert_hp, norm_eps),
    {.name = "attention.causal", .type = KILN_KEY_BOOL, .def = 0, .field = FIELD_F(kiln_bert_hp, causal)},
};

/* qwen2/qwen3/phi3 differ from llama only in tensors the builder finds bound
 * (biases, q/k norms, fused views) and in the RoPE layout */
static const struct kiln_arch arches[] = {
    {.name = "llama", .rope_mode = KT_ROPE_NORMAL, TENSORS(llama_tensors), .build = kiln_build_llama,
     .moe = {.allowed = true, .norm_weights = true}, .graph_per_layer = 48, .graph_extra = 64},
    ROW("qwen2", KT_ROPE_NEOX, qwen2_tensors),
    ROW("qwen3", KT_ROPE_NEOX, qwen3_tensors),
    ROW("phi3", KT_ROPE_NEOX, phi3_tensors),
    /* experts in llama files (Mixtral) and qwen3moe: softmax over every expert, the top
     * expert_used_count, their weights renormalized (llama.cpp's norm_w for both);
     * Mixtral's experts are feed_forward_length wide, Qwen3-MoE's
     * expert_feed_forward_length (absent: feed_forward_length / expert_used_count) */
    {.name = "qwen3moe", .rope_mode = KT_ROPE_NEOX, TENSORS(qwen3moe_tensors), .build = kiln_build_llama,
     .moe = {.allowed = true, .required = true, .ff_key = "expert_feed_forward_length", .ff_div_used = true,
             .norm_weights = true},
     .graph_per_layer = 48, .graph_extra = 64},
    /* every other layer windowed (4096 when the file does not say), its own RoPE base
     * only when the file gives one, the file's RoPE scaling on every layer */
    GEMMA_ROW("gemma2", gemma2_tensors, gemma2_keys, kiln_gemma2_prepare,
              SWA_KEYS, .window_def = 4096, .pattern_def = 2, .global_scaling = true),
    /* windowed only when the file gives a window; then five local layers to a global
     * one, base 10000 and no RoPE scaling on local layers */
    GEMMA_ROW("gemma3", gemma3_tensors, gemma3_keys, kiln_gemma3_prepare,
              SWA_KEYS, .window_def = 0, .pattern_def = 6, .freq_base_def = 10000.0),
    /* gpt-oss: a window on every other layer (the window required), YaRN RoPE, routing by a
     * softmax over the chosen experts' logits, gpt-oss's clamped SwiGLU */
    {.name = "gpt-oss", .rope_mode = KT_ROPE_NEOX, TENSORS(gpt_oss_tensors),
     .window = {SWA_KEYS, .window_def = -1, .pattern_def = 2, .global_scaling = true},
     .moe = {.allowed = true, .required = true, .ff_key = "expert_feed_forward_length", .ff_required = true,
             .gating = KILN_GATING_SOFTMAX_CHOSEN, .act = KILN_MOE_SWIGLU_OAI},
     .yarn = true, .build = kiln_build_gpt_oss, .graph_per_layer = 64, .graph_extra = 64},
    /* window and per-layer pattern required */
    GEMMA_ROW("gemma4", gemma4_tensors, gemma4_keys, kiln_gemma4_prepare,
              SWA_KEYS, .window_def = -1, .pattern_def = -1, .freq_base_def = 10000.0),
    {.name = "bert", .rope_mode = KT_ROPE_NORMAL, .encoder = true, TENSORS(bert_tensors),
     KEYS(bert_keys, struct kiln_bert_hp), .prepare = kiln_bert_prepare, .build = kiln_build_bert,
     .graph_per_layer = 48, .graph_extra = 64},
    {.name = "nomic-bert", .rope_mode = KT_ROPE_NEOX, .encoder = true, TENSORS(nomic_bert_tensors),
     KEYS(bert_keys, struct kiln_bert_hp), .prepare = kiln_bert_prepare, .build = kiln_build_bert,
     .graph_per_layer = 48, .graph_extra = 64},
};

const struct kiln_arch *kiln_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
        if (!strcmp(arches[i].name, name)) return &arches[i];
    return NULL;
}

bool kiln_arch_supported(const char *name) { return name && kiln_arch_find(name) != NULL; }

int64_t kiln_dim_size(const struct kiln_hparams *hp, const struct kiln_layer_hp *l, enum kiln_dim d) {
    const int64_t head = l ? l->n_embd_head : hp->n_embd_head, n_head = l ? l->n_head : hp->n_head;
    const int64_t n_head_kv = l ? l->n_head_kv : hp->n_head_kv, n_ff = l ? l->n_ff : hp->n_ff;
    switch (d) {
    case KILN_DIM_NONE: return 1;
    case KILN_DIM_ONE: return 1;
    case KILN_DIM_EMBD: return hp->n_embd;
    case KILN_DIM_VOCAB: return hp->n_vocab;
    case KILN_DIM_HEAD: return head;
    case KILN_DIM_ROT_PAIRS: return (l ? l->n_rot : hp->n_rot) / 2;
    case KILN_DIM_Q: return head * n_head;
    case KILN_DIM_KV: return head * n_head_kv;
    case KILN_DIM_QKV: return head * (n_head + 2 * n_head_kv);
    case KILN_DIM_FF: return n_ff;
    case KILN_DIM_FF2: return 2 * n_ff;
    case KILN_DIM_CTX_TRAIN: return hp->n_ctx_train;
    case KILN_DIM_TOKEN_TYPES: return hp->n_token_types;
    case KILN_DIM_CLS_OUT: return hp->n_cls_out;
    case KILN_DIM_HEADS: return n_head;
    case KILN_DIM_EXPERT: return l ? l->n_expert : 0;
    case KILN_DIM_FF_EXP: return l ? l->n_ff_exp : 0;
    }
    return -1;
}

void kiln_arch_list(char *buf, size_t size) {
    size_t used = 0;
    if (size) buf[0] = 0;
    for (size_t i = 0; i < sizeof arches / sizeof arches[0] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", arches[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}
