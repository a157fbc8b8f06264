/*
 * gemm_lanes_avx512.c - rows-in-lanes mul_mat kernels for Q4_0 and Q8_0
 * weights (x Q8_0 activations), as mapped: 16 weight rows x up to
 * KT_LANES_COLS columns per pass, one weight row per float lane, so the same
 * code serves decode (one column: every weight byte read once, 16 rows in
 * flight) and prompts (a 16-row block unpacked once per 8 columns).
 * Arithmetic per element, the reference's (kt_vec_dot_q4_0_q8_0): per block
 * the exact int32 dot, then acc = fma((float)isum, dx * dy, acc), one rounding
 * for the product and the sum. Contracts: gemm.h.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "lanes_avx512.h"
#include "quant.h"
#include "vec_dot_isa.h"

/* One block of 16 rows as unsigned bytes u = x + bias: lo[g] has bytes 0..15 of rows
 * 4g..4g+3, hi[g] bytes 16..31. */
INLINE void unpack_q4_0(const uint8_t *const *row, size_t boff, __m512i lo[4], __m512i hi[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    UNROLL
    for (int g = 0; g < 4; g++) {
        const __m512i v = load4x128(row + 4 * g, boff + 2);
        lo[g] = _mm512_and_si512(v, m4);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
}
INLINE void unpack_q8_0(const uint8_t *const *row, size_t boff, __m512i lo[4], __m512i hi[4]) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    UNROLL
    for (int g = 0; g < 4; g++) {
        lo[g] = _mm512_xor_si512(load4x128(row + 4 * g, boff + 2), flip);
        hi[g] = _mm512_xor_si512(load4x128(row + 4 * g, boff + 18), flip);
    }
}

#define LANES_TILE(NAME, WBLOCK, UNPACK)                                                                            \
    INLINE void NAME(int64_t K, const uint8_t *w, size_t ws, int nr, const void *const *yp,                        \
                     const struct kt_lanes_aux *const *aux, float *const *out, const int C) {                      \
        const uint8_t *row[16];                                                                                     \
        lanes_rows(w, ws, nr, row);                                                                                 \
        const __m512i scale_idx = lanes_gather_index(w, row);                                                       \
        __m512 acc[KT_LANES_COLS];                                                                                  \
        UNROLL                                                                                                      \
        for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();                                                   \
        for (int64_t b = 0; b < K / 32; b++) {                                                                      \
            const size_t boff = (size_t)b * sizeof(WBLOCK);                                                         \
            __m512i lo[4], hi[4];                                                                                   \
            UNPACK(row, boff, lo, hi);                                                                              \
            /* the 16 rows' fp16 scales, in reduce16's lane order */                                               \
            const __m512i dq = _mm512_i32gather_epi32(scale_idx, w + boff, 1);                                      \
            const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dq));                                           \
            UNROLL                                                                                                  \
            for (int c = 0; c < C; c++) {                                                                           \
                const kt_block_q8_0 *y = (const kt_block_q8_0 *)yp[c] + b;                                          \
                const __m512i ylo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y->qs));               \
                const __m512i yhi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->qs + 16)));        \
                __m512i p[4];                                                                                       \
                UNROLL                                                                                              \
                for (int g = 0; g < 4; g++)                                                                         \
                    p[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[g], ylo), hi[g], yhi); \
                const __m512i s = _mm512_add_epi32(reduce16(p[0], p[1], p[2], p[3]), _mm512_set1_epi32(aux[c][b].off)); \
                const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(aux[c][b].d));                                    \
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[c]);                                         \
            }                                                                                                       \
        }                                                                                                           \
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);                                                         \
        UNROLL                                                                                                      \
        for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, _mm512_permutexvar_ps(lane_rows(), acc[c])); \
    }

LANES_TILE(tile_q4_0, kt_block_q4_0, unpack_q4_0)
LANES_TILE(tile_q8_0, kt_block_q8_0, unpack_q8_0)

