/*
 * bench_vec_dot.c - time of the CPU dot-product kernels per type and ISA
 * (reference, AVX2, AVX-512) on a 4096-element row, and of the activation
 * quantizers: `bench_vec_dot [reps]`. Dots: TSC ticks of the fastest call;
 * quantizers: mean ns per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "cpu/vec_dot_isa.h"
#include "kt.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20000;
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    unsigned char *qx = malloc(N * 4), *qy = malloc(N * 4);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f, y[i] = (float)((i * 104729) % 777) / 388.0f - 1.0f;
    __builtin_cpu_init();
    const int a2 = __builtin_cpu_supports("avx2"), a512 = __builtin_cpu_supports("avx512vnni");
    static const struct { enum kt_type t; kt_vec_dot_fn avx2, avx512; } rows[] = {
        {KT_TYPE_Q4_0, kt_vec_dot_q4_0_q8_0_avx2, kt_vec_dot_q4_0_q8_0_avx512},
        {KT_TYPE_Q8_0, kt_vec_dot_q8_0_q8_0_avx2, kt_vec_dot_q8_0_q8_0_avx512},
        {KT_TYPE_Q4_K, kt_vec_dot_q4_K_q8_K_avx2, kt_vec_dot_q4_K_q8_K_avx512},
        {KT_TYPE_Q6_K, kt_vec_dot_q6_K_q8_K_avx2, kt_vec_dot_q6_K_q8_K_avx512},
        {KT_TYPE_F16, kt_vec_dot_f16_avx2, kt_vec_dot_f16_avx512},
    };
    printf("%-6s %12s %12s %12s   (TSC ticks per %d-element dot, fastest call)\n", "type", "ref", "avx2", "avx512", N);
    volatile float sink = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const struct kt_type_traits *tr = kt_get_type_traits(rows[r].t);
        tr->from_float_ref(x, qx, N);
        kt_get_type_traits(tr->vec_dot_type)->from_float_ref(y, qy, N);
        kt_vec_dot_fn fns[3] = {tr->vec_dot, a2 ? rows[r].avx2 : NULL, a512 ? rows[r].avx512 : NULL};
        double ns[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++) {
            if (!fns[k]) continue;
            /* the fastest single call (TSC ticks): on a shared machine the minimum
             * is the kernel's own time, means are mostly the neighbours' */
            const int n = k == 0 ? reps / 10 + 1 : reps;
            ns[k] = 1e30;
            for (int i = 0; i < n; i++) {
                float s;
                const unsigned long long t0 = __rdtsc();
                fns[k](N, &s, qx, qy);
                const double t = (double)(__rdtsc() - t0);
                sink += s;
                ns[k] = t < ns[k] ? t : ns[k];
            }
        }
        printf("%-6s %12.0f %12.0f %12.0f\n", tr->name, ns[0], ns[1], ns[2]);
    }
    static const struct { enum kt_type t; kt_from_float_fn avx2; } qz[] = {
        {KT_TYPE_Q8_0, kt_quantize_row_q8_0_avx2}, {KT_TYPE_Q8_K, kt_quantize_row_q8_K_avx2}};
    for (size_t r = 0; r < 2; r++) {
        double t0 = now();
        for (int i = 0; i < reps / 10 + 1; i++) kt_get_type_traits(qz[r].t)->from_float_ref(x, qy, N);
        double ref = (now() - t0) / (reps / 10 + 1) * 1e9;
        double fast = 0;
        if (a2) {
            t0 = now();
            for (int i = 0; i < reps; i++) qz[r].avx2(x, qy, N);
            fast = (now() - t0) / reps * 1e9;
        }
        printf("quantize %-5s %8.0f %12.0f\n", kt_type_name(qz[r].t), ref, fast);
    }
    free(x), free(y), free(qx), free(qy);
    return 0;
}
