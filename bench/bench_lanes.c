/*
 * bench_lanes.c - the prompt kernel of a quantized type by itself: one 16-row
 * group (repacked as a model's weights are) against COLS activation columns,
 * called over and over so that everything stays in the core's caches, on one
 * thread. It takes the kernel mul_mat takes for that many columns of one group
 * (the packer's wide kernel, or its expanded form, or its run) and prints the
 * cycles per 64 int8 multiply-adds (one 512-bit vpdpbusd) and the share of
 * that peak, at the faster of two clock readings (a chain of dependent adds,
 * before and after: the clock moves, and the higher reading understates the
 * share rather than overstating it). The best of PASSES short
 * passes: a pass during which something else held the core is slower, never
 * faster, so the best is what the kernel itself allows.
 *   bench_lanes [TYPE (q4_0, q8_0, q4_K, q6_K or all)] [K (2048)] [COLS (64)] [PASSES (40)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/gemm.h"
#include "kt-cpu.h"
#include "kt.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double clock_ghz(void) {
    const long n = 100000000;
    long x = 0;
    const double t = now();
    for (long i = 0; i < n; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0" : "+r"(x));
    return 2.0 * (double)n / (now() - t) * 1e-9;
}

static float uni(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int64_t)(*s >> 40) % 2001 - 1000) / 1000.0f;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench_lanes: out of memory\n");
        exit(1);
    }
    return p;
}

static int run(enum kt_type t, int64_t K, int cols, int passes) {
    int bias = 0;
    const struct kt_lanes_packer *pk = kt_cpu_lanes(t, &bias) ? kt_cpu_lanes_packer(t) : NULL;
    if (!pk) {
        printf("%-5s no packed prompt kernel on this CPU\n", kt_type_name(t));
        return 0;
    }
    const int64_t blk = kt_blck_size(t);
    if (K < blk || K % blk != 0) {
        fprintf(stderr, "bench_lanes: K must be a multiple of %lld for %s\n", (long long)blk, kt_type_name(t));
        return 2;
    }
    const enum kt_type vdt = kt_get_type_traits(t)->vec_dot_type;
    const size_t rs = kt_row_size(t, K), ys = kt_row_size(vdt, K);
    uint8_t *w = xalloc(rs * 16), *y = xalloc(ys * (size_t)cols), *group = xalloc(pk->size(K));
    struct kt_lanes_aux *aux = xalloc((size_t)(K / 32) * (size_t)cols * sizeof *aux);
    float *x = xalloc((size_t)K * sizeof(float)), *o = xalloc((size_t)cols * 16 * sizeof(float));
    const void **yp = xalloc((size_t)cols * sizeof *yp);
    const struct kt_lanes_aux **ap = xalloc((size_t)cols * sizeof *ap);
    float **out = xalloc((size_t)cols * sizeof *out);
    uint64_t s = 12345;
    for (int r = 0; r < 16; r++) {
        for (int64_t k = 0; k < K; k++) x[k] = uni(&s);
        kt_get_type_traits(t)->from_float_ref(x, w + (size_t)r * rs, K);
    }
    pk->pack(K, w, rs, 16, group);
    for (int c = 0; c < cols; c++) {
        for (int64_t k = 0; k < K; k++) x[k] = uni(&s);
        yp[c] = y + (size_t)c * ys;
        kt_get_type_traits(vdt)->from_float_ref(x, y + (size_t)c * ys, K);
        ap[c] = vdt == KT_TYPE_Q8_0 ? aux + (size_t)c * (size_t)(K / 32) : NULL;
        if (ap[c]) kt_lanes_aux(K, yp[c], bias, aux + (size_t)c * (size_t)(K / 32));
        out[c] = o + 16 * c;
    }
    /* the kernel mul_mat runs for this many columns of one group */
    const void *src = group;
    const char *which = "run";
    void (*fn)(int64_t, const void *, int, const void *const *, const struct kt_lanes_aux *const *, float *const *,
               int) = pk->run;
    if (cols >= KT_LANES_XPAND_MIN && pk->wide) {
        fn = pk->wide, which = "wide";
    } else if (cols >= KT_LANES_XPAND_MIN && pk->xsize) {
        void *xs = xalloc(pk->xsize(K) + 64);
        pk->expand(K, group, xs);
        src = xs, fn = pk->xrun, which = "xrun";
    }
    const double macs = (double)K * 16 * cols;
    const long calls = (long)(4e7 / macs) + 1; /* a pass of about 10 ms at the peak */
    double best = 1e30, ghz = clock_ghz();
    for (int p = 0; p < passes; p++) {
        const double t0 = now();
        for (long i = 0; i < calls; i++) fn(K, src, 16, yp, ap, out, cols);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    const double after = clock_ghz();
    if (after > ghz) ghz = after;
    const double cyc = best * ghz * 1e9 / (macs * (double)calls / 64);
    printf("%-5s K %lld, %d columns (%s): %.2f cycles per 64 multiply-adds, %.0f%% of one vpdpbusd a cycle (%.2f GHz)\n",
           kt_type_name(t), (long long)K, cols, which, cyc, 100.0 / cyc, ghz);
    if (src != group) free((void *)src);
    free(w), free(y), free(group), free(aux), free(x), free(o), free(yp), free(ap), free(out);
    return 0;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "q4_0";
    const int64_t K = argc > 2 ? atoll(argv[2]) : 2048;
    const int cols = argc > 3 ? atoi(argv[3]) : 64, passes = argc > 4 ? atoi(argv[4]) : 40;
    if (K < 1 || cols < 1 || cols > 4096 || passes < 1) {
        fprintf(stderr, "usage: bench_lanes [TYPE|all] [K] [COLS (1..4096)] [PASSES]\n");
        return 2;
    }
    const enum kt_type all[] = {KT_TYPE_Q4_0, KT_TYPE_Q8_0, KT_TYPE_Q4_K, KT_TYPE_Q6_K};
    int n = 0;
    enum kt_type types[4];
    for (int i = 0; i < 4; i++)
        if (strcmp(name, "all") == 0 || strcmp(name, kt_type_name(all[i])) == 0) types[n++] = all[i];
    if (!n) {
        fprintf(stderr, "bench_lanes: unknown type '%s' (q4_0, q8_0, q4_K, q6_K or all)\n", name);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        const int rc = run(types[i], K, cols, passes);
        if (rc) return rc;
    }
    return 0;
}
