/*
 * gemma.c - the Gemma 2, 3 and 4 graph (dense text models), read top to bottom:
 * the token embedding times sqrt(n_embd); per layer an RMS norm, q/k/v
 * projections, an RMS norm over each q and k head (Gemma 3/4; Gemma 4 also each
 * v head, without a weight, and takes k as v where a layer has no v projection),
 * NeoX RoPE with the layer's base (sliding-window layers have their own; Gemma 4's
 * global layers divide frequencies by rope_freqs), attention over the layer's
 * memory (the last n_swa positions on windowed layers) with Gemma 2's soft-capped
 * scores, the output projection, an RMS norm of it (post_attention_norm) and the
 * residual; RMS norm, GeGLU feed-forward (GELU in its tanh form on the gate), an
 * RMS norm of its output (post_ffw_norm) and the residual; Gemma 4 scales each
 * layer's output; the final norm, the output projection and the final logits
 * soft-capped (c * tanh(logit / c)). The norms use the file's weights as they are.
 *
 * Key: T tokens in the batch, D head dim, H heads, Hkv KV heads.
 */
#include "errf.h"
#include "families.h"
#include "runtime.h"

#include <math.h>

/* ------------------------------------------------------------------ hyper-parameters */

/* Gemma 2 and 3: 1/sqrt(head size), except the 27B shapes (46 and 62 layers), which
 * scale by n_embd / n_head as Google's reference and llama.cpp do */
static void attn_scale(struct kiln_model *m, int64_t n_layer_27b) {
    struct kiln_gemma_hp *g = m->fam;
    const struct kiln_hparams *hp = &m->hp;
    g->attn_scale = hp->n_layer == n_layer_27b ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                               : 1.0f / sqrtf((float)hp->n_embd_head);
}

bool kiln_gemma2_prepare(struct kiln_model *m, char *err, size_t errlen) {
    (void)err, (void)errlen;
    attn_scale(m, 46);
    return true;
}

bool kiln_gemma3_prepare(struct kiln_model *m, char *err, size_t errlen) {
    (void)err, (void)errlen;
    attn_scale(m, 62);
    return true;
}

/* Gemma 4: the dense text models (31B's shape) run; the variants whose graph kiln
 * does not build are refused by name. */
bool kiln_gemma4_prepare(struct kiln_model *m, char *err, size_t errlen) {
    struct kiln_gemma_hp *g = m->fam;
    if (g->n_embd_per_layer > 0)
        return kiln_errf(err, errlen,
                         "gemma4 with per-layer embeddings (gemma4.embedding_length_per_layer_input = %lld, as in "
                         "Gemma 4 E2B and E4B) is not supported: kiln runs the dense Gemma 4 text models",
                         (long long)g->n_embd_per_layer);
    if (g->n_expert > 0)
        return kiln_errf(err, errlen,
                         "gemma4 with experts (gemma4.expert_count = %lld, as in Gemma 4 26B-A4B) is not supported: "
                         "kiln runs the dense Gemma 4 text models",
                         (long long)g->n_expert);
    if (g->n_kv_shared > 0)
        return kiln_errf(err, errlen,
                         "gemma4 with layers sharing earlier layers' KV cache (gemma4.attention.shared_kv_layers = "
                         "%lld) is not supported: kiln runs the dense Gemma 4 text models",
                         (long long)g->n_kv_shared);
    g->attn_scale = 1.0f; /* the q and k norms take the place of 1/sqrt(D) */
    g->v_norm = true;
    return true;
}

/* ------------------------------------------------------------------ the graph */

static struct kt_tensor *rms(struct kt_context *ctx, struct kt_tensor *x, struct kt_tensor *w, float eps) {
    struct kt_tensor *n = kt_rms_norm(ctx, x, eps);
    return w ? kt_mul(ctx, n, w) : n;
}

static struct kt_tensor *attention(const struct kiln_graph_in *in, int il, struct kt_tensor *cur) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_gemma_hp *g = m->fam;
    const struct kiln_layer_hp *lh = &m->lhp[il];
    const struct kiln_layer *L = &m->layers[il];
    const float eps = m->hp.norm_rms_eps;
    const int64_t T = in->n_tokens, D = lh->n_embd_head, H = lh->n_head, Hkv = lh->n_head_kv;

    struct kt_tensor *q = kt_reshape_3d(ctx, kt_mul_mat(ctx, L->wq, cur), D, H, T); /* [D, H, T] */
    struct kt_tensor *kp = kt_mul_mat(ctx, L->wk, cur);                            /* [D*Hkv, T] */
    struct kt_tensor *k = kt_reshape_3d(ctx, kp, D, Hkv, T);
    /* Gemma 4's global layers have no v projection: v is k's projection before its norm */
    struct kt_tensor *v = kt_reshape_3d(ctx, L->wv ? kt_mul_mat(ctx, L->wv, cur) : kp, D, Hkv, T);
    if (L->attn_q_norm) {
        q = rms(ctx, q, L->attn_q_norm, eps);
        k = rms(ctx, k, L->attn_k_norm, eps);
    }
    if (g->v_norm) v = kt_rms_norm(ctx, v, eps);

    struct kt_rope_params rp = {.n_dims = (int32_t)lh->n_rot,
                                .mode = m->arch->rope_mode,
                                .n_ctx_orig = (int32_t)m->hp.n_ctx_train,
                                .freq_base = lh->rope_freq_base,
                                .freq_scale = lh->rope_freq_scale};
    /* Gemma 4's proportional RoPE on global layers: rope_freqs leaves most pairs unturned */
    struct kt_tensor *ff = lh->kind == KILN_LAYER_ATTN ? m->rope_freqs : NULL;
    q = kt_rope_ext(ctx, q, in->pos, ff, rp);
    k = kt_rope_ext(ctx, k, in->pos, ff, rp);

    const struct kiln_kv_views kv = kiln_kv_store(in, il, k, v);
    struct kt_tensor *att = /* [D, H, T] */
        g->attn_softcap > 0.0f ? kt_attn_ext_softcap(ctx, q, kv.k, kv.v, kv.mask, kv.order, g->attn_scale, g->attn_softcap)
                               : kt_attn_ext(ctx, q, kv.k, kv.v, kv.mask, kv.order, g->attn_scale);
    return kt_mul_mat(ctx, L->wo, kt_reshape_2d(ctx, att, D * H, T));
}

struct kt_tensor *kiln_build_gemma(const struct kiln_graph_in *in) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    const struct kiln_gemma_hp *g = m->fam;
    const float eps = m->hp.norm_rms_eps;

    struct kt_tensor *x = kt_get_rows(ctx, m->tok_embd, in->tokens); /* [n_embd, T] */
    x = kt_scale(ctx, x, sqrtf((float)m->hp.n_embd));
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct kiln_layer *L = &m->layers[il];
        struct kt_tensor *cur = attention(in, il, rms(ctx, x, L->attn_norm, eps));
        x = kt_add(ctx, x, rms(ctx, cur, L->attn_post_norm, eps));

        cur = rms(ctx, x, L->ffn_norm, eps);
        cur = kt_mul_mat(ctx, L->w_down, kt_geglu(ctx, kt_mul_mat(ctx, L->w_gate, cur), kt_mul_mat(ctx, L->w_up, cur)));
        x = kt_add(ctx, x, rms(ctx, cur, L->ffn_post_norm, eps));
        if (L->out_scale) x = kt_mul(ctx, x, L->out_scale);
    }
    return kiln_build_head(in, rms(ctx, x, m->output_norm, eps), g->final_softcap);
}
