/*
 * mul_mat.c - dst = src0 x src1 for weights of any type. Activations are first
 * converted (all threads, by rows) into the weight type's dot partner (Q8_0,
 * Q8_K, F16 ...) exactly as the reference quantizer would (for the F16 block
 * kernel, those values as floats), so the dot products are the format's own;
 * then output tiles are handed out so that a thread that finishes early takes
 * more (work stealing): prompts by an atomic counter, decode by per-thread
 * shares of contiguous rows (cpu.h). Where the type has a rows-in-lanes kernel
 * (gemm.h: Q4_0, Q8_0, Q4_K, Q6_K on AVX-512), 16 rows go one per lane, for
 * decode on the weights as mapped and for prompts through a per-thread packed
 * copy of 16 rows; else a block kernel computes a few rows x a few columns per
 * pass over K. Each output element is exactly one
 * vec_dot's arithmetic whatever the path or tiling, so results depend neither
 * on the thread count nor on how many columns a batch has. The conversion and
 * the tile walk are shared with the expert product (mul_mat.h, mul_mat_id.c).
 */
#include "mul_mat.h"

#include <string.h>

#define TILE_ROWS 16 /* weight rows reused across a tile's columns */
#define PACK_COLS KT_MM_PACK_COLS
#define PACK_MIN KT_MM_PACK_MIN
_Static_assert(KT_GEMM_COLS <= PACK_COLS && KT_LANES_COLS <= PACK_COLS, "a column group fits struct col_group");

/* Rows-in-lanes kernel (gemm.h) for this node, or NULL: the 16 row offsets must fit
 * the kernel's 32-bit gather indices. */
static kt_lanes_fn lanes_for(const struct kt_tensor *a, int *bias) {
    if (a->nb[1] > (size_t)INT32_MAX / KT_LANES_ROWS) return NULL;
    return kt_cpu_lanes(a->type, bias);
}

/* Block kernel (gemm.h) for weights a and n_act activation rows, or NULL (rows in
 * lanes, or none). */
static kt_gemm_fn gemm_for(const struct kt_tensor *a, int64_t n_act) {
    int bias;
    return lanes_for(a, &bias) ? NULL : kt_cpu_gemm(a->type, n_act);
}

static size_t align_up(size_t n) { return (n + KT_MEM_ALIGN - 1) & ~(size_t)(KT_MEM_ALIGN - 1); }

/* Bytes of one activation row: the dot partner's row, or for a block kernel that
 * row's values as floats. */
static size_t act_row_size(const struct kt_tensor *a, int64_t n_act) {
    enum kt_type vdt = kt_get_type_traits(a->type)->vec_dot_type;
    return align_up(gemm_for(a, n_act) ? (size_t)a->ne[0] * sizeof(float) : kt_row_size(vdt, a->ne[0]));
}

/* Elements [k0, k0 + n) of an activation row whose elements lie nb0 bytes apart: the
 * row itself where they are contiguous, else gathered into buf (transposed
 * activations, rare). */
static const float *act_run(const float *src, size_t nb0, int64_t k0, int64_t n, float *buf) {
    if (nb0 == sizeof(float)) return src + k0;
    for (int64_t k = 0; k < n; k++) buf[k] = *(const float *)((const uint8_t *)src + (size_t)(k0 + k) * nb0);
    return buf;
}

/* A block kernel's activation row: K elements nb0 bytes apart, rounded to the dot
 * partner's values (its quantizer, then back to floats), 256 at a time. */
static void act_floats(enum kt_type vdt, kt_from_float_fn quant, const float *src, size_t nb0, float *out, int64_t K) {
    float buf[256];
    uint64_t tmp[256]; /* the partner's bytes for 256 elements (at most 8 a value) */
    for (int64_t k0 = 0; k0 < K; k0 += 256) {
        const int64_t n = K - k0 < 256 ? K - k0 : 256;
        quant(act_run(src, nb0, k0, n, buf), tmp, n);
        kt_get_type_traits(vdt)->to_float(tmp, out + k0, n);
    }
}

/* Each column's per-block aux array (rows in lanes over Q8_0 activations), after the
 * activation rows; 0 where the kernel needs none. */
static size_t lanes_aux_size(const struct kt_tensor *a) {
    if (kt_get_type_traits(a->type)->vec_dot_type != KT_TYPE_Q8_0) return 0;
    return align_up((size_t)(a->ne[0] / 32) * sizeof(struct kt_lanes_aux));
}

