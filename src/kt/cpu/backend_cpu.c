/*
 * backend_cpu.c - the CPU as a kt backend: its device, its buffer type (host
 * memory, aligned), and backend instances that each own a persistent thread
 * pool and a work buffer that only grows, so that steady-state computes
 * allocate nothing.
 *
 * An instance given an op filter stands in for a discrete device in tests of
 * the scheduler: it supports only the filtered ops, allocates from its own
 * buffer type that reports itself as not host, and reaches only that memory,
 * so that the scheduler really splits graphs and copies tensors across.
 */
#include "backend-impl.h"
#include "cpu.h"
#include "test_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CPU_ALIGN 64

/* ------------------------------------------------------------------ buffers */

static void *cpu_buf_base(const struct kt_buffer *buf) { return buf->context; }
static void cpu_buf_free(struct kt_buffer *buf) { free(buf->context); }

static void cpu_buf_set(struct kt_buffer *buf, struct kt_tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy((uint8_t *)t->data + offset, data, size);
}
static void cpu_buf_get(struct kt_buffer *buf, const struct kt_tensor *t, void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy(data, (const uint8_t *)t->data + offset, size);
}
static void cpu_buf_memset(struct kt_buffer *buf, struct kt_tensor *t, uint8_t value, size_t offset, size_t size) {
    (void)buf;
    memset((uint8_t *)t->data + offset, value, size);
}
/* Zeros for a large buffer (the KV cache) without touching its memory: the whole pages
 * inside it are handed back (kt_cpu_drop_pages; aligned_alloc's memory is private and
 * anonymous, so they read as zeros), the ends are cleared by hand. So a cache sized for
 * the whole context is resident only as far as it is used: `kiln run` on the 1.1B
 * Q4_K_M file, 16 tokens, peak RSS 704 -> 668 MiB, the 44 MiB cache of 2048 cells no
 * longer all touched. */
#define CLEAR_RELEASE_MIN ((size_t)1 << 20)

static void cpu_buf_clear(struct kt_buffer *buf, uint8_t value) {
    uint8_t *p = buf->context, *a, *b;
    const size_t n = buf->size;
    if (value == 0 && n >= CLEAR_RELEASE_MIN && kt_cpu_drop_pages(p, n, &a, &b)) {
        memset(p, 0, (size_t)(a - p));
        memset(b, 0, (size_t)(p + n - b));
        return;
    }
    memset(p, value, n);
}

static const struct kt_buffer_i cpu_buffer_i = {
    .free_buffer = cpu_buf_free,
    .get_base = cpu_buf_base,
    .set_tensor = cpu_buf_set,
    .get_tensor = cpu_buf_get,
    .memset_tensor = cpu_buf_memset,
    .clear = cpu_buf_clear,
};

