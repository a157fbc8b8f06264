/*
 * env.c - the CPU engine's environment knobs, read into one struct once per
 * process (kt_cpu_kernels_reinit reads them again, for tests that switch the
 * ISA between passes), so that no kernel or planner calls getenv on its own.
 * docs/cli.md lists them with their defaults.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static struct kt_cpu_env env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static size_t bytes_or(const char *name, size_t def) {
    const char *v = getenv(name);
    return v ? (size_t)strtoul(v, NULL, 10) : def;
}

static bool is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

static void read_env(void) {
    struct kt_cpu_env e = {
        .isa_cap = is("KT_CPU_ISA", "ref") ? KT_CPU_ISA_REF : is("KT_CPU_ISA", "avx2") ? KT_CPU_ISA_AVX2
                                                                                       : KT_CPU_ISA_AVX512,
        .gemm_off = is("KT_CPU_GEMM", "off"),
        .repack_off = is("KT_CPU_REPACK", "off"),
        .profile = getenv("KT_CPU_PROFILE") && !is("KT_CPU_PROFILE", "0"),
        /* how far ahead the compact-group kernels prefetch into L2 (lanes_avx512.h says why) */
        .prefetch = bytes_or("KT_CPU_PREFETCH", 54272),
        .prefetch_q4 = bytes_or("KT_CPU_PREFETCH_Q4", 6144),
        .prefetch_dec = bytes_or("KT_CPU_PREFETCH_DEC", 0),
    };
    env = e;
}

const struct kt_cpu_env *kt_cpu_env(void) {
    pthread_once(&env_once, read_env);
    return &env;
}

void kt_cpu_env_reread(void) {
    pthread_once(&env_once, read_env);
    read_env();
}
