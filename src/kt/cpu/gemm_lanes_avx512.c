/*
 * gemm_lanes_avx512.c - rows-in-lanes mul_mat kernels for Q4_0 and Q8_0
 * weights (x Q8_0 activations), as mapped: 16 weight rows x up to
 * KT_LANES_COLS columns per pass, one weight row per float lane, so the same
 * code serves decode (one column: every weight byte read once, 16 rows in
 * flight) and prompts (a 16-row block unpacked once per 8 columns).
 * Arithmetic per element, the reference's (kt_vec_dot_q4_0_q8_0): per block
 * the exact int32 dot, then acc = acc + (float)isum * (dx * dy), rounded
 * after the product. Contracts: gemm.h.
 */
#include <immintrin.h>
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
                acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));                            \
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

/* ------------------------------------------------------------------ packed (prompts) */

/* For many columns a thread first transposes a 16-row block into its scratch, per
 * block: 8 x 64 bytes (group k: bytes 4k..4k+3 of each row as u = x + bias, row r in
 * int32 lane r), then the 16 rows' scales as floats. A column then costs 8 vpdpbusd
 * against broadcast activation words per block, with no reduction; the arithmetic per
 * element is the unpacked kernels' (and the reference's). */
#define PACK_BLOCK (9 * 64)

static size_t pack_size(int64_t K) { return (size_t)(K / 32) * PACK_BLOCK + 64; }

/* Row offsets of the 16 rows (rows past nr repeat the last: their lanes are never stored). */
static __m512i row_offsets(size_t ws, int nr) {
    int32_t idx[16];
    for (int r = 0; r < 16; r++) idx[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * ws);
    return _mm512_loadu_si512(idx);
}

static void pack_q4_0(int64_t K, const void *w, size_t ws, int nr, void *scratch) {
    const __m512i idx = row_offsets(ws, nr), m4 = _mm512_set1_epi8(0x0f);
    uint8_t *sp = align64(scratch);
    for (int64_t b = 0; b < K / 32; b++, sp += PACK_BLOCK) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * sizeof(kt_block_q4_0);
        UNROLL
        for (int k = 0; k < 4; k++) { /* quant bytes 4k..4k+3: elements 4k.. (low nibbles), 16+4k.. (high) */
            const __m512i v = _mm512_i32gather_epi32(idx, blk + 2 + 4 * k, 1);
            _mm512_store_si512(sp + 64 * k, _mm512_and_si512(v, m4));
            _mm512_store_si512(sp + 64 * (k + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        _mm512_store_ps(sp + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, blk, 1))));
    }
}

static void pack_q8_0(int64_t K, const void *w, size_t ws, int nr, void *scratch) {
    const __m512i idx = row_offsets(ws, nr), flip = _mm512_set1_epi8((char)0x80);
    uint8_t *sp = align64(scratch);
    for (int64_t b = 0; b < K / 32; b++, sp += PACK_BLOCK) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * sizeof(kt_block_q8_0);
        UNROLL
        for (int k = 0; k < 8; k++)
            _mm512_store_si512(sp + 64 * k, _mm512_xor_si512(_mm512_i32gather_epi32(idx, blk + 2 + 4 * k, 1), flip));
        _mm512_store_ps(sp + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, blk, 1))));
    }
}

INLINE void packed_tile(int64_t K, const uint8_t *sp, const void *const *yp, const struct kt_lanes_aux *const *aux,
                        float *const *out, __mmask16 keep, const int C) {
    __m512 acc[KT_LANES_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, sp += PACK_BLOCK) {
        __m512i u[8];
        UNROLL
        for (int k = 0; k < 8; k++) u[k] = _mm512_load_si512(sp + 64 * k);
        const __m512 dx = _mm512_load_ps(sp + 512);
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_0 *y = (const kt_block_q8_0 *)yp[c] + b;
            __m512i p = _mm512_set1_epi32(aux[c][b].off);
            UNROLL
            for (int k = 0; k < 8; k++) { /* one 4-byte load each: folds into the broadcast operand */
                int32_t q;
                memcpy(&q, y->qs + 4 * k, sizeof q);
                p = _mm512_dpbusd_epi32(p, u[k], _mm512_set1_epi32(q));
            }
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(aux[c][b].d));
            acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_cvtepi32_ps(p), d));
        }
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

static void packed_run(int64_t K, const void *scratch, int nr, const void *const *yp,
                       const struct kt_lanes_aux *const *aux, float *const *out, int nc) {
    const uint8_t *sp = align64(scratch);
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    for (int c0 = 0; c0 < nc; c0 += KT_LANES_COLS) {
        const int cc = nc - c0 < KT_LANES_COLS ? nc - c0 : KT_LANES_COLS;
        const void *const *y = yp + c0;
        const struct kt_lanes_aux *const *a = aux + c0;
        float *const *o = out + c0;
        switch (cc) {
        case 1: packed_tile(K, sp, y, a, o, keep, 1); break;
        case 2: packed_tile(K, sp, y, a, o, keep, 2); break;
        case 3: packed_tile(K, sp, y, a, o, keep, 3); break;
        case 4: packed_tile(K, sp, y, a, o, keep, 4); break;
        case 5: packed_tile(K, sp, y, a, o, keep, 5); break;
        case 6: packed_tile(K, sp, y, a, o, keep, 6); break;
        case 7: packed_tile(K, sp, y, a, o, keep, 7); break;
        default: packed_tile(K, sp, y, a, o, keep, 8); break;
        }
    }
}

const struct kt_lanes_packer kt_lanes_packer_q4_0 = {pack_size, pack_q4_0, packed_run};
const struct kt_lanes_packer kt_lanes_packer_q8_0 = {pack_size, pack_q8_0, packed_run};

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
        sum += (float)hsum256_epi32(p) * (_cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d));
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
        sum += (float)hsum256_epi32(p) * (_cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d));
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