/* One thread's scratch for prompts through packed 16-row groups (gemm.h): a compact
 * group unless the weights are repacked already, then the expanded form where the
 * type has one; a few bytes of slack to align it. */
size_t kt_mm_scratch_bytes(const struct kt_tensor *a) {
    int bias;
    const struct kt_lanes_packer *pk = lanes_for(a, &bias) ? kt_cpu_lanes_packer(a->type) : NULL;
    if (!pk) return 0;
    const uint8_t *g0;
    size_t gs;
    const size_t group = kt_cpu_repacked(a, &g0, &gs) ? 0 : align_up(pk->size(a->ne[0]));
    const size_t x = pk->xsize ? align_up(pk->xsize(a->ne[0])) : 0;
    return group + x ? group + x + KT_MEM_ALIGN : 0;
}

size_t kt_mm_act_bytes(const struct kt_tensor *a, int64_t n_act) {
    int bias;
    const bool lanes = lanes_for(a, &bias) != NULL;
    return (act_row_size(a, n_act) + (lanes ? lanes_aux_size(a) : 0)) * (size_t)n_act;
}

/* Work buffer: activation rows (and their aux) per column, then, where a pack kernel
 * serves the node's many columns, one scratch per thread. */
size_t kt_cpu_mul_mat_work_size(const struct kt_tensor *dst, int n_threads) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    size_t size = kt_mm_act_bytes(a, kt_nrows(b));
    if (kt_nrows(b) >= PACK_MIN) size += kt_mm_scratch_bytes(a) * (size_t)(n_threads > 0 ? n_threads : 1);
    return size;
}

bool kt_cpu_mul_mat_supports(const struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    const struct kt_type_traits *tr = kt_get_type_traits(a->type);
    if (b->type != KT_TYPE_F32 || !tr->vec_dot || !kt_cpu_vec_dot(a->type)) return false;
    if (tr->vec_dot_type != KT_TYPE_F32 && !kt_cpu_from_float(tr->vec_dot_type)) return false;
    return a->ne[0] % kt_blck_size(tr->vec_dot_type) == 0;
}

void kt_mm_init(struct kt_mm *m, const struct kt_compute_params *p, struct kt_tensor *dst, const struct kt_tensor *a,
                int64_t n_act, size_t scratch_off, int64_t pack_cols) {
    memset(m, 0, sizeof *m);
    m->a = a;
    m->dst = dst;
    m->K = a->ne[0];
    m->vdt = kt_get_type_traits(a->type)->vec_dot_type;
    m->dot = kt_cpu_vec_dot(a->type);
    m->quant = m->vdt == KT_TYPE_F32 ? NULL : kt_cpu_from_float(m->vdt);
    m->gemm = gemm_for(a, n_act);
    m->lanes = lanes_for(a, &m->lanes_bias);
    m->brow = act_row_size(a, n_act);
    m->auxs = m->lanes ? lanes_aux_size(a) : 0;
    m->acts = p->wdata;
    m->auxd = m->acts + m->brow * (size_t)n_act;
    if (m->lanes && !kt_cpu_repacked(a, &m->rp_g0, &m->rp_gsize)) m->rp_g0 = NULL;
    m->pack = m->lanes ? kt_cpu_lanes_packer(a->type) : NULL;
    const size_t ss = m->pack ? kt_mm_scratch_bytes(a) : 0;
    /* (the same answer on every thread: the tiles are shared) */
    if (ss && pack_cols >= PACK_MIN && scratch_off + ss * (size_t)p->nth <= p->wsize)
        m->scratch = (uint8_t *)(((uintptr_t)(m->acts + scratch_off + ss * (size_t)p->ith) + KT_MEM_ALIGN - 1) &
                                 ~(uintptr_t)(KT_MEM_ALIGN - 1));
}

void kt_mm_convert(const struct kt_mm *m, const float *src, size_t nb0, int64_t row) {
    const int64_t K = m->K;
    uint8_t *out = m->acts + (size_t)row * m->brow;
    if (m->gemm && m->quant) {
        act_floats(m->vdt, m->quant, src, nb0, (float *)out, K);
    } else if (nb0 != sizeof(float)) {
        /* strided elements: gather first (rare: transposed activations) */
        if (m->quant) {
            /* gather into the tail of the row's slot would alias; quantize element-wise instead */
            float buf[256];
            const int64_t blk = kt_blck_size(m->vdt);
            for (int64_t k0 = 0; k0 < K; k0 += blk)
                m->quant(act_run(src, nb0, k0, blk, buf), out + kt_row_size(m->vdt, k0), blk);
        } else {
            float *tmp = (float *)out;
            for (int64_t k = 0; k < K; k++) tmp[k] = *(const float *)((const uint8_t *)src + k * nb0);
        }
    } else if (m->quant) {
        m->quant(src, out, K);
    } else {
        memcpy(out, src, (size_t)K * sizeof(float));
    }
    if (m->auxs) kt_lanes_aux(K, out, m->lanes_bias, (struct kt_lanes_aux *)(m->auxd + (size_t)row * m->auxs));
}

