/*
 * gemm_lanes_k_avx512.c - rows-in-lanes mul_mat kernels for Q4_K and Q6_K
 * weights (x Q8_K activations), as mapped: 16 weight rows (one per float
 * lane) x up to 2 columns per pass, for decode and prompts alike
 * (gemm_lanes_avx512.c has the legacy types and the shape). Arithmetic per
 * element, the reference's (kt_vec_dot_q4_K_q8_K, kt_vec_dot_q6_K_q8_K): per
 * super-block exact int32 sums, then Q4_K acc + ((d*dy)*isum - (dmin*dy)*msum),
 * Q6_K acc + (d*dy)*isum, in float. Also the AVX-512 dots with the same
 * arithmetic. Contracts: gemm.h.
 */
#include <stddef.h>
#include <string.h>

#include "gemm.h"
#include "lanes_avx512.h"
#include "quant.h"
#include "vec_dot_isa.h"

#define KQ_COLS 2 /* columns per pass: 4 int32 accumulators each, plus 4 activation registers */

/* Per 128-bit lane (one row): the block's 8 scales then 8 mins as bytes, from the
 * 12 packed bytes at the lane's start (kt_k4_unpack_words, on every lane at once). */
INLINE __m512i q4_K_scales(__m512i v) {
    const __m512i p = _mm512_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* words u0 u2 u1 u2 */
    const __m512i q = _mm512_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* words u0 u0 u1 u1 */
    const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(p, _mm512_set4_epi32(4, 0, 0, 0)),
                                        _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(q, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm512_or_si512(lo, hi);
}

/* Byte j of every lane as int16 in all 8 of the lane's int16 slots (vpshufb pattern). */
INLINE __m512i bcast16_pattern(int j) { return _mm512_set1_epi16((short)(0x8000 | j)); }

/* The 8 activation pair sums bsums[2j] + bsums[2j+1] as int16, in every lane. */
INLINE __m512i q8_K_pairs(const kt_block_q8_K *y) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
}

INLINE __m512i bcast128(const int8_t *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

INLINE void tile_q4_K(int64_t K, const uint8_t *w, size_t ws, int nr, const void *const *yp, float *const *out,
                      const int C) {
    const uint8_t *row[16];
    lanes_rows(w, ws, nr, row);
    const __m512i didx = lanes_gather_index(w, row);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i minpat = _mm512_broadcast_i32x4(
        _mm_setr_epi8(8, -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14, -128, 15, -128));
    __m512 acc[KQ_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++) {
        const size_t boff = (size_t)i * sizeof(kt_block_q4_K);
        __m512i scm[4], isum[KQ_COLS][4];
        UNROLL
        for (int g = 0; g < 4; g++) scm[g] = q4_K_scales(load4x128(row + 4 * g, boff + 4));
        UNROLL
        for (int c = 0; c < C; c++)
            UNROLL
            for (int g = 0; g < 4; g++) isum[c][g] = _mm512_setzero_si512();
        UNROLL
        for (int ch = 0; ch < 4; ch++) { /* 32 bytes of quants: sub-blocks 2ch (low nibbles), 2ch+1 (high) */
            __m512i ya[KQ_COLS][4];
            UNROLL
            for (int c = 0; c < C; c++) {
                const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
                UNROLL
                for (int k = 0; k < 4; k++) ya[c][k] = bcast128(y->qs + 64 * ch + 16 * k);
            }
            UNROLL
            for (int g = 0; g < 4; g++) {
                const __m512i v1 = load4x128(row + 4 * g, boff + 16 + 32 * ch);
                const __m512i v2 = load4x128(row + 4 * g, boff + 16 + 32 * ch + 16);
                const __m512i q[4] = {_mm512_and_si512(v1, m4), _mm512_and_si512(v2, m4),
                                      _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4),
                                      _mm512_and_si512(_mm512_srli_epi16(v2, 4), m4)};
                const __m512i se = _mm512_shuffle_epi8(scm[g], bcast16_pattern(2 * ch));
                const __m512i so = _mm512_shuffle_epi8(scm[g], bcast16_pattern(2 * ch + 1));
                UNROLL
                for (int c = 0; c < C; c++) {
                    __m512i s = isum[c][g];
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[0], ya[c][0]), se);
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[1], ya[c][1]), se);
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[2], ya[c][2]), so);
                    isum[c][g] = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[3], ya[c][3]), so);
                }
            }
        }
        /* d (low half) and dmin (high half) of the 16 rows, in reduce16's lane order */
        const __m512i dd = _mm512_i32gather_epi32(didx, w + boff, 1);
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        const __m512 dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
            const __m512i pairs = q8_K_pairs(y);
            __m512i mp[4];
            UNROLL
            for (int g = 0; g < 4; g++) mp[g] = _mm512_madd_epi16(_mm512_shuffle_epi8(scm[g], minpat), pairs);
            const __m512 is = _mm512_cvtepi32_ps(reduce16(isum[c][0], isum[c][1], isum[c][2], isum[c][3]));
            const __m512 ms = _mm512_cvtepi32_ps(reduce16(mp[0], mp[1], mp[2], mp[3]));
            const __m512 dy = _mm512_set1_ps(y->d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, dy), is);
            const __m512 b = _mm512_mul_ps(_mm512_mul_ps(dm, dy), ms);
            acc[c] = _mm512_add_ps(acc[c], _mm512_sub_ps(a, b));
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, _mm512_permutexvar_ps(lane_rows(), acc[c]));
}

