/*
 * test_gemm.c - the block mul_mat kernels (cpu/gemm.h) and mul_mat through
 * them: every output element must equal, bit for bit, one call of the dot
 * kernel the engine uses (kt_cpu_vec_dot) on the reference quantizer's
 * activation bytes, for odd shapes, broadcast over dims 2/3, non-contiguous
 * activations and 1, 2, 4 threads; and stay within the activation format's
 * error of a double-precision product of the dequantized weights.
 * The rows-in-lanes kernels (Q4_0, Q8_0, Q4_K) keep the reference's own order: they
 * and mul_mat through them must equal the scalar reference dot bit for bit.
 * Types without a block kernel on this CPU still run the mul_mat checks.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "kt-cpu.h"
#include "kt.h"
#include "testutil.h"

static const enum kt_type types[] = {KT_TYPE_Q4_0, KT_TYPE_Q8_0, KT_TYPE_Q4_K, KT_TYPE_Q6_K, KT_TYPE_F16};

static float gauss(uint64_t *s) {
    double u1 = ((tu_rand_u64(s) >> 11) + 1) * 0x1p-53, u2 = (tu_rand_u64(s) >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Weight rows: quantized Gaussian data, or (raw, legacy types) random quant
 * bytes with sane fp16 scales so every bit pattern is seen (-128 in Q8_0, Q4_K's
 * 6-bit scales and mins at 63, Q6_K's int8 scales at -128, ...). */
static void make_rows(enum kt_type t, void *q, int64_t K, int64_t rows, bool raw, uint64_t *s) {
    const size_t rs = kt_row_size(t, K);
    float *x = malloc((size_t)K * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < K; k++) x[k] = gauss(s) * (k % 64 < 32 ? 1.0f : 0.1f);
        kt_get_type_traits(t)->from_float_ref(x, (uint8_t *)q + (size_t)r * rs, K);
    }
    free(x);
    if (!raw || t == KT_TYPE_F16) return;
    /* fp16 scales: d at the block's start (Q4_K: then dmin; Q6_K: d at its end) */
    const size_t bs = kt_get_type_traits(t)->type_size, nb = rs * (size_t)rows / bs, nd = t == KT_TYPE_Q4_K ? 2 : 1;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = (uint8_t *)q + b * bs;
        for (size_t k = 0; k < bs; k++) blk[k] = (uint8_t)tu_rand_u64(s);
        for (size_t j = 0; j < nd; j++) {
            const kt_fp16_t d = kt_fp32_to_fp16(0.001f + 0.01f * (float)(tu_rand_u64(s) % 100));
            memcpy(blk + (t == KT_TYPE_Q6_K ? bs - 2 : 2 * j), &d, sizeof d);
        }
    }
}

/* The kernel itself: every (nr, nc) block against single dots, bit for bit. */
static void test_kernel(enum kt_type t, kt_gemm_fn gemm, int64_t K, bool raw, uint64_t *s) {
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    const size_t rs = kt_row_size(t, K), ys = kt_row_size(vdt, K);
    uint8_t *w = malloc(rs * KT_GEMM_ROWS), *y = malloc(ys * KT_GEMM_COLS);
    float *x = malloc((size_t)K * sizeof(float)), *yf = malloc((size_t)K * KT_GEMM_COLS * sizeof(float));
    make_rows(t, w, K, KT_GEMM_ROWS, raw, s);
    for (int c = 0; c < KT_GEMM_COLS; c++) {
        for (int64_t k = 0; k < K; k++) x[k] = gauss(s);
        kt_get_type_traits(vdt)->from_float_ref(x, y + (size_t)c * ys, K);
        kt_get_type_traits(vdt)->to_float(y + (size_t)c * ys, yf + (size_t)c * (size_t)K, K); /* the kernel's input */
    }
    const kt_vec_dot_fn dot = kt_cpu_vec_dot(t);
    for (int nr = 1; nr <= KT_GEMM_ROWS; nr++)
        for (int nc = 1; nc <= KT_GEMM_COLS; nc++) {
            float got[KT_GEMM_COLS][KT_GEMM_ROWS];
            float *out[KT_GEMM_COLS];
            const void *yp[KT_GEMM_COLS], *yfp[KT_GEMM_COLS];
            for (int c = 0; c < KT_GEMM_COLS; c++) out[c] = got[c], yp[c] = y + (size_t)c * ys, yfp[c] = yf + (size_t)c * (size_t)K;
            gemm(K, w, rs, yfp, out, nr, nc);
            int bad = 0;
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) {
                    float want;
                    dot(K, &want, w + (size_t)r * rs, yp[c]);
                    if (memcmp(&want, &got[c][r], sizeof want) != 0 && bad++ == 0)
                        fprintf(stderr, "%s K=%lld %s block %dx%d (%d,%d): %.9g vs dot %.9g\n", kt_type_name(t),
                                (long long)K, raw ? "raw" : "quantized", nr, nc, r, c, got[c][r], want);
                }
            CHECKF(bad == 0, "%s gemm K=%lld %dx%d: %d elements differ from vec_dot", kt_type_name(t), (long long)K,
                   nr, nc, bad);
        }
    free(w), free(y), free(x), free(yf);
}

