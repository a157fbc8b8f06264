/*
 * bench_gemm.c - GFLOP/s of the CPU mul_mat per weight type for a 2048x2048
 * weight x 128 activation columns (prompt processing), on 1 and 2 threads.
 *   bench_gemm [reps (default 10)] [M K N [TYPE [THREADS]]]
 * Wall time of the fastest of reps runs. KT_CPU_GEMM=off times the per-element
 * vec_dot path (same results), KT_CPU_ISA=avx2 the AVX2 kernels. With
 * KT_BENCH_MARK=1 (bench_insns sets it) the timed runs are bracketed by SIGSTOP
 * so that bench_insns counts their instructions: give TYPE and THREADS 1.
 * The weights are repacked as a model's are (the CPU_REPACK buffer type) unless
 * KT_CPU_REPACK=off; from 256 MiB on they sit in huge pages as a large model's do, so
 * decode over a model's row length streams as in the model with M up to 2^20, e.g.
 * `bench_gemm 4 262144 2048 1 q4_K 1`.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kt-cpu.h"
#include "kt.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool only(const struct kt_tensor *t, void *data) { return t == data; }

static double bench(enum kt_type type, int64_t M, int64_t K, int64_t N, int threads, int reps) {
    const size_t wbytes = kt_row_size(type, K) * (size_t)M;
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = wbytes + (size_t)(K * N + M * N) * 4 +
                                                                          (size_t)N * kt_row_size(KT_TYPE_Q8_K, K) * 2 +
                                                                          (64u << 20)});
    if (!ctx) return -1;
    struct kt_tensor *a = kt_new_tensor_2d(ctx, type, K, M);
    struct kt_tensor *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, K, N);
    float *row = malloc((size_t)K * sizeof(float));
    uint64_t s = 12345;
    for (int64_t r = 0; r < M; r++) {
        for (int64_t k = 0; k < K; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            row[k] = (float)((int64_t)(s >> 40) % 2001 - 1000) / 1000.0f;
        }
        kt_get_type_traits(type)->from_float_ref(row, (uint8_t *)a->data + (size_t)r * a->nb[1], K);
    }
    float *bd = b->data;
    for (int64_t i = 0; i < K * N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        bd[i] = (float)((int64_t)(s >> 40) % 2001 - 1000) / 1000.0f;
    }
    free(row);
    struct kt_buffer_type *rp_buft = kt_dev_extra_bufts(kt_dev_by_type(KT_DEVICE_TYPE_CPU))[0];
    struct kt_buffer *rp = rp_buft ? kt_backend_move_ctx_tensors(ctx, rp_buft, only, a) : NULL;
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, kt_mul_mat(ctx, a, b));
    struct kt_threadpool *tp = kt_threadpool_new(threads);
    struct kt_cplan plan = kt_graph_plan(gf, threads, tp);
    plan.work_data = malloc(plan.work_size ? plan.work_size : 1);
    double best = 1e30;
    const bool mark = getenv("KT_BENCH_MARK") != NULL;
    if (mark) raise(SIGSTOP);
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        if (kt_graph_compute(gf, &plan) != KT_STATUS_SUCCESS) best = -1;
        const double t = now() - t0;
        if (t < best) best = t;
    }
    if (mark) raise(SIGSTOP);
    free(plan.work_data);
    kt_threadpool_free(tp);
    kt_buffer_free(rp);
    kt_free(ctx);
    return best <= 0 ? -1 : 2.0 * (double)M * (double)K * (double)N / best * 1e-9;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 10;
    const int64_t M = argc > 4 ? atoll(argv[2]) : 2048, K = argc > 4 ? atoll(argv[3]) : 2048,
                  N = argc > 4 ? atoll(argv[4]) : 128;
    if (reps < 1 || M < 1 || N < 1 || K < 256 || K % 256 || M > (1 << 20) || K > 65536 || N > 4096) {
        fprintf(stderr, "usage: bench_gemm [reps] [M K N] (K a multiple of 256)\n");
        return 2;
    }
    static const enum kt_type types[] = {KT_TYPE_Q4_0, KT_TYPE_Q8_0, KT_TYPE_Q4_K, KT_TYPE_Q6_K, KT_TYPE_F16};
    if (argc > 5) {
        /* one type, one thread count */
        enum kt_type t = KT_TYPE_COUNT;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcmp(argv[5], kt_type_name(types[i])) == 0) t = types[i];
        const int th = argc > 6 ? atoi(argv[6]) : 1;
        if (t == KT_TYPE_COUNT || th < 1 || th > 512) {
            fprintf(stderr, "bench_gemm: unknown type '%s' or bad thread count\n", argv[5]);
            return 2;
        }
        printf("%s %lldx%lld x %lld, %d threads: %.2f GFLOP/s\n", kt_type_name(t), (long long)M, (long long)K,
               (long long)N, th, bench(t, M, K, N, th, reps));
        return 0;
    }
    printf("mul_mat %lldx%lld weights x %lld columns, GFLOP/s (best of %d)\n", (long long)M, (long long)K,
           (long long)N, reps);
    printf("| type | 1 thread | 2 threads |\n| --- | ---: | ---: |\n");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        printf("| %s | %.1f | %.1f |\n", kt_type_name(types[i]), bench(types[i], M, K, N, 1, reps),
               bench(types[i], M, K, N, 2, reps));
    return 0;
}