/* The entry point of a tile: columns two at a time (one instance per count). */
#define LANES_K_ENTRY(NAME, TILE)                                                                                   \
    void NAME(int64_t K, const void *w, size_t ws, int nr, const void *const *yp,                                  \
              const struct kt_lanes_aux *const *aux, float *const *out, int nc) {                                  \
        (void)aux;                                                                                                  \
        for (int c0 = 0; c0 < nc; c0 += KQ_COLS) {                                                                  \
            if (nc - c0 >= 2)                                                                                       \
                TILE(K, w, ws, nr, yp + c0, out + c0, 2);                                                           \
            else                                                                                                    \
                TILE(K, w, ws, nr, yp + c0, out + c0, 1);                                                           \
        }                                                                                                           \
    }
_Static_assert(KQ_COLS == 2, "LANES_K_ENTRY lists every column count");

LANES_K_ENTRY(kt_lanes_q4_K_avx512, tile_q4_K)

/* Compact Q4_K groups (kept for a whole model: the CPU_REPACK buffer type): per super-block
 * of 16 rows, the quants as 32 chunks (chunk c: quant bytes 4c..4c+3 of every row, row
 * r in int32 lane r), the 8 scales then the 8 mins unpacked to bytes (value j of row r
 * at 16j + r), then d and dmin as 16 fp16 each: 2368 bytes for 2304. */
#define K4C_SC 2048
#define K4C_MN (K4C_SC + 128)
#define K4C_D (K4C_MN + 128)
#define K4C_BLOCK (K4C_D + 64)

static size_t size_q4_K(int64_t K) { return (size_t)(K / KT_QK_K) * K4C_BLOCK; }

static void pack_q4_K(int64_t K, const void *w, size_t ws, int nr, void *group) {
    const uint8_t *row[16];
    lanes_rows(w, ws, nr, row);
    const __m512i idx = lanes_row_offsets(ws, nr);
    uint8_t *g = group;
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K4C_BLOCK) {
        const size_t boff = (size_t)i * sizeof(kt_block_q4_K);
        const uint8_t *blk = (const uint8_t *)w + boff;
        UNROLL
        for (int c = 0; c < 32; c++)
            _mm512_store_si512(g + 64 * c, _mm512_i32gather_epi32(idx, blk + offsetof(kt_block_q4_K, qs) + 4 * c, 1));
        for (int r = 0; r < 16; r++) {
            uint8_t s8[8], m8[8];
            kt_k4_unpack(row[r] + boff + offsetof(kt_block_q4_K, scales), s8, m8);
            for (int j = 0; j < 8; j++) g[K4C_SC + 16 * j + r] = s8[j], g[K4C_MN + 16 * j + r] = m8[j];
        }
        const __m512i dd = _mm512_i32gather_epi32(idx, blk, 1);
        _mm256_store_si256((__m256i *)(g + K4C_D), _mm512_cvtepi32_epi16(dd));
        _mm256_store_si256((__m256i *)(g + K4C_D + 32), _mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    }
}

#define K4P_COLS 4 /* columns per pass of the prompt kernels */

/* A Q4_K super-block's term, the reference's float order: acc + ((d*dy)*isum - (dmin*dy)*msum). */
INLINE __m512 q4_K_add(__m512 acc, __m512 dx, __m512 dm, float d, __m512i isum, __m512i msum) {
    const __m512 dy = _mm512_set1_ps(d);
    const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, dy), _mm512_cvtepi32_ps(isum));
    const __m512 b = _mm512_mul_ps(_mm512_mul_ps(dm, dy), _mm512_cvtepi32_ps(msum));
    return _mm512_add_ps(acc, _mm512_sub_ps(a, b));
}

INLINE int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The prompt kernels' entry (Q4_K on a compact group, Q6_K on an expanded one): one
 * instance of the tile per column count (constant C keeps the accumulators in registers). */
