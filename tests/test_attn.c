/*
 * test_attn.c - the fused attention op (kt_attn_ext) on the CPU, on every ISA
 * path (KT_CPU_ISA=ref and the CPU's best): against a double-precision
 * reference of softmax(q.k * scale + mask) . v over F16 and F32 caches with
 * grouped-query heads; bit-identical over 1, 2 and 3 threads and whatever the
 * other tokens of the batch; bit-identical when a sequence's cells sit at
 * other places in the cache with other sequences' cells between them (the
 * property the server's prefix sharing and cache compaction need), and when
 * they are shuffled and the order input lists them in the sequence's order; a
 * token that sees no cell gets zeros. Soft-capped scores (kt_attn_ext_softcap:
 * cap * tanh(q.k * scale / cap) before the mask, Gemma 2's attention) and sinks
 * (kt_attn_ext_sinks: a logit per head in the softmax's denominator, gpt-oss) the same way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "kt-cpu.h"
#include "kt.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uni(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int64_t)(rng >> 40) % 2001 - 1000) / 1000.0f;
}

struct attn_case {
    int64_t D, H, Hkv, T, n_kv;
    enum kt_type kv_type;
    float softcap; /* 0: kt_attn_ext; else kt_attn_ext_softcap */
    bool sinks;    /* kt_attn_ext_sinks with sink_of(h) per head */
};

/* head h's sink: from below to above the scores' size (about +-1), so that some heads
 * give the sink most of their weight and others little */
static float sink_of(int64_t h) { return -2.0f + 0.75f * (float)h; }

/* out [D, H, T] of attention over a cache of n_kv cells; cell c of the cache holds
 * cell perm[c] of k/v ([D, n_src, Hkv]; noise where perm[c] < 0); mask[t][c] as given. */
static void run(const struct attn_case *ac, int64_t n_src, const float *q, const float *k, const float *v,
                const float *mask, const int *perm, const int32_t *order, int threads, float *out) {
    const int64_t D = ac->D, H = ac->H, Hkv = ac->Hkv, T = ac->T, n = ac->n_kv;
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 64u << 20});
    struct kt_tensor *tq = kt_new_tensor_3d(ctx, KT_TYPE_F32, D, H, T);
    struct kt_tensor *tk = kt_new_tensor_3d(ctx, ac->kv_type, D, n, Hkv);
    struct kt_tensor *tv = kt_new_tensor_3d(ctx, ac->kv_type, D, n, Hkv);
    struct kt_tensor *tm = kt_new_tensor_2d(ctx, KT_TYPE_F32, n, T);
    memcpy(tq->data, q, (size_t)(D * H * T) * sizeof(float));
    memcpy(tm->data, mask, (size_t)(n * T) * sizeof(float));
    float *row = malloc((size_t)D * sizeof(float));
    for (int64_t h = 0; h < Hkv; h++)
        for (int64_t c = 0; c < n; c++)
            for (int w = 0; w < 2; w++) {
                const float *src = w ? v : k;
                for (int64_t d = 0; d < D; d++)
                    row[d] = perm[c] >= 0 ? src[(h * n_src + perm[c]) * D + d] : 100.0f * uni(); /* noise: masked */
                struct kt_tensor *t = w ? tv : tk;
                kt_get_type_traits(ac->kv_type)->from_float_ref(row, (char *)t->data + c * t->nb[1] + h * t->nb[2], D);
            }
    free(row);
    struct kt_tensor *to = NULL;
    if (order) {
        to = kt_new_tensor_1d(ctx, KT_TYPE_I32, n);
        memcpy(to->data, order, (size_t)n * sizeof(int32_t));
    }
    struct kt_tensor *ts = kt_new_tensor_1d(ctx, KT_TYPE_F32, H);
    for (int64_t h = 0; h < H; h++) ((float *)ts->data)[h] = sink_of(h);
    struct kt_tensor *o = ac->softcap > 0.0f ? kt_attn_ext_softcap(ctx, tq, tk, tv, tm, to, 1.0f / sqrtf((float)D), ac->softcap)
                          : ac->sinks        ? kt_attn_ext_sinks(ctx, tq, tk, tv, tm, to, 1.0f / sqrtf((float)D), ts)
                                             : kt_attn_ext(ctx, tq, tk, tv, tm, to, 1.0f / sqrtf((float)D));
    CHECK(o != NULL);
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, o);
    CHECK(kt_graph_compute_with_ctx(ctx, gf, threads) == KT_STATUS_SUCCESS);
    memcpy(out, o->data, (size_t)(D * H * T) * sizeof(float));
    kt_free(ctx);
}

