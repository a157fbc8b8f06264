/*
 * backend.c - generic dispatch over the backend interfaces (backend-impl.h):
 * the registry of built-in devices, buffers and tensor data access through
 * them, copies across buffers, and placing a context's tensors in a buffer or
 * over memory the caller owns (a file mapping, zero-copy).
 */
#include "backend-impl.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ registry */

/* One row per backend built in, by priority; a row's device is NULL when absent (a
 * CUDA build on a machine without a driver or GPU). The CPU comes last: the fallback. */
static const struct {
    const char *name; /* llama-bench's backend name */
    struct kt_device *(*device)(void);
} registry[] = {
#ifdef KT_USE_CUDA
    {"CUDA", kt_cuda_device},
#endif
    {"CPU", kt_cpu_device},
};
#define N_REGISTRY (sizeof registry / sizeof registry[0])

/* The i-th present device, in registry order. */
static struct kt_device *present(size_t i) {
    for (size_t r = 0; r < N_REGISTRY; r++) {
        struct kt_device *d = registry[r].device();
        if (d && i-- == 0) return d;
    }
    return NULL;
}

const char *kt_dev_backend_name(const struct kt_device *dev) {
    for (size_t r = 0; r < N_REGISTRY; r++)
        if (dev && registry[r].device() == dev) return registry[r].name;
    return "?";
}

size_t kt_dev_count(void) {
    size_t n = 0;
    while (present(n)) n++;
    return n;
}

struct kt_device *kt_dev_get(size_t i) { return present(i); }

struct kt_device *kt_dev_by_name(const char *name) {
    if (!name) return NULL;
    struct kt_device *d;
    for (size_t i = 0; (d = present(i)) != NULL; i++)
        if (!strcmp(kt_dev_name(d), name)) return d;
    return NULL;
}

struct kt_device *kt_dev_by_type(enum kt_device_type type) {
    struct kt_device *d;
    for (size_t i = 0; (d = present(i)) != NULL; i++)
        if (kt_dev_type(d) == type) return d;
    return NULL;
}

const char *kt_dev_unavailable(enum kt_device_type type) {
    if (kt_dev_by_type(type)) return NULL;
    if (type != KT_DEVICE_TYPE_GPU) return "no such device";
#ifdef KT_USE_CUDA
    return kt_cuda_unavailable();
#else
    return "this build has no GPU backend (configure with -DKILN_CUDA=ON)";
#endif
}

/* ------------------------------------------------------------------ device */

const char *kt_dev_name(const struct kt_device *dev) { return dev->iface.get_name(dev); }
const char *kt_dev_description(const struct kt_device *dev) { return dev->iface.get_description(dev); }
enum kt_device_type kt_dev_type(const struct kt_device *dev) { return dev->iface.get_type(dev); }

void kt_dev_memory(const struct kt_device *dev, size_t *free, size_t *total) {
    size_t f = 0, t = 0;
    dev->iface.get_memory(dev, &f, &t);
    if (free) *free = f;
    if (total) *total = t;
}

struct kt_buffer_type *kt_dev_buffer_type(struct kt_device *dev) { return dev->iface.get_buffer_type(dev); }

struct kt_buffer_type *const *kt_dev_extra_bufts(struct kt_device *dev) {
    static struct kt_buffer_type *const none[] = {NULL};
    return dev->iface.get_extra_bufts ? dev->iface.get_extra_bufts(dev) : none;
}
struct kt_backend *kt_dev_init_backend(struct kt_device *dev) { return dev->iface.init_backend(dev); }

/* ------------------------------------------------------------------ buffer type */

const char *kt_buft_name(const struct kt_buffer_type *buft) { return buft->iface.get_name(buft); }