#define PACKED_RUN(NAME, TILE)                                                                                      \
    static void NAME(int64_t K, const void *scratch, int nr, const void *const *yp,                                \
                     const struct kt_lanes_aux *const *aux, float *const *out, int nc) {                           \
        (void)aux;                                                                                                  \
        const uint8_t *sp = align64(scratch);                                                                       \
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);                                                         \
        for (int c0 = 0; c0 < nc; c0 += K4P_COLS) {                                                                 \
            switch (nc - c0 < K4P_COLS ? nc - c0 : K4P_COLS) {                                                      \
            case 1: TILE(K, sp, yp + c0, out + c0, keep, 1); break;                                                 \
            case 2: TILE(K, sp, yp + c0, out + c0, keep, 2); break;                                                 \
            case 3: TILE(K, sp, yp + c0, out + c0, keep, 3); break;                                                 \
            default: TILE(K, sp, yp + c0, out + c0, keep, 4); break;                                                \
            }                                                                                                       \
        }                                                                                                           \
    }

/* Sub-blocks 2ch (low nibbles) and 2ch + 1 (high) of a compact Q4_K super-block g
 * against C columns y[c]: each sub-block's exact int32 dot times its scale, added into
 * isum[c] (shared by the prompt and the decode kernel). */
INLINE void q4_K_pair(const uint8_t *g, int ch, const kt_block_q8_K *const *y, __m512i *isum, const int C) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i p0[K4P_COLS], p1[K4P_COLS];
    UNROLL
    for (int c = 0; c < C; c++) p0[c] = p1[c] = _mm512_setzero_si512();
    UNROLL
    for (int k = 0; k < 8; k++) {
        const __m512i v = _mm512_load_si512(g + 64 * (8 * ch + k));
        const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        UNROLL
        for (int c = 0; c < C; c++) {
            p0[c] = _mm512_dpbusd_epi32(p0[c], lo, _mm512_set1_epi32(load_i32(y[c]->qs + 64 * ch + 4 * k)));
            p1[c] = _mm512_dpbusd_epi32(p1[c], hi, _mm512_set1_epi32(load_i32(y[c]->qs + 64 * ch + 32 + 4 * k)));
        }
    }
    const __m512i s0 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_SC + 32 * ch)));
    const __m512i s1 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_SC + 32 * ch + 16)));
    UNROLL
    for (int c = 0; c < C; c++)
        isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(p0[c], s0), _mm512_mullo_epi32(p1[c], s1)));
}

/* Prompts (KT_LANES_XPAND_MIN columns and more) straight from a compact group, four
 * columns per pass: per sub-block 8 vpdpbusd and one vpmulld a column, the mins' term
 * by vpdpwssd once per super-block (the compact kernels below spend 2 vpmulld per
 * sub-block pair on it), the nibbles, scales and mins unpacked on the way. Prompts
 * used to expand each group into a scratch layout first (this kernel's operands
 * unpacked), once per tile: that pass was 8% of a Q4_K_M pp128's compute in `perf`,
 * and in cache this kernel is 3-5% faster than the one on the expanded form was
 * (bench_gemm, alternated). */
INLINE void wide_tile_q4_K(int64_t K, const uint8_t *g, const void *const *yp, float *const *out, __mmask16 keep,
                           const int C) {
    __m512 acc[K4P_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K4C_BLOCK) {
        const kt_block_q8_K *y[K4P_COLS];
        __m512i isum[K4P_COLS], msum[K4P_COLS], mn[4];
        /* mins j = 2t, 2t + 1 of row r as the int16 pair of lane r */
        UNROLL
        for (int t = 0; t < 4; t++) {
            const __m128i a = _mm_load_si128((const __m128i *)(g + K4C_MN + 32 * t));
            const __m128i b = _mm_load_si128((const __m128i *)(g + K4C_MN + 32 * t + 16));
            mn[t] = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b)));
        }
        UNROLL
        for (int c = 0; c < C; c++) {
            y[c] = (const kt_block_q8_K *)yp[c] + i;
            isum[c] = _mm512_setzero_si512();
            const __m256i bs = _mm256_loadu_si256((const __m256i *)y[c]->bsums);
            const __m128i pr = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            __m512i m = _mm512_setzero_si512();
            m = _mm512_dpwssd_epi32(m, mn[0], _mm512_set1_epi32(_mm_extract_epi32(pr, 0)));
            m = _mm512_dpwssd_epi32(m, mn[1], _mm512_set1_epi32(_mm_extract_epi32(pr, 1)));
            m = _mm512_dpwssd_epi32(m, mn[2], _mm512_set1_epi32(_mm_extract_epi32(pr, 2)));
            msum[c] = _mm512_dpwssd_epi32(m, mn[3], _mm512_set1_epi32(_mm_extract_epi32(pr, 3)));
        }
        for (int ch = 0; ch < 4; ch++) q4_K_pair(g, ch, y, isum, C);
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D + 32)));
        UNROLL
        for (int c = 0; c < C; c++) acc[c] = q4_K_add(acc[c], dx, dm, y[c]->d, isum[c], msum[c]);
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

PACKED_RUN(wide_run_q4_K, wide_tile_q4_K)

