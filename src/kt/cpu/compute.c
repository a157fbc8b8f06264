/*
 * compute.c - the CPU engine: a persistent thread pool, the planner (work
 * memory per node), and graph execution. All threads walk the same node list;
 * each enters a node's kernel with its index and does its share. A barrier
 * separates two nodes only when the second touches memory the nodes since the
 * last barrier wrote (or writes memory they read), or when both use the shared
 * work buffer and chunk counter: independent neighbours such as the RoPE of q
 * and of k, or the stores of k and v into the cache, run without one, while the
 * q, k and v projections (mul_mat, which converts its activations into the work
 * buffer) each wait for the one before.
 */
#include "cpu.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ op table */

static size_t mul_mat_work(const struct kt_tensor *dst, int n_threads) { return kt_cpu_mul_mat_work_size(dst, n_threads); }

const struct kt_cpu_op kt_cpu_ops[KT_OP_COUNT] = {
    /* mixtures of experts */
    [KT_OP_MUL_MAT_ID] = {.fn = kt_cpu_mul_mat_id, .work_size = kt_cpu_mul_mat_id_work_size,
                          .supports = kt_cpu_mul_mat_id_supports},
    [KT_OP_TOP_K] = {.fn = kt_cpu_top_k},
    [KT_OP_SWIGLU_OAI] = {.fn = kt_cpu_swiglu_oai},
    [KT_OP_DUP] = {.fn = kt_cpu_dup, .supports = kt_cpu_cpy_supports},
    [KT_OP_CONT] = {.fn = kt_cpu_dup, .supports = kt_cpu_cpy_supports},
    [KT_OP_CPY] = {.fn = kt_cpu_dup, .supports = kt_cpu_cpy_supports},
    [KT_OP_ADD] = {.fn = kt_cpu_add},
    [KT_OP_SUB] = {.fn = kt_cpu_sub},
    [KT_OP_MUL] = {.fn = kt_cpu_mul},
    [KT_OP_DIV] = {.fn = kt_cpu_div},
    [KT_OP_SCALE] = {.fn = kt_cpu_scale},
    [KT_OP_SQR] = {.fn = kt_cpu_sqr},
    [KT_OP_SQRT] = {.fn = kt_cpu_sqrt},
    [KT_OP_SUM_ROWS] = {.fn = kt_cpu_sum_rows},
    [KT_OP_MEAN] = {.fn = kt_cpu_mean},
    [KT_OP_ARGMAX] = {.fn = kt_cpu_argmax},
    [KT_OP_NORM] = {.fn = kt_cpu_norm},
    [KT_OP_RMS_NORM] = {.fn = kt_cpu_rms_norm},
    [KT_OP_MUL_MAT] = {.fn = kt_cpu_mul_mat, .work_size = mul_mat_work, .supports = kt_cpu_mul_mat_supports},
    [KT_OP_ROPE] = {.fn = kt_cpu_rope},
    [KT_OP_SOFT_MAX] = {.fn = kt_cpu_soft_max},
    [KT_OP_DIAG_MASK_INF] = {.fn = kt_cpu_diag_mask_inf},
    [KT_OP_SILU] = {.fn = kt_cpu_silu},
    [KT_OP_GELU] = {.fn = kt_cpu_gelu},
    [KT_OP_RELU] = {.fn = kt_cpu_relu},
    [KT_OP_SWIGLU] = {.fn = kt_cpu_swiglu},
    [KT_OP_CONCAT] = {.fn = kt_cpu_concat},
    [KT_OP_GET_ROWS] = {.fn = kt_cpu_get_rows},
    [KT_OP_ATTN] = {.fn = kt_cpu_attn, .work_size = kt_cpu_attn_work_size},
    [KT_OP_GEGLU] = {.fn = kt_cpu_geglu},
    [KT_OP_SOFTCAP] = {.fn = kt_cpu_softcap},
    /* RESHAPE, VIEW, PERMUTE, TRANSPOSE: nothing to compute */
};

bool kt_cpu_supports_op(const struct kt_tensor *op) {
    if (op->op == KT_OP_NONE || kt_is_view_op(op->op)) return true;
    if ((unsigned)op->op >= KT_OP_COUNT || !kt_cpu_ops[op->op].fn) return false;
    return !kt_cpu_ops[op->op].supports || kt_cpu_ops[op->op].supports(op);
}

