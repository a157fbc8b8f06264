/*
 * kv_cache.c - the two KV kinds of sequence memory (memory.h): per layer of the
 * part a K and a V tensor [D, cells, Hkv] (each k/v head's cells contiguous, so
 * attention streams them), and per cell the position it holds and the set of
 * sequences (bits) that use it.
 *
 * The full cache keeps every position. The windowed cache (n_swa > 0) serves
 * layers that attend over the last n_swa positions: a cell whose every sequence
 * has moved n_swa positions past it is stale and is taken for new tokens, so the
 * part needs only about n_swa cells per sequence plus a batch, and attention over
 * it costs O(window). Stale cells stay readable until taken, which is what lets a
 * sequence cut back (seq_rm) resume where its window is still whole; seq_resume
 * says where that is.
 */
#include "memory.h"
#include "runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_PAD 256 /* attention spans a multiple of this many cells, so the span changes rarely */
#define N_SEQ 64   /* sequences a cell's bit set can name */

struct kv_part {
    struct kiln_mem_part base;
    uint32_t size;    /* cells */
    uint32_t used;    /* cells holding at least one sequence */
    int64_t n_swa;    /* 0: full cache */
    bool causal;      /* false (an encoder): a token sees every cell of its sequence */
    uint32_t n_layer; /* the model's layers (k[il] NULL where another part keeps layer il) */
    struct kiln_kv_cell *cells;
    struct kt_context *ctx;
    struct kt_buffer *buf;
    struct kt_tensor **k, **v;
    /* the last place: its first cell, and the cells it took as they were (to undo it) */
    int64_t head;
    uint32_t n_placed;
    uint32_t cursor; /* windowed: where the next search starts, so cells are taken again oldest first */
    struct kiln_kv_cell *saved;
    uint32_t cap_saved;
};

static struct kv_part *kv_of(struct kiln_mem_part *p) { return (struct kv_part *)p; }
static const struct kv_part *ckv_of(const struct kiln_mem_part *p) { return (const struct kv_part *)p; }

static const struct kiln_mem_ops kv_ops, kv_window_ops;

/* ------------------------------------------------------------------ memory */

static void kv_free(struct kiln_mem_part *p) {
    struct kv_part *kv = kv_of(p);
    if (!kv) return;
    if (kv->buf) kt_buffer_free(kv->buf);
    kt_free(kv->ctx);
    free(kv->cells);
    free(kv->k);
    free(kv->v);
    free(kv->saved);
    free(kv);
}

struct kiln_mem_part *kiln_kv_part_new(const struct kiln_model *m, const bool *layers, uint32_t size, int64_t n_swa,
                                       enum kt_type type_k, enum kt_type type_v, struct kt_buffer_type *buft,
                                       char *err, size_t errlen) {
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
        return NULL;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const int64_t D = m->lhp[il].n_embd_head;
        if (layers[il] && (D % kt_blck_size(type_k) || D % kt_blck_size(type_v))) {
            snprintf(err, errlen, "KV cache type %s needs a head size that is a multiple of %lld (it is %lld)",
                     kt_type_name(kt_is_quantized(type_k) ? type_k : type_v),
                     (long long)kt_blck_size(kt_is_quantized(type_k) ? type_k : type_v), (long long)D);
            return NULL;
        }
    }
    struct kv_part *kv = calloc(1, sizeof *kv);
    if (!kv) {
        snprintf(err, errlen, "out of memory for the KV cache bookkeeping");
        return NULL;
    }
    kv->base.ops = n_swa > 0 ? &kv_window_ops : &kv_ops;
    kv->size = size;
    kv->n_swa = n_swa;
    kv->causal = !m->arch->encoder;
    kv->n_layer = (uint32_t)hp->n_layer;
    kv->cells = calloc(size, sizeof *kv->cells);
    kv->k = calloc((size_t)hp->n_layer, sizeof *kv->k);
    kv->v = calloc((size_t)hp->n_layer, sizeof *kv->v);
    kv->ctx = kt_init((struct kt_init_params){.mem_size = (size_t)(2 * hp->n_layer + 2) * kt_tensor_overhead(),
                                              .no_alloc = true});
    if (!kv->cells || !kv->k || !kv->v || !kv->ctx) {
        snprintf(err, errlen, "out of memory for the KV cache bookkeeping");
        kv_free(&kv->base);
        return NULL;
    }
    for (uint32_t i = 0; i < size; i++) kv->cells[i].pos = -1;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (!layers[il]) continue;
        const int64_t D = m->lhp[il].n_embd_head, Hkv = m->lhp[il].n_head_kv;
        const char *sfx = n_swa > 0 ? "_swa" : "";
        kv->k[il] = kt_format_name(kt_new_tensor_3d(kv->ctx, type_k, D, size, Hkv), "cache_k%s_l%lld", sfx,
                                   (long long)il);
        kv->v[il] = kt_format_name(kt_new_tensor_3d(kv->ctx, type_v, D, size, Hkv), "cache_v%s_l%lld", sfx,
                                   (long long)il);
        if (!kv->k[il] || !kv->v[il]) {
            snprintf(err, errlen, "KV cache: %s", kt_last_error());
            kv_free(&kv->base);
            return NULL;
        }
    }
    kv->buf = kt_backend_alloc_ctx_tensors(kv->ctx, buft);
    if (!kv->buf) {
        snprintf(err, errlen, "cannot allocate the KV cache (%u cells): %s", size, kt_last_error());
        kv_free(&kv->base);
        return NULL;
    }
    /* zeros, so that masked cells never hold NaN (0 * NaN would poison sums) */
    kt_buffer_clear(kv->buf, 0);
    return &kv->base;
}