/* Rows-in-lanes kernels (Q4_0, Q8_0, Q4_K): every (nr, nc) against the reference
 * dot of the type traits (their documented order), bit for bit; nothing written
 * past nr rows and nc columns. */
static void test_lanes(enum kt_type t, kt_lanes_fn lanes, int bias, int64_t K, bool raw, uint64_t *s) {
    enum { NC = KT_LANES_COLS + 3 }; /* past one call's column group */
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    const bool aux_on = vdt == KT_TYPE_Q8_0;
    const size_t rs = kt_row_size(t, K), ys = kt_row_size(vdt, K);
    uint8_t *w = malloc(rs * KT_LANES_ROWS), *y = malloc(ys * NC);
    struct kt_lanes_aux *aux = malloc((size_t)(K / 32) * NC * sizeof *aux);
    float *x = malloc((size_t)K * sizeof(float));
    make_rows(t, w, K, KT_LANES_ROWS, raw, s);
    const void *yp[NC];
    const struct kt_lanes_aux *ap[NC];
    for (int c = 0; c < NC; c++) {
        for (int64_t k = 0; k < K; k++) x[k] = gauss(s) * (c % 3 == 2 ? 100.0f : 1.0f);
        kt_get_type_traits(vdt)->from_float_ref(x, y + (size_t)c * ys, K);
        yp[c] = y + (size_t)c * ys;
        ap[c] = aux_on ? aux + (size_t)c * (size_t)(K / 32) : NULL;
        if (aux_on) kt_lanes_aux(K, yp[c], bias, aux + (size_t)c * (size_t)(K / 32));
    }
    for (int nr = 1; nr <= KT_LANES_ROWS; nr++)
        for (int nc = 1; nc <= NC; nc++) {
            float got[NC][KT_LANES_ROWS + 1];
            float *out[NC];
            for (int c = 0; c < NC; c++) {
                out[c] = got[c];
                for (int r = 0; r <= KT_LANES_ROWS; r++) got[c][r] = -1.0f;
            }
            lanes(K, w, rs, nr, yp, ap, out, nc);
            int bad = 0;
            for (int c = 0; c < NC; c++)
                for (int r = 0; r <= KT_LANES_ROWS; r++) {
                    float want = -1.0f; /* untouched past nr rows and nc columns */
                    if (r < nr && c < nc) kt_get_type_traits(t)->vec_dot(K, &want, w + (size_t)r * rs, yp[c]);
                    if (memcmp(&want, &got[c][r], sizeof want) != 0 && bad++ == 0)
                        fprintf(stderr, "%s K=%lld lanes %dx%d (%d,%d): %.9g vs reference %.9g\n", kt_type_name(t),
                                (long long)K, nr, nc, r, c, got[c][r], want);
                }
            CHECKF(bad == 0, "%s lanes K=%lld %dx%d: %d elements differ from the reference", kt_type_name(t),
                   (long long)K, nr, nc, bad);
        }
    free(w), free(y), free(aux), free(x);
}