static struct kt_buffer *cpu_alloc_buffer(struct kt_buffer_type *buft, size_t size) {
    /* aligned_alloc wants a multiple of the alignment; an empty buffer still gets one unit */
    size_t bytes = size ? (size + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN : CPU_ALIGN;
    if (bytes < size) {
        kt_set_error("kt cpu buffer: %zu bytes overflow", size);
        return NULL;
    }
    void *mem = aligned_alloc(CPU_ALIGN, bytes);
    if (!mem) {
        kt_set_error("kt cpu buffer: cannot allocate %zu bytes", size);
        return NULL;
    }
    struct kt_buffer *buf = kt_buffer_init(buft, cpu_buffer_i, mem, size);
    if (!buf) free(mem);
    return buf;
}

static size_t cpu_buft_alignment(const struct kt_buffer_type *buft) { return CPU_ALIGN; }
static bool cpu_buft_is_host(const struct kt_buffer_type *buft) { return true; }
static const char *cpu_buft_name(const struct kt_buffer_type *buft) { return "CPU"; }

/* The test stand-in's memory: the same bytes, but it says it is not the host's. */
static bool sim_buft_is_host(const struct kt_buffer_type *buft) { return false; }
static const char *sim_buft_name(const struct kt_buffer_type *buft) { return "CPU_isolated"; }

static struct kt_device cpu_device; /* defined below; the buffer type points at it */

static struct kt_buffer_type cpu_buft = {
    .iface = {.get_name = cpu_buft_name,
              .alloc_buffer = cpu_alloc_buffer,
              .get_alignment = cpu_buft_alignment,
              .is_host = cpu_buft_is_host},
    .device = &cpu_device,
};

/* ------------------------------------------------------------------ device */

static const char *cpu_dev_name(const struct kt_device *dev) { return "CPU"; }

static const char *cpu_dev_description(const struct kt_device *dev) {
    /* the CPU's SIMD paths: what decides the kernels we run */
    return kt_cpu_features();
}

static enum kt_device_type cpu_dev_type(const struct kt_device *dev) { return KT_DEVICE_TYPE_CPU; }

static void cpu_dev_memory(const struct kt_device *dev, size_t *free_mem, size_t *total) {
    long page = sysconf(_SC_PAGESIZE), n = sysconf(_SC_PHYS_PAGES), av = sysconf(_SC_AVPHYS_PAGES);
    *total = page > 0 && n > 0 ? (size_t)page * (size_t)n : 0;
    *free_mem = page > 0 && av > 0 ? (size_t)page * (size_t)av : 0;
}

static struct kt_buffer_type *cpu_dev_buffer_type(struct kt_device *dev) { return kt_cpu_buffer_type(); }
static struct kt_backend *cpu_dev_init_backend(struct kt_device *dev) { return kt_backend_cpu_init(); }

/* The weights' layout of the matrix kernels (repack.c), unless KT_CPU_REPACK=off. */
static struct kt_buffer_type *const *cpu_dev_extra_bufts(struct kt_device *dev) {
    static struct kt_buffer_type *list[2];
    list[0] = kt_cpu_env()->repack_off ? NULL : kt_cpu_repack_buffer_type();
    return list;
}

static struct kt_device cpu_device = {
    .iface = {.get_name = cpu_dev_name,
              .get_description = cpu_dev_description,
              .get_type = cpu_dev_type,
              .get_memory = cpu_dev_memory,
              .get_buffer_type = cpu_dev_buffer_type,
              .init_backend = cpu_dev_init_backend,
              .get_extra_bufts = cpu_dev_extra_bufts},
};

struct kt_device *kt_cpu_device(void) { return &cpu_device; }

struct kt_buffer_type *kt_cpu_buffer_type(void) { return &cpu_buft; }

/* ------------------------------------------------------------------ backend */

struct cpu_backend {
    int n_threads;
    struct kt_threadpool *tp; /* persistent: created with the instance, rebuilt on a thread-count change */
    uint8_t *work;            /* grows to the largest plan seen, reused across computes */
    size_t work_size;
    kt_abort_callback abort_cb;
    void *abort_data;
    bool (*filter)(const struct kt_tensor *op, void *data);
    void *filter_data;
    struct kt_buffer_type sim_buft; /* the isolated memory of a filtered instance: its buffers
                                       must be freed before the instance */
};

static const char *cpu_name(const struct kt_backend *b) {
    const struct cpu_backend *c = b->context;
    return c->filter ? "CPU (filtered)" : "CPU";
}

static void cpu_free(struct kt_backend *b) {
    struct cpu_backend *c = b->context;
    kt_threadpool_free(c->tp);
    free(c->work);
    free(c);
    free(b);
}

static enum kt_status cpu_graph_compute(struct kt_backend *b, struct kt_cgraph *gf) {
    struct cpu_backend *c = b->context;
    struct kt_cplan plan = kt_graph_plan(gf, c->n_threads, c->tp);
    if (plan.work_size > c->work_size) {
        uint8_t *w = aligned_alloc(CPU_ALIGN, (plan.work_size + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN);
        if (!w) {
            kt_set_error("kt cpu backend: cannot allocate %zu bytes of work memory", plan.work_size);
            return KT_STATUS_ALLOC_FAILED;
        }
        free(c->work);
        c->work = w;
        c->work_size = plan.work_size;
    }
    plan.work_data = plan.work_size ? c->work : NULL;
    plan.abort_callback = c->abort_cb;
    plan.abort_callback_data = c->abort_data;
    return kt_graph_compute(gf, &plan);
}

static bool cpu_supports_op(const struct kt_backend *b, const struct kt_tensor *op) {
    const struct cpu_backend *c = b->context;
    if (c->filter && op->op != KT_OP_NONE && !kt_is_view_op(op->op) && !c->filter(op, c->filter_data))
        return false;
    return kt_cpu_supports_op(op);
}

static bool cpu_supports_buft(const struct kt_backend *b, const struct kt_buffer_type *buft) {
    const struct cpu_backend *c = b->context;
    if (c->filter) return buft == &c->sim_buft;
    return kt_buft_is_host(buft);
}

static struct kt_buffer_type *cpu_default_buft(struct kt_backend *b) {
    struct cpu_backend *c = b->context;
    return c->filter ? &c->sim_buft : kt_cpu_buffer_type();
}

/* A new pool of n_threads (checked by the caller); the old one stays when it cannot start. */
static bool cpu_set_n_threads(struct kt_backend *b, int n_threads) {
    struct cpu_backend *c = b->context;
    if (n_threads == c->n_threads) return true;
    struct kt_threadpool *tp = kt_threadpool_new(n_threads);
    if (!tp) return false; /* kt_last_error says why */
    kt_threadpool_free(c->tp);
    c->tp = tp;
    c->n_threads = n_threads;
    return true;
}

static void cpu_set_abort_callback(struct kt_backend *b, kt_abort_callback cb, void *data) {
    struct cpu_backend *c = b->context;
    c->abort_cb = cb;
    c->abort_data = data;
}

static const struct kt_backend_i cpu_backend_i = {
    .get_name = cpu_name,
    .free = cpu_free,
    .graph_compute = cpu_graph_compute,
    .supports_op = cpu_supports_op,
    .supports_buft = cpu_supports_buft,
    .get_default_buffer_type = cpu_default_buft,
    .set_n_threads = cpu_set_n_threads,
    .set_abort_callback = cpu_set_abort_callback,
};

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 512 ? 512 : (int)n;
}

struct kt_backend *kt_backend_cpu_init(void) {
    struct kt_backend *b = calloc(1, sizeof *b);
    struct cpu_backend *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        kt_set_error("kt_backend_cpu_init: out of memory");
        return NULL;
    }
    (void)kt_cpu_kernels(); /* every kernel choice now, not on a node's first call */
    c->n_threads = default_threads();
    c->tp = kt_threadpool_new(c->n_threads);
    if (!c->tp) {
        free(b);
        free(c);
        return NULL;
    }
    c->sim_buft = (struct kt_buffer_type){
        .iface = {.get_name = sim_buft_name,
                  .alloc_buffer = cpu_alloc_buffer,
                  .get_alignment = cpu_buft_alignment,
                  .is_host = sim_buft_is_host},
        .device = kt_cpu_device(),
    };
    *b = (struct kt_backend){.iface = cpu_backend_i, .device = kt_cpu_device(), .context = c};
    return b;
}

bool kt_backend_is_cpu(const struct kt_backend *b) { return b && b->iface.graph_compute == cpu_graph_compute; }

void kt_backend_cpu_set_op_filter(struct kt_backend *b, bool (*filter)(const struct kt_tensor *op, void *data),
                                  void *data) {
    if (!kt_backend_is_cpu(b)) return;
    struct cpu_backend *c = b->context;
    c->filter = filter;
    c->filter_data = data;
}
