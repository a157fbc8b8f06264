/*
 * ops_rope.c - rotary position embedding on the CPU, normal (adjacent pairs)
 * and NeoX (pairs half a rotation apart) layouts, partial rotary dims, linear
 * frequency scaling, per-pair frequency divisors (Llama 3's rope_freqs) and
 * YaRN (gpt-oss).
 * Rows are (head, token) pairs split across threads.
 */
#include "ops_isa.h"
#include "ops_util.h"

/* cos/sin table for one position: pairs up to this many are cached on the stack,
 * longer heads recompute each angle (same arithmetic, so same results). */
#define ROPE_CACHE_PAIRS 512

/*
 * Angle of pair i at position pos is pos * freq_scale * freq_base^(-2i/n_dims).
 * It is formed the way llama.cpp forms it (a running product theta *= base^(-2/n_dims)
 * starting at pos, then times freq_scale, all in float) so that our rotations, and
 * hence logits, agree with it to the last bits rather than just to float accuracy
 * (checked against llama.cpp v0.5.0's CPU library: every element bit-identical).
 * A frequency factor divides the running theta before the scale, in that order for
 * the same reason; without factors ff is 1 and theta / 1 is theta exactly.
 * YaRN (kt.h) mixes in the unscaled angle by a ramp over the pairs and scales cos
 * and sin; without it the scale is 1 and multiplying by it changes no bit.
 */
struct yarn {
    float ext, mscale, lo, hi; /* ramp from 1 at pair lo to 0 at pair hi */
};

static struct yarn yarn_of(const struct kt_rope_params *rp, int64_t n_dims) {
    struct yarn y = {.ext = rp->ext_factor, .mscale = rp->attn_factor != 0.0f ? rp->attn_factor : 1.0f};
    if (y.ext == 0.0f) return y;
    /* the pair that turns n_rot times over the original context: n_dims ln(n_ctx / (2 pi n_rot)) / (2 ln base) */
    const float k = (float)n_dims / (2.0f * logf(rp->freq_base)), two_pi = 2.0f * 3.14159265358979323846f;
    const float lo = floorf(k * logf((float)rp->n_ctx_orig / (rp->beta_fast * two_pi)));
    const float hi = ceilf(k * logf((float)rp->n_ctx_orig / (rp->beta_slow * two_pi)));
    y.lo = lo > 0.0f ? lo : 0.0f;
    y.hi = hi < (float)(n_dims - 1) ? hi : (float)(n_dims - 1);
    y.mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
    return y;
}

static void pair_cos_sin(float theta, float freq_scale, const float *ff, int64_t i, const struct yarn *y, float *c,
                         float *s) {
    const float extrap = ff ? theta / ff[i] : theta;
    float t = freq_scale * extrap;
    if (y->ext != 0.0f) {
        const float r = ((float)i - y->lo) / (y->hi - y->lo > 0.001f ? y->hi - y->lo : 0.001f);
        const float mix = (1.0f - (r < 0.0f ? 0.0f : r > 1.0f ? 1.0f : r)) * y->ext;
        t = t * (1.0f - mix) + extrap * mix;
    }
    *c = cosf(t) * y->mscale;
    *s = sinf(t) * y->mscale;
}

static void rope_angles(float pos, float freq_scale, const float *ff, float theta_scale, const struct yarn *y,
                        int64_t n_pairs, float *c, float *s) {
    float theta = pos;
    for (int64_t i = 0; i < n_pairs; i++) {
        pair_cos_sin(theta, freq_scale, ff, i, y, &c[i], &s[i]);
        theta *= theta_scale;
    }
}

void kt_cpu_rope(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *a = dst->src[0];
    const struct kt_tensor *pos = dst->src[1];
    /* F32 [n_dims/2], checked by kt_rope_ext */
    const float *ff = dst->src[2] ? (const float *)dst->src[2]->data : NULL;
    struct kt_rope_params rp;
    memcpy(&rp, dst->op_params, sizeof rp);

    const int64_t ne0 = a->ne[0];
    int64_t n_dims = rp.n_dims;
    if (n_dims > ne0) n_dims = ne0;
    if (n_dims < 0) n_dims = 0;
    n_dims &= ~(int64_t)1;
    const int64_t n_pairs = n_dims / 2;
    const bool neox = rp.mode == KT_ROPE_NEOX;
    const float theta_scale = n_dims > 0 ? powf(rp.freq_base, -2.0f / (float)n_dims) : 1.0f;
    const struct yarn yn = yarn_of(&rp, n_dims);

    float cache_c[ROPE_CACHE_PAIRS], cache_s[ROPE_CACHE_PAIRS];
    const bool cached = n_pairs <= ROPE_CACHE_PAIRS;
    int64_t cached_i2 = -1; /* angles depend on the token (dim 2) only */

    const size_t sa = a->nb[0], sd = dst->nb[0];
    const bool simd = cached && a->type == KT_TYPE_F32 && dst->type == KT_TYPE_F32 && sa == sizeof(float) &&
                      sd == sizeof(float) && kt_cpu_ops_use_avx512();
    int64_t r0, r1;
    kt_cpu_split_rows(p, kt_nrows(a), &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        kt_cpu_row_index(a->ne, ir, &i1, &i2, &i3);
        const char *x = kt_cpu_row_ptr(a, i1, i2, i3);
        char *y = kt_cpu_row_ptr(dst, i1, i2, i3);
        int32_t ipos;
        memcpy(&ipos, (const char *)pos->data + i2 * pos->nb[0], sizeof ipos);
        const float fpos = (float)ipos;

        if (cached && i2 != cached_i2) {
            rope_angles(fpos, rp.freq_scale, ff, theta_scale, &yn, n_pairs, cache_c, cache_s);
            cached_i2 = i2;
        }
        if (simd) {
            kt_cpu_rope_row_avx512(n_pairs, neox, (float *)y, (const float *)x, cache_c, cache_s);
            if (n_dims < ne0 && x != y)
                memcpy(y + n_dims * sd, x + n_dims * sa, (size_t)(ne0 - n_dims) * sizeof(float));
            continue;
        }
        float theta = fpos;
        /* pair i rotates elements (j0, j1); both are read before either is written,
         * so dst may alias src0 */
        for (int64_t i = 0; i < n_pairs; i++) {
            float c, s;
            if (cached) {
                c = cache_c[i];
                s = cache_s[i];
            } else {
                pair_cos_sin(theta, rp.freq_scale, ff, i, &yn, &c, &s);
                theta *= theta_scale;
            }
            const int64_t j0 = neox ? i : 2 * i;
            const int64_t j1 = neox ? i + n_pairs : 2 * i + 1;
            const float x0 = kt_cpu_load(a->type, x + j0 * sa);
            const float x1 = kt_cpu_load(a->type, x + j1 * sa);
            /* fused as llama.cpp's CPU builds for FMA machines contract them: with this
             * exact pairing the rotation is bit-identical to theirs */
            kt_cpu_store(dst->type, y + j0 * sd, fmaf(x0, c, -(x1 * s)));
            kt_cpu_store(dst->type, y + j1 * sd, fmaf(x0, s, x1 * c));
        }
        for (int64_t i0 = n_dims; i0 < ne0; i0++) {
            kt_cpu_store(dst->type, y + i0 * sd, kt_cpu_load(a->type, x + i0 * sa));
        }
    }
}