/* d = mul_mat computed on 1, 2 and 4 threads into first (nout floats): the three must agree bit for bit. */
static void compute_threads(struct kt_context *ctx, struct kt_tensor *d, float *first, int64_t nout, const char *what) {
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, d);
    static const int threads[] = {1, 2, 4};
    for (size_t ti = 0; ti < 3; ti++) {
        CHECK(kt_graph_compute_with_ctx(ctx, gf, threads[ti]) == KT_STATUS_SUCCESS);
        if (ti == 0)
            memcpy(first, d->data, (size_t)nout * sizeof(float));
        else
            CHECKF(memcmp(first, d->data, (size_t)nout * sizeof(float)) == 0, "%s: %d threads differ from 1", what,
                   threads[ti]);
    }
}

/* mul_mat of weights [K, M, W2, W3] and activations [K, N, W2*R2, W3*R3]: made
 * contiguous, or as a permuted view (rows not adjacent), or transposed (strided elements). */
enum act_layout { ACT_CONTIG, ACT_PERMUTED, ACT_TRANSPOSED };

static void test_mul_mat(enum kt_type t, int64_t K, int64_t M, int64_t N, int64_t W2, int64_t R2, int64_t W3,
                         int64_t R3, enum act_layout layout, uint64_t *s) {
    const int64_t B2 = W2 * R2, B3 = W3 * R3;
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    struct kt_context *ctx = kt_init((struct kt_init_params){
        .mem_size = kt_row_size(t, K) * (size_t)(M * W2 * W3) + (size_t)(K * N * B2 * B3 + M * N * B2 * B3) * 4 * 4 +
                    (size_t)(N * B2 * B3) * kt_row_size(vdt, K) * 2 + (1u << 20)});
    struct kt_tensor *a = kt_new_tensor_4d(ctx, t, K, M, W2, W3);
    make_rows(t, a->data, K, M * W2 * W3, false, s);
    struct kt_tensor *b;
    if (layout == ACT_PERMUTED)
        b = kt_permute(ctx, kt_new_tensor_4d(ctx, KT_TYPE_F32, K, B2, N, B3), 0, 2, 1, 3);
    else if (layout == ACT_TRANSPOSED && B2 * B3 == 1)
        b = kt_transpose(ctx, kt_new_tensor_2d(ctx, KT_TYPE_F32, N, K));
    else
        b = kt_new_tensor_4d(ctx, KT_TYPE_F32, K, N, B2, B3);
    {
        struct kt_tensor *base = b->view_src ? b->view_src : b;
        float *bd = base->data;
        for (int64_t i = 0; i < kt_nelements(base); i++) bd[i] = gauss(s);
    }
    struct kt_tensor *d = kt_mul_mat(ctx, a, b);
    const int64_t nout = M * N * B2 * B3;
    float *first = malloc((size_t)nout * sizeof(float)), *want = malloc((size_t)nout * sizeof(float));
    float *wantd = malloc((size_t)nout * sizeof(float));
    compute_threads(ctx, d, first, nout, kt_type_name(t));
    /* references: one dot per element on the reference quantizer's bytes (the scalar
     * reference's own dot where rows in lanes run), and doubles */
    int bias;
    const kt_vec_dot_fn dot = kt_cpu_lanes(t, &bias) ? kt_get_type_traits(t)->vec_dot : kt_cpu_vec_dot(t);
    float *col = malloc((size_t)K * sizeof(float)), *wrow = malloc((size_t)K * sizeof(float));
    uint8_t *qcol = malloc(kt_row_size(vdt, K));
    for (int64_t i3 = 0; i3 < B3; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t i1 = 0; i1 < N; i1++) {
                for (int64_t k = 0; k < K; k++)
                    col[k] = *(const float *)((const uint8_t *)b->data + k * b->nb[0] + i1 * b->nb[1] +
                                              i2 * b->nb[2] + i3 * b->nb[3]);
                kt_get_type_traits(vdt)->from_float_ref(col, qcol, K);
                for (int64_t r = 0; r < M; r++) {
                    const uint8_t *arow = (const uint8_t *)a->data + r * a->nb[1] + (i2 / R2) * a->nb[2] +
                                          (i3 / R3) * a->nb[3];
                    const int64_t o = ((i3 * B2 + i2) * N + i1) * M + r;
                    dot(K, &want[o], arow, qcol);
                    kt_get_type_traits(t)->to_float(arow, wrow, K);
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) acc += (double)wrow[k] * col[k];
                    wantd[o] = (float)acc;
                }
            }
    int64_t bad = 0;
    for (int64_t o = 0; o < nout; o++) bad += memcmp(&first[o], &want[o], sizeof(float)) != 0;
    CHECKF(bad == 0, "%s K=%lld M=%lld N=%lld bcast %lldx%lld layout %d: %lld of %lld elements differ from vec_dot",
           kt_type_name(t), (long long)K, (long long)M, (long long)N, (long long)R2, (long long)R3, (int)layout,
           (long long)bad, (long long)nout);
    /* activation rounding: 8-bit formats ~1e-4 relative squared error, F16 ~1e-7 */
    const double tol = vdt == KT_TYPE_F16 ? 1e-6 : 1e-3, e = tu_nmse(first, wantd, nout);
    CHECKF(e < tol, "%s K=%lld N=%lld: nmse %g vs double reference (tolerance %g)", kt_type_name(t), (long long)K,
           (long long)N, e, tol);
    free(first), free(want), free(wantd), free(col), free(wrow), free(qcol);
    kt_free(ctx);
}