struct kt_buffer *kt_buft_alloc_buffer(struct kt_buffer_type *buft, size_t size) {
    if (size > kt_buft_max_size(buft)) {
        kt_set_error("%s: %zu bytes exceed the buffer type's maximum of %zu", kt_buft_name(buft), size,
                     kt_buft_max_size(buft));
        return NULL;
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t kt_buft_alignment(const struct kt_buffer_type *buft) { return buft->iface.get_alignment(buft); }

size_t kt_buft_max_size(const struct kt_buffer_type *buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

bool kt_buft_is_host(const struct kt_buffer_type *buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

size_t kt_buft_alloc_size(const struct kt_buffer_type *buft, const struct kt_tensor *t) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : kt_nbytes(t);
}

struct kt_device *kt_buft_device(const struct kt_buffer_type *buft) { return buft->device; }

/* ------------------------------------------------------------------ buffer */

struct kt_buffer *kt_buffer_init(struct kt_buffer_type *buft, struct kt_buffer_i iface, void *context, size_t size) {
    struct kt_buffer *buf = malloc(sizeof *buf);
    if (!buf) {
        kt_set_error("kt buffer: out of memory");
        return NULL;
    }
    *buf = (struct kt_buffer){.iface = iface, .buft = buft, .context = context, .size = size};
    return buf;
}

void kt_buffer_free(struct kt_buffer *buf) {
    if (!buf) return;
    if (buf->iface.free_buffer) buf->iface.free_buffer(buf);
    free(buf);
}

void *kt_buffer_base(const struct kt_buffer *buf) { return buf->size ? buf->iface.get_base(buf) : NULL; }
size_t kt_buffer_size(const struct kt_buffer *buf) { return buf->size; }
void kt_buffer_clear(struct kt_buffer *buf, uint8_t value) {
    if (buf->size) buf->iface.clear(buf, value);
}
void kt_buffer_set_usage(struct kt_buffer *buf, enum kt_buffer_usage usage) { buf->usage = usage; }
enum kt_buffer_usage kt_buffer_get_usage(const struct kt_buffer *buf) { return buf->usage; }
struct kt_buffer_type *kt_buffer_get_type(const struct kt_buffer *buf) { return buf->buft; }
bool kt_buffer_is_host(const struct kt_buffer *buf) { return kt_buft_is_host(buf->buft); }

/* ---- memory the caller owns */

static void *host_ptr_base(const struct kt_buffer *buf) { return buf->context; }

static void host_set(struct kt_buffer *buf, struct kt_tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy((uint8_t *)t->data + offset, data, size);
}
static void host_get(struct kt_buffer *buf, const struct kt_tensor *t, void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy(data, (const uint8_t *)t->data + offset, size);
}
static void host_memset(struct kt_buffer *buf, struct kt_tensor *t, uint8_t value, size_t offset, size_t size) {
    (void)buf;
    memset((uint8_t *)t->data + offset, value, size);
}
static void host_clear(struct kt_buffer *buf, uint8_t value) { memset(buf->context, value, buf->size); }

struct kt_buffer *kt_buffer_from_host_ptr(void *ptr, size_t size) {
    if (!ptr || !size) {
        kt_set_error("kt_buffer_from_host_ptr: no memory given");
        return NULL;
    }
    /* No free_buffer: the memory stays the caller's (a read-only mapping is never written by kt
     * unless the caller asks, e.g. with kt_tensor_set). */
    struct kt_buffer_i iface = {.get_base = host_ptr_base,
                                .set_tensor = host_set,
                                .get_tensor = host_get,
                                .memset_tensor = host_memset,
                                .clear = host_clear};
    struct kt_buffer *buf = kt_buffer_init(kt_dev_buffer_type(kt_cpu_device()), iface, ptr, size);
    if (buf) buf->usage = KT_BUFFER_USAGE_WEIGHTS;
    return buf;
}

void kt_buffer_set_release_callback(struct kt_buffer *buf, void (*fn)(void *data, const void *addr, size_t size),
                                    void *data) {
    buf->release = fn;
    buf->release_data = data;
}

static bool in_buffer(const struct kt_buffer *buf, const void *addr, size_t size) {
    const uint8_t *base = kt_buffer_base(buf), *p = addr;
    if (!base || p < base) return false;
    size_t off = (size_t)(p - base);
    return off <= buf->size && size <= buf->size - off;
}

bool kt_buffer_bind_tensor(struct kt_buffer *buf, struct kt_tensor *t, void *addr) {
    if (!buf || !t) {
        kt_set_error("kt_buffer_bind_tensor: no buffer or tensor");
        return false;
    }
    if (t->view_src) {
        kt_set_error("kt_buffer_bind_tensor: '%s' is a view (bind its source)", t->name);
        return false;
    }
    if (!in_buffer(buf, addr, kt_nbytes(t))) {
        kt_set_error("kt_buffer_bind_tensor: '%s' (%zu bytes) does not fit in the buffer at that address", t->name,
                     kt_nbytes(t));
        return false;
    }
    t->data = addr;
    t->buffer = buf;
    if (buf->iface.init_tensor) buf->iface.init_tensor(buf, t);
    return true;
}

/* ------------------------------------------------------------------ context tensors */

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* One new buffer of buft for the roots of ctx that select() accepts (NULL: those without
 * memory). A root that had memory (a host mapping, another buffer) is copied from there;
 * views follow their source into the buffer, and views made before their source had
 * memory follow it now. */
typedef bool (*kt_select_fn)(const struct kt_tensor *t, void *data);

static bool chosen(const struct kt_tensor *t, kt_select_fn select, void *data) {
    return !t->view_src && (select ? select(t, data) : !t->data);
}

static struct kt_buffer *place_ctx_tensors(struct kt_context *ctx, struct kt_buffer_type *buft, kt_select_fn select,
                                           void *data) {
    size_t align = kt_buft_alignment(buft), total = 0;
    for (struct kt_tensor *t = kt_get_first_tensor(ctx); t; t = kt_get_next_tensor(ctx, t)) {
        if (!chosen(t, select, data)) continue;
        size_t sz = align_up(kt_buft_alloc_size(buft, t), align);
        if (sz > SIZE_MAX - total) {
            kt_set_error("kt_backend_alloc_ctx_tensors: sizes overflow");
            return NULL;
        }
        total += sz;
    }
    struct kt_buffer *buf = kt_buft_alloc_buffer(buft, total);
    if (!buf) return NULL;
    struct kt_tallocr ta = kt_tallocr_new(buf);
    for (struct kt_tensor *t = kt_get_first_tensor(ctx); t; t = kt_get_next_tensor(ctx, t)) {
        if (!chosen(t, select, data)) continue;
        struct kt_tensor was = *t; /* where its bytes are now, if anywhere */
        t->data = NULL;
        t->buffer = NULL;
        if (!kt_tallocr_alloc(&ta, t) || (was.data && !kt_tensor_copy(&was, t))) {
            kt_buffer_free(buf);
            return NULL;
        }
        if (was.data && was.buffer && was.buffer->release)
            was.buffer->release(was.buffer->release_data, was.data, kt_nbytes(&was));
    }
    for (struct kt_tensor *t = kt_get_first_tensor(ctx); t; t = kt_get_next_tensor(ctx, t)) {
        if (t->view_src && ((!t->data && t->view_src->data) || t->view_src->buffer == buf)) {
            t->data = (uint8_t *)t->view_src->data + t->view_offs;
            t->buffer = t->view_src->buffer;
            if (t->buffer && t->buffer->iface.init_tensor) t->buffer->iface.init_tensor(t->buffer, t);
        }
    }
    return buf;
}

struct kt_buffer *kt_backend_alloc_ctx_tensors(struct kt_context *ctx, struct kt_buffer_type *buft) {
    return place_ctx_tensors(ctx, buft, NULL, NULL);
}

struct kt_buffer *kt_backend_move_ctx_tensors(struct kt_context *ctx, struct kt_buffer_type *buft, kt_select_fn select,
                                              void *data) {
    return place_ctx_tensors(ctx, buft, select, data);
}

/* ------------------------------------------------------------------ tensor data */

/* Whether the CPU can address t's bytes directly (context memory, host buffers). */
static bool host_addressable(const struct kt_tensor *t) { return !t->buffer || kt_buffer_is_host(t->buffer); }

static bool range_ok(const char *what, const struct kt_tensor *t, size_t offset, size_t size) {
    size_t n = kt_nbytes(t);
    if (!t->data || offset > n || size > n - offset) {
        kt_set_error("%s: %zu bytes at offset %zu are outside '%s' (%zu bytes%s)", what, size, offset, t->name, n,
                     t->data ? "" : ", no memory");
        return false;
    }
    return true;
}

bool kt_tensor_set(struct kt_tensor *t, const void *data, size_t offset, size_t size) {
    if (!size) return true;
    if (!range_ok("kt_tensor_set", t, offset, size)) return false;
    if (t->buffer) t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
    else memcpy((uint8_t *)t->data + offset, data, size);
    return true;
}

bool kt_tensor_get(const struct kt_tensor *t, void *data, size_t offset, size_t size) {
    if (!size) return true;
    if (!range_ok("kt_tensor_get", t, offset, size)) return false;
    if (t->buffer) t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
    else memcpy(data, (const uint8_t *)t->data + offset, size);
    return true;
}

bool kt_tensor_memset(struct kt_tensor *t, uint8_t value, size_t offset, size_t size) {
    if (!size) return true;
    if (!range_ok("kt_tensor_memset", t, offset, size)) return false;
    if (t->buffer) t->buffer->iface.memset_tensor(t->buffer, t, value, offset, size);
    else memset((uint8_t *)t->data + offset, value, size);
    return true;
}

/* size bytes from src at soff to dst at doff, each side directly or through its buffer;
 * device-to-device goes through a small stack buffer so a copy never allocates. */
static void copy_bytes(const struct kt_tensor *src, size_t soff, struct kt_tensor *dst, size_t doff, size_t size) {
    bool sh = host_addressable(src), dh = host_addressable(dst);
    if (sh && dh) {
        memmove((uint8_t *)dst->data + doff, (const uint8_t *)src->data + soff, size);
    } else if (sh) {
        dst->buffer->iface.set_tensor(dst->buffer, dst, (const uint8_t *)src->data + soff, doff, size);
    } else if (dh) {
        src->buffer->iface.get_tensor(src->buffer, src, (uint8_t *)dst->data + doff, soff, size);
    } else {
        uint8_t stage[4096];
        for (size_t done = 0; done < size;) {
            size_t n = size - done < sizeof stage ? size - done : sizeof stage;
            src->buffer->iface.get_tensor(src->buffer, src, stage, soff + done, n);
            dst->buffer->iface.set_tensor(dst->buffer, dst, stage, doff + done, n);
            done += n;
        }
    }
}

bool kt_tensor_copy(const struct kt_tensor *src, struct kt_tensor *dst) {
    if (src->type != dst->type || !kt_are_same_shape(src, dst)) {
        kt_set_error("kt_tensor_copy: '%s' (%s) and '%s' (%s) differ in type or shape", src->name,
                     kt_type_name(src->type), dst->name, kt_type_name(dst->type));
        return false;
    }
    if (kt_nelements(src) == 0) return true;
    if (!src->data || !dst->data) {
        kt_set_error("kt_tensor_copy: '%s' has no memory", src->data ? dst->name : src->name);
        return false;
    }
    if (dst->buffer && dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst))
        return true;
    if (kt_is_contiguous(src) && kt_is_contiguous(dst)) {
        copy_bytes(src, 0, dst, 0, kt_nbytes(src));
        return true;
    }
    const size_t ts = kt_type_size(src->type);
    const bool rows = src->nb[0] == ts && dst->nb[0] == ts;
    if (!rows && kt_blck_size(src->type) != 1) {
        kt_set_error("kt_tensor_copy: '%s' has strided blocks", src->name);
        return false;
    }
    const size_t row = kt_row_size(src->type, src->ne[0]);
    for (int64_t i3 = 0; i3 < src->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < src->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < src->ne[1]; i1++) {
                size_t so = i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
                size_t d0 = i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
                if (rows) {
                    copy_bytes(src, so, dst, d0, row);
                } else {
                    for (int64_t i0 = 0; i0 < src->ne[0]; i0++)
                        copy_bytes(src, so + i0 * src->nb[0], dst, d0 + i0 * dst->nb[0], ts);
                }
            }
    return true;
}

/* ------------------------------------------------------------------ backend */

const char *kt_backend_name(const struct kt_backend *b) { return b->iface.get_name(b); }

void kt_backend_free(struct kt_backend *b) {
    if (b) b->iface.free(b);
}

struct kt_device *kt_backend_get_device(const struct kt_backend *b) { return b->device; }

struct kt_buffer_type *kt_backend_get_default_buffer_type(struct kt_backend *b) {
    return b->iface.get_default_buffer_type ? b->iface.get_default_buffer_type(b) : kt_dev_buffer_type(b->device);
}

enum kt_status kt_backend_graph_compute(struct kt_backend *b, struct kt_cgraph *gf) {
    return b->iface.graph_compute(b, gf);
}

bool kt_backend_supports_op(const struct kt_backend *b, const struct kt_tensor *op) {
    return b->iface.supports_op(b, op);
}

bool kt_backend_supports_buft(const struct kt_backend *b, const struct kt_buffer_type *buft) {
    return b->iface.supports_buft(b, buft);
}

void kt_backend_synchronize(struct kt_backend *b) {
    if (b->iface.synchronize) b->iface.synchronize(b);
}

bool kt_backend_set_n_threads(struct kt_backend *b, int n_threads) {
    if (n_threads < 1 || n_threads > 512) {
        kt_set_error("%s: %d threads (1..512 allowed)", kt_backend_name(b), n_threads);
        return false;
    }
    return !b->iface.set_n_threads || b->iface.set_n_threads(b, n_threads);
}

bool kt_backend_set_abort_callback(struct kt_backend *b, kt_abort_callback cb, void *data) {
    if (!b->iface.set_abort_callback) return false;
    b->iface.set_abort_callback(b, cb, data);
    return true;
}