/* One instance per column count so the accumulators stay in registers. */
#define DISPATCH_LANES(TILE)                                                                                        \
    for (int c0 = 0; c0 < nc; c0 += KT_LANES_COLS) {                                                                \
        const int cc = nc - c0 < KT_LANES_COLS ? nc - c0 : KT_LANES_COLS;                                           \
        const void *const *y = yp + c0;                                                                             \
        const struct kt_lanes_aux *const *a = aux + c0;                                                             \
        float *const *o = out + c0;                                                                                 \
        switch (cc) {                                                                                               \
        case 1: TILE(K, w, ws, nr, y, a, o, 1); break;                                                              \
        case 2: TILE(K, w, ws, nr, y, a, o, 2); break;                                                              \
        case 3: TILE(K, w, ws, nr, y, a, o, 3); break;                                                              \
        case 4: TILE(K, w, ws, nr, y, a, o, 4); break;                                                              \
        case 5: TILE(K, w, ws, nr, y, a, o, 5); break;                                                              \
        case 6: TILE(K, w, ws, nr, y, a, o, 6); break;                                                              \
        case 7: TILE(K, w, ws, nr, y, a, o, 7); break;                                                              \
        default: TILE(K, w, ws, nr, y, a, o, 8); break;                                                             \
        }                                                                                                           \
    }

_Static_assert(KT_LANES_COLS == 8, "DISPATCH_LANES lists every column count");

void kt_lanes_q4_0_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *yp,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc) {
    DISPATCH_LANES(tile_q4_0)
}

void kt_lanes_q8_0_avx512(int64_t K, const void *w, size_t ws, int nr, const void *const *yp,
                          const struct kt_lanes_aux *const *aux, float *const *out, int nc) {
    DISPATCH_LANES(tile_q8_0)
}

/* ------------------------------------------------------------------ packed 16-row groups */

/* A group of 16 rows, as compact as the rows themselves (so that a whole model can be
 * kept this way, the CPU_REPACK buffer type), for prompts (a thread packs a group into its
 * scratch once per 64 columns) and for decode of repacked weights (one sequential
 * stream, no gathers, no reduction). Blocks go in pairs, each pair 64-byte aligned:
 * the quants of block 2p, of block 2p+1, then the two blocks' 16 fp16 scales each.
 * A block's quants are nq 64-byte chunks: chunk k holds bytes 4k..4k+3 of every row
 * (row r in int32 lane r), Q4_0 nibbles as stored (u = x + 8, low nibbles elements
 * 4k.., high 16+4k..), Q8_0 bytes flipped to u = x + 128. A column then costs 8
 * vpdpbusd against broadcast activation words per block; the arithmetic per element
 * is the lanes kernels' (and the reference's). */
#define Q40_QB 256 /* quant bytes of one block of 16 rows */
#define Q80_QB 512
#define PAIR_BYTES(QB) (2 * (QB) + 64)

static size_t pack_size_q4_0(int64_t K) { return (size_t)((K / 32 + 1) / 2) * PAIR_BYTES(Q40_QB); }
static size_t pack_size_q8_0(int64_t K) { return (size_t)((K / 32 + 1) / 2) * PAIR_BYTES(Q80_QB); }

INLINE uint8_t *pk_quants(const uint8_t *g, int64_t b, size_t qb) {
    return (uint8_t *)g + (size_t)(b >> 1) * PAIR_BYTES(qb) + (size_t)(b & 1) * qb;
}
INLINE uint8_t *pk_scales(const uint8_t *g, int64_t b, size_t qb) {
    return (uint8_t *)g + (size_t)(b >> 1) * PAIR_BYTES(qb) + 2 * qb + (size_t)(b & 1) * 32;
}

/* Blocks of bsize bytes: fp16 scale, then nq * 4 quant bytes (flipped by xor). */
INLINE void pack_legacy(int64_t K, const void *w, size_t ws, int nr, void *group, size_t bsize, int nq, char flip) {
    const __m512i idx = lanes_row_offsets(ws, nr), x = _mm512_set1_epi8(flip);
    const size_t qb = (size_t)nq * 64;
    const int64_t nb = K / 32;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * bsize;
        uint8_t *q = pk_quants(group, b, qb);
        for (int k = 0; k < nq; k++)
            _mm512_store_si512(q + 64 * k, _mm512_xor_si512(_mm512_i32gather_epi32(idx, blk + 2 + 4 * k, 1), x));
        _mm256_store_si256((__m256i *)pk_scales(group, b, qb), _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, blk, 1)));
    }
    if (nb & 1) { /* the last pair's second half: never read, but defined */
        memset(pk_quants(group, nb, qb), 0, qb);
        memset(pk_scales(group, nb, qb), 0, 32);
    }
}