/* Decode (one column) of a compact Q4_K group: a super-block's 32 quant chunks first,
 * then its scales, mins and d, all in the order they lie, so that the core's own
 * prefetcher follows one forward stream (lanes_avx512.h: kt_cpu_lanes_prefetch_dec).
 * The sums are compact_tile_q4_K's (integer, so their order is free) and the float
 * step is the same. */
INLINE void compact_dec_q4_K(int64_t K, const uint8_t *g, const kt_block_q8_K *y, float *out, __mmask16 keep) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K4C_BLOCK, y++) {
        prefetch_ahead(g, K4C_BLOCK, kt_cpu_lanes_prefetch_dec);
        __m512i p[8]; /* sub-block 2ch (low nibbles) and 2ch + 1 (high) */
        UNROLL
        for (int ch = 0; ch < 4; ch++) {
            __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_load_si512(g + 64 * (8 * ch + k));
                const int8_t *yq = y->qs + 64 * ch + 4 * k;
                p0 = _mm512_dpbusd_epi32(p0, _mm512_and_si512(v, m4), _mm512_set1_epi32(load_i32(yq)));
                p1 = _mm512_dpbusd_epi32(p1, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                         _mm512_set1_epi32(load_i32(yq + 32)));
            }
            p[2 * ch] = p0, p[2 * ch + 1] = p1;
        }
        __m512i isum = _mm512_setzero_si512(), msum = _mm512_setzero_si512();
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_SC + 16 * j)));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p[j], sc));
        }
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i mn = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_MN + 16 * j)));
            const int32_t bs = y->bsums[2 * j] + y->bsums[2 * j + 1];
            msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(mn, _mm512_set1_epi32(bs)));
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D + 32)));
        acc = q4_K_add(acc, dx, dm, y->d, isum, msum);
    }
    _mm512_mask_storeu_ps(out, keep, acc);
}

/* Small batches straight from a compact group: the arithmetic of wide_tile_q4_K, two
 * columns per pass, with the weights' prefetch (one column: compact_dec_q4_K). */
INLINE void compact_tile_q4_K(int64_t K, const uint8_t *g, const void *const *yp, float *const *out, __mmask16 keep,
                              const int C) {
    if (C == 1) {
        compact_dec_q4_K(K, g, yp[0], out[0], keep);
        return;
    }
    __m512 acc[KQ_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K4C_BLOCK) {
        const kt_block_q8_K *y[KQ_COLS];
        __m512i isum[KQ_COLS], msum[KQ_COLS];
        UNROLL
        for (int c = 0; c < C; c++) {
            y[c] = (const kt_block_q8_K *)yp[c] + i;
            isum[c] = msum[c] = _mm512_setzero_si512();
        }
        prefetch_ahead(g, K4C_BLOCK, kt_cpu_lanes_prefetch);
        UNROLL
        for (int ch = 0; ch < 4; ch++) { /* sub-blocks 2ch and 2ch + 1: their sums, then their mins' terms */
            q4_K_pair(g, ch, y, isum, C);
            const __m512i n0 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_MN + 32 * ch)));
            const __m512i n1 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + K4C_MN + 32 * ch + 16)));
            UNROLL
            for (int c = 0; c < C; c++) {
                const int16_t *bs = y[c]->bsums + 4 * ch; /* sub-block 2ch + h: bsums 4ch + 2h, + 1 */
                msum[c] = _mm512_add_epi32(msum[c], _mm512_add_epi32(_mm512_mullo_epi32(n0, _mm512_set1_epi32(bs[0] + bs[1])),
                                                                     _mm512_mullo_epi32(n1, _mm512_set1_epi32(bs[2] + bs[3]))));
            }
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K4C_D + 32)));
        UNROLL
        for (int c = 0; c < C; c++) acc[c] = q4_K_add(acc[c], dx, dm, y[c]->d, isum[c], msum[c]);
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

/* The compact kernels' entry: columns two at a time. */
#define COMPACT_RUN(NAME, TILE)                                                                                     \
    static void NAME(int64_t K, const void *group, int nr, const void *const *yp,                                  \
                     const struct kt_lanes_aux *const *aux, float *const *out, int nc) {                           \
        (void)aux;                                                                                                  \
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);                                                         \
        for (int c0 = 0; c0 < nc; c0 += KQ_COLS) {                                                                  \
            if (nc - c0 >= 2)                                                                                       \
                TILE(K, group, yp + c0, out + c0, keep, 2);                                                         \
            else                                                                                                    \
                TILE(K, group, yp + c0, out + c0, keep, 1);                                                         \
        }                                                                                                           \
    }

COMPACT_RUN(compact_run_q4_K, compact_tile_q4_K)

const struct kt_lanes_packer kt_lanes_packer_q4_K = {
    .size = size_q4_K, .pack = pack_q4_K, .run = compact_run_q4_K, .wide = wide_run_q4_K};

