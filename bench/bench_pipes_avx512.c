/*
 * bench_pipes_avx512.c - what one core of this CPU issues per cycle: 512-bit
 * FMA, multiply, add, vpdpbusd, vpmulld and shuffles, alone and in pairs, FMA
 * beside loads that convert or broadcast (what the F16 cache and the
 * attention's broadcasts cost), and vpdpbusd and FMA on 256 bits; each as 12
 * independent instructions per loop turn (no dependency chain limits them).
 * Cycles come from a chain of dependent integer adds (one a cycle), so no
 * hardware counter is needed. The ceilings docs/benchmarks.md weighs the speed targets
 * against come from here.
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

/* the same with B reading memory (%14): B is given with its source, "op (%14)," */
#define PM(A, B, i, j) A " %12, %13, %" #i "\n\t" B " %" #j "\n\t"
#define BODYM(A, B) PM(A, B, 0, 1) PM(A, B, 2, 3) PM(A, B, 4, 5) PM(A, B, 6, 7) PM(A, B, 8, 9) PM(A, B, 10, 11)

/* the same on the registers' 256-bit halves (%t: the ymm name) */
#define PY(A, B, i, j) A " %t12, %t13, %t" #i "\n\t" B " %t12, %t13, %t" #j "\n\t"
#define BODYY(A, B) PY(A, B, 0, 1) PY(A, B, 2, 3) PY(A, B, 4, 5) PY(A, B, 6, 7) PY(A, B, 8, 9) PY(A, B, 10, 11)

static double ghz;
static float mem[64] __attribute__((aligned(64)));

#define TIME(NAME, A, B) TIMED(NAME, BODY(A, B))
#define TIMEM(NAME, A, B) TIMED(NAME, BODYM(A, B))
#define TIMEY(NAME, A, B) TIMED(NAME, BODYY(A, B))
#define TIMED(NAME, TEXT)                                                                                              \
    do {                                                                                                               \
        __m512 r0 = _mm512_set1_ps(1.0f), r1 = r0, r2 = r0, r3 = r0, r4 = r0, r5 = r0, r6 = r0, r7 = r0, r8 = r0,     \
               r9 = r0, r10 = r0, r11 = r0;                                                                            \
        const __m512 u = _mm512_set1_ps(0.5f), w = _mm512_set1_ps(0.25f);                                              \
        const double start = now();                                                                                    \
        for (long n = 0; n < turns; n++) __asm__ volatile(TEXT : REGS : "v"(u), "v"(w), "r"(mem) : "memory");        \
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
    TIME("vpdpbusd + add", "vpdpbusd", "vaddps");
    TIMEM("vpdpbusd + vcvtdq2ps", "vpdpbusd", "vcvtdq2ps %12,");
    TIMEM("vpdpbusd + vpsrlw", "vpdpbusd", "vpsrlw $4, %12,");
    TIMEM("fma + vcvtph2ps mem", "vfmadd231ps", "vcvtph2ps (%14),");
    TIMEM("fma + vbroadcastss mem", "vfmadd231ps", "vbroadcastss (%14),");
    TIMEM("fma + vbroadcastf32x4", "vfmadd231ps", "vbroadcastf32x4 (%14),");
    TIMEM("fma + fma {1to16} mem", "vfmadd231ps", "vfmadd231ps (%14)%{1to16%}, %13,");
    TIMEM("vpdpbusd + vpbroadcastd", "vpdpbusd", "vpbroadcastd (%14),");
    /* 256-bit: twice as many a cycle would mean two 256-bit pipes that a 512-bit
     * instruction takes both of (no more multiply-adds a cycle either way) */
    TIMEY("vpdpbusd 256-bit", "vpdpbusd", "vpdpbusd");
    TIMEY("fma 256-bit", "vfmadd231ps", "vfmadd231ps");
    return 0;
}
