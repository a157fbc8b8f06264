/*
 * test_moe.c - the mixture-of-experts ops on the CPU. mul_mat_id for every
 * weight type with a dot product: each element equal, bit for bit, to the dot
 * kernel the engine uses (kt_cpu_vec_dot) on the reference quantizer's bytes of
 * its activation row and its expert's weight row, for one token (decode) and for
 * batches large enough that experts get many columns (the packed prompt kernels),
 * shared and per-slot activations, strided activations, repeated and
 * out-of-range ids (zeros); the same bits for 1, 2 and 4 threads and for a batch
 * computed whole or in two parts; F32 weights also against a double-precision
 * product. top_k against a stable sort (ties by index, NaN last); swiglu_oai
 * against its formula in double; the routing chain a builder makes (softmax,
 * top_k, get_rows of the chosen probabilities, renormalized) against a
 * reference; constructors refuse what does not fit. Everything again with the
 * scalar kernels (KT_CPU_ISA=ref).
 */
#include "optest.h"

static float gauss(void) {
    double u1 = ((tu_rand_u64(&rng) >> 11) + 1) * 0x1p-53, u2 = (tu_rand_u64(&rng) >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ------------------------------------------------------------------ mul_mat_id */

/* The element the engine must produce: its dot kernel on the partner's reference bytes. */
static float want_dot(enum kt_type t, const void *wrow, const float *x, int64_t K, void *qbuf) {
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    if (vdt == KT_TYPE_F32)
        memcpy(qbuf, x, (size_t)K * sizeof(float));
    else
        kt_get_type_traits(vdt)->from_float_ref(x, qbuf, K);
    float s;
    kt_cpu_vec_dot(t)(K, &s, wrow, qbuf);
    return s;
}

static struct kt_tensor *run_graph(struct kt_context *ctx, struct kt_tensor *out, int n_threads) {
    struct kt_cgraph *gf = kt_new_graph(ctx);
    if (!out || !gf || !kt_build_forward_expand(gf, out)) return NULL;
    struct kt_cplan plan = kt_graph_plan(gf, n_threads, pool);
    plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
    enum kt_status st = kt_graph_compute(gf, &plan);
    free(plan.work_data);
    return st == KT_STATUS_SUCCESS ? out : NULL;
}

/* One configuration: type, K, rows M, experts E, slots n_used, tokens T, activations
 * per slot (n_b == n_used) or shared (n_b == 1), ids with a repeat and a bad one. */
static void check_id(enum kt_type type, int64_t K, int64_t M, int64_t E, int64_t n_used, int64_t T, bool per_slot,
                     bool odd_ids, enum layout lay) {
    struct kt_context *ctx = new_ctx();
    const int64_t n_b = per_slot ? n_used : 1;
    struct kt_tensor *as = kt_new_tensor_3d(ctx, type, K, M, E);
    float *row = malloc((size_t)K * sizeof(float));
    for (int64_t r = 0; r < M * E; r++) {
        for (int64_t k = 0; k < K; k++) row[k] = gauss() * (k % 64 < 32 ? 1.0f : 0.1f);
        tu_encode(type, row, (uint8_t *)as->data + (size_t)r * as->nb[1], 1, K);
    }
    const int64_t bne[4] = {K, n_b, T, 1};
    struct kt_tensor *b = mk(ctx, KT_TYPE_F32, bne, lay, -2, 2);
    struct kt_tensor *ids = kt_new_tensor_2d(ctx, KT_TYPE_I32, n_used, T);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n_used; j++) {
            int32_t e;
            bool fresh;
            do { /* distinct per token, as top_k gives */
                e = (int32_t)rnd(E);
                fresh = true;
                for (int64_t q = 0; q < j; q++) fresh &= ((int32_t *)ids->data)[t * n_used + q] != e;
            } while (!fresh);
            ((int32_t *)ids->data)[t * n_used + j] = e;
        }
    if (odd_ids) { /* a repeated expert in token 0, ids out of range in the last token */
        ((int32_t *)ids->data)[1] = ((int32_t *)ids->data)[0];
        ((int32_t *)ids->data)[(T - 1) * n_used] = (int32_t)E;
        if (n_used > 2) ((int32_t *)ids->data)[(T - 1) * n_used + 2] = -1;
    }
    char label[160];
    snprintf(label, sizeof label, "MUL_MAT_ID %s K=%lld M=%lld E=%lld used=%lld T=%lld %s (%s)%s", kt_type_name(type),
             (long long)K, (long long)M, (long long)E, (long long)n_used, (long long)T,
             per_slot ? "per slot" : "shared", layout_name[lay], odd_ids ? " odd ids" : "");
    struct kt_tensor *out = kt_mul_mat_id(ctx, as, b, ids);
    if (!run_check(ctx, out, NULL, 0, 0, label)) {
        free(row);
        kt_free(ctx);
        return;
    }
    CHECK(out->ne[0] == M && out->ne[1] == n_used && out->ne[2] == T);

    /* every element against the dot kernel; F32 weights also against a double product */
    float *x = malloc((size_t)K * sizeof(float));
    void *qbuf = malloc((size_t)K * sizeof(float) + 64);
    int bad = 0;
    double worst = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n_used; j++) {
            const int32_t e = ((int32_t *)ids->data)[t * n_used + j];
            for (int64_t k = 0; k < K; k++) x[k] = (float)tget(b, (int64_t[]){k, j % n_b, t, 0});
            for (int64_t r = 0; r < M; r++) {
                const float got = (float)tget(out, (int64_t[]){r, j, t, 0});
                float want = 0.0f;
                if (e >= 0 && e < E) {
                    const uint8_t *w = (const uint8_t *)as->data + e * as->nb[2] + r * as->nb[1];
                    want = want_dot(type, w, x, K, qbuf);
                    if (type == KT_TYPE_F32) {
                        double d = 0, mag = 0;
                        for (int64_t k = 0; k < K; k++)
                            d += (double)((const float *)w)[k] * x[k], mag += fabs((double)((const float *)w)[k] * x[k]);
                        worst = fmax(worst, fabs(got - d) / (mag + 1e-30));
                    }
                }
                if (memcmp(&got, &want, sizeof got) != 0 && bad++ < 3)
                    fprintf(stderr, "%s [%s]: (row %lld, slot %lld, token %lld, expert %d) %.9g vs dot %.9g\n", label,
                            pass_name, (long long)r, (long long)j, (long long)t, e, got, want);
            }
        }
    CHECKF(bad == 0, "%s [%s]: %d elements differ from the dot kernel", label, pass_name, bad);
    CHECKF(worst < 1e-5, "%s: F32 experts off a double product by %.3g of sum|w x|", label, worst);

    /* the batch in two parts (tokens [0, h) and [h, T)): the same bits */
    if (T > 1) {
        const int64_t h = 1 + rnd(T - 1);
        const size_t nbytes = kt_nbytes(out);
        uint8_t *whole = malloc(nbytes);
        memcpy(whole, out->data, nbytes);
        for (int part = 0; part < 2; part++) {
            const int64_t t0 = part ? h : 0, nt = part ? T - h : h;
            struct kt_tensor *bp = kt_view_3d(ctx, b, K, n_b, nt, b->nb[1], b->nb[2], (size_t)t0 * b->nb[2]);
            struct kt_tensor *ip = kt_view_2d(ctx, ids, n_used, nt, ids->nb[1], (size_t)t0 * ids->nb[1]);
            struct kt_tensor *o = run_graph(ctx, kt_mul_mat_id(ctx, as, bp, ip), 1 + part);
            CHECKF(o != NULL, "%s: part %d: %s", label, part, kt_last_error());
            if (o)
                CHECKF(memcmp(o->data, whole + (size_t)t0 * out->nb[2], (size_t)nt * out->nb[2]) == 0,
                       "%s [%s]: tokens [%lld, %lld) alone differ from the whole batch", label, pass_name,
                       (long long)t0, (long long)(t0 + nt));
        }
        free(whole);
    }
    free(x), free(qbuf), free(row);
    kt_free(ctx);
}

