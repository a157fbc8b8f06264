/*
 * backend-impl.h - what a backend implements: device, buffer type, buffer and
 * backend as structs of function pointers, plus the registry's row type and
 * the allocator's private entry points that the scheduler builds on.
 * Included by backend.c, alloc.c, sched.c and each backend's own files only.
 */
#ifndef KT_BACKEND_IMPL_H
#define KT_BACKEND_IMPL_H

#include "kt-alloc.h"
#include "kt-backend.h"

/* ------------------------------------------------------------------ device */

struct kt_device_i {
    const char *(*get_name)(const struct kt_device *dev);
    const char *(*get_description)(const struct kt_device *dev);
    enum kt_device_type (*get_type)(const struct kt_device *dev);
    void (*get_memory)(const struct kt_device *dev, size_t *free, size_t *total);
    struct kt_buffer_type *(*get_buffer_type)(struct kt_device *dev); /* the device's default */
    struct kt_backend *(*init_backend)(struct kt_device *dev);        /* NULL + kt_set_error */
    /* optional: buffer types for weights besides the default, NULL-terminated */
    struct kt_buffer_type *const *(*get_extra_bufts)(struct kt_device *dev);
};

struct kt_device {
    struct kt_device_i iface;
    void *context;
};

/* ------------------------------------------------------------------ buffer type */

struct kt_buffer_type_i {
    const char *(*get_name)(const struct kt_buffer_type *buft);
    /* size may be 0 (an empty buffer); NULL + kt_set_error on failure */
    struct kt_buffer *(*alloc_buffer)(struct kt_buffer_type *buft, size_t size);
    size_t (*get_alignment)(const struct kt_buffer_type *buft);
    size_t (*get_max_size)(const struct kt_buffer_type *buft);                              /* optional: SIZE_MAX */
    size_t (*get_alloc_size)(const struct kt_buffer_type *buft, const struct kt_tensor *t); /* optional: kt_nbytes */
    bool (*is_host)(const struct kt_buffer_type *buft);                                     /* optional: false */
};

struct kt_buffer_type {
    struct kt_buffer_type_i iface;
    struct kt_device *device;
    void *context;
};

/* ------------------------------------------------------------------ buffer */

/* offset/size are bytes within the tensor's own data (t->data is inside the buffer). */
struct kt_buffer_i {
    void (*free_buffer)(struct kt_buffer *buf); /* optional: releases context and memory, not the struct */
    void *(*get_base)(const struct kt_buffer *buf);
    /* optional: called when a tensor (or view) is placed in the buffer */
    void (*init_tensor)(struct kt_buffer *buf, struct kt_tensor *t);
    void (*set_tensor)(struct kt_buffer *buf, struct kt_tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor)(struct kt_buffer *buf, const struct kt_tensor *t, void *data, size_t offset, size_t size);
    void (*memset_tensor)(struct kt_buffer *buf, struct kt_tensor *t, uint8_t value, size_t offset, size_t size);
    /* optional: dst lives in buf, src anywhere; return false to let the generic path copy */
    bool (*cpy_tensor)(struct kt_buffer *buf, const struct kt_tensor *src, struct kt_tensor *dst);
    void (*clear)(struct kt_buffer *buf, uint8_t value);
};

struct kt_buffer {
    struct kt_buffer_i iface;
    struct kt_buffer_type *buft;
    void *context;
    size_t size;
    enum kt_buffer_usage usage;
    void (*release)(void *data, const void *addr, size_t size); /* kt_buffer_set_release_callback */
    void *release_data;
};

/* A new buffer struct (malloc'd; kt_buffer_free frees it after iface.free_buffer). */
struct kt_buffer *kt_buffer_init(struct kt_buffer_type *buft, struct kt_buffer_i iface, void *context, size_t size);

/* ------------------------------------------------------------------ backend */

struct kt_backend_i {
    const char *(*get_name)(const struct kt_backend *b);
    void (*free)(struct kt_backend *b); /* frees the context and the struct */
    /* computes every node of gf whose inputs and outputs are in memory this backend reaches */
    enum kt_status (*graph_compute)(struct kt_backend *b, struct kt_cgraph *gf);
    bool (*supports_op)(const struct kt_backend *b, const struct kt_tensor *op);
    /* whether kernels of this backend can read and write memory of buft directly */
    bool (*supports_buft)(const struct kt_backend *b, const struct kt_buffer_type *buft);
    /* optional: the default buffer type when it differs from the device's */
    struct kt_buffer_type *(*get_default_buffer_type)(struct kt_backend *b);
    void (*synchronize)(struct kt_backend *b); /* optional: NULL for synchronous backends */
    /* optional: NULL for a backend without threads of its own (n_threads is checked already) */
    bool (*set_n_threads)(struct kt_backend *b, int n_threads);
    /* optional: NULL for a backend that cannot stop inside a graph */
    void (*set_abort_callback)(struct kt_backend *b, kt_abort_callback cb, void *data);
};

struct kt_backend {
    struct kt_backend_i iface;
    struct kt_device *device;
    void *context;
};

/* ------------------------------------------------------------------ registry rows */

/* One per backend built in (backend.c's table, which names each); each returns its static device. */
struct kt_device *kt_cpu_device(void);
#ifdef KT_USE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
struct kt_device *kt_cuda_device(void); /* NULL without a driver or device */
const char *kt_cuda_unavailable(void);  /* why kt_cuda_device() is NULL (NULL when it is not) */
#ifdef __cplusplus
}
#endif
#endif

/* ------------------------------------------------------------------ allocator internals */

/* Which tensors a plan places: called with roots (tensors that are not views) only.
 * The scheduler uses this to let one allocator per backend plan a shared graph
 * while consumer counts (liveness) come from every node of it. */
typedef bool (*kt_gallocr_owns_fn)(const struct kt_tensor *root, void *data);

/* Plan gf placing the roots owns() accepts (NULL: every root without memory or in
 * this allocator's buffer). assign=false only sizes (reserve); assign=true also grows
 * the buffer if needed and writes data/buffer into the tensors and their views. */
bool kt_gallocr_plan(struct kt_gallocr *galloc, struct kt_cgraph *gf, kt_gallocr_owns_fn owns, void *owns_data,
                     bool assign);
struct kt_buffer *kt_gallocr_get_buffer(const struct kt_gallocr *galloc);

/* The scheduler's last plan, for tests that check it: the node order every backend's
 * allocator planned (copies included), and backend i's allocator. */
struct kt_cgraph *kt_sched_plan_graph(struct kt_sched *sched);
struct kt_gallocr *kt_sched_gallocr(struct kt_sched *sched, int i);

/* Root of a view chain (t itself when it is not a view). */
static inline struct kt_tensor *kt_tensor_root(const struct kt_tensor *t) {
    return t->view_src ? t->view_src : (struct kt_tensor *)t;
}

#endif