/* The weight matrix column (i1, i2, i3) of the batch multiplies (broadcast over dims
 * 2/3 by r2, r3), and that column's output. */
static inline const uint8_t *batch_weights(const struct kt_tensor *a, int64_t i2, int64_t i3, int64_t r2, int64_t r3) {
    return (const uint8_t *)a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
}
static inline float *column_out(struct kt_tensor *dst, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)((uint8_t *)dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
}

/* The next columns from *c (before ic1, at most max) that share one weight matrix
 * (broadcast over dims 2/3 can change it inside a tile): their activation rows (and
 * the rows' indices, for the aux arrays) and their outputs from row rr on. */
struct col_group {
    const void *y[PACK_COLS];
    float *out[PACK_COLS];
    int64_t act[PACK_COLS];
    const uint8_t *w;
    int n;
};

static void next_group(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t rr, int64_t *c, int64_t ic1,
                       int max, struct col_group *g) {
    if (cols->list) { /* one expert's columns: its matrix throughout */
        g->w = cols->w;
        for (g->n = 0; *c < ic1 && g->n < max; ++*c, g->n++) {
            const struct kt_mm_entry *e = &cols->list[*c];
            g->y[g->n] = m->acts + (size_t)e->act * m->brow;
            g->act[g->n] = e->act;
            g->out[g->n] = (float *)((uint8_t *)m->dst->data + e->out) + rr;
        }
        return;
    }
    const int64_t N = cols->N, B2 = cols->B2;
    /* (callers ask while *c < ic1) column *c's indices once, then stepped: a division
     * per column was 4% of a prompt */
    int64_t i1 = *c % N, i2 = (*c / N) % B2, i3 = *c / (N * B2);
    g->w = batch_weights(m->a, i2, i3, cols->r2, cols->r3);
    for (g->n = 0; *c < ic1 && g->n < max; ++*c, g->n++) {
        g->y[g->n] = m->acts + (size_t)*c * m->brow;
        g->act[g->n] = *c;
        g->out[g->n] = column_out(m->dst, i1, i2, i3) + rr;
        if (++i1 == N) { /* the next column is in the next matrix of the batch: same weights? */
            i1 = 0;
            if (++i2 == B2) i2 = 0, i3++;
            if (batch_weights(m->a, i2, i3, cols->r2, cols->r3) != g->w) {
                ++*c, g->n++;
                break;
            }
        }
    }
}

/* Rows [ir0, ir1) x columns [ic0, ic1) through a block kernel, KT_GEMM_ROWS rows x at
 * most KT_GEMM_COLS columns per call. */
static void gemm_tile(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t ir0, int64_t ir1, int64_t ic0,
                      int64_t ic1) {
    const struct kt_tensor *a = m->a;
    for (int64_t rr = ir0; rr < ir1; rr += KT_GEMM_ROWS) {
        const int nr = (int)(ir1 - rr < KT_GEMM_ROWS ? ir1 - rr : KT_GEMM_ROWS);
        for (int64_t c = ic0; c < ic1;) {
            struct col_group g;
            next_group(m, cols, rr, &c, ic1, KT_GEMM_COLS, &g);
            m->gemm(m->K, g.w + rr * a->nb[1], a->nb[1], g.y, g.out, nr, g.n);
        }
    }
}

/* Rows in lanes: rows [ir0, ir1) in groups of 16 x columns [ic0, ic1) in groups that
 * share one weight matrix. A 16-row group comes from the repacked copy (g0: group 0 of
 * the matrix, gsize bytes apart) or, given scratch and at least PACK_MIN columns, is
 * packed into the scratch once per matrix; the packer's run computes from it, or for
 * KT_LANES_XPAND_MIN columns and more its wide, or its xrun from the expanded form
 * (written once per group).
 * Else the lanes kernel reads the weights as mapped. Same results every way. */
