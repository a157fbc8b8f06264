/*
 * bench_pipes_avx512.c - what one core of this CPU issues per cycle: 512-bit
 * FMA, multiply, add, vpdpbusd, vpmulld and shuffles, alone and in
 * pairs, each as 12 independent instructions per loop turn (no dependency
 * chain limits them). Cycles come from a chain of dependent integer adds (one a
 * cycle), so no hardware counter is needed. The ceilings the README's speed
 * targets are weighed against come from here.
 *   bench_pipes_avx512 [turns in millions (100)]
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* twelve scalars, not an array, so that they stay in registers across turns */
#define REGS "+v"(r0), "+v"(r1), "+v"(r2), "+v"(r3), "+v"(r4), "+v"(r5), "+v"(r6), "+v"(r7), "+v"(r8), "+v"(r9), \
             "+v"(r10), "+v"(r11)

/* 12 instructions per turn, A into the even registers and B into the odd ones: all
 * independent */
#define P(A, B, i, j) A " %12, %13, %" #i "\n\t" B " %12, %13, %" #j "\n\t"
#define BODY(A, B) P(A, B, 0, 1) P(A, B, 2, 3) P(A, B, 4, 5) P(A, B, 6, 7) P(A, B, 8, 9) P(A, B, 10, 11)

static double ghz;

#define TIME(NAME, A, B)                                                                                               \
    do {                                                                                                               \
        __m512 r0 = _mm512_set1_ps(1.0f), r1 = r0, r2 = r0, r3 = r0, r4 = r0, r5 = r0, r6 = r0, r7 = r0, r8 = r0,     \
               r9 = r0, r10 = r0, r11 = r0;                                                                            \
        const __m512 u = _mm512_set1_ps(0.5f), w = _mm512_set1_ps(0.25f);                                              \
        const double start = now();                                                                                    \
        for (long n = 0; n < turns; n++) __asm__ volatile(BODY(A, B) : REGS : "v"(u), "v"(w));                      \
        const double c = (now() - start) * ghz * 1e9 / (double)turns;                                                  \
        printf("%-24s %5.2f cycles per 12 (%.2f a cycle)\n", NAME, c, 12.0 / c);                                        \
        __asm__ volatile("" ::"v"(r0), "v"(r1), "v"(r2), "v"(r3), "v"(r4), "v"(r5), "v"(r6), "v"(r7), "v"(r8), "v"(r9), \
                         "v"(r10), "v"(r11));                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni")) {
        printf("bench_pipes_avx512: this CPU has no AVX-512 VNNI\n");
        return 0;
    }
    const long turns = (argc > 1 ? atol(argv[1]) : 100) * 1000000L;
    long x = 0;
    double t0 = now();
    for (long n = 0; n < turns; n++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    ghz = 4.0 * (double)turns / (now() - t0) * 1e-9;
    printf("clock (dependent adds): %.2f GHz\n", ghz);
    TIME("fma", "vfmadd231ps", "vfmadd231ps");
    TIME("mul", "vmulps", "vmulps");
    TIME("add", "vaddps", "vaddps");
    TIME("vpdpbusd", "vpdpbusd", "vpdpbusd");
    TIME("fma + add", "vfmadd231ps", "vaddps");
    TIME("fma + unpcklps", "vfmadd231ps", "vunpcklps");
    TIME("vpdpbusd + mul", "vpdpbusd", "vmulps");
    TIME("vpdpbusd + fma", "vpdpbusd", "vfmadd231ps");
    TIME("vpdpbusd + vpaddd", "vpdpbusd", "vpaddd");
    TIME("vpdpbusd + vpandd", "vpdpbusd", "vpandd");
    TIME("vpdpbusd + vpmulld", "vpdpbusd", "vpmulld");
    return 0;
}
