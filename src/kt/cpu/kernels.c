/*
 * kernels.c - the CPU engine's kernel table: every dot product, activation
 * quantizer, block mul_mat kernel and the row kernels' ISA chosen once per
 * process (backend init or first use) instead of on every kernel call, from the
 * CPU's features and the environment (kt_cpu_env: KT_CPU_ISA, KT_CPU_GEMM, the
 * prefetch distances).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"

struct table {
    struct kt_cpu_kernels k;
    kt_gemm_fn gemm[KT_TYPE_COUNT];
    bool gemm_decode[KT_TYPE_COUNT];
    kt_lanes_fn lanes[KT_TYPE_COUNT];
    int lanes_bias[KT_TYPE_COUNT];
    const struct kt_lanes_packer *packer[KT_TYPE_COUNT];
};

static struct table table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* how far ahead the compact-group kernels prefetch into L2 (lanes_avx512.h says why;
 * the defaults are env.c's) */
size_t kt_cpu_lanes_prefetch, kt_cpu_lanes_prefetch_q4, kt_cpu_lanes_prefetch_dec;

static void build(void) {
    struct table t;
    memset(&t, 0, sizeof t);
    t.k.isa = kt_cpu_isa_level(&t.k.rows_avx512);
    const struct kt_cpu_env *env = kt_cpu_env();
    kt_cpu_lanes_prefetch = env->prefetch;
    kt_cpu_lanes_prefetch_q4 = env->prefetch_q4;
    kt_cpu_lanes_prefetch_dec = env->prefetch_dec;
    const bool gemm_off = env->gemm_off;
    for (int i = 0; i < KT_TYPE_COUNT; i++) {
        const enum kt_type type = (enum kt_type)i;
        if (!kt_get_type_traits(type)->name) continue;
        t.k.vec_dot[i] = kt_cpu_pick_vec_dot(type, t.k.isa);
        t.k.from_float[i] = kt_cpu_pick_from_float(type, t.k.isa);
        if (gemm_off || !t.k.vec_dot[i]) continue;
        t.gemm[i] = kt_cpu_pick_gemm(type, t.k.vec_dot[i], &t.gemm_decode[i]);
        t.lanes[i] = kt_cpu_pick_lanes(type, t.k.vec_dot[i], &t.lanes_bias[i]);
        t.packer[i] = t.lanes[i] ? kt_cpu_pick_lanes_packer(t.lanes[i]) : NULL;
    }
    table = t;
}

const struct kt_cpu_kernels *kt_cpu_kernels(void) {
    pthread_once(&table_once, build);
    return &table.k;
}

void kt_cpu_kernels_reinit(void) {
    pthread_once(&table_once, build);
    kt_cpu_env_reread();
    build();
}

kt_gemm_fn kt_cpu_gemm(enum kt_type type, int64_t ncols) {
    pthread_once(&table_once, build);
    return ncols > 1 || table.gemm_decode[type] ? table.gemm[type] : NULL;
}

kt_lanes_fn kt_cpu_lanes(enum kt_type type, int *bias) {
    pthread_once(&table_once, build);
    *bias = table.lanes_bias[type];
    return table.lanes[type];
}

const struct kt_lanes_packer *kt_cpu_lanes_packer(enum kt_type type) {
    pthread_once(&table_once, build);
    return table.packer[type];
}
