/*
 * quant.h - private to kt: the on-disk block layouts of every quantized type
 * (GGUF's, byte for byte: weights mapped from a file are read through these
 * structs) and the per-type row kernels that types.c puts into the table.
 */
#ifndef KT_QUANT_H
#define KT_QUANT_H

#include <stdint.h>
#include <string.h>

#include "kt.h"

/* Elements per block: 32 for the legacy types, 256 for the K-quant super-blocks. */
#define KT_QK4_0 32
#define KT_QK4_1 32
#define KT_QK5_0 32
#define KT_QK5_1 32
#define KT_QK8_0 32
#define KT_QK8_1 32
#define KT_QK4_NL 32
#define KT_QK_K 256
#define KT_K_SCALE_SIZE 12

/* ---- legacy 32-element blocks; d is the scale, m the offset (fp16) */
typedef struct { kt_fp16_t d; uint8_t qs[KT_QK4_0 / 2]; } kt_block_q4_0;
typedef struct { kt_fp16_t d, m; uint8_t qs[KT_QK4_1 / 2]; } kt_block_q4_1;
typedef struct { kt_fp16_t d; uint8_t qh[4]; uint8_t qs[KT_QK5_0 / 2]; } kt_block_q5_0;
typedef struct { kt_fp16_t d, m; uint8_t qh[4]; uint8_t qs[KT_QK5_1 / 2]; } kt_block_q5_1;
typedef struct { kt_fp16_t d; int8_t qs[KT_QK8_0]; } kt_block_q8_0;
/* s = d * sum(qs): lets a Q4_1/Q5_1 dot add the offset term without a second pass. */
typedef struct { kt_fp16_t d, s; int8_t qs[KT_QK8_1]; } kt_block_q8_1;

/* ---- K-quants: 256-element super-blocks of 16 or 32-element sub-blocks */
typedef struct {
    uint8_t scales[KT_QK_K / 16]; /* low nibble scale, high nibble min, per 16 */
    uint8_t qs[KT_QK_K / 4];      /* 2-bit quants */
    kt_fp16_t d, dmin;
} kt_block_q2_K;
typedef struct {
    uint8_t hmask[KT_QK_K / 8]; /* high bit of each 3-bit quant */
    uint8_t qs[KT_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];         /* 16 x 6-bit scales, biased by 32 */
    kt_fp16_t d;
} kt_block_q3_K;
typedef struct {
    kt_fp16_t d, dmin;
    uint8_t scales[KT_K_SCALE_SIZE]; /* 8 x (6-bit scale, 6-bit min) */
    uint8_t qs[KT_QK_K / 2];
} kt_block_q4_K;
typedef struct {
    kt_fp16_t d, dmin;
    uint8_t scales[KT_K_SCALE_SIZE];
    uint8_t qh[KT_QK_K / 8];
    uint8_t qs[KT_QK_K / 2];
} kt_block_q5_K;
typedef struct {
    uint8_t ql[KT_QK_K / 2];     /* low 4 bits */
    uint8_t qh[KT_QK_K / 4];     /* high 2 bits */
    int8_t scales[KT_QK_K / 16]; /* 8-bit signed scales */
    kt_fp16_t d;
} kt_block_q6_K;
/* Activation partner of the K-quants: float scale, and sums of 16 quants so
 * that the min terms of Q2_K/Q4_K/Q5_K cost one multiply per sub-block. */
typedef struct {
    float d;
    int8_t qs[KT_QK_K];
    int16_t bsums[KT_QK_K / 16];
} kt_block_q8_K;

/* ---- non-linear 4-bit: indices into kt_iq4nl_values */
typedef struct { kt_fp16_t d; uint8_t qs[KT_QK4_NL / 2]; } kt_block_iq4_nl;
typedef struct {
    kt_fp16_t d;
    uint16_t scales_h;              /* high 2 bits of 8 sub-block scales */
    uint8_t scales_l[KT_QK_K / 64]; /* low 4 bits */
    uint8_t qs[KT_QK_K / 2];
} kt_block_iq4_xs;

/* ---- MXFP4: 32 E2M1 values (4-bit codes, low nibbles elements 0..15) and one
 * E8M0 exponent e; element = kt_mxfp4_values[code] * 2^(e - 128). The table holds the
 * E2M1 values doubled (integers), hence the half scale. */
#define KT_QK_MXFP4 32
typedef struct { uint8_t e; uint8_t qs[KT_QK_MXFP4 / 2]; } kt_block_mxfp4;