void kiln_kv_part_tensors(const struct kiln_mem_part *p, int il, struct kt_tensor **k, struct kt_tensor **v) {
    const struct kv_part *kv = ckv_of(p);
    *k = kv->k[il];
    *v = kv->v[il];
}

static size_t kv_bytes(const struct kiln_mem_part *p) { return kt_buffer_size(ckv_of(p)->buf); }

/* ------------------------------------------------------------------ cells */

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

bool kiln_kv_part_defrag(struct kiln_mem_part *p) {
    struct kv_part *kv = kv_of(p);
    uint32_t *from = malloc(sizeof *from * (kv->size ? kv->size : 1)), n = 0;
    size_t scratch_size = 0;
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        if (!kv->k[il]) continue;
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
            if (!kv->k[il]) continue;
            move_cells(kv->k[il], from, n, scratch);
            move_cells(kv->v[il], from, n, scratch);
        }
        for (uint32_t k = 0; k < n; k++) kv->cells[k] = kv->cells[from[k]];
        for (uint32_t k = n; k < kv->size; k++) kv->cells[k] = (struct kiln_kv_cell){.pos = -1, .seq = 0};
    }
    kv->cursor = n < kv->size ? n : 0; /* the free run */
    free(from);
    free(scratch);
    return true;
}

/* cells [0, n_kv) cover every used cell, padded */
static uint32_t kv_n_kv(const struct kv_part *kv, uint32_t pad) {
    uint32_t last = 0;
    for (uint32_t i = kv->size; i > 0; i--)
        if (kv->cells[i - 1].seq) {
            last = i;
            break;
        }
    uint32_t n = (last + pad - 1) / pad * pad;
    return n < pad ? pad : n > kv->size ? kv->size : n;
}

/* The largest position of every sequence (-1: none). */
static void pos_max_all(const struct kv_part *kv, int32_t *pmax) {
    for (int s = 0; s < N_SEQ; s++) pmax[s] = -1;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kiln_kv_cell *c = &kv->cells[i];
        for (uint64_t bits = c->seq; bits; bits &= bits - 1) {
            const int s = __builtin_ctzll(bits);
            if (c->pos > pmax[s]) pmax[s] = c->pos;
        }
    }
}

/* A windowed cell no sequence of it can see again: each has a position at or past
 * ref[s] to decode next, and ref[s] - pos >= n_swa. */
static bool stale(const struct kv_part *kv, const struct kiln_kv_cell *c, const int32_t *ref) {
    if (kv->n_swa <= 0 || !c->seq) return false;
    for (uint64_t bits = c->seq; bits; bits &= bits - 1)
        if ((int64_t)ref[__builtin_ctzll(bits)] - c->pos < kv->n_swa) return false;
    return true;
}

/* first cell of a run of n cells free (or stale, where ref is given), or -1. The
 * windowed cache searches from its cursor round to it (a run does not wrap): cells
 * are taken in the order they were filled, so the oldest positions go first and a
 * sequence cut back finds its latest window whole as long as possible. */
