/*
 * memory.c - a context's sequence memory as a set of parts (memory.h): one part
 * per layer kind the model has, built here, and the public kiln_kv_* sequence
 * calls answered by asking every part the same question. Nothing here knows how
 * a kind keeps its state.
 */
#include "memory.h"
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_PAD 256

bool kiln_memory_init(struct kiln_memory *mem, const struct kiln_model *m, uint32_t n_ctx, uint32_t n_seq,
                      uint32_t n_batch, enum kt_type type_k, enum kt_type type_v, struct kt_buffer_type *buft,
                      char *err, size_t errlen) {
    memset(mem, 0, sizeof *mem);
    const int64_t L = m->hp.n_layer;
    mem->layer_part = malloc((size_t)L);
    bool *layers = malloc((size_t)L * sizeof *layers);
    if (!mem->layer_part || !layers) {
        free(layers);
        snprintf(err, errlen, "out of memory");
        return false;
    }
    /* one part per kind present, in kind order (the full cache first: it is the one that fills) */
    for (int kind = 0; kind < KILN_LAYER_KIND_COUNT; kind++) {
        int64_t n = 0;
        for (int64_t il = 0; il < L; il++) n += layers[il] = m->lhp[il].kind == (enum kiln_layer_kind)kind;
        if (!n) continue;
        struct kiln_mem_part *p = NULL;
        if (kind == KILN_LAYER_ATTN) {
            p = kiln_kv_part_new(m, layers, n_ctx, 0, type_k, type_v, buft, err, errlen);
        } else {
            /* the last n_swa positions of every sequence and the batch in flight, padded as
             * attention spans are, never more than the context */
            uint64_t want = (uint64_t)m->n_swa * n_seq + n_batch;
            want = (want + KV_PAD - 1) / KV_PAD * KV_PAD;
            p = kiln_kv_part_new(m, layers, want < n_ctx ? (uint32_t)want : n_ctx, m->n_swa, type_k, type_v, buft,
                                 err, errlen);
        }
        if (!p) {
            free(layers);
            kiln_memory_free(mem);
            return false;
        }
        for (int64_t il = 0; il < L; il++)
            if (layers[il]) mem->layer_part[il] = (int8_t)mem->n_parts;
        mem->parts[mem->n_parts++] = p;
    }
    free(layers);
    return true;
}

void kiln_memory_free(struct kiln_memory *mem) {
    for (int i = 0; i < mem->n_parts; i++) mem->parts[i]->ops->free(mem->parts[i]);
    free(mem->layer_part);
    memset(mem, 0, sizeof *mem);
}

/* ------------------------------------------------------------------ the public sequence calls */

static bool seq_ok(const struct kiln_context *ctx, int32_t seq, bool allow_all) {
    return (allow_all && seq < 0) || (seq >= 0 && (uint32_t)seq < ctx->params.n_seq_max);
}

void kiln_kv_clear(struct kiln_context *ctx) {
    for (int i = 0; i < ctx->mem.n_parts; i++) ctx->mem.parts[i]->ops->clear(ctx->mem.parts[i]);
}

bool kiln_kv_seq_rm(struct kiln_context *ctx, int32_t seq, int32_t p0, int32_t p1) {
    if (!seq_ok(ctx, seq, true)) {
        snprintf(ctx->err, sizeof ctx->err, "sequence %d out of range (0..%u)", seq, ctx->params.n_seq_max - 1);
        return false;
    }
    if (p0 < 0) p0 = 0;
    bool ok = true;
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        struct kiln_mem_part *p = ctx->mem.parts[i];
        if (p->ops->seq_rm(p, seq, p0, p1) != KILN_MEM_OK) {
            snprintf(ctx->err, sizeof ctx->err, "the %s memory cannot remove positions [%d, %d) of sequence %d",
                     p->ops->kind, p0, p1, seq);
            ok = false;
        }
    }
    return ok;
}

bool kiln_kv_seq_cp(struct kiln_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (!seq_ok(ctx, src, false) || !seq_ok(ctx, dst, false)) {
        snprintf(ctx->err, sizeof ctx->err, "sequence %d or %d out of range (0..%u)", src, dst,
                 ctx->params.n_seq_max - 1);
        return false;
    }
    if (p0 < 0) p0 = 0;
    bool ok = true;
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        struct kiln_mem_part *p = ctx->mem.parts[i];
        if (p->ops->seq_cp(p, src, dst, p0, p1) != KILN_MEM_OK) {
            snprintf(ctx->err, sizeof ctx->err, "the %s memory cannot copy positions [%d, %d) of sequence %d",
                     p->ops->kind, p0, p1, src);
            ok = false;
        }
    }
    return ok;
}

int32_t kiln_kv_seq_pos_max(const struct kiln_context *ctx, int32_t seq) {
    if (!seq_ok(ctx, seq, false)) return -1;
    int32_t best = -1;
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        const int32_t v = ctx->mem.parts[i]->ops->seq_pos_max(ctx->mem.parts[i], seq);
        best = v > best ? v : best;
    }
    return best;
}

/* the smallest position every part still holds: a windowed part's, once it let old ones go */
int32_t kiln_kv_seq_pos_min(const struct kiln_context *ctx, int32_t seq) {
    if (!seq_ok(ctx, seq, false)) return -1;
    int32_t best = -1;
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        const int32_t v = ctx->mem.parts[i]->ops->seq_pos_min(ctx->mem.parts[i], seq);
        if (v < 0) return -1;
        best = v > best ? v : best;
    }
    return best;
}

/* Every part must be able to resume at the same length: each answers the largest it
 * can at or below the candidate, until they agree. */
int32_t kiln_kv_seq_resumable(const struct kiln_context *ctx, int32_t seq, int32_t n) {
    if (!seq_ok(ctx, seq, false) || n <= 0) return 0;
    for (bool moved = true; moved && n > 0;) {
        moved = false;
        for (int i = 0; i < ctx->mem.n_parts; i++) {
            const int32_t m = ctx->mem.parts[i]->ops->seq_resume(ctx->mem.parts[i], seq, n);
            if (m < n) n = m, moved = true;
        }
    }
    return n;
}

size_t kiln_kv_size_bytes(const struct kiln_context *ctx) {
    size_t n = 0;
    for (int i = 0; i < ctx->mem.n_parts; i++) n += ctx->mem.parts[i]->ops->bytes(ctx->mem.parts[i]);
    return n;
}

/* what every layer keeping every position would take: n_ctx cells of its K and V rows */
size_t kiln_kv_size_bytes_full(const struct kiln_context *ctx) {
    const struct kiln_model *m = ctx->model;
    size_t n = 0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const int64_t D = m->lhp[il].n_embd_head, Hkv = m->lhp[il].n_head_kv;
        n += (kt_row_size(ctx->params.type_k, D) + kt_row_size(ctx->params.type_v, D)) * (size_t)Hkv *
             (size_t)ctx->params.n_ctx;
    }
    return n;
}