/* ------------------------------------------------------------------ thread pool */

struct kt_threadpool {
    int n_threads;
    pthread_t *workers;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int generation; /* bumped (under mu) to start a computation */
    bool stop;

    /* the computation in progress */
    struct kt_cgraph *gf;
    struct kt_cplan *plan;
    int n_active;   /* threads taking part (<= n_threads) */
    atomic_int n_done;
    /* the barrier (counted from 0 in this computation) after which every thread stops,
     * -1: none. Thread 0 sets it before entering that barrier; a thread reads it after
     * each barrier and stops once it has passed that one, so a worker still between the
     * barriers before cannot leave early and strand the others at the next. */
    atomic_int abort_at;

    /* barrier: the last thread to arrive bumps `passed` */
    atomic_int n_arrived;
    atomic_int n_passed;
    atomic_int n_sleepers; /* waiters blocked in the kernel on n_passed */
    /* dynamic work: chunk counter of the node in progress */
    atomic_int chunk;
    /* per thread (cpu.h): its share of the node's tiles still to take, first | end << 32 */
    struct share *share;
    struct prof *prof; /* per thread, with KT_CPU_PROFILE=1 */
    long graphs;
};

struct share {
    _Alignas(64) _Atomic uint64_t left;
};

/* KT_CPU_PROFILE=1: per thread, the time spent in each op (mul_mat by weight type)
 * and waiting at barriers, printed per graph when the pool is freed. A node's time
 * excludes the barriers inside it (mul_mat's), which count as barriers. */
#define PROF_SLOTS (KT_OP_COUNT + KT_TYPE_COUNT)
struct prof {
    _Alignas(64) double ns[PROF_SLOTS];
    long n[PROF_SLOTS];
    double bar_ns;
    long bar_n;
};

struct worker_arg {
    struct kt_threadpool *tp;
    int ith;
};

static void cpu_relax(unsigned *spins) {
    if (++*spins > 2000) {
        sched_yield(); /* a shared machine: do not starve whoever holds our other core */
    } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

/* Sleep until *addr != val (spurious wake-ups are fine: callers re-check). */
static void wait_change(atomic_int *addr, int val) {
#if defined(__linux__)
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)addr;
    (void)val;
    sched_yield();
#endif
}