/* One row at a time, the same arithmetic: the super-block's integer sums reduced at
 * once, then the scalar float terms in the reference's order. */
void kt_vec_dot_q4_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q4_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        uint32_t o[4];
        kt_k4_unpack_words(x[i].scales, o);
        /* int16 lanes: 8 scales, then 8 mins */
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]));
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m128i mprod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), pair);
        /* per 64 elements: scale 2j on the low 32 bytes, 2j+1 on the high 32 */
        const __m512i scales = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm));
        __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(qb, m4)),
                                                 _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), 1);
            const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 64 * j));
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi16((short)(((4 * j + 1) << 8) | (4 * j))),
                                                   _mm256_set1_epi16((short)(((4 * j + 3) << 8) | (4 * j + 2))), 1);
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), _mm512_shuffle_epi8(scales, sel)));
        }
        const int32_t isum = _mm512_reduce_add_epi32(sumi), msum = _mm512_reduce_add_epi32(_mm512_zextsi128_si512(mprod));
        sum += _cvtsh_ss(x[i].d) * y[i].d * (float)isum - _cvtsh_ss(x[i].dmin) * y[i].d * (float)msum;
    }
    *s = sum;
}

/* ------------------------------------------------------------------ Q6_K */

/* Q6_K: isum = sum_j scale_j * dot(q_j - 32, y_j) over 16 sub-blocks of 16 elements,
 * computed as sum_j scale_j * dot(u_j, y_j) - 32 * sum_j scale_j * bsum_j with the
 * stored unsigned u = q + 32 (exact in int32); then acc + (d*dy)*isum. */

/* Scale j of every lane (row) as int16 in all 8 of the lane's int16 slots (sign kept:
 * the byte goes to the high half, then an arithmetic shift). */
INLINE __m512i q6_K_scale16(__m512i sc, int j) {
    return _mm512_srai_epi16(_mm512_shuffle_epi8(sc, _mm512_set1_epi16((short)((j << 8) | 0x80))), 8);
}
/* Scales 8k..8k+7 of every lane as int16 (k = 0, 1). */
INLINE __m512i q6_K_scales8(__m512i sc, int k) {
    const __m128i pat = _mm_setr_epi8(-128, (char)(8 * k), -128, (char)(8 * k + 1), -128, (char)(8 * k + 2), -128,
                                      (char)(8 * k + 3), -128, (char)(8 * k + 4), -128, (char)(8 * k + 5), -128,
                                      (char)(8 * k + 6), -128, (char)(8 * k + 7));
    return _mm512_srai_epi16(_mm512_shuffle_epi8(sc, _mm512_broadcast_i32x4(pat)), 8);
}

INLINE void tile_q6_K(int64_t K, const uint8_t *w, size_t ws, int nr, const void *const *yp, float *const *out,
                      const int C) {
    const uint8_t *row[16];
    lanes_rows(w, ws, nr, row);
    const __m512i didx = lanes_gather_index(w, row);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[KQ_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++) {
        const size_t boff = (size_t)i * sizeof(kt_block_q6_K);
        __m512i isum[KQ_COLS][4];
        UNROLL
        for (int g = 0; g < 4; g++) {
            const uint8_t *const *r4 = row + 4 * g;
            const __m512i sc = load4x128(r4, boff + offsetof(kt_block_q6_K, scales));
            /* start from -32 * sum_j scale_j * bsum_j */
            const __m512i s0 = q6_K_scales8(sc, 0), s1 = q6_K_scales8(sc, 1);
            UNROLL
            for (int c = 0; c < C; c++) {
                const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
                const __m512i off =
                    _mm512_add_epi32(_mm512_madd_epi16(s0, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y->bsums))),
                                     _mm512_madd_epi16(s1, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->bsums + 8)))));
                isum[c][g] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(off, 5));
            }
            UNROLL
            for (int h = 0; h < 2; h++) {
                __m512i a[4], hb[2];
                UNROLL
                for (int k = 0; k < 4; k++) a[k] = load4x128(r4, boff + 64 * (size_t)h + 16 * (size_t)k);
                UNROLL
                for (int k = 0; k < 2; k++) hb[k] = load4x128(r4, boff + offsetof(kt_block_q6_K, qh) + 32 * (size_t)h + 16 * (size_t)k);
                UNROLL
                for (int sb = 0; sb < 8; sb++) { /* sub-block 8h + sb: low nibbles of a[sb%4] (sb < 4) or high */
                    const __m512i lo = sb < 4 ? a[sb % 4] : _mm512_srli_epi16(a[sb % 4], 4);
                    const __m512i hv = hb[sb % 2];
                    const int sh = sb / 2; /* high bits 2*sh..2*sh+1 of qh go to bits 4, 5 */
                    const __m512i hs = sh == 0 ? _mm512_slli_epi16(hv, 4)
                                       : sh == 1 ? _mm512_slli_epi16(hv, 2)
                                       : sh == 2 ? hv
                                                 : _mm512_srli_epi16(hv, 2);
                    const __m512i u = _mm512_ternarylogic_epi32(lo, m4, _mm512_and_si512(hs, m30), 0xea);
                    const __m512i s16 = q6_K_scale16(sc, 8 * h + sb);
                    UNROLL
                    for (int c = 0; c < C; c++) {
                        const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
                        const __m512i yv = bcast128(y->qs + 128 * h + 16 * sb);
                        isum[c][g] = _mm512_dpwssd_epi32(isum[c][g], _mm512_maddubs_epi16(u, yv), s16);
                    }
                }
            }
        }
        /* d: the high half of the 32 bits ending the block */
        const __m512i dd = _mm512_i32gather_epi32(didx, w + boff + sizeof(kt_block_q6_K) - 4, 1);
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_K *y = (const kt_block_q8_K *)yp[c] + i;
            const __m512 is = _mm512_cvtepi32_ps(reduce16(isum[c][0], isum[c][1], isum[c][2], isum[c][3]));
            acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(y->d)), is));
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, _mm512_permutexvar_ps(lane_rows(), acc[c]));
}