static void pack_q4_0(int64_t K, const void *w, size_t ws, int nr, void *group) {
    pack_legacy(K, w, ws, nr, group, sizeof(kt_block_q4_0), 4, 0);
}
static void pack_q8_0(int64_t K, const void *w, size_t ws, int nr, void *group) {
    pack_legacy(K, w, ws, nr, group, sizeof(kt_block_q8_0), 8, (char)0x80);
}

INLINE int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A block's quants, read in address order: Q4_0 nibbles split (low ones in u[0..3],
 * high in u[4..7]), Q8_0 bytes as stored. */
INLINE void pk_unpack(const uint8_t *q, __m512i u[8], const bool q4) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (q4) {
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_load_si512(q + 64 * k);
            u[k] = _mm512_and_si512(v, m4);
            u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
    } else {
        UNROLL
        for (int k = 0; k < 8; k++) u[k] = _mm512_load_si512(q + 64 * k);
    }
}

/* A block's exact integer sum against one column, aux's offset included, in two chains
 * (exact int32: the split changes nothing); each activation word is one 4-byte load,
 * which folds into the broadcast operand. */
INLINE __m512i pk_isum(const __m512i u[8], const kt_block_q8_0 *y, int32_t off) {
    __m512i p0 = _mm512_set1_epi32(off), p1 = _mm512_setzero_si512();
    UNROLL
    for (int k = 0; k < 4; k++) {
        p0 = _mm512_dpbusd_epi32(p0, u[k], _mm512_set1_epi32(load_i32(y->qs + 4 * k)));
        p1 = _mm512_dpbusd_epi32(p1, u[k + 4], _mm512_set1_epi32(load_i32(y->qs + 16 + 4 * k)));
    }
    return _mm512_add_epi32(p0, p1);
}

INLINE __m512i dec_isum(const uint8_t *q, const kt_block_q8_0 *y, int32_t off, const bool q4) {
    __m512i u[8];
    pk_unpack(q, u, q4);
    return pk_isum(u, y, off);
}

INLINE __m512 dec_add(__m512 acc, const uint8_t *g, int64_t b, size_t qb, __m512i isum, float d) {
    const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)pk_scales(g, b, qb)));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, _mm512_set1_ps(d)), acc);
}

/* Decode (one column) of a group: a pair of blocks at a time, in the order the bytes
 * lie (both blocks' quants, then their scales), so that the core's own prefetcher
 * follows one forward stream (lanes_avx512.h: kt_cpu_lanes_prefetch_dec). The
 * arithmetic and its order are packed_tile's. */
INLINE void packed_dec(int64_t K, const uint8_t *g, const kt_block_q8_0 *y, const struct kt_lanes_aux *aux,
                       float *out, __mmask16 keep, const bool q4) {
    const size_t qb = q4 ? Q40_QB : Q80_QB;
    const int64_t nb = K / 32;
    __m512 acc = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const uint8_t *q = pk_quants(g, b, qb);
        prefetch_ahead(q, PAIR_BYTES(qb), kt_cpu_lanes_prefetch_dec);
        const __m512i s0 = dec_isum(q, y + b, aux[b].off, q4), s1 = dec_isum(q + qb, y + b + 1, aux[b + 1].off, q4);
        acc = dec_add(acc, g, b, qb, s0, aux[b].d);
        acc = dec_add(acc, g, b + 1, qb, s1, aux[b + 1].d);
    }
    if (b < nb) acc = dec_add(acc, g, b, qb, dec_isum(pk_quants(g, b, qb), y + b, aux[b].off, q4), aux[b].d);
    _mm512_mask_storeu_ps(out, keep, acc);
}