static void test_mul_mat_id(void) {
    static const enum kt_type types[] = {KT_TYPE_F32, KT_TYPE_F16,  KT_TYPE_Q4_0,   KT_TYPE_Q8_0, KT_TYPE_Q4_K,
                                         KT_TYPE_Q6_K, KT_TYPE_MXFP4, KT_TYPE_IQ4_NL, KT_TYPE_Q5_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum kt_type t = types[i];
        const int64_t K = kt_blck_size(t) == 256 ? 256 : 96;
        check_id(t, K, 70, 6, 3, 1, false, false, L_CONT); /* decode, gate/up: one shared row */
        check_id(t, K, 70, 6, 3, 1, true, false, L_CONT);  /* decode, down: a row per slot */
        check_id(t, K, 70, 6, 2, 7, false, true, L_PAD);   /* a few tokens, odd ids */
        check_id(t, K, 37, 4, 2, 45, true, false, L_CONT); /* ~20 columns an expert: packed groups */
        check_id(t, K, 40, 2, 2, 70, false, false, L_TRANS); /* 70 columns an expert: the wide kernels */
    }
}

/* ------------------------------------------------------------------ top_k */

static void test_top_k(void) {
    for (int c = 0; c < 30; c++) {
        struct kt_context *ctx = new_ctx();
        int64_t ne[4];
        rand_shape(ne, 3, 6);
        ne[0] = 1 + rnd(c % 3 ? 12 : 200);
        const enum layout lay = (enum layout)(c % L_COUNT);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -1, 1);
        const int64_t nr = ne[1] * ne[2] * ne[3];
        int64_t i[4];
        for (int64_t k = 0; k < nel(ne); k++) { /* ties, infinities, NaN */
            unflat(ne, k, i);
            const int64_t r = rnd(10);
            if (c % 2 && r < 4) tset(a, i, (double)rnd(3));
            if (r == 4) tset(a, i, c % 4 == 1 ? NAN : -INFINITY);
        }
        const int k = 1 + (int)rnd(ne[0]);
        double *want = malloc((size_t)(k * nr) * sizeof *want);
        int64_t *idx = malloc((size_t)ne[0] * sizeof *idx);
        for (int64_t r = 0; r < nr; r++) {
            int64_t rr[4];
            unflat(ne, r * ne[0], rr);
            /* a stable insertion sort by value, largest first, NaN after everything */
            for (int64_t q = 0; q < ne[0]; q++) {
                idx[q] = q;
                for (int64_t s = q; s > 0; s--) {
                    const double v = tget(a, (int64_t[]){idx[s], rr[1], rr[2], rr[3]}),
                                 u = tget(a, (int64_t[]){idx[s - 1], rr[1], rr[2], rr[3]});
                    if (isnan(v) || (!isnan(u) && !(v > u))) break;
                    const int64_t sw = idx[s];
                    idx[s] = idx[s - 1], idx[s - 1] = sw;
                }
            }
            for (int q = 0; q < k; q++) want[r * k + q] = (double)idx[q];
        }
        char label[128];
        snprintf(label, sizeof label, "TOP_K k=%d of [%lld,%lld,%lld,%lld] (%s)", k, (long long)ne[0], (long long)ne[1],
                 (long long)ne[2], (long long)ne[3], layout_name[lay]);
        run_check(ctx, kt_top_k(ctx, a, k), want, 0, 0, label);
        free(want), free(idx);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ swiglu_oai */

static void test_swiglu_oai(void) {
    for (int c = 0; c < 8; c++) {
        struct kt_context *ctx = new_ctx();
        int64_t ne[4];
        rand_shape(ne, 3, 40);
        const enum layout lay = (enum layout)(c % L_COUNT);
        struct kt_tensor *g = mk(ctx, KT_TYPE_F32, ne, lay, -12, 12), *u = mk(ctx, KT_TYPE_F32, ne, L_CONT, -12, 12);
        const double alpha = 1.702, limit = c % 2 ? 7.0 : 3.5;
        double *gv = read_all(g), *uv = read_all(u);
        const int64_t n = nel(ne);
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            const double x = fmin(gv[k], limit), y = fmax(-limit, fmin(uv[k], limit));
            want[k] = x / (1 + exp(-alpha * x)) * (y + 1);
        }
        char label[96];
        snprintf(label, sizeof label, "SWIGLU_OAI limit %g %lld elements (%s)", limit, (long long)n, layout_name[lay]);
        run_check(ctx, kt_swiglu_oai(ctx, g, u, (float)alpha, (float)limit), want, 1e-5, 1e-5, label);
        free(gv), free(uv), free(want);
        kt_free(ctx);
    }
}

