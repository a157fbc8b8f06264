/*
 * ops_attn.c - fused attention on the CPU (KT_OP_ATTN): for each token and
 * group of query heads sharing a k/v head, the cells the mask leaves finite
 * are listed in the order the op's order input gives (cell order without
 * one), their scores q.k * scale (soft-capped when the op says so) + mask
 * computed (each k row read once for the group), softmax taken over that packed list
 * (and the head's sink where the op has them), and the v rows of the list
 * summed in its order. Nothing is summed over a masked cell, not even a zero:
 * a sequence's result depends only on its own cells in their listed order,
 * never on where in the cache they sit or what lies between them (the
 * runtime lists cells by position). No [n_kv, T, H] score tensor is
 * materialised, and the cache is read in place (no transposed copy of V per
 * token).
 */
#include <math.h>
#include <string.h>

#include "ops_isa.h"
#include "ops_util.h"

/* Per thread: the packed cell list and its mask values, G rows of scores and of
 * probabilities, 16 k/v rows as floats and G output rows. */
static size_t per_thread(int64_t n_kv, int64_t G, int64_t D) {
    return ((size_t)n_kv * (sizeof(int32_t) + (1 + 2 * (size_t)G) * sizeof(float)) +
            (size_t)(16 + G) * (size_t)D * sizeof(float) + 64 + 63) & ~(size_t)63;
}

size_t kt_cpu_attn_work_size(const struct kt_tensor *dst, int n_threads) {
    const struct kt_tensor *q = dst->src[0], *k = dst->src[1];
    return per_thread(k->ne[1], q->ne[1] / k->ne[2], q->ne[0]) * (size_t)(n_threads > 0 ? n_threads : 1);
}

/* softmax of n packed scores (no mask left: every one is finite); with a sink (sink !=
 * NULL), *sink also takes part in the max and the denominator but gets no probability */
static void softmax(int64_t n, float *p, const float *s, const float *sink, bool simd) {
    if (simd && !sink) {
        kt_cpu_soft_max_row_avx512(n, p, s, NULL, false, 1.0f, 1.0f);
        return;
    }
    float mx = sink ? *sink : -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = s[i] > mx ? s[i] : mx;
    double sum = sink ? expf(*sink - mx) : 0.0;
    for (int64_t i = 0; i < n; i++) sum += p[i] = expf(s[i] - mx);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) p[i] *= inv;
}

/* a k or v row as floats (an F16 cache on AVX-512 takes kt_cpu_attn_unit_avx512) */
static void load_row(const struct kt_tensor *x, const char *row, float *out, int64_t D) {
    if (x->type == KT_TYPE_F32)
        memcpy(out, row, (size_t)D * sizeof(float));
    else
        kt_get_type_traits(x->type)->to_float(row, out, D);
}

