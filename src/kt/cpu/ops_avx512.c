/*
 * ops_avx512.c - AVX-512 row kernels for the ops whose cost is exp(): softmax,
 * silu, swiglu, gelu; and rope's rotation, add/sub/mul/div and scale. A vector exp (range reduction +
 * polynomial, about 1 ulp) replaces libm's scalar expf. Tails use masked loads, so every element of a row
 * goes through the same arithmetic whatever the row length.
 */
#include <immintrin.h>
#include <math.h>

#include "ops_isa.h"
#include "ops_avx512_inl.h"

/* x / (1 + e^-x): -0 for very negative x (e^-x = inf), x for large x */
static inline __m512 vsilu(__m512 x) {
    const __m512 e = vexp(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* 0.5 x (1 + tanh(z)) = x / (1 + e^(-2z)) with z = sqrt(2/pi) (x + 0.044715 x^3) */
static inline __m512 vgelu(__m512 v) {
    const __m512 c2 = _mm512_set1_ps(-2.0f * 0.79788456080286535587989211986876f);
    const __m512 a = _mm512_set1_ps(0.044715f);
    const __m512 z = _mm512_mul_ps(v, _mm512_fmadd_ps(_mm512_mul_ps(a, v), v, _mm512_set1_ps(1.0f)));
    const __m512 e = vexp(_mm512_mul_ps(c2, z));
    return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/*
 * Loops run whole vectors unmasked and only the tail masked: masked stores are
 * several times slower than plain ones on some cores (Zen 4), enough to make an
 * exp-bound row memory-store-bound.
 */
void kt_cpu_silu_row_avx512(int64_t n, float *y, const float *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, vsilu(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, k, vsilu(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

void kt_cpu_gelu_row_avx512(int64_t n, float *y, const float *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, vgelu(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, k, vgelu(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

void kt_cpu_swiglu_row_avx512(int64_t n, float *y, const float *x, const float *g) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(vsilu(_mm512_loadu_ps(x + i)), _mm512_loadu_ps(g + i)));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 sv = vsilu(_mm512_maskz_loadu_ps(k, x + i));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(k, g + i)));
    }
}

/* logits x*scale + slope*mask of 16 elements (k: which exist) */
static inline __m512 logits(__mmask16 k, const float *x, const void *mask, bool mask_f16, __m512 vs,
                            __m512 vslope, int64_t i) {
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
    if (mask) {
        const __m512 m = mask_f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)mask + i))
                                  : _mm512_maskz_loadu_ps(k, (const float *)mask + i);
        v = _mm512_add_ps(v, _mm512_mul_ps(vslope, m));
    }
    return v;
}

static inline void add_pd(__m512d *s0, __m512d *s1, __m512 e) {
    *s0 = _mm512_add_pd(*s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    *s1 =
        _mm512_add_pd(*s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
}

void kt_cpu_soft_max_row_avx512(int64_t n, float *y, const float *x, const void *mask, bool mask_f16,
                                float scale, float slope) {
    const __m512 vs = _mm512_set1_ps(scale), vslope = _mm512_set1_ps(slope);
    const __mmask16 all = 0xffff, kt = tail_mask(n % 16);
    const int64_t nv = n - n % 16;
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    /* pass 1: logits into y, and their maximum */
    for (int64_t i = 0; i < nv; i += 16) {
        const __m512 v = logits(all, x, mask, mask_f16, vs, vslope, i);
        _mm512_storeu_ps(y + i, v);
        vmax = _mm512_max_ps(vmax, v);
    }
    if (nv < n) {
        const __m512 v = logits(kt, x, mask, mask_f16, vs, vslope, nv);
        _mm512_mask_storeu_ps(y + nv, kt, v);
        vmax = _mm512_mask_max_ps(vmax, kt, vmax, v);
    }
    const float mx = _mm512_reduce_max_ps(vmax);
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < nv; i += 16) _mm512_storeu_ps(y + i, _mm512_setzero_ps());
        if (nv < n) _mm512_mask_storeu_ps(y + nv, kt, _mm512_setzero_ps());
        return;
    }
    /* pass 2: exponentials, summed in double (two accumulators of 8 lanes) */
    const __m512 vm = _mm512_set1_ps(mx);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < nv; i += 16) {
        const __m512 e = vexp(_mm512_sub_ps(_mm512_loadu_ps(y + i), vm));
        _mm512_storeu_ps(y + i, e);
        add_pd(&s0, &s1, e);
    }
    if (nv < n) {
        const __m512 e = _mm512_maskz_mov_ps(kt, vexp(_mm512_sub_ps(_mm512_maskz_loadu_ps(kt, y + nv), vm)));
        _mm512_mask_storeu_ps(y + nv, kt, e);
        add_pd(&s0, &s1, e);
    }
    /* pass 3: normalize */
    const __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
    for (int64_t i = 0; i < nv; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
    if (nv < n) _mm512_mask_storeu_ps(y + nv, kt, _mm512_mul_ps(_mm512_maskz_loadu_ps(kt, y + nv), inv));
}

/* 16 rotated pairs starting at pair i (k: which exist); the arithmetic is the scalar
 * path's fmaf(x0, c, -(x1 s)) and fmaf(x0, s, x1 c), which matches llama.cpp's */
static inline void rope16(__mmask16 k, __mmask16 lo, __mmask16 hi, bool neox, int64_t n_pairs, int64_t i,
                          float *y, const float *x, const float *c, const float *s) {
    const __m512 vc = _mm512_maskz_loadu_ps(k, c + i), vs = _mm512_maskz_loadu_ps(k, s + i);
    __m512 x0, x1;
    if (neox) {
        x0 = _mm512_maskz_loadu_ps(k, x + i);
        x1 = _mm512_maskz_loadu_ps(k, x + n_pairs + i);
    } else {
        /* de-interleave 16 pairs: evens to x0, odds to x1 */
        const __m512 a = _mm512_maskz_loadu_ps(lo, x + 2 * i), b = _mm512_maskz_loadu_ps(hi, x + 2 * i + 16);
        const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
        x0 = _mm512_permutex2var_ps(a, ev, b);
        x1 = _mm512_permutex2var_ps(a, od, b);
    }
    const __m512 neg = _mm512_xor_ps(_mm512_mul_ps(x1, vs), _mm512_set1_ps(-0.0f)); /* exact negation */
    const __m512 y0 = _mm512_fmadd_ps(x0, vc, neg);
    const __m512 y1 = _mm512_fmadd_ps(x0, vs, _mm512_mul_ps(x1, vc));
    if (neox) {
        if (k == 0xffff) {
            _mm512_storeu_ps(y + i, y0);
            _mm512_storeu_ps(y + n_pairs + i, y1);
        } else {
            _mm512_mask_storeu_ps(y + i, k, y0);
            _mm512_mask_storeu_ps(y + n_pairs + i, k, y1);
        }
    } else {
        const __m512i il0 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const __m512i il1 = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
        if (k == 0xffff) {
            _mm512_storeu_ps(y + 2 * i, _mm512_permutex2var_ps(y0, il0, y1));
            _mm512_storeu_ps(y + 2 * i + 16, _mm512_permutex2var_ps(y0, il1, y1));
        } else {
            _mm512_mask_storeu_ps(y + 2 * i, lo, _mm512_permutex2var_ps(y0, il0, y1));
            _mm512_mask_storeu_ps(y + 2 * i + 16, hi, _mm512_permutex2var_ps(y0, il1, y1));
        }
    }
}

void kt_cpu_rope_row_avx512(int64_t n_pairs, bool neox, float *y, const float *x, const float *c,
                            const float *s) {
    int64_t i = 0;
    /* both pair loads of a NeoX block are read before its stores: y may alias x */
    for (; i + 16 <= n_pairs; i += 16) rope16(0xffff, 0xffff, 0xffff, neox, n_pairs, i, y, x, c, s);
    if (i < n_pairs) {
        const int64_t left = n_pairs - i;
        rope16(tail_mask(left), tail_mask(2 * left), tail_mask(2 * left - 16), neox, n_pairs, i, y, x, c, s);
    }
}

static inline __m512 bin16(enum kt_cpu_bin_op op, __m512 a, __m512 b) {
    switch (op) {
    case KT_CPU_ADD:
        return _mm512_add_ps(a, b);
    case KT_CPU_SUB:
        return _mm512_sub_ps(a, b);
    case KT_CPU_MUL:
        return _mm512_mul_ps(a, b);
    default:
        return _mm512_div_ps(a, b);
    }
}

void kt_cpu_bin_row_avx512(enum kt_cpu_bin_op op, int64_t n, float *d, const float *a, const float *b,
                           bool b_scalar) {
    const __m512 bs = _mm512_set1_ps(b[0]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, bin16(op, _mm512_loadu_ps(a + i), b_scalar ? bs : _mm512_loadu_ps(b + i)));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        /* masked-off lanes divide 0 by 1, not by 0: no spurious exception flags either way */
        const __m512 vb = b_scalar ? bs : _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), k, b + i);
        _mm512_mask_storeu_ps(d + i, k, bin16(op, _mm512_maskz_loadu_ps(k, a + i), vb));
    }
}