static void lanes_tile(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t ir0, int64_t ir1, int64_t ic0,
                       int64_t ic1) {
    const struct kt_tensor *a = m->a;
    const struct kt_lanes_packer *pk = m->pack;
    const int64_t K = m->K;
    const uint8_t *g0 = cols->list ? NULL : m->rp_g0;
    uint8_t *own = m->scratch && !g0 ? m->scratch : NULL; /* the thread's compact group */
    uint8_t *xs = m->scratch && pk->xsize ? m->scratch + (own ? align_up(pk->size(K)) : 0) : NULL;
    const int group = g0 || own ? PACK_COLS : KT_LANES_COLS;
    for (int64_t rr = ir0; rr < ir1; rr += KT_LANES_ROWS) {
        const int nr = (int)(ir1 - rr < KT_LANES_ROWS ? ir1 - rr : KT_LANES_ROWS);
        const uint8_t *packed = NULL, *expanded = NULL; /* which matrix own / xs hold */
        for (int64_t c = ic0; c < ic1;) {
            struct col_group g;
            next_group(m, cols, rr, &c, ic1, group, &g);
            const struct kt_lanes_aux *ax[PACK_COLS];
            for (int j = 0; j < g.n; j++)
                ax[j] = m->auxs ? (const struct kt_lanes_aux *)(m->auxd + (size_t)g.act[j] * m->auxs) : NULL;
            const uint8_t *grp = g0 ? g0 + (size_t)(rr / KT_LANES_ROWS) * m->rp_gsize : NULL;
            if (!grp && own && g.n >= PACK_MIN) {
                if (g.w != packed) pk->pack(K, g.w + rr * a->nb[1], a->nb[1], nr, own), packed = g.w;
                grp = own;
            }
            if (!grp) {
                for (int c0 = 0; c0 < g.n; c0 += KT_LANES_COLS)
                    m->lanes(K, g.w + rr * a->nb[1], a->nb[1], nr, g.y + c0, ax + c0, g.out + c0,
                             g.n - c0 < KT_LANES_COLS ? g.n - c0 : KT_LANES_COLS);
            } else if (pk->wide && g.n >= KT_LANES_XPAND_MIN) {
                pk->wide(K, grp, nr, g.y, ax, g.out, g.n);
            } else if (xs && g.n >= KT_LANES_XPAND_MIN) {
                if (g.w != expanded) pk->expand(K, grp, xs), expanded = g.w;
                pk->xrun(K, xs, nr, g.y, ax, g.out, g.n);
            } else {
                pk->run(K, grp, nr, g.y, ax, g.out, g.n);
            }
        }
    }
}

/* One vec_dot per element, TILE_ROWS weight rows reused across the tile's columns. */
static void dot_tile(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t ir0, int64_t ir1, int64_t ic0,
                     int64_t ic1) {
    const size_t ws = m->a->nb[1];
    for (int64_t rr = ir0; rr < ir1; rr += TILE_ROWS) {
        const int64_t nr = ir1 - rr < TILE_ROWS ? ir1 - rr : TILE_ROWS;
        for (int64_t c = ic0; c < ic1;) {
            struct col_group g;
            next_group(m, cols, rr, &c, ic1, PACK_COLS, &g);
            for (int j = 0; j < g.n; j++)
                for (int64_t r = 0; r < nr; r++) m->dot(m->K, &g.out[j][r], g.w + (rr + r) * ws, g.y[j]);
        }
    }
}

void kt_mm_tile(const struct kt_mm *m, const struct kt_mm_cols *cols, int64_t ir0, int64_t ir1, int64_t ic0,
                int64_t ic1) {
    if (m->lanes)
        lanes_tile(m, cols, ir0, ir1, ic0, ic1);
    else if (m->gemm)
        gemm_tile(m, cols, ir0, ir1, ic0, ic1);
    else
        dot_tile(m, cols, ir0, ir1, ic0, ic1);
}

/* prompts: tiles of 64 (or 32) rows, reused across the tile's columns. A packer that
 * expands its groups for the prompt kernel (the K-quants) does so once per tile, so
 * its tiles take 4x as many columns: `kiln bench -p 128,512` on the 1.1B Q4_K_M,
 * 243 -> 262 and 235 -> 253 t/s (expand_q4_K had been a fifth of the Q4_K time);
 * Q8_0, which does not expand, measured no better with them. Q4_K's wide kernel reads
 * the compact group and expands nothing: 64 and 256 columns measured alike
 * (`bench_gemm 10 2048 2048 128 q4_K 2` and `... 5632 2048 512 ...`, alternated); it
 * keeps the K-quants' 256. */
int64_t kt_mm_tile_rows(const struct kt_mm *m) { return m->gemm || m->lanes ? 64 : 32; }

