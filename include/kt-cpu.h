/*
 * kt-cpu.h - the CPU backend: a compute engine with a persistent thread pool
 * and a planner that decides threads and work memory per node, and the CPU as
 * a kt backend (kt-backend.h). Code that runs on any device uses
 * kt-backend.h's registry and generic calls instead; this header is for tools,
 * tests and benchmarks that want the CPU by name.
 *
 *   struct kt_threadpool *tp = kt_threadpool_new(4);       // once
 *   struct kt_cplan plan = kt_graph_plan(gf, 4, tp);
 *   plan.work_data = malloc(plan.work_size);               // or an arena
 *   kt_graph_compute(gf, &plan);                           // many times
 *   kt_threadpool_free(tp);
 *
 * Results do not depend on the number of threads: work is split by output
 * rows / chunks, never inside one reduction.
 *
 * The CPU device offers one extra buffer type for weights (kt_dev_extra_bufts):
 * "CPU_REPACK". A matrix moved into it whose type has a compact 16-row layout
 * here (Q4_0, Q8_0, Q4_K, Q6_K on AVX-512 VNNI) is kept in that layout (within
 * 3% of its bytes) and stays readable where it was: mul_mat on it, or on a view
 * of whole 16-row groups, reads the groups, one sequential stream per thread,
 * with results bit for bit the same; every other op reads the data where they
 * were, so that memory must outlive the buffer (a weight changed afterwards
 * must be moved again). Every other tensor is copied as it is. One anonymous
 * allocation, in huge pages when large. KT_CPU_REPACK=off: the device offers
 * none.
 */
#ifndef KT_CPU_H
#define KT_CPU_H

#include "kt-backend.h"
#include "kt.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kt_threadpool;

/* A pool of n_threads - 1 workers; the caller's thread is thread 0. NULL on failure. */
struct kt_threadpool *kt_threadpool_new(int n_threads);
void kt_threadpool_free(struct kt_threadpool *tp);
int kt_threadpool_n_threads(const struct kt_threadpool *tp);

struct kt_cplan {
    size_t work_size;       /* bytes the caller provides in work_data */
    uint8_t *work_data;
    int n_threads;
    struct kt_threadpool *threadpool; /* NULL: compute creates a temporary pool */
    kt_abort_callback abort_callback;
    void *abort_callback_data;
};

struct kt_cplan kt_graph_plan(const struct kt_cgraph *gf, int n_threads, struct kt_threadpool *tp);
enum kt_status kt_graph_compute(struct kt_cgraph *gf, struct kt_cplan *plan);
/* Plan, carve the work buffer from ctx, compute (convenience for tests and tools). */
enum kt_status kt_graph_compute_with_ctx(struct kt_context *ctx, struct kt_cgraph *gf, int n_threads);

/* Whether the CPU engine has a kernel for this node (type combinations included). */
bool kt_cpu_supports_op(const struct kt_tensor *op);

/* Which SIMD paths this CPU can run ("avx512 vnni bf16 avx2 f16c ..."; also the CPU
 * device's description). */
const char *kt_cpu_features(void);

/* ---- the CPU as a backend (the same as kt_dev_init_backend of the "CPU" device) */
struct kt_backend *kt_backend_cpu_init(void);
bool kt_backend_is_cpu(const struct kt_backend *b);
/* The CPU device's default buffer type: aligned host memory. */
struct kt_buffer_type *kt_cpu_buffer_type(void);

#ifdef __cplusplus
}
#endif

#endif /* KT_CPU_H */