static bool select_one(const struct kt_tensor *t, void *data) { return t == data; }

/* Weights moved into the CPU device's extra buffer type as a model's are (CPU_REPACK):
 * mul_mat on a view of rows [row0, row0 + M) of a matrix of total rows, N columns, 1/2/4
 * threads, must equal the reference dot per element (a view that starts inside a 16-row
 * group reads the tensor's own data, which a packed tensor keeps where it was). */
static void test_repacked(enum kt_type t, int64_t K, int64_t total, int64_t row0, int64_t M, int64_t N, uint64_t *s) {
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    struct kt_context *ctx = kt_init((struct kt_init_params){
        .mem_size = 2 * kt_row_size(t, K) * (size_t)total + (size_t)(K * N + M * N) * 4 + (1u << 20)});
    struct kt_tensor *w = kt_new_tensor_2d(ctx, t, K, total);
    make_rows(t, w->data, K, total, false, s);
    const void *stored = w->data;
    uint8_t *copy = malloc(kt_nbytes(w));
    memcpy(copy, stored, kt_nbytes(w));
    struct kt_tensor *a = kt_view_2d(ctx, w, K, M, w->nb[1], (size_t)row0 * w->nb[1]); /* made before the move */
    struct kt_buffer_type *buft = kt_dev_extra_bufts(kt_dev_by_type(KT_DEVICE_TYPE_CPU))[0];
    CHECK(buft != NULL && strcmp(kt_buft_name(buft), "CPU_REPACK") == 0);
    struct kt_buffer *rp = buft ? kt_backend_move_ctx_tensors(ctx, buft, select_one, w) : NULL;
    CHECKF(rp != NULL, "%s: %s", kt_type_name(t), kt_last_error());
    int bias;
    const bool lanes = kt_cpu_lanes(t, &bias) != NULL;
    /* the path taken: the packed groups (whole groups), else the plain copy (other types) */
    const uint8_t *g0;
    size_t gs;
    const bool packed = kt_cpu_repacked(a, &g0, &gs) != NULL;
    CHECKF(packed == (lanes && row0 % 16 == 0), "%s rows %lld..: packed copy %d", kt_type_name(t), (long long)row0,
           packed);
    /* a packed tensor stays where it was; a plain copy moves into the buffer, its view with it */
    CHECKF((w->data == stored) == lanes, "%s: data moved %d", kt_type_name(t), w->data != stored);
    CHECKF((w->buffer == rp) == !lanes, "%s: in the buffer %d", kt_type_name(t), w->buffer == rp);
    CHECKF(a->data == (uint8_t *)w->data + a->view_offs, "%s: the view follows its tensor", kt_type_name(t));
    /* either way the tensor reads back as it was */
    uint8_t *back = malloc(kt_nbytes(w));
    CHECK(kt_tensor_get(w, back, 0, kt_nbytes(w)) && memcmp(back, copy, kt_nbytes(w)) == 0);
    free(back), free(copy);
    struct kt_tensor *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, K, N);
    float *bd = b->data;
    for (int64_t i = 0; i < K * N; i++) bd[i] = gauss(s);
    struct kt_tensor *d = kt_mul_mat(ctx, a, b);
    const int64_t nout = M * N;
    float *first = malloc((size_t)nout * sizeof(float)), *want = malloc((size_t)nout * sizeof(float));
    compute_threads(ctx, d, first, nout, "repacked");
    const kt_vec_dot_fn dot = lanes ? kt_get_type_traits(t)->vec_dot : kt_cpu_vec_dot(t);
    uint8_t *qcol = malloc(kt_row_size(vdt, K));
    for (int64_t c = 0; c < N; c++) {
        kt_get_type_traits(vdt)->from_float_ref(bd + c * K, qcol, K);
        for (int64_t r = 0; r < M; r++) dot(K, &want[c * M + r], (const uint8_t *)a->data + r * a->nb[1], qcol);
    }
    int64_t bad = 0;
    for (int64_t o = 0; o < nout; o++) bad += memcmp(&first[o], &want[o], sizeof(float)) != 0;
    CHECKF(bad == 0, "%s repacked K=%lld rows %lld..%lld of %lld, N=%lld: %lld of %lld elements differ from vec_dot",
           kt_type_name(t), (long long)K, (long long)row0, (long long)(row0 + M), (long long)total, (long long)N,
           (long long)bad, (long long)nout);
    free(first), free(want), free(qcol);
    kt_buffer_free(rp);
    /* the groups went with the buffer: mul_mat no longer finds them */
    CHECKF(!lanes || !kt_cpu_repacked(a, &g0, &gs), "%s: packed groups after the buffer's free", kt_type_name(t));
    kt_free(ctx);
}

