/*
 * moe.c - the routed feed-forward every family with experts calls (Mixtral's llama
 * layout, Qwen3-MoE, gpt-oss): the router scores each token's experts, the top
 * n_expert_used serve it, and their outputs are summed with the routing weights.
 * The expert products are one kt_mul_mat_id each, so the backend reads only the
 * experts a batch chose and groups the batch's tokens by expert. What differs per
 * family is the row's moe spec (runtime.h): how the weights come from the router's
 * logits, the activation, and the biases gpt-oss adds to the router and each expert.
 *
 * Key: T tokens in the batch, E experts, k experts used per token, F an expert's width.
 */
#include "runtime.h"

/* gpt-oss's clamped SwiGLU (llama.cpp's constants for LLM_FFN_SWIGLU_OAI_MOE) */
#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

/* each chosen expert's bias row: b [n, E] taken at ids [k, T] -> [n, k, T] */
static struct kt_tensor *expert_bias(struct kt_context *ctx, struct kt_tensor *x, struct kt_tensor *b,
                                     struct kt_tensor *ids) {
    if (!b || !x || !ids) return x;
    struct kt_tensor *rows = kt_get_rows(ctx, b, kt_reshape_1d(ctx, ids, ids->ne[0] * ids->ne[1]));
    return kt_add(ctx, x, kt_reshape_3d(ctx, rows, b->ne[0], ids->ne[0], ids->ne[1]));
}

struct kt_tensor *kiln_moe_ffn(const struct kiln_graph_in *in, int il, struct kt_tensor *cur) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_moe_spec *spec = &m->arch->moe;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const int64_t T = cur->ne[1], E = lh->n_expert, k = lh->n_expert_used, n_embd = cur->ne[0];

    /* routing */
    struct kt_tensor *logits = kt_mul_mat(ctx, L->ffn_gate_inp, cur); /* [E, T] */
    if (L->ffn_gate_inp_b) logits = kt_add(ctx, logits, L->ffn_gate_inp_b);
    struct kt_tensor *w; /* [1, k, T] */
    struct kt_tensor *chosen;  /* I32 [k, T] */
    if (spec->gating == KILN_GATING_SOFTMAX_CHOSEN) {
        /* the k largest logits, a softmax over those alone */
        chosen = kt_top_k(ctx, logits, (int)k);
        w = kt_get_rows(ctx, kt_reshape_3d(ctx, logits, 1, E, T), chosen);
        w = kt_reshape_3d(ctx, kt_soft_max(ctx, kt_reshape_2d(ctx, w, k, T)), 1, k, T);
    } else {
        /* softmax over every expert, the k most probable, their probabilities */
        struct kt_tensor *probs = kt_soft_max(ctx, logits); /* [E, T] */
        chosen = kt_top_k(ctx, probs, (int)k);
        w = kt_get_rows(ctx, kt_reshape_3d(ctx, probs, 1, E, T), chosen);
    }
    if (spec->norm_weights) {
        /* the chosen weights sum to 1 (the top k of a softmax sum to at least k/E, so the
         * sum needs no guard against zero) */
        struct kt_tensor *w2 = kt_reshape_2d(ctx, w, k, T);
        w = kt_reshape_3d(ctx, kt_div(ctx, w2, kt_sum_rows(ctx, w2)), 1, k, T);
    }

    /* the experts: each token's row times its k experts' matrices */
    struct kt_tensor *x = kt_reshape_3d(ctx, cur, n_embd, 1, T);
    struct kt_tensor *up = expert_bias(ctx, kt_mul_mat_id(ctx, L->ffn_up_exps, x, chosen), L->ffn_up_exps_b, chosen);
    struct kt_tensor *gate = /* [F, k, T] */
        expert_bias(ctx, kt_mul_mat_id(ctx, L->ffn_gate_exps, x, chosen), L->ffn_gate_exps_b, chosen);
    struct kt_tensor *h = spec->act == KILN_MOE_SWIGLU_OAI ? kt_swiglu_oai(ctx, gate, up, OAI_ALPHA, OAI_LIMIT)
                                                           : kt_swiglu(ctx, gate, up);
    struct kt_tensor *out = /* [n_embd, k, T] */
        expert_bias(ctx, kt_mul_mat_id(ctx, L->ffn_down_exps, h, chosen), L->ffn_down_exps_b, chosen);
    out = kt_mul(ctx, out, w);

    /* the weighted outputs summed in expert order */
    if (!out) return NULL;
    struct kt_tensor *sum = NULL;
    for (int64_t j = 0; j < k; j++) {
        struct kt_tensor *e = kt_view_2d(ctx, out, n_embd, T, out->nb[2], (size_t)j * out->nb[1]);
        sum = sum ? kt_add(ctx, sum, e) : e;
    }
    return k == 1 ? kt_cont(ctx, sum) : sum;
}
