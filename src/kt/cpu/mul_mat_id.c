/*
 * mul_mat_id.c - the expert product (KT_OP_MUL_MAT_ID) on the CPU. Each
 * activation row is converted once into the weights' dot partner (a token's
 * row serves all the experts it chose); the (slot, token) columns are grouped
 * by the expert they route to (a counting sort, tokens in order within an
 * expert); then tiles of (an expert's weight rows) x (its columns) go through
 * mul_mat's kernels (mul_mat.h). So the tokens of a prompt that chose one
 * expert share one pass over its weights, and decode reads the chosen experts'
 * rows only. Every element is the dot product mul_mat computes for that row and
 * column: results depend neither on the thread count nor on which other tokens
 * share the batch.
 */
#include "mul_mat.h"

#include <string.h>

#define DEC_ROWS 32 /* decode: rows per tile, tiles handed out in shares as mul_mat's */

/* Where the work buffer's parts lie, after the converted activation rows. */
struct layout {
    size_t list, start, units, scratch, end;
};

static size_t align_up(size_t n) { return (n + KT_MEM_ALIGN - 1) & ~(size_t)(KT_MEM_ALIGN - 1); }

static struct layout layout_of(const struct kt_tensor *dst, int n_threads) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t n_act = b->ne[1] * b->ne[2], n_cols = ids->ne[0] * ids->ne[1], E = a->ne[2];
    struct layout l;
    l.list = align_up(kt_mm_act_bytes(a, n_act));
    l.start = l.list + align_up((size_t)n_cols * sizeof(struct kt_mm_entry));
    l.units = l.start + align_up((size_t)(E + 1) * sizeof(int64_t));
    l.scratch = l.units + align_up((size_t)(E + 1) * sizeof(int64_t));
    l.end = l.scratch + (n_cols >= KT_MM_PACK_MIN ? kt_mm_scratch_bytes(a) * (size_t)(n_threads > 0 ? n_threads : 1) : 0);
    return l;
}

size_t kt_cpu_mul_mat_id_work_size(const struct kt_tensor *dst, int n_threads) {
    return layout_of(dst, n_threads).end;
}

bool kt_cpu_mul_mat_id_supports(const struct kt_tensor *dst) {
    return dst->src[2]->type == KT_TYPE_I32 && kt_cpu_mul_mat_supports(dst);
}

static inline int32_t id_at(const struct kt_tensor *ids, int64_t j, int64_t t) {
    int32_t v;
    memcpy(&v, (const uint8_t *)ids->data + j * ids->nb[0] + t * ids->nb[1], sizeof v);
    return v;
}

/* Decode's tile count, which every thread needs before the barrier: one row of tiles
 * per distinct expert chosen (a token names few). */
static int64_t decode_units(const struct kt_tensor *ids, int64_t E, int64_t nt0) {
    int64_t distinct = 0;
    for (int64_t j = 0; j < ids->ne[0]; j++) {
        const int32_t e = id_at(ids, j, 0);
        bool seen = e < 0 || e >= E;
        for (int64_t k = 0; k < j && !seen; k++) seen = id_at(ids, k, 0) == e;
        distinct += !seen;
    }
    return distinct * nt0;
}

/* The columns by expert: list[start[e] .. start[e+1]) are expert e's, tokens in
 * order; units[e] counts the tiles before expert e's (tile_r rows x tile_c columns).
 * A column whose id is out of range is zeros. */
static void group(struct kt_tensor *dst, struct kt_mm_entry *list, int64_t *start, int64_t *units, int64_t nt0,
                  int64_t tile_c) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t E = a->ne[2], n_used = ids->ne[0], T = ids->ne[1], n_b = b->ne[1], M = a->ne[1];
    memset(start, 0, (size_t)(E + 1) * sizeof *start);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n_used; j++) {
            const int32_t e = id_at(ids, j, t);
            if (e >= 0 && e < E) {
                start[e + 1]++;
            } else {
                float *out = (float *)((uint8_t *)dst->data + j * dst->nb[1] + t * dst->nb[2]);
                memset(out, 0, (size_t)M * sizeof(float));
            }
        }
    units[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        const int64_t n = start[e + 1];
        units[e + 1] = units[e] + (n ? nt0 * ((n + tile_c - 1) / tile_c) : 0);
        start[e + 1] += start[e];
    }
    /* in token order, start[e] serving as expert e's cursor (so it ends at the old
     * start[e + 1]) */
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n_used; j++) {
            const int32_t e = id_at(ids, j, t);
            if (e < 0 || e >= E) continue;
            list[start[e]++] = (struct kt_mm_entry){.out = (int64_t)(j * dst->nb[1] + t * dst->nb[2]),
                                                    .act = j % n_b + n_b * t};
        }
    for (int64_t e = E; e > 0; e--) start[e] = start[e - 1];
    start[0] = 0;
}

void kt_cpu_mul_mat_id(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t M = a->ne[1], E = a->ne[2], n_b = b->ne[1], T = b->ne[2];
    const int64_t n_act = n_b * T, n_cols = ids->ne[0] * T;
    const struct layout l = layout_of(dst, p->nth);
    struct kt_mm m;
    kt_mm_init(&m, p, dst, a, n_act, l.scratch, n_cols);
    struct kt_mm_entry *list = (struct kt_mm_entry *)(m.acts + l.list);
    int64_t *start = (int64_t *)(m.acts + l.start), *units = (int64_t *)(m.acts + l.units);

    /* phase 1: activation rows converted (all threads), columns grouped (the last thread,
     * whose share of rows is the smallest) */
    int64_t r0, r1;
    kt_cpu_split_rows(p, n_act, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        kt_mm_convert(&m, (const float *)((const uint8_t *)b->data + (r % n_b) * b->nb[1] + (r / n_b) * b->nb[2]),
                      b->nb[0], r);
    /* decode (one token): 32-row tiles of each chosen expert in shares, so that a thread
     * streams whole experts' rows front to back */
    const bool dec = T == 1;
    const int64_t tile_r = dec ? DEC_ROWS : kt_mm_tile_rows(&m), tile_c = dec ? n_cols : kt_mm_tile_cols(&m);
    const int64_t nt0 = (M + tile_r - 1) / tile_r;
    if (p->ith == p->nth - 1) group(dst, list, start, units, nt0, tile_c);
    if (dec)
        kt_cpu_share_init(p, decode_units(ids, E, nt0));
    else if (p->ith == 0)
        kt_cpu_chunk_reset(p);
    kt_cpu_barrier(p);

    /* phase 2: unit u is tile (u - units[e]) of expert e, rows fastest */
    const int64_t total = units[E];
    for (int64_t u = dec ? kt_cpu_share_next(p) : p->ith; u >= 0 && u < total;
         u = dec ? kt_cpu_share_next(p) : kt_cpu_chunk_next(p)) {
        int64_t lo = 0, hi = E; /* the last e with units[e] <= u */
        while (hi - lo > 1) {
            const int64_t mid = (lo + hi) / 2;
            if (units[mid] <= u) lo = mid;
            else hi = mid;
        }
        const int64_t e = lo, t = u - units[e], n = start[e + 1] - start[e];
        const int64_t ir0 = (t % nt0) * tile_r, ir1 = ir0 + tile_r < M ? ir0 + tile_r : M;
        const int64_t ic0 = (t / nt0) * tile_c, ic1 = ic0 + tile_c < n ? ic0 + tile_c : n;
        const struct kt_mm_cols cols = {.list = list + start[e], .w = (const uint8_t *)a->data + e * a->nb[2]};
        kt_mm_tile(&m, &cols, ir0, ir1, ic0, ic1);
    }
}