/* The reference in double, on the values as the cache type rounds them. */
static void reference(const struct attn_case *ac, const float *q, const float *k, const float *v, const float *mask,
                      float *out) {
    const int64_t D = ac->D, H = ac->H, G = ac->H / ac->Hkv, T = ac->T, n = ac->n_kv;
    const struct kt_type_traits *tr = kt_get_type_traits(ac->kv_type);
    float *kr = malloc((size_t)(n * D * ac->Hkv) * sizeof(float)), *vr = malloc((size_t)(n * D * ac->Hkv) * sizeof(float));
    void *buf = malloc((size_t)D * 4);
    for (int64_t r = 0; r < n * ac->Hkv; r++) { /* round through the cache type */
        tr->from_float_ref(k + r * D, buf, D), tr->to_float(buf, kr + r * D, D);
        tr->from_float_ref(v + r * D, buf, D), tr->to_float(buf, vr + r * D, D);
    }
    double *s = malloc((size_t)n * sizeof(double));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / G;
            double mx = ac->sinks ? sink_of(h) : -INFINITY, sum = ac->sinks ? 1.0 : 0.0; /* exp(sink - mx), rescaled below */
            for (int64_t c = 0; c < n; c++) {
                s[c] = -INFINITY;
                if (mask[t * n + c] == -INFINITY) continue;
                double d = 0;
                for (int64_t i = 0; i < D; i++) d += (double)q[(t * H + h) * D + i] * kr[(kh * n + c) * D + i];
                d /= sqrt((double)D);
                if (ac->softcap > 0.0f) d = ac->softcap * tanh(d / ac->softcap);
                s[c] = d + mask[t * n + c];
                if (s[c] > mx) mx = s[c];
            }
            if (ac->sinks) sum = exp(sink_of(h) - mx);
            for (int64_t c = 0; c < n; c++) sum += s[c] == -INFINITY ? 0 : exp(s[c] - mx);
            for (int64_t i = 0; i < D; i++) {
                double acc = 0;
                for (int64_t c = 0; c < n; c++)
                    if (s[c] != -INFINITY) acc += exp(s[c] - mx) / sum * vr[(kh * n + c) * D + i];
                out[(t * H + h) * D + i] = mx == -INFINITY ? 0.0f : (float)acc;
            }
        }
    free(kr), free(vr), free(buf), free(s);
}