/* ------------------------------------------------------------------ routing */

/* What a builder does with the router's logits [E, T]: softmax, the top n_used, their
 * probabilities gathered (get_rows over [1, E, T]) and renormalized to sum 1. */
static void test_routing(void) {
    const int64_t E = 8, T = 5, n_used = 3;
    struct kt_context *ctx = new_ctx();
    const int64_t ne[4] = {E, T, 1, 1};
    struct kt_tensor *logits = mk(ctx, KT_TYPE_F32, ne, L_CONT, -3, 3);
    struct kt_tensor *probs = kt_soft_max(ctx, logits);
    struct kt_tensor *sel = kt_top_k(ctx, probs, (int)n_used);
    struct kt_tensor *w = kt_get_rows(ctx, kt_reshape_3d(ctx, probs, 1, E, T), sel); /* [1, n_used, T] */
    w = kt_reshape_2d(ctx, w, n_used, T);
    w = kt_div(ctx, w, kt_sum_rows(ctx, w));
    double *l = read_all(logits), *want = malloc((size_t)(n_used * T) * sizeof *want);
    for (int64_t t = 0; t < T; t++) {
        /* the chosen: the largest logits; their weights: a softmax over those alone */
        bool taken[8] = {false};
        double z = 0, v[3];
        for (int64_t j = 0; j < n_used; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++)
                if (!taken[e] && (best < 0 || l[t * E + e] > l[t * E + best])) best = e;
            taken[best] = true;
            z += v[j] = exp(l[t * E + best]);
        }
        for (int64_t j = 0; j < n_used; j++) want[t * n_used + j] = v[j] / z;
    }
    run_check(ctx, w, want, 1e-6, 1e-5, "routing: softmax, top_k, get_rows, renormalize");
    free(l), free(want);
    kt_free(ctx);
}