int64_t kt_mm_tile_cols(const struct kt_mm *m) {
    const bool kquant = m->pack && (m->pack->xsize || m->pack->wide);
    return m->scratch || m->rp_g0 ? (kquant ? 4 : 1) * PACK_COLS
           : m->gemm              ? 6 * KT_GEMM_COLS
           : m->lanes             ? 32
                                  : 8;
}

void kt_cpu_mul_mat(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t M = a->ne[1];
    const int64_t N = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    const int64_t ncols = N * B2 * B3;
    struct kt_mm m;
    kt_mm_init(&m, p, dst, a, ncols, kt_mm_act_bytes(a, ncols), ncols);
    const struct kt_mm_cols cols = {.N = N, .B2 = B2, .r2 = B2 / a->ne[2], .r3 = B3 / a->ne[3]};

    /* phase 1: activations into the dot partner type, one packed row per column */
    int64_t c0, c1;
    kt_cpu_split_rows(p, ncols, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        int64_t i1 = c % N, i2 = (c / N) % B2, i3 = c / (N * B2);
        kt_mm_convert(&m, (const float *)((const uint8_t *)b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3]),
                      b->nb[0], c);
    }
    /* decode (one column): 32-row tiles in shares (cpu.h) */
    const bool dec = ncols == 1;
    const int64_t dec_rows = 32, dec_tiles = (M + dec_rows - 1) / dec_rows;
    if (dec)
        kt_cpu_share_init(p, dec_tiles);
    else if (p->ith == 0)
        kt_cpu_chunk_reset(p);
    kt_cpu_barrier(p);

    /* phase 2: tiles of (rows of dst) x (columns). With a block kernel (gemm.h) a tile is
     * walked by groups of KT_GEMM_ROWS weight rows (kept in L1) against groups of
     * KT_GEMM_COLS columns of the same weight matrix; the tile's activations stay in L2. */
    const int64_t tile_r = kt_mm_tile_rows(&m), tile_c = dec ? 1 : kt_mm_tile_cols(&m);
    const int64_t nt0 = (M + tile_r - 1) / tile_r, nt1 = (ncols + tile_c - 1) / tile_c;
    /* decode: each thread streams its own share of the rows front to back, then helps
     * with what is left of the others' from their ends (kt_cpu_share_next), so that
     * the weights' prefetch, which runs a group or a pass ahead, stays in the thread's
     * own run. The earlier split (3/4 of the rows in runs, then 32-row tiles to whoever
     * was free, the prefetch running into a tile another thread takes) was slower on
     * every 1.1B file, timed in one process on alternating tokens (two runs each, 2
     * threads): tg Q4_K_M 4% and 15%, Q8_0 4% and 5%, Q4_0 2% and 3%, F16 1% and 2%. */
    /* Prompts: the last nth tiles go in pieces of 16 rows, so that a thread that takes
     * the matrix's last work holds the others up for a piece, not a whole tile (a
     * 64 x 256 Q4_K tile is about 0.1 ms here, and a pp128 has 155 matrices). */
    const int64_t pieces = tile_r / KT_LANES_ROWS, whole = nt0 * nt1,
                  split = dec || whole < 2 * p->nth ? 0 : p->nth, first_split = whole - split;
    const int64_t ntiles = dec ? dec_tiles : whole + split * (pieces - 1);
    for (int64_t u = dec ? kt_cpu_share_next(p) : p->ith; u >= 0 && u < ntiles;
         u = dec ? kt_cpu_share_next(p) : kt_cpu_chunk_next(p)) {
        const int64_t t = dec || u < first_split ? u : first_split + (u - first_split) / pieces;
        int64_t ir0 = (t % nt0) * tile_r, ir1 = ir0 + tile_r < M ? ir0 + tile_r : M;
        int64_t ic0 = (t / nt0) * tile_c, ic1 = ic0 + tile_c < ncols ? ic0 + tile_c : ncols;
        if (!dec && u >= first_split) {
            ir0 += (u - first_split) % pieces * KT_LANES_ROWS;
            if (ir0 >= ir1) continue;
            if (ir0 + KT_LANES_ROWS < ir1) ir1 = ir0 + KT_LANES_ROWS;
        }
        if (dec) {
            ir0 = t * dec_rows, ir1 = ir0 + dec_rows < M ? ir0 + dec_rows : M;
            ic0 = 0, ic1 = 1;
        }
        kt_mm_tile(&m, &cols, ir0, ir1, ic0, ic1);
    }
}