LANES_K_ENTRY(kt_lanes_q6_K_avx512, tile_q6_K)

/* Prompts: 16 rows of a Q6_K super-block transposed into the scratch, row r in int32
 * lane r: per sub-block j (16 elements), 4 x 64 bytes of unsigned quants u = q + 32
 * (group k: elements 16j+4k..+3), then the 16 scales as int32, the scales again as
 * int16 pairs (2i, 2i+1) for the -32 * sum_j scale_j * bsum_j term, then d as floats. */
#define K6_SC (64 * 64)
#define K6_SP (K6_SC + 16 * 64)
#define K6_D (K6_SP + 8 * 64)
#define K6_BLOCK (K6_D + 64)

static size_t xsize_q6_K(int64_t K) { return (size_t)(K / KT_QK_K) * K6_BLOCK; }

/* Compact Q6_K groups: per super-block of 16 rows, 16 steps of three chunks in the order
 * the kernels read them (step 8h + m: ql chunks 16h + m and 16h + 8 + m, then qh chunk
 * 8h + m; ql chunk 16h + 8p + m holds ql bytes 64h + 32p + 4m..+3 of every row, row r
 * in int32 lane r, and qh chunk 8h + m qh bytes 32h + 4m..+3), the 16 scales (scale j
 * of row r at 16j + r), d as 16 fp16 and 32 bytes of padding: 3392 bytes for 3360. */
#define K6C_STEP(h, m) (192 * (8 * (h) + (m)))
#define K6C_SC 3072
#define K6C_D (K6C_SC + 256)
#define K6C_BLOCK (K6C_D + 64)

static size_t size_q6_K(int64_t K) { return (size_t)(K / KT_QK_K) * K6C_BLOCK; }

static void pack_q6_K(int64_t K, const void *w, size_t ws, int nr, void *group) {
    const uint8_t *row[16];
    lanes_rows(w, ws, nr, row);
    const __m512i idx = lanes_row_offsets(ws, nr);
    uint8_t *g = group;
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K6C_BLOCK) {
        const size_t boff = (size_t)i * sizeof(kt_block_q6_K);
        const uint8_t *blk = (const uint8_t *)w + boff;
        UNROLL
        for (int c = 0; c < 32; c++) /* c = 16h + 8p + m */
            _mm512_store_si512(g + K6C_STEP(c / 16, c % 8) + 64 * (c / 8 % 2),
                               _mm512_i32gather_epi32(idx, blk + offsetof(kt_block_q6_K, ql) + 4 * c, 1));
        UNROLL
        for (int c = 0; c < 16; c++) /* c = 8h + m */
            _mm512_store_si512(g + K6C_STEP(c / 8, c % 8) + 128,
                               _mm512_i32gather_epi32(idx, blk + offsetof(kt_block_q6_K, qh) + 4 * c, 1));
        for (int r = 0; r < 16; r++)
            for (int j = 0; j < 16; j++) g[K6C_SC + 16 * j + r] = row[r][boff + offsetof(kt_block_q6_K, scales) + j];
        /* d: the high half of the 32 bits ending the block */
        const __m512i dd = _mm512_i32gather_epi32(idx, blk + sizeof(kt_block_q6_K) - 4, 1);
        _mm256_store_si256((__m256i *)(g + K6C_D), _mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        memset(g + K6C_D + 32, 0, 32);
    }
}

/* Unsigned quants u = q + 32 of chunk position (h, m) of a compact super-block: u[qd]
 * holds elements 128h + 32qd + 4m..+3 of every row (sub-block 8h + 2qd + m/4). */