_Static_assert(sizeof(kt_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(kt_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(kt_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(kt_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(kt_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(kt_block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(kt_block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(kt_block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(kt_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(kt_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(kt_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(kt_block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(kt_block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(kt_block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(kt_block_mxfp4) == 17, "mxfp4 layout");

extern const int8_t kt_iq4nl_values[16];
extern const int8_t kt_mxfp4_values[16];

/* 2^(e - 128): half the E8M0 scale e, as the doubled E2M1 table wants it (e 0 and 1
 * give float subnormals; 255, E8M0's NaN, is read as 2^127 as GGUF tools do). */
static inline float kt_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- scalar helpers shared by the quant files (inline: they sit in inner loops) */

static inline uint32_t kt_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float kt_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float kt_h2f(kt_fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return kt_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
    if (exp == 0) { /* zero or subnormal: man * 2^-24 is exact in float */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return kt_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Round to nearest, ties to even; every NaN becomes the quiet 0x7e00 (sign kept). */
static inline kt_fp16_t kt_f2h(float f) {
    uint32_t u = kt_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;
    if (a >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                       /* below 2^-14: half subnormal */
        /* scaling by 2^24 is exact; adding 2^23 rounds to an integer, ties to even */
        float v = kt_bits_f32(a) * 0x1p24f;
        float r = (v + 8388608.0f) - 8388608.0f;
        return sign | (uint16_t)r;
    }
    uint32_t h = (((a >> 23) - 112) << 10) | ((a >> 13) & 0x3ff);
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry into the exponent is right */
    return sign | (uint16_t)h;
}

static inline float kt_bf2f(kt_bf16_t h) { return kt_bits_f32((uint32_t)h << 16); }

/* Ties to even; NaN keeps its top bits and is forced quiet; subnormals kept. */
static inline kt_bf16_t kt_f2bf(float f) {
    uint32_t u = kt_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (kt_bf16_t)((u >> 16) | 0x40);
    uint32_t lsb = (u >> 16) & 1;
    return (kt_bf16_t)((u + 0x7fffu + lsb) >> 16);
}

/* Round half to even for |v| < 2^22 without a libm call or a float->int trap:
 * adding 1.5*2^23 puts the integer in the low mantissa bits. The K-quant
 * searches depend on this exact rounding to reproduce GGUF tools' bytes. */
static inline int kt_nearest_int(float v) {
    float t = v + 12582912.0f;
    return (int)(kt_f32_bits(t) & 0x007fffff) - 0x00400000;
}

/* ---- row kernels (n elements, a multiple of the block size) */

#define KT_DECLARE_ROW_KERNELS(t)                                                       \
    void kt_dequantize_row_##t(const void *restrict x, float *restrict y, int64_t n);   \
    void kt_quantize_row_##t##_ref(const float *restrict x, void *restrict y, int64_t n)

KT_DECLARE_ROW_KERNELS(q4_0);
KT_DECLARE_ROW_KERNELS(q4_1);
KT_DECLARE_ROW_KERNELS(q5_0);
KT_DECLARE_ROW_KERNELS(q5_1);
KT_DECLARE_ROW_KERNELS(q8_0);
KT_DECLARE_ROW_KERNELS(q8_1);
KT_DECLARE_ROW_KERNELS(q2_K);
KT_DECLARE_ROW_KERNELS(q3_K);
KT_DECLARE_ROW_KERNELS(q4_K);
KT_DECLARE_ROW_KERNELS(q5_K);
KT_DECLARE_ROW_KERNELS(q6_K);
KT_DECLARE_ROW_KERNELS(q8_K);
KT_DECLARE_ROW_KERNELS(iq4_nl);
KT_DECLARE_ROW_KERNELS(iq4_xs);
KT_DECLARE_ROW_KERNELS(mxfp4);

void kt_vec_dot_q4_0_q8_0(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q4_1_q8_1(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_0_q8_0(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_1_q8_1(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q8_0_q8_0(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q2_K_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q3_K_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q4_K_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q5_K_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_q6_K_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_iq4_nl_q8_0(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_iq4_xs_q8_K(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void kt_vec_dot_mxfp4_q8_0(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);

/* Q4_K/Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static inline void kt_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales and mins of a Q4_K/Q5_K block at once (same values as
 * kt_k4_scale_min): bytes 0..3 hold the low 6 bits of scales 0..3 and, in
 * their top bits, the high 2 bits of scales 4..7; bytes 4..7 likewise for the
 * mins; bytes 8..11 the low 4 bits of scales (low nibble) and mins 4..7. */
static inline void kt_k4_unpack_words(const uint8_t *q, uint32_t o[4]) { /* bytes: 8 scales, 8 mins */
    uint32_t u[3];
    memcpy(u, q, 12);
    o[0] = u[0] & 0x3f3f3f3fu;
    o[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    o[2] = u[1] & 0x3f3f3f3fu;
    o[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
}
static inline void kt_k4_unpack(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t o[4];
    kt_k4_unpack_words(q, o);
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}

/* Q3_K: signed scale of sub-block j (0..15): 4 low bits from bytes 0..7, 2 high from 8..11. */
static inline int kt_q3k_scale(int j, const uint8_t *s) {
    int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* All 16 Q3_K scales at once, biased by +32 (4 per 32-bit word, byte j =
 * kt_q3k_scale(j) + 32): word operations on the 12 packed bytes. */
static inline void kt_q3k_scale_words(const uint8_t *s, uint32_t o[4]) {
    uint32_t a[3];
    memcpy(a, s, 12);
    o[0] = (a[0] & 0x0f0f0f0fu) | ((a[2] & 0x03030303u) << 4);
    o[1] = (a[1] & 0x0f0f0f0fu) | (((a[2] >> 2) & 0x03030303u) << 4);
    o[2] = ((a[0] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 4) & 0x03030303u) << 4);
    o[3] = ((a[1] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 6) & 0x03030303u) << 4);
}

#endif