void kt_cpu_scale_row_avx512(int64_t n, float *y, const float *x, float s, float b) {
    const __m512 vs = _mm512_set1_ps(s), vb = _mm512_set1_ps(b);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), vb));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, k,
                              _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs), vb));
    }
}

float kt_cpu_dot_row_avx512(int64_t n, const float *a, const float *b) {
    __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b));
    for (int64_t d = 16; d < n; d += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc);
    return _mm512_reduce_add_ps(acc);
}

void kt_cpu_axpy_row_avx512(int64_t n, float *o, float p, const float *v) {
    const __m512 vp = _mm512_set1_ps(p);
    for (int64_t d = 0; d < n; d += 16)
        _mm512_storeu_ps(o + d, _mm512_fmadd_ps(vp, _mm512_loadu_ps(v + d), _mm512_loadu_ps(o + d)));
}

/* Eight rows' sums of squares, each in index order: eight columns of the rows at a
 * time, squared in float, turned so that a register holds one column (lane r: row r),
 * widened to double and added column after column into the rows' eight double lanes;
 * the rest of each row one element at a time, in order after them. */
void kt_cpu_sum_squares8_avx512(int64_t n, const float *const *x, double *sum) {
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 r[8], t[8], u[8];
        for (int k = 0; k < 8; k++) {
            r[k] = _mm256_loadu_ps(x[k] + i);
            r[k] = _mm256_mul_ps(r[k], r[k]);
        }
        for (int k = 0; k < 8; k += 2) {
            t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);     /* rows k, k+1: columns 0 1 | 4 5 */
            t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]); /* columns 2 3 | 6 7 */
        }
        for (int k = 0; k < 8; k += 4) {
            u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);     /* rows k..k+3, column 0 | 4 */
            u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee); /* column 1 | 5 */
            u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44); /* column 2 | 6 */
            u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee); /* column 3 | 7 */
        }
        for (int c = 0; c < 4; c++)
            acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_permute2f128_ps(u[c], u[4 + c], 0x20)));
        for (int c = 0; c < 4; c++)
            acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_permute2f128_ps(u[c], u[4 + c], 0x31)));
    }
    _mm512_storeu_pd(sum, acc);
    for (int k = 0; k < 8; k++)
        for (int64_t j = i; j < n; j++) sum[k] += (double)(x[k][j] * x[k][j]);
}