static int64_t find_run(const struct kv_part *kv, uint32_t n, const int32_t *ref) {
    if (n == 0 || n > kv->size) return -1;
    const uint32_t start = kv->n_swa > 0 ? kv->cursor : 0;
    uint32_t run = 0;
    for (uint32_t k = 0; k < kv->size; k++) {
        const uint32_t i = (start + k) % kv->size;
        if (i == 0) run = 0;
        run = kv->cells[i].seq == 0 || (ref && stale(kv, &kv->cells[i], ref)) ? run + 1 : 0;
        if (run == n) return (int64_t)i + 1 - n;
    }
    return -1;
}

static enum kiln_mem_status kv_place(struct kiln_mem_part *p, const struct kiln_batch *b) {
    struct kv_part *kv = kv_of(p);
    const uint32_t T = (uint32_t)b->n_tokens;
    if (T > kv->cap_saved) {
        struct kiln_kv_cell *s = realloc(kv->saved, sizeof *s * T);
        if (!s) return KILN_MEM_NO_ROOM;
        kv->saved = s;
        kv->cap_saved = T;
    }
    /* each sequence's next position: where it stands, or its first token in the batch */
    int32_t ref[N_SEQ];
    pos_max_all(kv, ref);
    for (int s = 0; s < N_SEQ; s++) ref[s] += 1;
    for (uint32_t j = 0; j < T; j++)
        if (b->pos[j] < ref[b->seq_id[j]]) ref[b->seq_id[j]] = b->pos[j];
    /* empty cells first: stale ones still let a sequence cut back resume */
    int64_t head = find_run(kv, T, NULL);
    if (head < 0 && kv->n_swa > 0) head = find_run(kv, T, ref);
    if (head < 0) {
        /* stale cells (windowed) go for good, then holes close up: the free cells become one run */
        uint32_t freeable = 0;
        for (uint32_t i = 0; i < kv->size; i++) freeable += !kv->cells[i].seq || stale(kv, &kv->cells[i], ref);
        if (freeable < T) return KILN_MEM_NO_ROOM;
        for (uint32_t i = 0; i < kv->size; i++)
            if (stale(kv, &kv->cells[i], ref)) {
                kv->cells[i] = (struct kiln_kv_cell){.pos = -1, .seq = 0};
                kv->used--;
            }
        if (!kiln_kv_part_defrag(p)) return KILN_MEM_NO_ROOM;
        head = find_run(kv, T, ref);
        if (head < 0) return KILN_MEM_NO_ROOM;
    }
    for (uint32_t j = 0; j < T; j++) {
        struct kiln_kv_cell *c = &kv->cells[head + j];
        kv->saved[j] = *c;
        kv->used += c->seq == 0;
        *c = (struct kiln_kv_cell){.pos = b->pos[j], .seq = 1ull << b->seq_id[j]};
    }
    kv->head = head;
    kv->n_placed = T;
    if (kv->n_swa > 0) kv->cursor = (uint32_t)((head + T) % kv->size);
    return KILN_MEM_OK;
}

static void kv_unplace(struct kiln_mem_part *p, const struct kiln_batch *b, bool computed) {
    (void)b;
    struct kv_part *kv = kv_of(p);
    for (uint32_t j = 0; j < kv->n_placed; j++) {
        struct kiln_kv_cell *c = &kv->cells[kv->head + j];
        /* a stale cell taken back holds its old data only if the graph never wrote it */
        *c = computed ? (struct kiln_kv_cell){.pos = -1, .seq = 0} : kv->saved[j];
        kv->used -= c->seq == 0;
    }
    kv->n_placed = 0;
}

/* ------------------------------------------------------------------ graph inputs */

static bool kv_inputs(struct kiln_mem_part *p, struct kt_context *ctx, int64_t n_tokens, bool reserve,
                      struct kiln_mem_inputs *out) {
    const struct kv_part *kv = kv_of(p);
    const bool win = kv->n_swa > 0;
    out->n_kv = reserve ? kv->size : kv_n_kv(kv, KV_PAD);
    out->head = reserve ? 0 : kv->head;
    out->mask = kt_set_name(kt_new_tensor_2d(ctx, KT_TYPE_F32, out->n_kv, n_tokens), win ? "inp_mask_swa" : "inp_mask");
    out->order = kt_set_name(kt_new_tensor_1d(ctx, KT_TYPE_I32, out->n_kv), win ? "inp_kv_order_swa" : "inp_kv_order");
    if (!out->mask || !out->order) return false;
    kt_set_input(out->mask);
    kt_set_input(out->order);
    return true;
}

