/*
 * kv_cache.c - the KV cache: per layer a K tensor [n_embd_kv, cells] and a V
 * tensor (stored transposed, [cells, n_embd_kv], when its type allows, so that
 * attention multiplies by it without a copy), plus per-cell bookkeeping: the
 * position a cell holds and the set of sequences (bits) that use it.
 */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kiln_kv_init(struct kiln_kv_cache *kv, const struct kiln_model *m, uint32_t size, enum kt_type type_k,
                  enum kt_type type_v, struct kt_buffer_type *buft, char *err, size_t errlen) {
    memset(kv, 0, sizeof *kv);
    const struct kiln_hparams *hp = &m->hp;
    const enum kt_type ok_types[] = {KT_TYPE_F16, KT_TYPE_F32, KT_TYPE_BF16, KT_TYPE_Q8_0};
    bool k_ok = false, v_ok = false;
    for (size_t i = 0; i < sizeof ok_types / sizeof ok_types[0]; i++) {
        k_ok |= type_k == ok_types[i];
        v_ok |= type_v == ok_types[i];
    }
    if (!k_ok || !v_ok) {
        snprintf(err, errlen, "KV cache types %s/%s: use f16, f32, bf16 or q8_0", kt_type_name(type_k),
                 kt_type_name(type_v));
        return false;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const int64_t D = m->lhp[il].n_embd_head;
        if (D % kt_blck_size(type_k) || D % kt_blck_size(type_v)) {
            snprintf(err, errlen, "KV cache type %s needs a head size that is a multiple of %lld (it is %lld)",
                     kt_type_name(kt_is_quantized(type_k) ? type_k : type_v),
                     (long long)kt_blck_size(kt_is_quantized(type_k) ? type_k : type_v), (long long)D);
            return false;
        }
    }
    kv->size = size;
    kv->n_layer = (uint32_t)hp->n_layer;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->cells = calloc(size, sizeof *kv->cells);
    kv->k = calloc((size_t)hp->n_layer, sizeof *kv->k);
    kv->v = calloc((size_t)hp->n_layer, sizeof *kv->v);
    kv->ctx = kt_init((struct kt_init_params){.mem_size = (size_t)(2 * hp->n_layer + 2) * kt_tensor_overhead(),
                                              .no_alloc = true});
    if (!kv->cells || !kv->k || !kv->v || !kv->ctx) {
        snprintf(err, errlen, "out of memory for the KV cache bookkeeping");
        kiln_kv_free(kv);
        return false;
    }
    for (uint32_t i = 0; i < size; i++) kv->cells[i].pos = -1;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        /* [D, cells, Hkv]: each k/v head's cells contiguous, so attention streams them */
        const int64_t D = m->lhp[il].n_embd_head, Hkv = m->lhp[il].n_head_kv;
        kv->k[il] = kt_format_name(kt_new_tensor_3d(kv->ctx, type_k, D, size, Hkv), "cache_k_l%lld", (long long)il);
        kv->v[il] = kt_format_name(kt_new_tensor_3d(kv->ctx, type_v, D, size, Hkv), "cache_v_l%lld", (long long)il);
        if (!kv->k[il] || !kv->v[il]) {
            snprintf(err, errlen, "KV cache: %s", kt_last_error());
            kiln_kv_free(kv);
            return false;
        }
    }
    kv->buf = kt_backend_alloc_ctx_tensors(kv->ctx, buft);
    if (!kv->buf) {
        snprintf(err, errlen, "cannot allocate the KV cache (%u cells): %s", size, kt_last_error());
        kiln_kv_free(kv);
        return false;
    }
    /* zeros, so that masked cells never hold NaN (0 * NaN would poison sums) */
    kt_buffer_clear(kv->buf, 0);
    return true;
}

void kiln_kv_free(struct kiln_kv_cache *kv) {
    if (kv->buf) kt_buffer_free(kv->buf);
    kt_free(kv->ctx);
    free(kv->cells);
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

int64_t kiln_kv_find_slot(const struct kiln_kv_cache *kv, uint32_t n) {
    if (n == 0 || n > kv->size) return -1;
    uint32_t run = 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        run = kv->cells[i].seq == 0 ? run + 1 : 0;
        if (run == n) return (int64_t)i + 1 - n;
    }
    return -1;
}

/* Move a cache tensor's cells ([D, cells, Hkv]: one row per cell in each head's
 * plane) so that cell from[k] lands in cell k. from[] rises and from[k] >= k, so
 * moving in order never overwrites a cell still to be read. */