/* The decode split (cpu.h): each thread takes its own share front to back, then the
 * others' from their back ends; every tile exactly once. First one thread after
 * another, where the order is known; then 4 threads at once, each pausing at random,
 * where only "each tile once" is. */
struct share_run {
    struct kt_compute_params p;
    pthread_barrier_t *start;
    int *taken; /* per tile, how many times */
    int got, out_of_range; /* counted here: the CHECK counters are not for threads */
    uint64_t seed;
};

static void *share_worker(void *arg) {
    struct share_run *r = arg;
    kt_cpu_share_init(&r->p, 1000);
    pthread_barrier_wait(r->start);
    for (int64_t t; (t = kt_cpu_share_next(&r->p)) >= 0; r->got++) {
        if (t < 1000)
            __atomic_fetch_add(&r->taken[t], 1, __ATOMIC_RELAXED);
        else
            r->out_of_range++;
        r->seed = r->seed * 6364136223846793005ull + 1442695040888963407ull;
        for (volatile unsigned spin = (unsigned)(r->seed >> 54); spin > 0; spin--) {
        }
    }
    return NULL;
}

static void test_shares(void) {
    struct kt_threadpool *tp = kt_threadpool_new(4);
    CHECK(tp != NULL);
    if (!tp) return;
    struct kt_compute_params p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (struct kt_compute_params){.ith = i, .nth = 3, .tp = tp};
        kt_cpu_share_init(&p[i], 10); /* shares [0,3) [3,6) [6,10) */
    }
    CHECK(kt_cpu_share_next(&p[1]) == 3);
    static const int64_t want0[] = {0, 1, 2, 5, 4, 9, 8, 7, 6, -1}; /* own, then the others' backs */
    for (size_t k = 0; k < sizeof want0 / sizeof want0[0]; k++) {
        const int64_t got = kt_cpu_share_next(&p[0]);
        CHECKF(got == want0[k], "share step %zu: tile %lld, want %lld", k, (long long)got, (long long)want0[k]);
    }
    CHECK(kt_cpu_share_next(&p[1]) == -1 && kt_cpu_share_next(&p[2]) == -1);
    for (int i = 0; i < 2; i++) { /* fewer tiles than threads: a share may be empty */
        p[i] = (struct kt_compute_params){.ith = i, .nth = 2, .tp = tp};
        kt_cpu_share_init(&p[i], 1);
    }
    CHECK(kt_cpu_share_next(&p[0]) == 0 && kt_cpu_share_next(&p[0]) == -1 && kt_cpu_share_next(&p[1]) == -1);

    int taken[1000] = {0};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 4);
    struct share_run run[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        run[i] = (struct share_run){
            {.ith = i, .nth = 4, .tp = tp}, &start, taken, 0, 0, 0x1234567u * (uint64_t)(i + 1)};
        CHECK(pthread_create(&th[i], NULL, share_worker, &run[i]) == 0);
    }
    int total = 0, bad = 0;
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL), total += run[i].got, bad += run[i].out_of_range;
    pthread_barrier_destroy(&start);
    for (int t = 0; t < 1000; t++) bad += taken[t] != 1;
    CHECKF(bad == 0 && total == 1000, "4 threads: %d tiles out of range or not taken exactly once (%d taken of 1000)",
           bad, total);
    kt_threadpool_free(tp);
}