/* A token sees a cell of its sequence at or before its position (any position of it,
 * for an encoder) and, windowed, fewer than n_swa positions back. */
static void fill_mask(const struct kv_part *kv, const struct kiln_batch *b, int64_t n_kv, float *mask) {
    const struct kiln_kv_cell *cells = kv->cells;
    const int64_t w = kv->n_swa > 0 ? kv->n_swa : INT64_MAX;
    const int32_t any = kv->causal ? 0 : INT32_MAX;
    for (int32_t j = 0; j < b->n_tokens; j++) {
        const uint64_t bit = 1ull << b->seq_id[j];
        const int32_t pj = b->pos[j];
        float *row = mask + (size_t)j * (size_t)n_kv;
        for (int64_t c = 0; c < n_kv; c++)
            row[c] = (cells[c].seq & bit) && cells[c].pos <= (int64_t)pj + any && (int64_t)pj - cells[c].pos < w
                         ? 0.0f
                         : -INFINITY;
    }
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Cells [0, n_kv) by position (empty cells first), ties by cell. Within one sequence
 * positions are distinct, so every token's visible cells come out in position order
 * wherever they sit. A counting sort, O(n_kv + highest position), unless positions
 * run far beyond the cells (a caller's choice, and a windowed cache's normal state):
 * then a comparison sort. */
static bool fill_order(const struct kv_part *kv, int64_t n_kv, int32_t *order) {
    const struct kiln_kv_cell *cells = kv->cells;
    int32_t top = -1;
    for (int64_t c = 0; c < n_kv; c++) top = cells[c].pos > top ? cells[c].pos : top;
    if ((int64_t)top > 4 * n_kv + 4096) {
        uint64_t *key = malloc((size_t)n_kv * sizeof *key);
        if (!key) return false;
        for (int64_t c = 0; c < n_kv; c++) key[c] = (uint64_t)(cells[c].pos + 1) << 32 | (uint64_t)c;
        qsort(key, (size_t)n_kv, sizeof *key, cmp_u64);
        for (int64_t c = 0; c < n_kv; c++) order[c] = (int32_t)(key[c] & 0xffffffffu);
        free(key);
        return true;
    }
    int64_t *start = calloc((size_t)top + 2, sizeof *start); /* slot 0: empty cells (pos -1) */
    if (!start) return false;
    for (int64_t c = 0; c < n_kv; c++) start[cells[c].pos + 1]++;
    int64_t at = 0;
    for (int64_t p = 0; p <= (int64_t)top + 1; p++) {
        const int64_t n = start[p];
        start[p] = at;
        at += n;
    }
    for (int64_t c = 0; c < n_kv; c++) order[start[cells[c].pos + 1]++] = (int32_t)c;
    free(start);
    return true;
}

/* Straight into the tensors' memory when it is host memory (the CPU backend), else
 * through a scratch copy. */
static bool kv_set_inputs(const struct kiln_mem_part *p, const struct kiln_batch *b, const struct kiln_mem_inputs *in) {
    const struct kv_part *kv = ckv_of(p);
    const int64_t n_kv = in->n_kv, T = b->n_tokens;
    const bool host = in->mask->buffer && kt_buffer_is_host(in->mask->buffer) && in->order->buffer &&
                      kt_buffer_is_host(in->order->buffer);
    float *mask = host ? in->mask->data : malloc(sizeof(float) * (size_t)n_kv * (size_t)T);
    int32_t *order = host ? in->order->data : malloc(sizeof(int32_t) * (size_t)n_kv);
    bool ok = mask && order && fill_order(kv, n_kv, order);
    if (ok) fill_mask(kv, b, n_kv, mask);
    if (ok && !host) {
        kt_tensor_set(in->mask, mask, 0, sizeof(float) * (size_t)n_kv * (size_t)T);
        kt_tensor_set(in->order, order, 0, sizeof(int32_t) * (size_t)n_kv);
    }
    if (!host) {
        free(mask);
        free(order);
    }
    return ok;
}

/* ------------------------------------------------------------------ sequences */

static bool in_range(int32_t pos, int32_t p0, int32_t p1) { return pos >= p0 && (p1 < 0 || pos < p1); }

static void kv_clear(struct kiln_mem_part *p) {
    struct kv_part *kv = kv_of(p);
    for (uint32_t i = 0; i < kv->size; i++) kv->cells[i] = (struct kiln_kv_cell){.pos = -1, .seq = 0};
    kv->used = 0;
    kv->cursor = 0;
}

static enum kiln_mem_status kv_seq_rm(struct kiln_mem_part *p, int32_t seq, int32_t p0, int32_t p1) {
    struct kv_part *kv = kv_of(p);
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kiln_kv_cell *c = &kv->cells[i];
        if (!c->seq || !in_range(c->pos, p0, p1)) continue;
        c->seq = seq < 0 ? 0 : c->seq & ~(1ull << seq);
        if (!c->seq) {
            c->pos = -1;
            kv->used--;
        }
    }
    return KILN_MEM_OK;
}

