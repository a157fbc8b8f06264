/*
 * bench_vec_dot.c - time of the CPU dot-product kernels per type and ISA
 * (reference, AVX2, AVX-512) on a 4096-element row, side by side with
 * llama.cpp's own kernel for the same type when its CPU library can be loaded
 * (KILN_GGML_CPU=path/libggml-cpu-zen4.so, default: the peer build under
 * /tmp/kiln-peer), and of the activation quantizers.
 *   bench_vec_dot [reps] [n (default 4096)]
 * Dots: TSC ticks of the fastest call (stable on a shared machine); the
 * ratio column is ggml / best kiln (above 1: kiln is faster). Quantizers the same.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "cpu/vec_dot_isa.h"
#include "kt.h"

/* llama.cpp's per-type CPU traits (ggml-cpu.h), declared here to load them at run time */
typedef void (*ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
                                int nrc);
struct ggml_traits_cpu {
    void (*from_float)(const float *x, void *y, int64_t n);
    ggml_vec_dot_fn vec_dot;
    int vec_dot_type;
    int64_t nrows;
};
typedef const struct ggml_traits_cpu *(*ggml_get_traits_fn)(int type);

static ggml_get_traits_fn load_ggml(void) {
    const char *path = getenv("KILN_GGML_CPU");
    if (!path) path = "/tmp/kiln-peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-zen4.so";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "no llama.cpp column: %s\n", dlerror());
        return NULL;
    }
    /* POSIX dlsym returns functions as void *: copy the bits (ISO C has no such cast) */
    void (*init)(void) = NULL;
    ggml_get_traits_fn get = NULL;
    void *pi = dlsym(h, "ggml_cpu_init"), *pg = dlsym(h, "ggml_get_type_traits_cpu");
    if (!pi || !pg) return NULL;
    memcpy(&init, &pi, sizeof pi);
    memcpy(&get, &pg, sizeof pg);
    init();
    return get;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20000;
    const int N = argc > 2 ? atoi(argv[2]) : 4096; /* a multiple of 256 */
    if (N <= 0 || N % 256 != 0 || N > (1 << 24)) {
        fprintf(stderr, "n must be a positive multiple of 256\n");
        return 1;
    }
    float *x = malloc((size_t)N * sizeof(float)), *y = malloc((size_t)N * sizeof(float));
    unsigned char *qx = malloc((size_t)N * 4), *qy = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f, y[i] = (float)((i * 104729) % 777) / 388.0f - 1.0f;
    __builtin_cpu_init();
    const int a2 = __builtin_cpu_supports("avx2"), a512 = __builtin_cpu_supports("avx512vnni");
    static const struct { enum kt_type t; kt_vec_dot_fn avx2, avx512; } rows[] = {
        {KT_TYPE_Q4_0, kt_vec_dot_q4_0_q8_0_avx2, kt_vec_dot_q4_0_q8_0_avx512},
        {KT_TYPE_Q8_0, kt_vec_dot_q8_0_q8_0_avx2, kt_vec_dot_q8_0_q8_0_avx512},
        {KT_TYPE_Q4_K, kt_vec_dot_q4_K_q8_K_avx2, kt_vec_dot_q4_K_q8_K_avx512},
        {KT_TYPE_Q6_K, kt_vec_dot_q6_K_q8_K_avx2, kt_vec_dot_q6_K_q8_K_avx512},
        {KT_TYPE_F16, kt_vec_dot_f16_avx2, kt_vec_dot_f16_avx512},
        {KT_TYPE_F32, kt_vec_dot_f32_avx2, kt_vec_dot_f32_avx512},
        {KT_TYPE_Q4_1, kt_vec_dot_q4_1_q8_1_avx2, NULL},
        {KT_TYPE_Q5_0, kt_vec_dot_q5_0_q8_0_avx2, NULL},
        {KT_TYPE_Q5_1, kt_vec_dot_q5_1_q8_1_avx2, NULL},
        {KT_TYPE_IQ4_NL, kt_vec_dot_iq4_nl_q8_0_avx2, NULL},
        {KT_TYPE_Q2_K, kt_vec_dot_q2_K_q8_K_avx2, NULL},
        {KT_TYPE_Q3_K, kt_vec_dot_q3_K_q8_K_avx2, NULL},
        {KT_TYPE_Q5_K, kt_vec_dot_q5_K_q8_K_avx2, NULL},
        {KT_TYPE_IQ4_XS, kt_vec_dot_iq4_xs_q8_K_avx2, NULL},
    };
    ggml_get_traits_fn ggml = load_ggml();
    printf("%-6s %9s %9s %9s %9s %7s   (TSC ticks per %d-element dot, fastest call)\n", "type", "ref", "avx2",
           "avx512", "ggml", "ratio", N);
    volatile float sink = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const struct kt_type_traits *tr = kt_get_type_traits(rows[r].t);
        tr->from_float_ref(x, qx, N);
        kt_get_type_traits(tr->vec_dot_type)->from_float_ref(y, qy, N);
        kt_vec_dot_fn fns[3] = {tr->vec_dot, a2 ? rows[r].avx2 : NULL, a512 ? rows[r].avx512 : NULL};
        double ns[4] = {0, 0, 0, 0};
        float res[4] = {0, 0, 0, 0};
        for (int k = 0; k < 3; k++) {
            if (!fns[k]) continue;
            /* the fastest single call (TSC ticks): on a shared machine the minimum
             * is the kernel's own time, means are mostly the neighbours' */
            const int n = k == 0 ? reps / 10 + 1 : reps;
            ns[k] = 1e30;
            for (int i = 0; i < n; i++) {
                const unsigned long long t0 = __rdtsc();
                fns[k](N, &res[k], qx, qy);
                const double t = (double)(__rdtsc() - t0);
                sink += res[k];
                ns[k] = t < ns[k] ? t : ns[k];
            }
        }
        /* ggml: same weight bytes (the formats are the same); activations through its own quantizer */
        const struct ggml_traits_cpu *gt = ggml ? ggml((int)rows[r].t) : NULL;
        unsigned char *gy = malloc((size_t)N * 4);
        const struct ggml_traits_cpu *gp = gt ? ggml(gt->vec_dot_type) : NULL; /* the activation type's row */
        if (gt && gt->vec_dot && gp && (gp->from_float || gt->vec_dot_type == (int)KT_TYPE_F32)) {
            if (gp->from_float) gp->from_float(y, gy, N);
            else memcpy(gy, y, N * sizeof(float));
            ns[3] = 1e30;
            for (int i = 0; i < reps; i++) {
                const unsigned long long t0 = __rdtsc();
                gt->vec_dot(N, &res[3], 0, qx, 0, gy, 0, 1);
                const double t = (double)(__rdtsc() - t0);
                sink += res[3];
                ns[3] = t < ns[3] ? t : ns[3];
            }
        }
        free(gy);
        double best = ns[2] > 0 ? ns[2] : ns[1] > 0 ? ns[1] : ns[0];
        printf("%-6s %9.0f %9.0f %9.0f %9.0f %7.2f   (results: ref %.6g, ggml %.6g)\n", tr->name, ns[0], ns[1], ns[2],
               ns[3], ns[3] > 0 ? ns[3] / best : 0.0, res[0], res[3]);
    }
    static const struct { enum kt_type t; kt_from_float_fn avx2; } qz[] = {
        {KT_TYPE_Q8_0, kt_quantize_row_q8_0_avx2}, {KT_TYPE_Q8_1, kt_quantize_row_q8_1_avx2},
        {KT_TYPE_Q8_K, kt_quantize_row_q8_K_avx2},
        {KT_TYPE_F16, kt_fp32_to_fp16_row_avx2}};
    printf("%-6s %9s %9s %9s %9s %7s   (TSC ticks to quantize %d floats, fastest call)\n", "into", "ref", "avx2", "",
           "ggml", "ratio", N);
    for (size_t r = 0; r < sizeof qz / sizeof qz[0]; r++) {
        kt_from_float_fn fns[3] = {kt_get_type_traits(qz[r].t)->from_float_ref, a2 ? qz[r].avx2 : NULL, NULL};
        const struct ggml_traits_cpu *gt = ggml ? ggml((int)qz[r].t) : NULL;
        double t[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4; k++) {
            if (k < 3 && !fns[k]) continue;
            if (k == 3 && !(gt && gt->from_float)) continue;
            t[k] = 1e30;
            for (int i = 0; i < (k == 0 ? reps / 10 + 1 : reps / 4 + 1); i++) {
                const unsigned long long t0 = __rdtsc();
                if (k < 3) fns[k](x, qy, N);
                else gt->from_float(x, qy, N);
                const double d = (double)(__rdtsc() - t0);
                t[k] = d < t[k] ? d : t[k];
            }
        }
        printf("%-6s %9.0f %9.0f %9s %9.0f %7.2f\n", kt_type_name(qz[r].t), t[0], t[1], "", t[3],
               t[3] > 0 && t[1] > 0 ? t[3] / t[1] : 0.0);
    }
    free(x), free(y), free(qx), free(qy);
    return 0;
}
