/*
 * lanes_avx512.h - helpers of the rows-in-lanes kernels (gemm_lanes_avx512.c,
 * gemm_lanes_k_avx512.c), for files compiled for AVX-512 only: four weight rows
 * per register (one per 128-bit lane) and the reduction that leaves one int32
 * per row in the lanes of one register.
 */
#ifndef KT_CPU_LANES_AVX512_H
#define KT_CPU_LANES_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))
/* Loops over a tile's rows and columns must unroll completely (-O2 does not by
 * itself) so that the accumulator arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

/* Four rows' 16 bytes at p + off (rows r[0..3]) into one register, one row per 128-bit lane. */
INLINE __m512i load4x128(const uint8_t *const *r, size_t off) {
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(r[0] + off))),
                                               _mm_loadu_si128((const __m128i *)(r[1] + off)), 1);
    const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(r[2] + off))),
                                               _mm_loadu_si128((const __m128i *)(r[3] + off)), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Four registers of partial sums (register g, 128-bit lane j: row 4g + j, 4 int32 each)
 * into one int32 per row; lane e holds row e/4 + 4*(e%4) (a 4x4 transpose, see unlane). */
INLINE __m512i reduce16(__m512i a, __m512i b, __m512i c, __m512i d) {
    const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}
/* The lane order of reduce16 as row numbers (it is its own inverse). */
INLINE __m512i lane_rows(void) { return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

INLINE int32_t hsum256_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Rows r[0..15] of a 16-row tile: rows past nr repeat the last (read, never stored). */
INLINE void lanes_rows(const uint8_t *w, size_t ws, int nr, const uint8_t *row[16]) {
    for (int r = 0; r < 16; r++) row[r] = w + (size_t)(r < nr ? r : nr - 1) * ws;
}

/* Byte offsets of a tile's 16 rows in row order (rows past nr repeat the last, as
 * lanes_rows): the packers' gather indices. */
INLINE __m512i lanes_row_offsets(size_t ws, int nr) {
    int32_t idx[16];
    for (int r = 0; r < 16; r++) idx[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * ws);
    return _mm512_loadu_si512(idx);
}

/* Byte offsets from w of the 16 rows in reduce16's lane order (gather indices). */
INLINE __m512i lanes_gather_index(const uint8_t *w, const uint8_t *const row[16]) {
    int32_t rr[16], idx[16];
    _mm512_storeu_si512(rr, lane_rows());
    for (int e = 0; e < 16; e++) idx[e] = (int32_t)(row[rr[e]] - w);
    return _mm512_loadu_si512(idx);
}

/* Scratch for packed blocks, 64-byte aligned inside whatever the caller passed. */
INLINE uint8_t *align64(const void *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* Compact groups are streamed from memory.
 * - Decode (one column: packed_dec, compact_dec_q4_K, compact_dec_q6_K) reads each group
 *   strictly in address order, scales after the quants they scale, and asks for
 *   nothing ahead (kt_cpu_lanes_prefetch_dec, KT_CPU_PREFETCH_DEC, default 0): the
 *   core's own prefetcher then keeps one forward stream going. A kernel that touched a
 *   block's scales (at the block's end) between its quants, or prefetched 4 KiB or
 *   more ahead, read 13-22 GB/s on one core where the same loop in order reads 24-27,
 *   in 4 KiB pages as in huge ones (a 512 MiB Q4_0 buffer, K = 16384). In the model,
 *   old and new alternated twice (`kiln bench -p 0 -n 64 -r 3` on the 1.1B files), tg
 *   1 / 2 threads: Q4_0 35.6 -> 41.5 / 48.5 -> 50.1, Q4_K_M 30.5 -> 38.4 / 40.9 ->
 *   48.5, Q8_0 16.8 -> 20.8 / 22.9 -> 28.9 t/s.
 * - Prompts and small batches run a group's blocks once per column group and
 *   still ask for the bytes ahead, into L2 (into L1 it measured slower); the hardware
 *   prefetcher alone left a core at 10 GB/s on Q6_K groups, and a batch of 8 columns
 *   (8 sequences decoding together) at 7 GB/s on Q4_0 ones:
 *   - K-quants, kt_cpu_lanes_prefetch (KT_CPU_PREFETCH, default 16 Q6_K blocks of 16
 *     rows, 53 KiB), measured when decode took this path too: `KT_CPU_PREFETCH=0
 *     bench_gemm 5 16384 8192 1 q6_K T` against 8 blocks, 1 and 2 threads: 24.6 -> 41.3
 *     and 42.9 -> 70.3 GFLOP/s; Q4_K 68.4 -> 83.0, 122.0 -> 127.9.
 *   - Q4_0 and Q8_0, kt_cpu_lanes_prefetch_q4 (KT_CPU_PREFETCH_Q4, default 6 KiB):
 *     `kiln bench -p 8,32` on the 1.1B Q4_0, 131 -> 247 and 218 -> 288 t/s; `-p 8,128`
 *     on the Q8_0, 90 -> 193 and 237 -> 282.
 * 0 turns one off. Prefetches past the end of a buffer do not fault. */
extern size_t kt_cpu_lanes_prefetch, kt_cpu_lanes_prefetch_q4, kt_cpu_lanes_prefetch_dec;
INLINE void prefetch_ahead(const uint8_t *p, size_t bytes, size_t ahead) {
    if (ahead)
        for (size_t l = 0; l < bytes; l += 64) _mm_prefetch((const char *)p + ahead + l, _MM_HINT_T1);
}

#endif