static void move_cells(struct kt_tensor *t, const uint32_t *from, uint32_t n, void *scratch) {
    size_t bytes = kt_nbytes(t), row = t->nb[1];
    kt_tensor_get(t, scratch, 0, bytes);
    for (int64_t h = 0; h < t->ne[2]; h++) {
        unsigned char *d = (unsigned char *)scratch + (size_t)h * t->nb[2];
        for (uint32_t k = 0; k < n; k++)
            if (from[k] != k) memcpy(d + (size_t)k * row, d + (size_t)from[k] * row, row);
    }
    kt_tensor_set(t, scratch, 0, bytes);
}

bool kiln_kv_defrag(struct kiln_kv_cache *kv) {
    uint32_t *from = malloc(sizeof *from * (kv->size ? kv->size : 1)), n = 0;
    size_t scratch_size = 0;
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        if (kt_nbytes(kv->k[il]) > scratch_size) scratch_size = kt_nbytes(kv->k[il]);
        if (kt_nbytes(kv->v[il]) > scratch_size) scratch_size = kt_nbytes(kv->v[il]);
    }
    void *scratch = malloc(scratch_size ? scratch_size : 1);
    if (!from || !scratch) {
        free(from);
        free(scratch);
        return false;
    }
    for (uint32_t i = 0; i < kv->size; i++)
        if (kv->cells[i].seq) from[n++] = i;
    if (n > 0 && from[n - 1] != n - 1) { /* some cell is not yet in place */
        for (uint32_t il = 0; il < kv->n_layer; il++) {
            struct kt_tensor *k = kv->k[il], *v = kv->v[il];
            move_cells(k, from, n, scratch);
            move_cells(v, from, n, scratch);
        }
        for (uint32_t k = 0; k < n; k++) kv->cells[k] = kv->cells[from[k]];
        for (uint32_t k = n; k < kv->size; k++) kv->cells[k] = (struct kiln_kv_cell){.pos = -1, .seq = 0};
    }
    free(from);
    free(scratch);
    return true;
}

uint32_t kiln_kv_n_kv(const struct kiln_kv_cache *kv, uint32_t pad) {
    uint32_t last = 0;
    for (uint32_t i = kv->size; i > 0; i--)
        if (kv->cells[i - 1].seq) {
            last = i;
            break;
        }
    uint32_t n = (last + pad - 1) / pad * pad;
    return n < pad ? pad : n > kv->size ? kv->size : n;
}

/* ------------------------------------------------------------------ sequence operations */

static bool in_range(int32_t pos, int32_t p0, int32_t p1) { return pos >= p0 && (p1 < 0 || pos < p1); }

void kiln_kv_clear(struct kiln_context *ctx) {
    struct kiln_kv_cache *kv = &ctx->kv;
    for (uint32_t i = 0; i < kv->size; i++) kv->cells[i] = (struct kiln_kv_cell){.pos = -1, .seq = 0};
    kv->used = 0;
}

static bool seq_ok(const struct kiln_context *ctx, int32_t seq, bool allow_all) {
    return (allow_all && seq < 0) || (seq >= 0 && (uint32_t)seq < ctx->params.n_seq_max);
}

bool kiln_kv_seq_rm(struct kiln_context *ctx, int32_t seq, int32_t p0, int32_t p1) {
    if (!seq_ok(ctx, seq, true)) {
        snprintf(ctx->err, sizeof ctx->err, "sequence %d out of range (0..%u)", seq, ctx->params.n_seq_max - 1);
        return false;
    }
    if (p0 < 0) p0 = 0;
    struct kiln_kv_cache *kv = &ctx->kv;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kiln_kv_cell *c = &kv->cells[i];
        if (!c->seq || !in_range(c->pos, p0, p1)) continue;
        c->seq = seq < 0 ? 0 : c->seq & ~(1ull << seq);
        if (!c->seq) {
            c->pos = -1;
            kv->used--;
        }
    }
    return true;
}

bool kiln_kv_seq_cp(struct kiln_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (!seq_ok(ctx, src, false) || !seq_ok(ctx, dst, false)) {
        snprintf(ctx->err, sizeof ctx->err, "sequence %d or %d out of range (0..%u)", src, dst,
                 ctx->params.n_seq_max - 1);
        return false;
    }
    if (p0 < 0) p0 = 0;
    struct kiln_kv_cache *kv = &ctx->kv;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kiln_kv_cell *c = &kv->cells[i];
        if ((c->seq >> src & 1) && in_range(c->pos, p0, p1)) c->seq |= 1ull << dst;
    }
    return true;
}

int32_t kiln_kv_seq_pos_max(const struct kiln_context *ctx, int32_t seq) {
    if (!seq_ok(ctx, seq, false)) return -1;
    int32_t best = -1;
    for (uint32_t i = 0; i < ctx->kv.size; i++) {
        const struct kiln_kv_cell *c = &ctx->kv.cells[i];
        if ((c->seq >> seq & 1) && c->pos > best) best = c->pos;
    }
    return best;
}
