/*
 * gemm16_avx512.c - rows-in-lanes mul_mat kernels for Q4_0 and Q8_0 weights
 * (x Q8_0 activations): 16 weight rows are transposed, per thread and per
 * tile, into a small scratch (4 bytes of each row per 32-bit lane), so one
 * vpdpbusd against 4 broadcast activation bytes advances 16 rows at once and a
 * block's integer sums need no horizontal reduction. The weights stay as
 * mapped; the scratch holds 16 rows of one tile. Contracts: gemm.h.
 *
 * Arithmetic per output (row r, column c), the same for any batch, tiling or
 * thread count: for each block b in order, s = exact int32 dot of the block,
 * acc = fma((float)s, dx_b * dy_b, acc) with one float accumulator; out = acc.
 */
#include <immintrin.h>
#include <string.h>

#include "gemm.h"
#include "quant.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* Scratch per block: 8 x 64 bytes (group g: bytes 4g..4g+3 of each row, as
 * unsigned u = x + bias), then 16 float row scales. */
#define BLOCK_BYTES (9 * 64)

size_t kt_gemm16_scratch_size(int64_t K) { return (size_t)(K / 32) * BLOCK_BYTES + 64; }

static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* Row offsets of the nr rows (rows past nr repeat the last: their lanes are never stored). */
INLINE __m512i row_index(size_t ws, int nr) {
    int32_t idx[16];
    for (int r = 0; r < 16; r++) idx[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * ws);
    return _mm512_loadu_si512(idx);
}

void kt_gemm16_pack_q4_0(int64_t K, const void *w, size_t ws, int nr, void *scratch) {
    const __m512i idx = row_index(ws, nr), m4 = _mm512_set1_epi8(0x0f);
    uint8_t *s = align64(scratch);
    const uint8_t *base = w;
    for (int64_t b = 0; b < K / 32; b++, s += BLOCK_BYTES) {
        const uint8_t *blk = base + (size_t)b * sizeof(kt_block_q4_0);
        UNROLL
        for (int g = 0; g < 4; g++) {
            const __m512i v = _mm512_i32gather_epi32(idx, blk + 2 + 4 * g, 1);
            _mm512_store_si512(s + 64 * g, _mm512_and_si512(v, m4));
            _mm512_store_si512(s + 64 * (g + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        const __m512i d = _mm512_i32gather_epi32(idx, blk, 1);
        _mm512_store_ps(s + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
    }
}

void kt_gemm16_pack_q8_0(int64_t K, const void *w, size_t ws, int nr, void *scratch) {
    const __m512i idx = row_index(ws, nr), flip = _mm512_set1_epi8((char)0x80);
    uint8_t *s = align64(scratch);
    const uint8_t *base = w;
    for (int64_t b = 0; b < K / 32; b++, s += BLOCK_BYTES) {
        const uint8_t *blk = base + (size_t)b * sizeof(kt_block_q8_0);
        UNROLL
        for (int g = 0; g < 8; g++)
            _mm512_store_si512(s + 64 * g, _mm512_xor_si512(_mm512_i32gather_epi32(idx, blk + 2 + 4 * g, 1), flip));
        const __m512i d = _mm512_i32gather_epi32(idx, blk, 1);
        _mm512_store_ps(s + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
    }
}

void kt_gemm16_aux(int64_t K, const void *y, int bias, struct kt_gemm16_aux *aux) {
    const kt_block_q8_0 *yb = y;
    for (int64_t b = 0; b < K / 32; b++) {
        int32_t sum = 0;
        for (int k = 0; k < 32; k++) sum += yb[b].qs[k];
        aux[b].off = -bias * sum;
        aux[b].d = _cvtsh_ss(yb[b].d);
    }
}

#define COLS 8

INLINE void run_tile(int64_t K, const uint8_t *s, const void *const *yp, const struct kt_gemm16_aux *const *aux,
                     float *const *out, __mmask16 rows, const int C) {
    __m512 acc[COLS];
    UNROLL
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, s += BLOCK_BYTES) {
        __m512i u[8];
        UNROLL
        for (int g = 0; g < 8; g++) u[g] = _mm512_load_si512(s + 64 * g);
        const __m512 dx = _mm512_load_ps(s + 512);
        UNROLL
        for (int c = 0; c < C; c++) {
            const kt_block_q8_0 *y = (const kt_block_q8_0 *)yp[c] + b;
            int32_t q[8];
            memcpy(q, y->qs, sizeof q);
            __m512i p = _mm512_set1_epi32(aux[c][b].off);
            UNROLL
            for (int g = 0; g < 8; g++) p = _mm512_dpbusd_epi32(p, u[g], _mm512_set1_epi32(q[g]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dx, _mm512_set1_ps(aux[c][b].d)), acc[c]);
        }
    }
    UNROLL
    for (int c = 0; c < C; c++) {
        if (rows == 0xffff)
            _mm512_storeu_ps(out[c], acc[c]);
        else
            _mm512_mask_storeu_ps(out[c], rows, acc[c]);
    }
}

void kt_gemm16_run(int64_t K, const void *scratch, const void *const *y, const struct kt_gemm16_aux *const *aux,
                   float *const *out, int nr, int nc) {
    const uint8_t *s = align64((void *)(uintptr_t)scratch);
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    for (int c0 = 0; c0 < nc; c0 += COLS) {
        const int cc = nc - c0 < COLS ? nc - c0 : COLS;
        switch (cc) {
        case 1: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 1); break;
        case 2: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 2); break;
        case 3: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 3); break;
        case 4: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 4); break;
        case 5: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 5); break;
        case 6: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 6); break;
        case 7: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 7); break;
        default: run_tile(K, s, y + c0, aux + c0, out + c0, rows, 8); break;
        }
    }
}