static void check_case(const struct attn_case *ac0, const char *isa) {
    struct attn_case ac = *ac0;
    const int64_t D = ac.D, H = ac.H, T = ac.T, n = ac.n_kv, no = D * H * T;
    float *q = malloc((size_t)no * sizeof(float)), *k = malloc((size_t)(n * D * ac.Hkv) * sizeof(float));
    float *v = malloc((size_t)(n * D * ac.Hkv) * sizeof(float)), *mask = malloc((size_t)(n * T) * sizeof(float));
    float *got = malloc((size_t)no * sizeof(float)), *want = malloc((size_t)no * sizeof(float));
    float *again = malloc((size_t)no * sizeof(float));
    int *ident = malloc((size_t)n * sizeof(int));
    for (int64_t i = 0; i < no; i++) q[i] = 2.0f * uni();
    for (int64_t i = 0; i < n * D * ac.Hkv; i++) k[i] = uni(), v[i] = uni();
    for (int64_t c = 0; c < n; c++) ident[c] = (int)c;
    /* causal over the last T cells; token T-1 sees everything; token 0 of a batch of 3+
     * sees nothing (a padding row) */
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < n; c++)
            mask[t * n + c] = (c <= n - T + t && !(T >= 3 && t == 0)) ? 0.0f : -INFINITY;
    run(&ac, n, q, k, v, mask, ident, NULL, 1, got);
    reference(&ac, q, k, v, mask, want);
    char label[128];
    snprintf(label, sizeof label, "%s attn D=%lld H=%lld/%lld T=%lld n_kv=%lld %s softcap %g%s", isa, (long long)D,
             (long long)H, (long long)ac.Hkv, (long long)T, (long long)n, kt_type_name(ac.kv_type), (double)ac.softcap,
             ac.sinks ? " sinks" : "");
    CHECKF(tu_close(label, got, want, no, 2e-5, 2e-4), "%s: against the double reference", label);
    if (T >= 3)
        for (int64_t i = 0; i < D * H; i++) CHECKF(got[i] == 0.0f, "%s: a token that sees no cell", label);
    for (int th = 2; th <= 3; th++) {
        run(&ac, n, q, k, v, mask, ident, NULL, th, again);
        CHECKF(memcmp(got, again, (size_t)no * sizeof(float)) == 0, "%s: %d threads differ from 1", label, th);
    }
    /* the last token alone (a batch of one) gives the same bits */
    {
        struct attn_case one = ac;
        one.T = 1;
        run(&one, n, q + (T - 1) * D * H, k, v, mask + (T - 1) * n, ident, NULL, 2, again);
        CHECKF(memcmp(got + (T - 1) * D * H, again, (size_t)(D * H) * sizeof(float)) == 0,
               "%s: the last token alone differs from the batch", label);
    }
    /* the same sequence spread over a cache twice as large, other cells (noise,
     * masked) between its own, its own in the same order: the same bits */
    {
        struct attn_case wide = ac;
        wide.n_kv = 2 * n + 3;
        int *perm = malloc((size_t)wide.n_kv * sizeof(int));
        float *wmask = malloc((size_t)(wide.n_kv * T) * sizeof(float));
        int64_t next = 0;
        for (int64_t c = 0; c < wide.n_kv; c++) {
            const bool own = next < n && (c % 2 == 1 || wide.n_kv - c <= n - next);
            perm[c] = own ? (int)next++ : -1;
        }
        CHECK(next == n);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < wide.n_kv; c++)
                wmask[t * wide.n_kv + c] = perm[c] >= 0 ? mask[t * n + perm[c]] : -INFINITY;
        run(&wide, n, q, k, v, wmask, perm, NULL, 2, again);
        CHECKF(memcmp(got, again, (size_t)no * sizeof(float)) == 0, "%s: moving the cells changed the result", label);
        /* now shuffled: its cells in a random order among the others, and the order input
         * listing them by their place in the sequence (what the runtime does by position),
         * the other cells first and one entry out of range: the same bits */
        for (int64_t c = wide.n_kv - 1; c > 0; c--) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            const int64_t r = (int64_t)((rng >> 33) % (uint64_t)(c + 1));
            const int tmp = perm[c];
            perm[c] = perm[r], perm[r] = tmp;
        }
        int32_t *order = malloc((size_t)wide.n_kv * sizeof(int32_t));
        int64_t at = 0;
        for (int64_t c = 0; c < wide.n_kv; c++)
            if (perm[c] < 0) order[at++] = (int32_t)c;
        order[0] = (int32_t)wide.n_kv; /* skipped: a masked cell left out instead */
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < wide.n_kv; c++)
                if (perm[c] == i) order[at++] = (int32_t)c;
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < wide.n_kv; c++)
                wmask[t * wide.n_kv + c] = perm[c] >= 0 ? mask[t * n + perm[c]] : -INFINITY;
        run(&wide, n, q, k, v, wmask, perm, order, 2, again);
        CHECKF(memcmp(got, again, (size_t)no * sizeof(float)) == 0, "%s: shuffled cells listed in order changed the result",
               label);
        free(perm), free(wmask), free(order);
    }
    free(q), free(k), free(v), free(mask), free(got), free(want), free(again), free(ident);
}

