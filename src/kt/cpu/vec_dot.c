/*
 * vec_dot.c - the CPU's ISA level and, per type, the dot-product and
 * activation-quantizer kernels for a level: the ISA variants (vec_dot_avx512.c,
 * gemm_lanes_avx512.c, vec_dot_avx2.c, vec_dot_more_avx2.c), else the
 * reference kernels of the type traits table. kernels.c asks once and keeps
 * the answer in the kernel table. Also kt_cpu_features(), the SIMD extensions found.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "cpu.h"
#include "vec_dot_isa.h"

#if defined(__x86_64__) || defined(__i386__)
/* clang's __builtin_cpu_supports does not know "f16c": ask CPUID leaf 1 (ECX bit 29). */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

/* CPUID traps to the hypervisor on virtual machines (microseconds each): ask once. */
static enum kt_cpu_isa isa_detected;
static bool avx512_rows; /* AVX-512 F/DQ/BW/VL, what the row kernels of ops_isa.h need */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void detect_isa(void) {
    enum kt_cpu_isa best = KT_CPU_ISA_REF;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) best = KT_CPU_ISA_AVX2;
    avx512_rows = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (best == KT_CPU_ISA_AVX2 && avx512_rows && __builtin_cpu_supports("avx512vnni")) best = KT_CPU_ISA_AVX512;
#endif
    isa_detected = best;
}

enum kt_cpu_isa kt_cpu_isa_level(bool *rows_avx512) {
    pthread_once(&isa_once, detect_isa);
    enum kt_cpu_isa isa = isa_detected;
    bool rows = avx512_rows;
    const enum kt_cpu_isa cap = kt_cpu_env()->isa_cap;
    if (isa > cap) isa = cap;
    if (cap < KT_CPU_ISA_AVX512) rows = false;
    if (rows_avx512) *rows_avx512 = rows;
    return isa;
}

/* One row per type with a fast path; a NULL slot falls back to the next lower ISA. */
static const struct {
    enum kt_type type;
    kt_vec_dot_fn avx2, avx512;
} dots[] = {
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
    {KT_TYPE_MXFP4, kt_vec_dot_mxfp4_q8_0_avx2, NULL},
    {KT_TYPE_Q2_K, kt_vec_dot_q2_K_q8_K_avx2, NULL},
    {KT_TYPE_Q3_K, kt_vec_dot_q3_K_q8_K_avx2, NULL},
    {KT_TYPE_Q5_K, kt_vec_dot_q5_K_q8_K_avx2, NULL},
    {KT_TYPE_IQ4_XS, kt_vec_dot_iq4_xs_q8_K_avx2, NULL},
};

static const struct {
    enum kt_type type;
    kt_from_float_fn avx2;
} quantizers[] = {
    {KT_TYPE_Q8_0, kt_quantize_row_q8_0_avx2},
    {KT_TYPE_Q8_1, kt_quantize_row_q8_1_avx2},
    {KT_TYPE_Q8_K, kt_quantize_row_q8_K_avx2},
    {KT_TYPE_F16, kt_fp32_to_fp16_row_avx2},
};

kt_vec_dot_fn kt_cpu_pick_vec_dot(enum kt_type type, enum kt_cpu_isa isa) {
    for (size_t i = 0; i < sizeof dots / sizeof dots[0]; i++) {
        if (dots[i].type != type) continue;
        if (isa >= KT_CPU_ISA_AVX512 && dots[i].avx512) return dots[i].avx512;
        if (isa >= KT_CPU_ISA_AVX2 && dots[i].avx2) return dots[i].avx2;
    }
    return kt_get_type_traits(type)->vec_dot;
}

kt_from_float_fn kt_cpu_pick_from_float(enum kt_type type, enum kt_cpu_isa isa) {
    for (size_t i = 0; i < sizeof quantizers / sizeof quantizers[0]; i++)
        if (quantizers[i].type == type && isa >= KT_CPU_ISA_AVX2) return quantizers[i].avx2;
    return kt_get_type_traits(type)->from_float;
}

/* ------------------------------------------------------------------ feature string */

static char features[128];
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void add_feature(size_t *len, bool has, const char *name) {
    if (has && *len < sizeof features)
        *len += (size_t)snprintf(features + *len, sizeof features - *len, "%s%s", *len ? " " : "", name);
}

static void build_features(void) {
    size_t len = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    unsigned a = 0, b, c, d; /* AVX512_BF16: CPUID leaf 7 sub-leaf 1, EAX bit 5 */
    const bool bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
    add_feature(&len, __builtin_cpu_supports("avx512f"), "avx512f");
    add_feature(&len, __builtin_cpu_supports("avx512bw"), "avx512bw");
    add_feature(&len, __builtin_cpu_supports("avx512vl"), "avx512vl");
    add_feature(&len, __builtin_cpu_supports("avx512dq"), "avx512dq");
    add_feature(&len, __builtin_cpu_supports("avx512vnni"), "avx512vnni");
    add_feature(&len, bf16, "avx512bf16");
    add_feature(&len, __builtin_cpu_supports("avx2"), "avx2");
    add_feature(&len, __builtin_cpu_supports("fma"), "fma");
    add_feature(&len, has_f16c(), "f16c");
#endif
    if (len == 0) snprintf(features, sizeof features, "none");
}

const char *kt_cpu_features(void) {
    pthread_once(&features_once, build_features);
    return features;
}