INLINE void q6_K_unpack(const uint8_t *g, int h, int m, __m512i u[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const uint8_t *st = g + K6C_STEP(h, m);
    const __m512i l0 = _mm512_load_si512(st), l1 = _mm512_load_si512(st + 64), hv = _mm512_load_si512(st + 128);
    /* (x & m4) | (high bits & 0x30): ternary 0xea = (A & B) | C */
    u[0] = _mm512_ternarylogic_epi32(l0, m4, _mm512_and_si512(_mm512_slli_epi16(hv, 4), m30), 0xea);
    u[1] = _mm512_ternarylogic_epi32(l1, m4, _mm512_and_si512(_mm512_slli_epi16(hv, 2), m30), 0xea);
    u[2] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l0, 4), m4, _mm512_and_si512(hv, m30), 0xea);
    u[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l1, 4), m4, _mm512_and_si512(_mm512_srli_epi16(hv, 2), m30), 0xea);
}

/* A compact group into the prompt layout (K6_*). */
static void expand_q6_K(int64_t K, const void *group, void *scratch) {
    const uint8_t *g = group;
    uint8_t *sp = scratch;
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K6C_BLOCK, sp += K6_BLOCK) {
        for (int h = 0; h < 2; h++)
            UNROLL
            for (int m = 0; m < 8; m++) {
                __m512i u[4];
                q6_K_unpack(g, h, m, u);
                UNROLL
                for (int qd = 0; qd < 4; qd++) _mm512_store_si512(sp + 64 * (4 * (8 * h + 2 * qd + m / 4) + m % 4), u[qd]);
            }
        int16_t *sp16 = (int16_t *)(sp + K6_SP);
        for (int j = 0; j < 16; j++) {
            _mm512_store_si512(sp + K6_SC + 64 * j, _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(g + K6C_SC + 16 * j))));
            for (int r = 0; r < 16; r++) sp16[32 * (j / 2) + 2 * r + (j % 2)] = (int8_t)g[K6C_SC + 16 * j + r];
        }
        _mm512_store_ps(sp + K6_D, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K6C_D))));
    }
}

/* Decode (one column) of a compact Q6_K group: the 16 steps in the order they lie, each
 * sub-block's exact -32 * bsum_j + dot(u_j, y_j) kept apart, then the scales and d at
 * the super-block's end (lanes_avx512.h: kt_cpu_lanes_prefetch_dec). Same integer sums
 * and float step as compact_tile_q6_K. */
INLINE void compact_dec_q6_K(int64_t K, const uint8_t *g, const kt_block_q8_K *y, float *out, __mmask16 keep) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K6C_BLOCK, y++) {
        prefetch_ahead(g, K6C_BLOCK, kt_cpu_lanes_prefetch_dec);
        __m512i p[16]; /* sub-block j = 8h + 2qd + m / 4 */
        UNROLL
        for (int j = 0; j < 16; j++) p[j] = _mm512_set1_epi32(-32 * y->bsums[j]);
        UNROLL
        for (int h = 0; h < 2; h++)
            UNROLL
            for (int m = 0; m < 8; m++) {
                __m512i u[4];
                q6_K_unpack(g, h, m, u);
                UNROLL
                for (int qd = 0; qd < 4; qd++) {
                    const int j = 8 * h + 2 * qd + m / 4;
                    const int32_t yq = load_i32(y->qs + 128 * h + 32 * qd + 4 * m);
                    p[j] = _mm512_dpbusd_epi32(p[j], u[qd], _mm512_set1_epi32(yq));
                }
            }
        __m512i isum = _mm512_setzero_si512();
        UNROLL
        for (int j = 0; j < 16; j++) {
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(g + K6C_SC + 16 * j)));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p[j], sc));
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K6C_D)));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(y->d)), _mm512_cvtepi32_ps(isum)));
    }
    _mm512_mask_storeu_ps(out, keep, acc);
}

/* Small batches straight from a compact group (one column: compact_dec_q6_K): per
 * sub-block j the exact -32 * bsum_j + dot(u_j, y_j), times scale j, summed; then
 * acc + (d*dy)*isum. */