int main(void) {
    static const struct attn_case cases[] = {
        {64, 8, 2, 1, 37, KT_TYPE_F16, 0, false},  {64, 8, 2, 5, 70, KT_TYPE_F16, 0, false},
        {32, 4, 4, 3, 17, KT_TYPE_F32, 0, false},  {128, 6, 1, 4, 50, KT_TYPE_F16, 0, false},
        {64, 4, 2, 2, 33, KT_TYPE_Q8_0, 0, false}, {24, 2, 1, 3, 9, KT_TYPE_F16, 0, false},
        /* soft-capped: a cap near the scores' size bends every one of them */
        {64, 8, 2, 5, 70, KT_TYPE_F16, 0.5f, false}, {32, 4, 4, 3, 17, KT_TYPE_F32, 1.0f, false},
        /* sinks (gpt-oss): grouped heads with sinks of their own, F16 and F32 caches */
        {64, 8, 2, 5, 70, KT_TYPE_F16, 0, true}, {32, 4, 4, 3, 17, KT_TYPE_F32, 0, true},
        {64, 8, 2, 1, 37, KT_TYPE_F16, 0, true},
    };
    static const char *isas[] = {"ref", NULL};
    for (size_t i = 0; i < 2; i++) {
        if (isas[i])
            setenv("KT_CPU_ISA", isas[i], 1);
        else
            unsetenv("KT_CPU_ISA");
        kt_cpu_kernels_reinit();
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) check_case(&cases[c], isas[i] ? isas[i] : "best");
    }
    /* shapes that do not fit are refused with a message */
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 1u << 20, .no_alloc = true});
    struct kt_tensor *q = kt_new_tensor_3d(ctx, KT_TYPE_F32, 64, 6, 1), *k = kt_new_tensor_3d(ctx, KT_TYPE_F16, 64, 9, 4);
    CHECK(kt_attn_ext(ctx, q, k, k, NULL, NULL, 1.0f) == NULL); /* 6 heads over 4 k/v heads */
    CHECK(strstr(kt_last_error(), "do not fit") != NULL);
    struct kt_tensor *k2 = kt_new_tensor_3d(ctx, KT_TYPE_F16, 64, 9, 2), *m = kt_new_tensor_2d(ctx, KT_TYPE_F32, 8, 1);
    CHECK(kt_attn_ext(ctx, q, k2, k2, m, NULL, 1.0f) == NULL); /* mask of 8 cells for 9 */
    CHECK(strstr(kt_last_error(), "mask") != NULL);
    struct kt_tensor *o8 = kt_new_tensor_1d(ctx, KT_TYPE_I32, 8), *of = kt_new_tensor_1d(ctx, KT_TYPE_F32, 9);
    CHECK(kt_attn_ext(ctx, q, k2, k2, NULL, o8, 1.0f) == NULL); /* order of 8 cells for 9 */
    CHECK(strstr(kt_last_error(), "order") != NULL);
    CHECK(kt_attn_ext(ctx, q, k2, k2, NULL, of, 1.0f) == NULL); /* order not I32 */
    CHECK(strstr(kt_last_error(), "order") != NULL);
    CHECK(kt_attn_ext_softcap(ctx, q, k2, k2, NULL, NULL, 1.0f, 0.0f) == NULL); /* a cap of 0 */
    CHECK(strstr(kt_last_error(), "softcap") != NULL);
    struct kt_tensor *s4 = kt_new_tensor_1d(ctx, KT_TYPE_F32, 4); /* sinks for 4 heads of 6 */
    CHECK(kt_attn_ext_sinks(ctx, q, k2, k2, NULL, NULL, 1.0f, s4) == NULL);
    CHECK(strstr(kt_last_error(), "one F32 value per head") != NULL);
    kt_free(ctx);
    return tu_finish("test_attn");
}