static void wake_all(atomic_int *addr) {
#if defined(__linux__)
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Spin briefly (a barrier is usually a few microseconds away), then sleep: on a
 * machine with more runnable threads than cores a spinning waiter would take the
 * core from the very thread it waits for. */
#define BARRIER_SPINS 2000

static void barrier_wait(struct kt_threadpool *tp) {
    int n = tp->n_active;
    if (n == 1) return;
    int passed = atomic_load(&tp->n_passed);
    if (atomic_fetch_add(&tp->n_arrived, 1) == n - 1) {
        atomic_store(&tp->n_arrived, 0);
        atomic_fetch_add(&tp->n_passed, 1);
        if (atomic_load(&tp->n_sleepers) > 0) wake_all(&tp->n_passed);
        return;
    }
    for (int i = 0; i < BARRIER_SPINS; i++) {
        if (atomic_load_explicit(&tp->n_passed, memory_order_acquire) != passed) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    /* seq_cst: the releaser either sees this sleeper or this sleeper sees the release */
    atomic_fetch_add(&tp->n_sleepers, 1);
    while (atomic_load(&tp->n_passed) == passed) wait_change(&tp->n_passed, passed);
    atomic_fetch_sub(&tp->n_sleepers, 1);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The barrier, timed per thread under KT_CPU_PROFILE. */
static void barrier(struct kt_threadpool *tp, int ith) {
    if (!tp->prof) {
        barrier_wait(tp);
        return;
    }
    const double t0 = now_ns();
    barrier_wait(tp);
    tp->prof[ith].bar_ns += now_ns() - t0;
    tp->prof[ith].bar_n++;
}

void kt_cpu_barrier(const struct kt_compute_params *p) { barrier(p->tp, p->ith); }

int kt_cpu_chunk_next(const struct kt_compute_params *p) {
    return atomic_fetch_add_explicit(&p->tp->chunk, 1, memory_order_relaxed);
}

void kt_cpu_chunk_reset(const struct kt_compute_params *p) {
    atomic_store_explicit(&p->tp->chunk, p->nth, memory_order_relaxed);
}

void kt_cpu_share_init(const struct kt_compute_params *p, int64_t n) {
    const uint64_t first = (uint64_t)(n * p->ith / p->nth), end = (uint64_t)(n * (p->ith + 1) / p->nth);
    atomic_store_explicit(&p->tp->share[p->ith].left, first | end << 32, memory_order_relaxed);
}

int64_t kt_cpu_share_next(const struct kt_compute_params *p) {
    for (int k = 0; k < p->nth; k++) {
        struct share *sh = &p->tp->share[(p->ith + k) % p->nth];
        uint64_t v = atomic_load_explicit(&sh->left, memory_order_relaxed);
        for (;;) {
            const uint64_t first = v & 0xffffffffu, end = v >> 32;
            if (first >= end) break;
            /* the owner takes from the front, the others from the back */
            const uint64_t nv = k == 0 ? (first + 1) | end << 32 : first | (end - 1) << 32;
            if (atomic_compare_exchange_weak_explicit(&sh->left, &v, nv, memory_order_relaxed, memory_order_relaxed))
                return (int64_t)(k == 0 ? first : end - 1);
        }
    }
    return -1;
}

/* ---- dependency tracking for barrier elision */

struct range {
    const uint8_t *lo, *hi;
};

#define MAX_PENDING 24

struct pending {
    int n_w, n_r;
    bool work; /* a node since the last barrier used the work buffer / chunk counter */
    struct range w[MAX_PENDING], r[MAX_PENDING];
};

static struct range tensor_range(const struct kt_tensor *t) {
    const uint8_t *p = t->data;
    return (struct range){p, p + kt_nbytes(t)};
}

static bool overlaps(struct range a, const struct range *list, int n) {
    for (int i = 0; i < n; i++)
        if (a.lo < list[i].hi && list[i].lo < a.hi) return true;
    return false;
}

/* Whether node must wait for the nodes run since the last barrier. Deterministic
 * (every thread decides the same), conservative when the lists are full. */
static bool needs_barrier(const struct pending *pd, const struct kt_tensor *node, bool uses_work) {
    if (pd->n_w == 0) return false;
    /* the shared work buffer and chunk counter belong to one node at a time */
    if (uses_work && pd->work) return true;
    if (pd->n_w >= MAX_PENDING || pd->n_r >= MAX_PENDING - KT_MAX_SRC) return true;
    struct range out = tensor_range(node);
    if (overlaps(out, pd->w, pd->n_w) || overlaps(out, pd->r, pd->n_r)) return true;
    for (int i = 0; i < KT_MAX_SRC; i++) {
        const struct kt_tensor *s = node->src[i];
        if (s && s->data && overlaps(tensor_range(s), pd->w, pd->n_w)) return true;
    }
    return false;
}

static void note_node(struct pending *pd, const struct kt_tensor *node, bool uses_work) {
    pd->work |= uses_work;
    if (pd->n_w < MAX_PENDING) pd->w[pd->n_w++] = tensor_range(node);
    for (int i = 0; i < KT_MAX_SRC; i++) {
        const struct kt_tensor *s = node->src[i];
        if (s && s->data && pd->n_r < MAX_PENDING) pd->r[pd->n_r++] = tensor_range(s);
    }
}

/* Every thread runs this over the whole graph. */
static void run_graph(struct kt_threadpool *tp, int ith) {
    struct kt_cgraph *gf = tp->gf;
    struct kt_cplan *plan = tp->plan;
    struct kt_compute_params params = {
        .ith = ith, .nth = tp->n_active, .wsize = plan->work_size, .wdata = plan->work_data, .tp = tp};
    struct pending pd = {0};
    int n_barriers = 0;
    for (int i = 0; i < gf->n_nodes; i++) {
        struct kt_tensor *node = gf->nodes[i];
        const struct kt_cpu_op *op = &kt_cpu_ops[node->op];
        if (!op->fn || kt_nelements(node) == 0) continue;
        const bool uses_work = op->work_size != NULL;
        if (needs_barrier(&pd, node, uses_work)) {
            if (ith == 0 && plan->abort_callback && plan->abort_callback(plan->abort_callback_data))
                atomic_store(&tp->abort_at, n_barriers);
            barrier(tp, ith);
            pd.n_w = pd.n_r = 0;
            pd.work = false;
            const int at = atomic_load(&tp->abort_at);
            if (at >= 0 && at <= n_barriers) return;
            n_barriers++;
        }
        struct prof *pr = tp->prof ? &tp->prof[ith] : NULL;
        const double t0 = pr ? now_ns() : 0, b0 = pr ? pr->bar_ns : 0;
        if (op->single_thread) {
            if (ith == 0) {
                struct kt_compute_params one = params;
                one.ith = 0;
                one.nth = 1;
                op->fn(&one, node);
            }
        } else {
            op->fn(&params, node);
        }
        if (pr) {
            const int slot = node->op == KT_OP_MUL_MAT ? KT_OP_COUNT + node->src[0]->type : node->op;
            pr->ns[slot] += now_ns() - t0 - (pr->bar_ns - b0);
            pr->n[slot]++;
        }
        note_node(&pd, node, uses_work);
    }
    barrier(tp, ith);
}

static void *worker_main(void *p) {
    struct worker_arg *arg = p;
    struct kt_threadpool *tp = arg->tp;
    int ith = arg->ith;
    free(arg);
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&tp->mu);
        while (tp->generation == seen && !tp->stop) pthread_cond_wait(&tp->cv, &tp->mu);
        seen = tp->generation;
        bool stop = tp->stop;
        bool active = ith < tp->n_active;
        pthread_mutex_unlock(&tp->mu);
        if (stop) break;
        if (active) run_graph(tp, ith);
        atomic_fetch_add_explicit(&tp->n_done, 1, memory_order_release);
    }
    return NULL;
}

struct kt_threadpool *kt_threadpool_new(int n_threads) {
    if (n_threads < 1 || n_threads > 512) {
        kt_set_error("kt_threadpool_new: %d threads (1..512 allowed)", n_threads);
        return NULL;
    }
    struct kt_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) {
        kt_set_error("kt_threadpool_new: out of memory");
        return NULL;
    }
    tp->n_threads = n_threads;
    tp->share = aligned_alloc(_Alignof(struct share), (size_t)n_threads * sizeof(struct share));
    if (!tp->share) {
        free(tp);
        kt_set_error("kt_threadpool_new: out of memory");
        return NULL;
    }
    if (kt_cpu_env()->profile)
        tp->prof = aligned_alloc(_Alignof(struct prof), (size_t)n_threads * sizeof(struct prof));
    if (tp->prof) memset(tp->prof, 0, (size_t)n_threads * sizeof(struct prof));
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    if (n_threads > 1) {
        tp->workers = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!tp->workers) {
            kt_threadpool_free(tp);
            kt_set_error("kt_threadpool_new: out of memory");
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *arg = malloc(sizeof *arg);
        if (arg) *arg = (struct worker_arg){tp, i};
        if (!arg || pthread_create(&tp->workers[i - 1], NULL, worker_main, arg) != 0) {
            free(arg);
            tp->n_threads = i; /* free joins the ones started */
            kt_threadpool_free(tp);
            kt_set_error("kt_threadpool_new: cannot start thread %d", i);
            return NULL;
        }
    }
    return tp;
}