INLINE void compact_tile_q6_K(int64_t K, const uint8_t *g, const void *const *yp, float *const *out, __mmask16 keep,
                              const int C) {
    if (C == 1) {
        compact_dec_q6_K(K, g, yp[0], out[0], keep);
        return;
    }
    __m512 acc[KQ_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, g += K6C_BLOCK) {
        const kt_block_q8_K *y[KQ_COLS];
        __m512i isum[KQ_COLS];
        UNROLL
        for (int c = 0; c < C; c++) y[c] = (const kt_block_q8_K *)yp[c] + i, isum[c] = _mm512_setzero_si512();
        prefetch_ahead(g, K6C_BLOCK, kt_cpu_lanes_prefetch);
        UNROLL
        for (int h = 0; h < 2; h++)
            UNROLL
            for (int mh = 0; mh < 2; mh++) { /* sub-blocks 8h + 2qd + mh, qd = 0..3 */
                __m512i p[4][KQ_COLS];
                UNROLL
                for (int qd = 0; qd < 4; qd++)
                    UNROLL
                    for (int c = 0; c < C; c++) p[qd][c] = _mm512_set1_epi32(-32 * y[c]->bsums[8 * h + 2 * qd + mh]);
                UNROLL
                for (int mm = 0; mm < 4; mm++) {
                    const int m = 4 * mh + mm;
                    __m512i u[4];
                    q6_K_unpack(g, h, m, u);
                    UNROLL
                    for (int qd = 0; qd < 4; qd++)
                        UNROLL
                        for (int c = 0; c < C; c++)
                            p[qd][c] = _mm512_dpbusd_epi32(p[qd][c], u[qd],
                                                           _mm512_set1_epi32(load_i32(y[c]->qs + 128 * h + 32 * qd + 4 * m)));
                }
                UNROLL
                for (int qd = 0; qd < 4; qd++) {
                    const int j = 8 * h + 2 * qd + mh;
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(g + K6C_SC + 16 * j)));
                    UNROLL
                    for (int c = 0; c < C; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(p[qd][c], sc));
                }
            }
        const __m512 dx = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + K6C_D)));
        UNROLL
        for (int c = 0; c < C; c++)
            acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(y[c]->d)),
                                                         _mm512_cvtepi32_ps(isum[c])));
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

COMPACT_RUN(compact_run_q6_K, compact_tile_q6_K)

INLINE void packed_tile_q6_K(int64_t K, const uint8_t *sp, const void *const *yp, float *const *out, __mmask16 keep,
                             const int C) {
    __m512 acc[K4P_COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / KT_QK_K; i++, sp += K6_BLOCK) {
        const kt_block_q8_K *y[K4P_COLS];
        __m512i isum[K4P_COLS];
        UNROLL
        for (int c = 0; c < C; c++) {
            y[c] = (const kt_block_q8_K *)yp[c] + i;
            __m512i o = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 8; k++)
                o = _mm512_dpwssd_epi32(o, _mm512_load_si512(sp + K6_SP + 64 * k),
                                        _mm512_set1_epi32(load_i32(y[c]->bsums + 2 * k)));
            isum[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(o, 5));
        }
        for (int j = 0; j < 16; j++) {
            __m512i p[K4P_COLS];
            UNROLL
            for (int c = 0; c < C; c++) p[c] = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 4; k++) {
                const __m512i u = _mm512_load_si512(sp + 64 * (4 * j + k));
                UNROLL
                for (int c = 0; c < C; c++)
                    p[c] = _mm512_dpbusd_epi32(p[c], u, _mm512_set1_epi32(load_i32(y[c]->qs + 16 * j + 4 * k)));
            }
            const __m512i sc = _mm512_load_si512(sp + K6_SC + 64 * j);
            UNROLL
            for (int c = 0; c < C; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(p[c], sc));
        }
        const __m512 dx = _mm512_load_ps(sp + K6_D);
        UNROLL
        for (int c = 0; c < C; c++)
            acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(y[c]->d)),
                                                         _mm512_cvtepi32_ps(isum[c])));
    }
    UNROLL
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(out[c], keep, acc[c]);
}

PACKED_RUN(packed_run_q6_K, packed_tile_q6_K)

const struct kt_lanes_packer kt_lanes_packer_q6_K = {.size = size_q6_K,
                                                     .pack = pack_q6_K,
                                                     .run = compact_run_q6_K,
                                                     .xsize = xsize_q6_K,
                                                     .expand = expand_q6_K,
                                                     .xrun = packed_run_q6_K};

/* One row at a time, the same arithmetic. */
void kt_vec_dot_q6_K_q8_K_avx512(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const kt_block_q6_K *x = vx;
    const kt_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    /* int32 lane m of a 64-element register covers elements 4m..4m+3: sub-block m/4 */
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / KT_QK_K; i++) {
        const int8_t *sc = x[i].scales;
        /* quants are stored +32: dot the unsigned values, subtract 32 * scale * bsum per sub-block */
        const __m256i off = _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)),
                              _mm256_loadu_si256((const __m256i *)y[i].bsums)), 5);
        __m512i sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(off));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            const __m512i qa = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1); /* elements 128h + 0..63 */
            const __m512i qb = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1); /* 128h + 64..127 */
            const __m512i ya = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h));
            const __m512i yb = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 64));
            int32_t s4a, s4b;
            memcpy(&s4a, sc + 8 * h, 4);
            memcpy(&s4b, sc + 8 * h + 4, 4);
            const __m512i sca = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(s4a), spread));
            const __m512i scb = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(s4b), spread));
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, ya), sca));
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, yb), scb));
        }
        sum += _cvtsh_ss(x[i].d) * y[i].d * (float)_mm512_reduce_add_epi32(sumi);
    }
    *s = sum;
}
