/*
 * bert.c - the BERT graph (BERT, BGE, MiniLM, E5 and their rerankers), read top to
 * bottom: token embeddings plus token type 0's row plus learned absolute position
 * embeddings, a LayerNorm; per layer q/k/v projections with biases, attention over
 * every token of the token's own sequence (not causal), the output projection, the
 * residual and a LayerNorm; the feed-forward (up, GELU, down, with biases), the
 * residual and a LayerNorm. The result is the hidden states: BERT has no output
 * head; pooling (pooling.c) makes embeddings or, through the classifier, scores.
 * nomic-bert differs where its row binds other tensors: no learned positions but
 * RoPE (NeoX) on q and k, one fused q|k|v matrix (seen as views), and a SwiGLU
 * feed-forward (gate and up) instead of GELU.
 *
 * Key: T tokens in the batch, D head dim, H heads, Hkv KV heads.
 */
#include "errf.h"
#include "families.h"
#include "runtime.h"

#include <math.h>

bool kiln_bert_prepare(struct kiln_model *m, char *err, size_t errlen) {
    const struct kiln_bert_hp *b = m->fam;
    if (b->causal)
        return kiln_errf(err, errlen,
                         "bert.attention.causal = true is not supported: kiln runs BERT with attention over the "
                         "whole sequence");
    if (m->hp.n_token_types <= 0)
        return kiln_errf(err, errlen, "a bert model needs tokenizer.ggml.token_type_count (the token types' count)");
    return true;
}

/* LayerNorm: (x - mean) / sqrt(var + eps) * w + b */
static struct kt_tensor *layer_norm(struct kt_context *ctx, struct kt_tensor *x, struct kt_tensor *w,
                                    struct kt_tensor *b, float eps) {
    return kt_add(ctx, kt_mul(ctx, kt_norm(ctx, x, eps), w), b);
}

static struct kt_tensor *linear(struct kt_context *ctx, struct kt_tensor *w, struct kt_tensor *b,
                                struct kt_tensor *x) {
    struct kt_tensor *y = kt_mul_mat(ctx, w, x);
    return b ? kt_add(ctx, y, b) : y;
}

static struct kt_tensor *attention(const struct kiln_graph_in *in, int il, struct kt_tensor *x) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const int64_t T = in->n_tokens, D = lh->n_embd_head, H = lh->n_head, Hkv = lh->n_head_kv;

    struct kt_tensor *q = kt_reshape_3d(ctx, linear(ctx, L->wq, L->bq, x), D, H, T);   /* [D, H, T] */
    struct kt_tensor *k = kt_reshape_3d(ctx, linear(ctx, L->wk, L->bk, x), D, Hkv, T); /* [D, Hkv, T] */
    struct kt_tensor *v = linear(ctx, L->wv, L->bv, x);                               /* [D*Hkv, T] */
    if (!m->pos_embd) { /* nomic-bert: rotary positions */
        const struct kt_rope_params rp = {.n_dims = (int32_t)lh->n_rot,
                                          .mode = m->arch->rope_mode,
                                          .n_ctx_orig = (int32_t)m->hp.n_ctx_train,
                                          .freq_base = lh->rope_freq_base,
                                          .freq_scale = lh->rope_freq_scale};
        q = kt_rope_ext(ctx, q, in->pos, NULL, rp);
        k = kt_rope_ext(ctx, k, in->pos, NULL, rp);
    }
    /* the memory's mask for an encoder lets a token see every cell of its sequence */
    const struct kiln_kv_views kv = kiln_kv_store(in, il, k, v);
    struct kt_tensor *att = kt_attn_ext(ctx, q, kv.k, kv.v, kv.mask, kv.order, 1.0f / sqrtf((float)D));
    return linear(ctx, L->wo, L->bo, kt_reshape_2d(ctx, att, D * H, T));
}

struct kt_tensor *kiln_build_bert(const struct kiln_graph_in *in) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_bert_hp *b = m->fam;
    const float eps = b->norm_eps;

    struct kt_tensor *x = kt_get_rows(ctx, m->tok_embd, in->tokens); /* [n_embd, T] */
    if (m->type_embd) x = kt_add(ctx, x, kt_view_1d(ctx, m->type_embd, m->hp.n_embd, 0)); /* every token type 0 */
    if (m->pos_embd) x = kt_add(ctx, kt_get_rows(ctx, m->pos_embd, in->pos), x);
    x = layer_norm(ctx, x, m->tok_norm, m->tok_norm_b, eps);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct kiln_layer *L = &m->layers[il];
        struct kt_tensor *cur = kt_add(ctx, attention(in, il, x), x);
        cur = layer_norm(ctx, cur, L->attn_out_norm, L->attn_out_norm_b, eps);
        struct kt_tensor *up = linear(ctx, L->w_up, L->b_up, cur);
        struct kt_tensor *act = L->w_gate ? kt_swiglu(ctx, kt_mul_mat(ctx, L->w_gate, cur), up) : kt_gelu(ctx, up);
        struct kt_tensor *ff = linear(ctx, L->w_down, L->b_down, act);
        x = layer_norm(ctx, kt_add(ctx, ff, cur), L->layer_out_norm, L->layer_out_norm_b, eps);
    }
    return x;
}