static float dot(const float *a, const float *b, int64_t D, bool simd) {
    if (simd) return kt_cpu_dot_row_avx512(D, a, b);
    float s = 0.0f;
    for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

/* o += p * v over D floats */
static void axpy(float *o, float p, const float *v, int64_t D, bool simd) {
    if (simd) {
        kt_cpu_axpy_row_avx512(D, o, p, v);
        return;
    }
    for (int64_t d = 0; d < D; d++) o[d] += p * v[d];
}

void kt_cpu_attn(const struct kt_compute_params *p, struct kt_tensor *dst) {
    const struct kt_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const int32_t *order = dst->src[4] ? (const int32_t *)dst->src[4]->data : NULL;
    const float *sinks = dst->src[5] ? (const float *)dst->src[5]->data : NULL;
    const float scale = kt_get_op_param_f32(dst, 0), cap = kt_get_op_param_f32(dst, 1);
    const int64_t D = q->ne[0], H = q->ne[1], T = q->ne[2], n_kv = k->ne[1], Hkv = k->ne[2], G = H / Hkv;
    const bool simd = kt_cpu_ops_use_avx512() && D % 16 == 0;

    uint8_t *w = (uint8_t *)(((uintptr_t)p->wdata + 63) & ~(uintptr_t)63) + per_thread(n_kv, G, D) * (size_t)p->ith;
    int32_t *idx = (int32_t *)w;
    float *madd = (float *)(idx + n_kv), *s = madd + n_kv, *pr = s + G * n_kv, *row = pr + G * n_kv, *o = row + 16 * D;
    /* soft-capped scores and sinks go through the generic loop (the AVX-512 unit has neither) */
    const bool f16 = simd && k->type == KT_TYPE_F16 && v->type == KT_TYPE_F16 && cap == 0.0f && !sinks;

    /* Units (token, k/v head) go round the threads; a token's cell list serves all its
     * units, so with a token per thread and more (T >= nth) a thread takes whole tokens
     * and lists each once, and otherwise (decode) the token's heads are shared out.
     * Tokens go round forwards then backwards (0 1 | 1 0 | 0 1 ... for two threads): in a
     * causal prompt each token sees one cell more than the one before, and plain rounds
     * left the last thread the most cells (KT_CPU_PROFILE=1 kiln bench -p 128 on the 1.1B
     * Q4_0: attention 13.4 and 14.4 ms a graph on the two threads; 11.7-12.3 and 11.8-12.5
     * so). */
    const bool by_token = T >= p->nth;
    int64_t listed = -1, n = 0;
    for (int64_t c = 0;; c++) {
        int64_t t, kh;
        if (by_token) {
            const int64_t round = c / Hkv;
            t = round * p->nth + (round % 2 ? p->nth - 1 - p->ith : p->ith), kh = c % Hkv;
            if (t >= T) break;
        } else {
            const int64_t u = p->ith + c * p->nth;
            if (u >= T * Hkv) break;
            t = u / Hkv, kh = u % Hkv;
        }
        if (t != listed) {
            const float *m = mask ? (const float *)((const char *)mask->data + t * mask->nb[1]) : NULL;
            n = 0;
            for (int64_t j = 0; j < n_kv; j++) {
                const int64_t i = order ? order[j] : j;
                if (i < 0 || i >= n_kv) continue;
                if (!m || m[i] != -INFINITY) madd[n] = m ? m[i] : 0.0f, idx[n++] = (int32_t)i;
            }
            listed = t;
        }
        const float *qh = (const float *)((const char *)q->data + t * q->nb[2] + kh * G * q->nb[1]);
        if (f16 && n > 0) {
            kt_cpu_attn_unit_avx512(D, G, n, qh, q->nb[1], (const uint8_t *)k->data + kh * k->nb[2], k->nb[1],
                                    (const uint8_t *)v->data + kh * v->nb[2], v->nb[1], idx, madd, scale, s, pr,
                                    (size_t)n_kv, row, (float *)((char *)dst->data + t * dst->nb[2] + kh * G * dst->nb[1]),
                                    dst->nb[1]);
            continue;
        }
        /* scores: each k row once for the group's heads */
        for (int64_t j = 0; j < n; j++) {
            load_row(k, (const char *)k->data + idx[j] * k->nb[1] + kh * k->nb[2], row, D);
            const float add = madd[j];
            for (int64_t g = 0; g < G; g++) {
                const float sc = dot((const float *)((const char *)qh + g * q->nb[1]), row, D, simd) * scale;
                s[g * n_kv + j] = (cap != 0.0f ? cap * tanhf(sc / cap) : sc) + add;
            }
        }
        for (int64_t g = 0; g < G; g++) {
            if (n) softmax(n, pr + g * n_kv, s + g * n_kv, sinks ? sinks + kh * G + g : NULL, simd);
            memset(o + g * D, 0, (size_t)D * sizeof(float));
        }
        /* the v rows of the list, in its order */
        for (int64_t j = 0; j < n; j++) {
            load_row(v, (const char *)v->data + idx[j] * v->nb[1] + kh * v->nb[2], row, D);
            for (int64_t g = 0; g < G; g++) axpy(o + g * D, pr[g * n_kv + j], row, D, simd);
        }
        for (int64_t g = 0; g < G; g++)
            memcpy((char *)dst->data + t * dst->nb[2] + (kh * G + g) * dst->nb[1], o + g * D, (size_t)D * sizeof(float));
    }
}
