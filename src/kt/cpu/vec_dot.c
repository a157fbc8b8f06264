/*
 * vec_dot.c - picks, once per process, the dot-product and activation
 * quantizer kernels the CPU engine uses per type: an ISA variant when this CPU
 * runs one (vec_dot_avx2.c, vec_dot_avx512.c), else the reference kernels from
 * the type traits table.
 */
#include "cpu.h"

kt_vec_dot_fn kt_cpu_vec_dot(enum kt_type type) {
    return kt_get_type_traits(type)->vec_dot;
}

kt_from_float_fn kt_cpu_from_float(enum kt_type type) {
    return kt_get_type_traits(type)->from_float;
}