/* ------------------------------------------------------------------ errors */

#define EXPECT_NULL(expr)                                                                      \
    do {                                                                                       \
        kt_clear_error();                                                                      \
        const void *r_ = (expr);                                                               \
        CHECKF(r_ == NULL && kt_last_error()[0] != 0, "%s should fail with a message", #expr); \
    } while (0)

static void test_errors(void) {
    struct kt_context *ctx = new_ctx();
    struct kt_tensor *as = kt_new_tensor_3d(ctx, KT_TYPE_Q4_0, 64, 16, 4), *b = kt_new_tensor_3d(ctx, KT_TYPE_F32, 64, 1, 5);
    struct kt_tensor *ids = kt_new_tensor_2d(ctx, KT_TYPE_I32, 2, 5);
    CHECK(kt_mul_mat_id(ctx, as, b, ids) != NULL);
    EXPECT_NULL(kt_mul_mat_id(ctx, as, b, kt_new_tensor_2d(ctx, KT_TYPE_F32, 2, 5)));         /* ids not I32 */
    EXPECT_NULL(kt_mul_mat_id(ctx, as, b, kt_new_tensor_2d(ctx, KT_TYPE_I32, 2, 4)));         /* tokens differ */
    EXPECT_NULL(kt_mul_mat_id(ctx, as, kt_new_tensor_3d(ctx, KT_TYPE_F32, 32, 1, 5), ids));   /* K differs */
    EXPECT_NULL(kt_mul_mat_id(ctx, as, kt_new_tensor_3d(ctx, KT_TYPE_F32, 64, 3, 5), ids));   /* 2 slots, 3 rows */
    EXPECT_NULL(kt_mul_mat_id(ctx, as, kt_new_tensor_3d(ctx, KT_TYPE_F16, 64, 1, 5), ids));   /* F16 activations */
    EXPECT_NULL(kt_mul_mat_id(ctx, kt_new_tensor_4d(ctx, KT_TYPE_Q4_0, 64, 16, 4, 2), b, ids)); /* 4-D experts */
    EXPECT_NULL(kt_mul_mat_id(ctx, kt_new_tensor_3d(ctx, KT_TYPE_Q8_1, 64, 16, 4), b, ids));  /* no dot product */
    CHECK(kt_mul_mat_id(ctx, as, b, NULL) == NULL); /* (keeps the error that made the NULL) */
    struct kt_tensor *x = kt_new_tensor_2d(ctx, KT_TYPE_F32, 8, 3);
    CHECK(kt_top_k(ctx, x, 8) != NULL);
    EXPECT_NULL(kt_top_k(ctx, x, 0));
    EXPECT_NULL(kt_top_k(ctx, x, 9));
    EXPECT_NULL(kt_top_k(ctx, kt_new_tensor_2d(ctx, KT_TYPE_I32, 8, 3), 2));
    CHECK(kt_swiglu_oai(ctx, x, x, 1.702f, 7.0f) != NULL);
    EXPECT_NULL(kt_swiglu_oai(ctx, x, kt_new_tensor_2d(ctx, KT_TYPE_F32, 8, 2), 1.702f, 7.0f));
    EXPECT_NULL(kt_swiglu_oai(ctx, x, x, 0.0f, 7.0f));
    EXPECT_NULL(kt_swiglu_oai(ctx, x, x, 1.702f, NAN));
    kt_free(ctx);
}

int main(void) {
    pool = kt_threadpool_new(4);
    if (!pool) {
        fprintf(stderr, "kt_threadpool_new: %s\n", kt_last_error());
        return 1;
    }
    test_errors();
    test_mul_mat_id();
    test_top_k();
    test_swiglu_oai();
    test_routing();
    /* again with the scalar kernels: every path must meet the same references */
    setenv("KT_CPU_ISA", "ref", 1);
    kt_cpu_kernels_reinit();
    pass_name = "KT_CPU_ISA=ref";
    test_mul_mat_id();
    test_top_k();
    test_swiglu_oai();
    kt_threadpool_free(pool);
    return tu_finish("test_moe");
}