INLINE void packed_tile(int64_t K, const uint8_t *g, const void *const *yp, const struct kt_lanes_aux *const *aux,
                        float *const *out, __mmask16 keep, const int C, const bool q4) {
    if (C == 1) {
        packed_dec(K, g, yp[0], aux[0], out[0], keep, q4);
        return;
    }
    const size_t qb = q4 ? Q40_QB : Q80_QB;
    __m512 acc[KT_LANES_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++) {
        const uint8_t *q = pk_quants(g, b, qb);
        if (!(b & 1)) prefetch_ahead(q, PAIR_BYTES(qb), kt_cpu_lanes_prefetch_q4);
        __m512i u[8];
        pk_unpack(q, u, q4);
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)pk_scales(g, b, qb)));
        UNROLL
        for (int c = 0; c < C; c++) {
            const __m512i isum = pk_isum(u, (const kt_block_q8_0 *)yp[c] + b, aux[c][b].off);
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(aux[c][b].d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[c]);
        }
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

#define PACKED_RUN(NAME, Q4)                                                                                        \
    static void NAME(int64_t K, const void *group, int nr, const void *const *yp,                                  \
                     const struct kt_lanes_aux *const *aux, float *const *out, int nc) {                           \
        const uint8_t *g = group;                                                                                   \
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);                                                         \
        for (int c0 = 0; c0 < nc; c0 += KT_LANES_COLS) {                                                            \
            const void *const *y = yp + c0;                                                                         \
            const struct kt_lanes_aux *const *a = aux + c0;                                                         \
            float *const *o = out + c0;                                                                             \
            switch (nc - c0 < KT_LANES_COLS ? nc - c0 : KT_LANES_COLS) {                                            \
            case 1: packed_tile(K, g, y, a, o, keep, 1, Q4); break;                                                 \
            case 2: packed_tile(K, g, y, a, o, keep, 2, Q4); break;                                                 \
            case 3: packed_tile(K, g, y, a, o, keep, 3, Q4); break;                                                 \
            case 4: packed_tile(K, g, y, a, o, keep, 4, Q4); break;                                                 \
            case 5: packed_tile(K, g, y, a, o, keep, 5, Q4); break;                                                 \
            case 6: packed_tile(K, g, y, a, o, keep, 6, Q4); break;                                                 \
            case 7: packed_tile(K, g, y, a, o, keep, 7, Q4); break;                                                 \
            default: packed_tile(K, g, y, a, o, keep, 8, Q4); break;                                                \
            }                                                                                                       \
        }                                                                                                           \
    }

PACKED_RUN(packed_run_q4_0, true)
PACKED_RUN(packed_run_q8_0, false)

const struct kt_lanes_packer kt_lanes_packer_q4_0 = {.size = pack_size_q4_0, .pack = pack_q4_0, .run = packed_run_q4_0};
const struct kt_lanes_packer kt_lanes_packer_q8_0 = {.size = pack_size_q8_0, .pack = pack_q8_0, .run = packed_run_q8_0};

/* ------------------------------------------------------------------ single dots */

/* The same arithmetic one row at a time (vec_dot: what mul_mat without block kernels,
 * KT_CPU_GEMM=off, runs): the block's integer dot reduced at once, then the scalar
 * multiply and add. */
void kt_vec_dot_q4_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        const __m128i b = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, yv),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, yv));
        sum = fmaf((float)hsum256_epi32(p), _cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d), sum);
    }
    *s = sum;
}

void kt_vec_dot_q8_0_q8_0_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q8_0 *x = vx;
    const kt_block_q8_0 *y = vy;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK8_0; i++) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[i].qs), flip);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, yv),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), flip, yv));
        sum = fmaf((float)hsum256_epi32(p), _cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d), sum);
    }
    *s = sum;
}

void kt_lanes_aux(int64_t K, const void *y, int bias, struct kt_lanes_aux *aux) {
    const kt_block_q8_0 *yb = y;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < K / 32; b++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)yb[b].qs);
        aux[b].off = -bias * hsum256_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v));
        aux[b].d = _cvtsh_ss(yb[b].d);
    }
}