static enum kiln_mem_status kv_seq_cp(struct kiln_mem_part *p, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    struct kv_part *kv = kv_of(p);
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kiln_kv_cell *c = &kv->cells[i];
        if ((c->seq >> src & 1) && in_range(c->pos, p0, p1)) c->seq |= 1ull << dst;
    }
    return KILN_MEM_OK;
}

static int32_t kv_seq_pos_max(const struct kiln_mem_part *p, int32_t seq) {
    const struct kv_part *kv = ckv_of(p);
    int32_t best = -1;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kiln_kv_cell *c = &kv->cells[i];
        if ((c->seq >> seq & 1) && c->pos > best) best = c->pos;
    }
    return best;
}

static int32_t kv_seq_pos_min(const struct kiln_mem_part *p, int32_t seq) {
    const struct kv_part *kv = ckv_of(p);
    int32_t best = -1;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kiln_kv_cell *c = &kv->cells[i];
        if ((c->seq >> seq & 1) && (best < 0 || c->pos < best)) best = c->pos;
    }
    return best;
}

/* Resuming at m needs every position of [m - w + 1, m) held (w: the window, or m
 * for the full cache). run[q]: held positions ending at q. */
static int32_t kv_seq_resume(const struct kiln_mem_part *p, int32_t seq, int32_t n) {
    const struct kv_part *kv = ckv_of(p);
    if (n <= 0) return 0;
    uint32_t *run = calloc((size_t)n, sizeof *run);
    if (!run) return 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kiln_kv_cell *c = &kv->cells[i];
        if ((c->seq >> seq & 1) && c->pos >= 0 && c->pos < n) run[c->pos] = 1;
    }
    for (int32_t q = 1; q < n; q++)
        if (run[q]) run[q] = run[q - 1] + 1;
    int32_t m = n;
    for (; m > 0; m--) {
        const int64_t need = kv->n_swa > 0 && kv->n_swa - 1 < m ? kv->n_swa - 1 : m;
        if ((int64_t)run[m - 1] >= need) break;
    }
    free(run);
    return m;
}

static const struct kiln_mem_ops kv_ops = {
    .kind = "kv",
    .place = kv_place,
    .unplace = kv_unplace,
    .inputs = kv_inputs,
    .set_inputs = kv_set_inputs,
    .clear = kv_clear,
    .seq_rm = kv_seq_rm,
    .seq_cp = kv_seq_cp,
    .seq_pos_min = kv_seq_pos_min,
    .seq_pos_max = kv_seq_pos_max,
    .seq_resume = kv_seq_resume,
    .bytes = kv_bytes,
    .free = kv_free,
};

/* the same code; the kind's name says which (n_swa decides the behaviour) */
static const struct kiln_mem_ops kv_window_ops = {
    .kind = "kv-window",
    .place = kv_place,
    .unplace = kv_unplace,
    .inputs = kv_inputs,
    .set_inputs = kv_set_inputs,
    .clear = kv_clear,
    .seq_rm = kv_seq_rm,
    .seq_cp = kv_seq_cp,
    .seq_pos_min = kv_seq_pos_min,
    .seq_pos_max = kv_seq_pos_max,
    .seq_resume = kv_seq_resume,
    .bytes = kv_bytes,
    .free = kv_free,
};
