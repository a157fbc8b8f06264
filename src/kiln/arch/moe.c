/*
 * moe.c - the routed feed-forward every family with experts calls (Mixtral's llama
 * layout, Qwen3-MoE): the router scores each token's experts, the top
 * n_expert_used serve it, and their outputs are summed with the routing weights.
 * The expert products are one kt_mul_mat_id each, so the backend reads only the
 * experts a batch chose and groups the batch's tokens by expert.
 *
 * Key: T tokens in the batch, E experts, k experts used per token, F an expert's width.
 */
#include "runtime.h"

struct kt_tensor *kiln_moe_ffn(const struct kiln_graph_in *in, int il, struct kt_tensor *cur) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const int64_t T = cur->ne[1], E = lh->n_expert, k = lh->n_expert_used, n_embd = cur->ne[0];

    /* routing: softmax over every expert, the k most probable, their probabilities */
    struct kt_tensor *probs = kt_soft_max(ctx, kt_mul_mat(ctx, L->ffn_gate_inp, cur)); /* [E, T] */
    struct kt_tensor *chosen = kt_top_k(ctx, probs, (int)k);                             /* I32 [k, T] */
    struct kt_tensor *w = kt_get_rows(ctx, kt_reshape_3d(ctx, probs, 1, E, T), chosen); /* [1, k, T] */
    if (m->arch->moe.norm_weights) {
        /* the chosen weights sum to 1 (the top k of a softmax sum to at least k/E, so the
         * sum needs no guard against zero) */
        struct kt_tensor *w2 = kt_reshape_2d(ctx, w, k, T);
        w = kt_reshape_3d(ctx, kt_div(ctx, w2, kt_sum_rows(ctx, w2)), 1, k, T);
    }

    /* SwiGLU experts: each token's row times its k experts' matrices */
    struct kt_tensor *x = kt_reshape_3d(ctx, cur, n_embd, 1, T);
    struct kt_tensor *up = kt_mul_mat_id(ctx, L->ffn_up_exps, x, chosen);     /* [F, k, T] */
    struct kt_tensor *gate = kt_mul_mat_id(ctx, L->ffn_gate_exps, x, chosen); /* [F, k, T] */
    struct kt_tensor *out = kt_mul_mat_id(ctx, L->ffn_down_exps, kt_swiglu(ctx, gate, up), chosen); /* [n_embd, k, T] */
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
