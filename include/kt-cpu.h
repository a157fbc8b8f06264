/*
 * kt-cpu.h - the CPU compute engine: a persistent thread pool, a planner that
 * decides threads and work memory per node, and graph execution.
 *
 *   struct kt_threadpool *tp = kt_threadpool_new(4);       // once
 *   struct kt_cplan plan = kt_graph_plan(gf, 4, tp);
 *   plan.work_data = malloc(plan.work_size);               // or an arena
 *   kt_graph_compute(gf, &plan);                           // many times
 *   kt_threadpool_free(tp);
 *
 * Results do not depend on the number of threads: work is split by output
 * rows / chunks, never inside one reduction.
 */
#ifndef KT_CPU_H
#define KT_CPU_H

#include "kt.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kt_threadpool;

/* A pool of n_threads - 1 workers; the caller's thread is thread 0. NULL on failure. */
struct kt_threadpool *kt_threadpool_new(int n_threads);
void kt_threadpool_free(struct kt_threadpool *tp);
int kt_threadpool_n_threads(const struct kt_threadpool *tp);

/* Return true to stop a computation between nodes. */
typedef bool (*kt_abort_callback)(void *data);

struct kt_cplan {
    size_t work_size;       /* bytes the caller provides in work_data */
    uint8_t *work_data;
    int n_threads;
    struct kt_threadpool *threadpool; /* NULL: compute creates a temporary pool */
    kt_abort_callback abort_callback;
    void *abort_callback_data;
};

enum kt_status {
    KT_STATUS_SUCCESS = 0,
    KT_STATUS_FAILED = 1,  /* kt_last_error() says why */
    KT_STATUS_ABORTED = 2,
    KT_STATUS_ALLOC_FAILED = 3,
};

struct kt_cplan kt_graph_plan(const struct kt_cgraph *gf, int n_threads, struct kt_threadpool *tp);
enum kt_status kt_graph_compute(struct kt_cgraph *gf, struct kt_cplan *plan);
/* Plan, carve the work buffer from ctx, compute (convenience for tests and tools). */
enum kt_status kt_graph_compute_with_ctx(struct kt_context *ctx, struct kt_cgraph *gf, int n_threads);

/* Whether the CPU engine has a kernel for this node (type combinations included). */
bool kt_cpu_supports_op(const struct kt_tensor *op);

/* Weights copied out of a model file into memory the CPU reads fastest: each
 * listed tensor with matmul[i] set whose type has a compact 16-row layout here
 * (Q4_0, Q8_0, Q4_K, Q6_K on AVX-512 VNNI) goes into that layout (within 3% of
 * its bytes): mul_mat on it, or on a view of whole 16-row groups, reads the copy,
 * one sequential stream per thread, with results bit for bit the same; its data
 * stay where they were (other ops read them; a weight changed afterwards must be
 * repacked again). Every other listed tensor is copied as it is and its data
 * pointer moved to the copy (views of it must be re-pointed by the caller). One
 * anonymous allocation, in huge pages when large. release: the data lie in a
 * read-only file mapping whose pages may be dropped once copied (read back from
 * the file when touched), so memory holds one copy. KT_CPU_REPACK=off copies
 * nothing. NULL (with kt_last_error) only when memory runs out; free it after
 * the last use of the tensors. */
struct kt_cpu_repack;
struct kt_cpu_repack *kt_cpu_repack_weights(struct kt_tensor *const *weights, const bool *matmul, size_t n,
                                            bool release);
size_t kt_cpu_repack_size(const struct kt_cpu_repack *r);  /* bytes held */
size_t kt_cpu_repack_count(const struct kt_cpu_repack *r); /* tensors copied (packed or as they are) */
void kt_cpu_repack_free(struct kt_cpu_repack *r);

/* Which SIMD paths this CPU can run ("avx512 vnni bf16 avx2 f16c ..."). */
const char *kt_cpu_features(void);

#ifdef __cplusplus
}
#endif

#endif /* KT_CPU_H */
