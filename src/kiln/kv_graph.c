/*
 * kv_graph.c - the graph side of the KV cache, shared by every builder: this
 * batch's k and v written into their cells, and the views attention reads
 * back, ordered after those writes. (The cache's memory and cells: kv_cache.c.)
 */
#include "runtime.h"

struct kiln_kv_views kiln_kv_store(const struct kiln_graph_in *in, int il, struct kt_tensor *k,
                                   struct kt_tensor *v) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_hparams *hp = &in->model->hp;
    const struct kiln_kv_cache *kv = &in->kctx->kv;
    const int64_t T = in->n_tokens, D = hp->n_embd_head, Hkv = hp->n_head_kv, n_embd_kv = D * Hkv;
    const int64_t n_kv = in->n_kv;
    struct kt_tensor *kc = kv->k[il], *vc = kv->v[il];

    /* write into cells [kv_head, kv_head + T) */
    const size_t krow = kt_row_size(kv->type_k, n_embd_kv);
    struct kt_tensor *k_dst = kt_view_2d(ctx, kc, n_embd_kv, T, krow, krow * (size_t)in->kv_head);
    struct kt_tensor *k_st = kt_cpy(ctx, kt_reshape_2d(ctx, k, n_embd_kv, T), k_dst);
    const size_t vrow = kt_row_size(kv->type_v, n_embd_kv);
    struct kt_tensor *v_dst = kt_view_2d(ctx, vc, n_embd_kv, T, vrow, vrow * (size_t)in->kv_head);
    struct kt_tensor *v_st = kt_cpy(ctx, kt_reshape_2d(ctx, v, n_embd_kv, T), v_dst);

    /* The views of cells [0, n_kv) name the stores as an extra source: nothing
     * else tells the scheduler that attention must read the cache after this
     * batch's writes (the views alias the cache, not the copies' results). */
    struct kiln_kv_views r;
    r.k = kt_view_3d(ctx, kc, D, n_kv, Hkv, krow, kt_row_size(kv->type_k, D), 0);
    if (r.k) r.k->src[1] = k_st;
    r.v = kt_view_3d(ctx, vc, D, n_kv, Hkv, vrow, kt_row_size(kv->type_v, D), 0);
    if (r.v) r.v->src[1] = v_st;
    return r;
}
