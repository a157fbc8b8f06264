/*
 * kv_graph.c - the graph side of the KV memory, shared by every builder: this
 * batch's k and v written into the cells layer il's memory part placed them in,
 * and the views attention reads back, ordered after those writes, with that
 * part's mask and cell order. (The cells themselves: kv_cache.c.)
 */
#include "runtime.h"

struct kiln_kv_views kiln_kv_store(const struct kiln_graph_in *in, int il, struct kt_tensor *k,
                                   struct kt_tensor *v) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_layer_hp *lh = &in->model->lhp[il];
    const int part = in->kctx->mem.layer_part[il];
    const struct kiln_mem_inputs *mi = &in->mem[part];
    const int64_t T = in->n_tokens, D = lh->n_embd_head, Hkv = lh->n_head_kv;
    const int64_t n_kv = mi->n_kv;
    struct kt_tensor *kc, *vc;
    kiln_kv_part_tensors(in->kctx->mem.parts[part], il, &kc, &vc);

    /* write into cells [head, head + T) of every head's plane ([D, cells, Hkv]) */
    struct kt_tensor *k_dst = kt_view_3d(ctx, kc, D, T, Hkv, kc->nb[1], kc->nb[2], kc->nb[1] * (size_t)mi->head);
    struct kt_tensor *k_st = kt_cpy(ctx, kt_permute(ctx, kt_reshape_3d(ctx, k, D, Hkv, T), 0, 2, 1, 3), k_dst);
    struct kt_tensor *v_dst = kt_view_3d(ctx, vc, D, T, Hkv, vc->nb[1], vc->nb[2], vc->nb[1] * (size_t)mi->head);
    struct kt_tensor *v_st = kt_cpy(ctx, kt_permute(ctx, kt_reshape_3d(ctx, v, D, Hkv, T), 0, 2, 1, 3), v_dst);

    /* The views of cells [0, n_kv) name the stores as an extra source: nothing
     * else tells the scheduler that attention must read the cache after this
     * batch's writes (the views alias the cache, not the copies' results). */
    struct kiln_kv_views r = {.mask = mi->mask, .order = mi->order};
    r.k = kt_view_3d(ctx, kc, D, n_kv, Hkv, kc->nb[1], kc->nb[2], 0);
    if (r.k) r.k->src[1] = k_st;
    r.v = kt_view_3d(ctx, vc, D, n_kv, Hkv, vc->nb[1], vc->nb[2], 0);
    if (r.v) r.v->src[1] = v_st;
    return r;
}
