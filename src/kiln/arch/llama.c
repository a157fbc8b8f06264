/*
 * llama.c - the llama graph (LLaMA 1/2/3, Mistral, TinyLlama, SmolLM, CodeLlama
 * shapes; qwen2 adds q/k/v biases, qwen3 per-head q/k RMS norms, phi3 fused
 * weights seen as views, all three NeoX RoPE; Mixtral and Qwen3-MoE route the
 * feed-forward through experts (moe.c); each is used where the architecture's row
 * bound it), read top to bottom:
 * embeddings; per layer RMSNorm, q/k/v projections, RoPE, the new k/v written
 * into the cache, grouped-query attention over the cache, output projection
 * and residual; RMSNorm, SwiGLU feed-forward and residual; final norm and the
 * output projection of the rows whose logits are wanted.
 *
 * Key: T tokens in the batch, KV cells attended, D head dim, H heads, Hkv KV heads.
 */
#include "runtime.h"

#include <math.h>

static struct kt_tensor *attention(const struct kiln_graph_in *in, int il, struct kt_tensor *cur) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_hparams *hp = &m->hp;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const int64_t T = in->n_tokens, D = lh->n_embd_head, H = lh->n_head, Hkv = lh->n_head_kv;

    struct kt_tensor *q = kt_mul_mat(ctx, L->wq, cur); /* [D*H, T] */
    struct kt_tensor *k = kt_mul_mat(ctx, L->wk, cur); /* [D*Hkv, T] */
    struct kt_tensor *v = kt_mul_mat(ctx, L->wv, cur); /* [D*Hkv, T] */
    if (L->bq) {
        q = kt_add(ctx, q, L->bq);
        k = kt_add(ctx, k, L->bk);
        v = kt_add(ctx, v, L->bv);
    }
    struct kt_rope_params rp = {.n_dims = (int32_t)lh->n_rot,
                                .mode = m->arch->rope_mode,
                                .n_ctx_orig = (int32_t)hp->n_ctx_train,
                                .freq_base = lh->rope_freq_base,
                                .freq_scale = lh->rope_freq_scale};
    q = kt_reshape_3d(ctx, q, D, H, T);   /* [D, H, T] */
    k = kt_reshape_3d(ctx, k, D, Hkv, T); /* [D, Hkv, T] */
    if (L->attn_q_norm) { /* qwen3: each head RMS-normed before RoPE */
        q = kt_mul(ctx, kt_rms_norm(ctx, q, hp->norm_rms_eps), L->attn_q_norm);
        k = kt_mul(ctx, kt_rms_norm(ctx, k, hp->norm_rms_eps), L->attn_k_norm);
    }
    q = kt_rope_ext(ctx, q, in->pos, m->rope_freqs, rp);
    k = kt_rope_ext(ctx, k, in->pos, m->rope_freqs, rp);

    /* into the cache; K and V [D, n_kv, Hkv] read it back after the stores; one fused
     * attention op over the cells the mask leaves to each token, taken by position, so
     * that where a sequence's cells sit never changes its result */
    const struct kiln_kv_views kv = kiln_kv_store(in, il, k, v);
    struct kt_tensor *att = kt_attn_ext(ctx, q, kv.k, kv.v, kv.mask, kv.order, 1.0f / sqrtf((float)D)); /* [D, H, T] */
    return kt_mul_mat(ctx, L->wo, kt_reshape_2d(ctx, att, D * H, T));
}

struct kt_tensor *kiln_build_head(const struct kiln_graph_in *in, struct kt_tensor *x, float softcap) {
    struct kt_context *ctx = in->ctx;
    if (in->embeddings) return x; /* every token's hidden state, for pooling */
    if (in->n_outputs < in->n_tokens) x = kt_get_rows(ctx, x, in->out_ids);
    struct kt_tensor *logits = kt_mul_mat(ctx, in->model->output, x); /* [n_vocab, n_outputs] */
    if (softcap > 0.0f) logits = kt_softcap(ctx, logits, softcap);
    if (logits) {
        kt_set_name(logits, "logits");
        kt_set_output(logits);
    }
    return logits;
}

struct kt_tensor *kiln_build_llama(const struct kiln_graph_in *in) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const float eps = m->hp.norm_rms_eps;

    struct kt_tensor *x = kt_get_rows(ctx, m->tok_embd, in->tokens); /* [n_embd, T] */
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct kiln_layer *L = &m->layers[il];
        struct kt_tensor *cur = kt_mul(ctx, kt_rms_norm(ctx, x, eps), L->attn_norm);
        x = kt_add(ctx, x, attention(in, il, cur));

        cur = kt_mul(ctx, kt_rms_norm(ctx, x, eps), L->ffn_norm);
        if (L->ffn_gate_inp) { /* experts (Mixtral, Qwen3-MoE): the shared routed block */
            x = kt_add(ctx, x, kiln_moe_ffn(in, il, cur));
            continue;
        }
        struct kt_tensor *ff = kt_swiglu(ctx, kt_mul_mat(ctx, L->w_gate, cur), kt_mul_mat(ctx, L->w_up, cur));
        x = kt_add(ctx, x, kt_mul_mat(ctx, L->w_down, ff));
    }
    x = kt_mul(ctx, kt_rms_norm(ctx, x, eps), m->output_norm);
    return kiln_build_head(in, x, 0.0f);
}
