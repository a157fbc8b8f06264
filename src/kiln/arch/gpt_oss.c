/*
 * gpt_oss.c - the gpt-oss graph (OpenAI's open-weight mixtures of experts), read top
 * to bottom: the token embedding; per layer an RMS norm, q/k/v projections with their
 * biases, NeoX RoPE scaled by YaRN (every layer; windowed layers may have their own
 * base), attention over the layer's memory (the last n_swa positions on every other
 * layer) with a learned sink logit per head in each softmax, the output projection
 * and its bias, the residual; an RMS norm (the file's post_attention_norm), the routed
 * feed-forward (moe.c: a biased router, a softmax over the chosen experts' logits,
 * gpt-oss's clamped SwiGLU with biased experts) and the residual; the final norm and
 * the output projection.
 *
 * Key: T tokens in the batch, D head dim, H heads, Hkv KV heads.
 */
#include "runtime.h"

#include <math.h>

static struct kt_tensor *bias(struct kt_context *ctx, struct kt_tensor *x, struct kt_tensor *b) {
    return b ? kt_add(ctx, x, b) : x;
}

static struct kt_tensor *attention(const struct kiln_graph_in *in, int il, struct kt_tensor *cur) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const int64_t T = in->n_tokens, D = lh->n_embd_head, H = lh->n_head, Hkv = lh->n_head_kv;

    struct kt_tensor *q = kt_reshape_3d(ctx, bias(ctx, kt_mul_mat(ctx, L->wq, cur), L->bq), D, H, T);
    struct kt_tensor *k = kt_reshape_3d(ctx, bias(ctx, kt_mul_mat(ctx, L->wk, cur), L->bk), D, Hkv, T);
    struct kt_tensor *v = bias(ctx, kt_mul_mat(ctx, L->wv, cur), L->bv); /* [D*Hkv, T] */
    const struct kiln_yarn *y = &m->yarn;
    struct kt_rope_params rp = {.n_dims = (int32_t)lh->n_rot,
                                .mode = m->arch->rope_mode,
                                .n_ctx_orig = (int32_t)(y->on ? y->n_ctx_orig : m->hp.n_ctx_train),
                                .freq_base = lh->rope_freq_base,
                                .freq_scale = lh->rope_freq_scale,
                                .ext_factor = y->on ? y->ext_factor : 0.0f,
                                .attn_factor = y->on ? y->attn_factor : 0.0f,
                                .beta_fast = y->on ? y->beta_fast : 0.0f,
                                .beta_slow = y->on ? y->beta_slow : 0.0f};
    q = kt_rope_ext(ctx, q, in->pos, NULL, rp);
    k = kt_rope_ext(ctx, k, in->pos, NULL, rp);

    const struct kiln_kv_views kv = kiln_kv_store(in, il, k, v);
    struct kt_tensor *att = /* [D, H, T] */
        kt_attn_ext_sinks(ctx, q, kv.k, kv.v, kv.mask, kv.order, 1.0f / sqrtf((float)D), L->attn_sinks);
    return bias(ctx, kt_mul_mat(ctx, L->wo, kt_reshape_2d(ctx, att, D * H, T)), L->bo);
}

struct kt_tensor *kiln_build_gpt_oss(const struct kiln_graph_in *in) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const float eps = m->hp.norm_rms_eps;

    struct kt_tensor *x = kt_get_rows(ctx, m->tok_embd, in->tokens); /* [n_embd, T] */
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct kiln_layer *L = &m->layers[il];
        x = kt_add(ctx, x, attention(in, il, kt_mul(ctx, kt_rms_norm(ctx, x, eps), L->attn_norm)));
        struct kt_tensor *cur = kt_mul(ctx, kt_rms_norm(ctx, x, eps), L->attn_post_norm);
        x = kt_add(ctx, x, kiln_moe_ffn(in, il, cur));
    }
    x = kt_mul(ctx, kt_rms_norm(ctx, x, eps), m->output_norm);
    return kiln_build_head(in, x, 0.0f);
}