/* The profile per graph computed: ms per op and thread, calls, barrier waits. */
static void print_profile(const struct kt_threadpool *tp) {
    if (!tp->prof || tp->graphs == 0) return;
    const double g = (double)tp->graphs;
    fprintf(stderr, "kt cpu profile: %ld graphs, %d threads; per graph: ms per thread, calls\n", tp->graphs,
            tp->n_threads);
    for (int s = 0; s < PROF_SLOTS; s++) {
        if (!tp->prof[0].n[s]) continue;
        fprintf(stderr, "  %-8s %-6s", s < KT_OP_COUNT ? kt_op_name((enum kt_op)s) : "MUL_MAT",
                s < KT_OP_COUNT ? "" : kt_type_name((enum kt_type)(s - KT_OP_COUNT)));
        for (int t = 0; t < tp->n_threads; t++) fprintf(stderr, " %8.3f", tp->prof[t].ns[s] / g * 1e-6);
        fprintf(stderr, " %6.0f\n", (double)tp->prof[0].n[s] / g);
    }
    fprintf(stderr, "  %-15s", "barrier waits");
    for (int t = 0; t < tp->n_threads; t++) fprintf(stderr, " %8.3f", tp->prof[t].bar_ns / g * 1e-6);
    fprintf(stderr, " %6.0f\n", (double)tp->prof[0].bar_n / g);
}

