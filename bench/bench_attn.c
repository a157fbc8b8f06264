/*
 * bench_attn.c - time of the fused attention (kt_attn_ext) for one decoded
 * token over a cache of n_kv cells, at TinyLlama's shapes (64-wide heads, 32
 * query heads over 4 k/v heads, F16 cache), for a stack of layers whose caches
 * together outgrow the last-level cache, as a model's do.
 *   bench_attn [n_kv (4096)] [threads (2)] [reps (20)] [layers (22)] [T (1)]
 * Prints the fastest run's milliseconds per token and the cache bytes it read per
 * second (K and V of every layer once).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kt-cpu.h"
#include "kt.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int64_t n_kv = argc > 1 ? atoll(argv[1]) : 4096;
    const int threads = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 20;
    const int layers = argc > 4 ? atoi(argv[4]) : 22;
    const int64_t T = argc > 5 ? atoll(argv[5]) : 1, D = 64, H = 32, Hkv = 4;
    if (n_kv < 1 || threads < 1 || reps < 1 || layers < 1 || T < 1) {
        fprintf(stderr, "usage: bench_attn [n_kv] [threads] [reps] [layers] [T]\n");
        return 2;
    }
    const size_t kv_bytes = (size_t)(2 * D * n_kv * Hkv * 2) * (size_t)layers;
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = kv_bytes + ((size_t)64 << 20)});
    if (!ctx) return 1;
    struct kt_tensor *q = kt_new_tensor_3d(ctx, KT_TYPE_F32, D, H, T);
    struct kt_tensor *mask = kt_new_tensor_2d(ctx, KT_TYPE_F32, n_kv, T);
    struct kt_tensor *order = kt_new_tensor_1d(ctx, KT_TYPE_I32, n_kv);
    for (int64_t i = 0; i < D * H * T; i++) ((float *)q->data)[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n_kv; i++) ((float *)mask->data)[t * n_kv + i] = i <= n_kv - T + t ? 0.0f : -INFINITY;
    for (int64_t i = 0; i < n_kv; i++) ((int32_t *)order->data)[i] = (int32_t)i;
    struct kt_cgraph *gf = kt_new_graph(ctx);
    for (int l = 0; l < layers; l++) {
        struct kt_tensor *k = kt_new_tensor_3d(ctx, KT_TYPE_F16, D, n_kv, Hkv);
        struct kt_tensor *v = kt_new_tensor_3d(ctx, KT_TYPE_F16, D, n_kv, Hkv);
        kt_fp16_t *kp = k->data, *vp = v->data;
        for (int64_t i = 0; i < D * n_kv * Hkv; i++) {
            kp[i] = kt_fp32_to_fp16((float)((i * 31 + l) % 997) / 997.0f - 0.5f);
            vp[i] = kt_fp32_to_fp16((float)((i * 17 + l) % 991) / 991.0f - 0.5f);
        }
        kt_build_forward_expand(gf, kt_attn_ext(ctx, q, k, v, mask, order, 0.125f));
    }
    struct kt_threadpool *tp = kt_threadpool_new(threads);
    struct kt_cplan plan = kt_graph_plan(gf, threads, tp);
    plan.work_data = malloc(plan.work_size);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        if (kt_graph_compute(gf, &plan) != KT_STATUS_SUCCESS) {
            fprintf(stderr, "bench_attn: %s\n", kt_last_error());
            return 1;
        }
        const double t = now() - t0;
        if (t < best) best = t;
    }
    printf("attn n_kv %lld T %lld, %d layers, %d threads: %.3f ms (%.1f GB/s of cache)\n", (long long)n_kv,
           (long long)T, layers, threads, best * 1e3, (double)kv_bytes / best * 1e-9);
    free(plan.work_data);
    kt_threadpool_free(tp);
    kt_free(ctx);
    return 0;
}