int main(void) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    test_shares();
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum kt_type t = types[i];
        const int64_t qk = kt_blck_size(kt_get_type_traits(t)->vec_dot_type) > 32 ? 256 : 32;
        const kt_gemm_fn gemm = kt_cpu_gemm(t, 2);
        int bias = 0;
        const kt_lanes_fn lanes = kt_cpu_lanes(t, &bias);
        if (lanes) {
            static const int64_t kb[] = {1, 2, 3, 8, 37};
            for (size_t j = 0; j < sizeof kb / sizeof kb[0]; j++) {
                test_lanes(t, lanes, bias, kb[j] * qk, false, &s);
                test_lanes(t, lanes, bias, kb[j] * qk, true, &s);
            }
        } else if (!gemm) {
            printf("%s: no block kernel on this CPU, mul_mat checks only\n", kt_type_name(t));
        } else {
            static const int64_t kb[] = {1, 2, 3, 8, 37};
            for (size_t j = 0; j < sizeof kb / sizeof kb[0]; j++) {
                test_kernel(t, gemm, kb[j] * qk, false, &s);
                test_kernel(t, gemm, kb[j] * qk, true, &s);
                if (t == KT_TYPE_F16) test_kernel(t, gemm, kb[j] * qk + 7, false, &s); /* scalar tail */
            }
        }
        const int64_t K1 = qk == 256 ? 512 : 96, K2 = qk == 256 ? 768 : 160;
        for (int64_t N = 1; N <= 70; N += N < 10 ? 1 : 13)
            test_mul_mat(t, N % 2 ? K1 : K2, 67, N, 1, 1, 1, 1, ACT_CONTIG, &s);
        test_mul_mat(t, K1, 133, 70, 1, 1, 1, 1, ACT_CONTIG, &s);  /* several tiles each way */
        test_mul_mat(t, K2, 9, 11, 2, 3, 1, 1, ACT_CONTIG, &s);    /* GQA-like broadcast over dim 2 */
        test_mul_mat(t, K1, 6, 5, 2, 2, 2, 2, ACT_CONTIG, &s);     /* broadcast over dims 2 and 3 */
        test_mul_mat(t, K1, 13, 7, 2, 2, 1, 1, ACT_PERMUTED, &s);  /* activation rows not adjacent */
        test_mul_mat(t, K2, 10, 9, 1, 1, 1, 1, ACT_TRANSPOSED, &s); /* strided activation elements */
        static const int64_t rn[] = {1, 2, 3, 7, 8, 9, 64, 70};
        for (size_t j = 0; j < sizeof rn / sizeof rn[0]; j++) {
            test_repacked(t, j % 2 ? K1 : K2, 67, 0, 67, rn[j], &s); /* a tail group of 3 rows */
            test_repacked(t, K1, 100, 32, 48, rn[j], &s);           /* a view of whole groups (fused q/k/v) */
            test_repacked(t, K2, 40, 5, 20, rn[j], &s);             /* a view inside a group: the data as stored */
        }
        if (t == KT_TYPE_F16) test_mul_mat(t, 101, 7, 6, 1, 1, 1, 1, ACT_CONTIG, &s); /* K % 16 != 0 */
    }
    return tu_finish("test_gemm");
}