void kt_threadpool_free(struct kt_threadpool *tp) {
    if (!tp) return;
    print_profile(tp);
    pthread_mutex_lock(&tp->mu);
    tp->stop = true;
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n_threads; i++)
        if (tp->workers) pthread_join(tp->workers[i - 1], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->workers);
    free(tp->share);
    free(tp->prof);
    free(tp);
}

int kt_threadpool_n_threads(const struct kt_threadpool *tp) { return tp->n_threads; }

/* ------------------------------------------------------------------ plan and compute */

struct kt_cplan kt_graph_plan(const struct kt_cgraph *gf, int n_threads, struct kt_threadpool *tp) {
    if (n_threads < 1) n_threads = 1;
    if (tp && n_threads > tp->n_threads) n_threads = tp->n_threads;
    size_t work = 0;
    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *node = gf->nodes[i];
        const struct kt_cpu_op *op = &kt_cpu_ops[node->op];
        if (op->work_size) {
            size_t w = op->work_size(node, n_threads);
            if (w > work) work = w;
        }
    }
    return (struct kt_cplan){.work_size = work, .n_threads = n_threads, .threadpool = tp};
}

static bool check_graph(const struct kt_cgraph *gf, const struct kt_cplan *plan) {
    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *node = gf->nodes[i];
        if (!kt_cpu_supports_op(node)) {
            kt_set_error("kt cpu: no kernel for %s of '%s' (%s)", kt_op_name(node->op), node->name,
                         kt_type_name(node->type));
            return false;
        }
        if (kt_is_view_op(node->op)) continue;
        if (!node->data && kt_nelements(node) > 0) {
            kt_set_error("kt cpu: '%s' (%s) has no memory", node->name, kt_op_name(node->op));
            return false;
        }
        for (int j = 0; j < KT_MAX_SRC; j++)
            if (node->src[j] && !node->src[j]->data && kt_nelements(node->src[j]) > 0) {
                kt_set_error("kt cpu: input '%s' of '%s' has no memory", node->src[j]->name, node->name);
                return false;
            }
    }
    if (plan->work_size && !plan->work_data) {
        kt_set_error("kt cpu: the plan needs %zu bytes of work memory and has none", plan->work_size);
        return false;
    }
    return true;
}

enum kt_status kt_graph_compute(struct kt_cgraph *gf, struct kt_cplan *plan) {
    if (!check_graph(gf, plan)) return KT_STATUS_FAILED;
    struct kt_threadpool *tp = plan->threadpool;
    bool own = false;
    if (!tp) {
        tp = kt_threadpool_new(plan->n_threads);
        if (!tp) return KT_STATUS_FAILED;
        own = true;
    }
    int n = plan->n_threads < 1 ? 1 : plan->n_threads > tp->n_threads ? tp->n_threads : plan->n_threads;
    tp->gf = gf;
    tp->plan = plan;
    tp->graphs++;
    tp->n_active = n;
    atomic_store(&tp->abort_at, -1);
    atomic_store(&tp->n_done, 0);
    atomic_store(&tp->n_arrived, 0);
    if (tp->n_threads > 1) {
        pthread_mutex_lock(&tp->mu);
        tp->generation++;
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
    run_graph(tp, 0);
    /* wait until every worker has left this computation before the next one reuses the pool */
    unsigned spins = 0;
    while (atomic_load_explicit(&tp->n_done, memory_order_acquire) < tp->n_threads - 1) cpu_relax(&spins);
    const bool aborted = atomic_load(&tp->abort_at) >= 0;
    if (own) kt_threadpool_free(tp);
    if (aborted) {
        kt_set_error("kt cpu: computation aborted by the callback");
        return KT_STATUS_ABORTED;
    }
    return KT_STATUS_SUCCESS;
}

enum kt_status kt_graph_compute_with_ctx(struct kt_context *ctx, struct kt_cgraph *gf, int n_threads) {
    struct kt_cplan plan = kt_graph_plan(gf, n_threads, NULL);
    if (plan.work_size) {
        plan.work_data = kt_alloc_bytes(ctx, plan.work_size);
        if (!plan.work_data) return KT_STATUS_ALLOC_FAILED;
    }
    return kt_graph_compute(gf, &plan);
}
