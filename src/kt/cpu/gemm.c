/*
 * gemm.c - the block mul_mat kernels for a weight type (gemm.h): only the one
 * whose arithmetic twins the dot kernel chosen for the type, so an ISA cap
 * (KT_CPU_ISA) or a CPU without the ISA turns block kernels off rather than
 * making the two paths disagree. kernels.c asks once per process.
 */

#include "cpu.h"
#include "gemm.h"
#include "vec_dot_isa.h"

static const struct {
    enum kt_type type;
    kt_vec_dot_fn dot; /* the vec_dot this kernel matches bit for bit */
    kt_gemm_fn gemm;
    /* also for one column (4 rows per pass): where it measured fewer instructions
     * than one vec_dot per row (bench_insns on bench_gemm 1 256 2048 1 TYPE 1:
     * q4_K 208219 -> 195881, f16 160606 -> 123972; q6_K 200493 -> 208195: not used) */
    bool decode;
} gemms[] = {
    {KT_TYPE_F16, kt_vec_dot_f16_avx512, kt_gemm_f16_f16_avx512, true},
    {KT_TYPE_COUNT, NULL, NULL, false},
};

kt_gemm_fn kt_cpu_pick_gemm(enum kt_type type, kt_vec_dot_fn dot, bool *decode) {
    for (size_t i = 0; gemms[i].gemm; i++)
        if (gemms[i].type == type && gemms[i].dot == dot) return *decode = gemms[i].decode, gemms[i].gemm;
    return NULL;
}

kt_lanes_fn kt_cpu_pick_lanes(enum kt_type type, kt_vec_dot_fn dot, int *bias) {
    if (type == KT_TYPE_Q4_0 && dot == kt_vec_dot_q4_0_q8_0_avx512) return *bias = 8, kt_lanes_q4_0_avx512;
    if (type == KT_TYPE_Q8_0 && dot == kt_vec_dot_q8_0_q8_0_avx512) return *bias = 128, kt_lanes_q8_0_avx512;
    if (type == KT_TYPE_Q4_K && dot == kt_vec_dot_q4_K_q8_K_avx512) return *bias = 0, kt_lanes_q4_K_avx512;
    if (type == KT_TYPE_Q6_K && dot == kt_vec_dot_q6_K_q8_K_avx512) return *bias = 0, kt_lanes_q6_K_avx512;
    return NULL;
}

const struct kt_lanes_packer *kt_cpu_pick_lanes_packer(kt_lanes_fn lanes) {
    if (lanes == kt_lanes_q4_0_avx512) return &kt_lanes_packer_q4_0;
    if (lanes == kt_lanes_q8_0_avx512) return &kt_lanes_packer_q8_0;
    if (lanes == kt_lanes_q4_K_avx512) return &kt_lanes_packer_q4_K;
    if (lanes == kt_lanes_q6_K_avx512) return &kt_lanes_packer_q6_K;
    return NULL;
}
