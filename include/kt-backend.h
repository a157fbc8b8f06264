/*
 * kt-backend.h - where tensors live and where graphs run.
 *
 * A device (CPU, a GPU ...) offers a buffer type (how to allocate memory it
 * can use) and creates backends (streams that compute graphs). A buffer holds
 * tensor data; a tensor belongs to at most one buffer (t->buffer) and is read
 * and written through kt_tensor_set/get so that callers never touch device
 * memory directly. The registry lists the devices built in; nothing here
 * names one (the CPU's own calls are in kt-cpu.h, for tools and tests).
 *
 *   struct kt_device *dev = kt_dev_by_type(KT_DEVICE_TYPE_CPU);
 *   struct kt_backend *cpu = kt_dev_init_backend(dev);
 *   if (!kt_backend_set_n_threads(cpu, 4)) ... kt_last_error() says why ...
 *   struct kt_buffer *w = kt_buffer_from_host_ptr(map, map_size);  // weights stay mapped
 *   kt_buffer_bind_tensor(w, t, (uint8_t *)map + offset);           // zero-copy
 *   struct kt_buffer *kv = kt_backend_alloc_ctx_tensors(ctx, kt_backend_get_default_buffer_type(cpu));
 *   struct kt_sched *s = kt_sched_new(&cpu, 1, 4096);             // kt-alloc.h
 *   kt_sched_reserve(s, worst_graph);                               // size compute memory once
 *   kt_sched_graph_compute(s, gf);                                  // no allocation in steady state
 *
 * Adding a backend: implement the interfaces of src/kt/backend-impl.h in its
 * own directory and add one registry row; nothing else changes.
 *
 * Errors: a call that can fail returns NULL, false or a kt_status, and
 * kt_last_error() (kt.h, per thread) says why.
 */
#ifndef KT_BACKEND_H
#define KT_BACKEND_H

#include "kt.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kt_device;
struct kt_buffer_type;
struct kt_buffer;
struct kt_backend;

enum kt_device_type {
    KT_DEVICE_TYPE_CPU = 0,
    KT_DEVICE_TYPE_GPU = 1,
    KT_DEVICE_TYPE_ACCEL = 2,
};

enum kt_buffer_usage {
    KT_BUFFER_USAGE_ANY = 0,
    KT_BUFFER_USAGE_WEIGHTS = 1,
    KT_BUFFER_USAGE_COMPUTE = 2,
};

/* ---- registry */
size_t kt_dev_count(void);
struct kt_device *kt_dev_get(size_t i);                   /* NULL if out of range */
struct kt_device *kt_dev_by_name(const char *name);       /* "CPU", "CUDA0" ... */
struct kt_device *kt_dev_by_type(enum kt_device_type type);
/* Why no device of this type is present ("this build has no GPU backend ...",
 * "no CUDA device: ..."), or NULL when one is. */
const char *kt_dev_unavailable(enum kt_device_type type);

/* ---- device */
const char *kt_dev_name(const struct kt_device *dev);
const char *kt_dev_description(const struct kt_device *dev);
enum kt_device_type kt_dev_type(const struct kt_device *dev);
void kt_dev_memory(const struct kt_device *dev, size_t *free, size_t *total);
struct kt_buffer_type *kt_dev_buffer_type(struct kt_device *dev);
/* Buffer types the device offers for weights besides its default, NULL-terminated (none:
 * { NULL }): memory its kernels read in their own layout, as the CPU's "CPU_REPACK"
 * (kt-cpu.h says what it keeps). A loader moves the weights only its matrix products
 * read into the first one (kt_backend_move_ctx_tensors). */
struct kt_buffer_type *const *kt_dev_extra_bufts(struct kt_device *dev);
struct kt_backend *kt_dev_init_backend(struct kt_device *dev); /* NULL + kt_last_error */
/* The registry row the device comes from ("CPU", "CUDA"): llama-bench's backend names. */
const char *kt_dev_backend_name(const struct kt_device *dev);

/* ---- buffer type */
const char *kt_buft_name(const struct kt_buffer_type *buft);
struct kt_buffer *kt_buft_alloc_buffer(struct kt_buffer_type *buft, size_t size); /* NULL + kt_last_error */
size_t kt_buft_alignment(const struct kt_buffer_type *buft);
size_t kt_buft_max_size(const struct kt_buffer_type *buft);
bool kt_buft_is_host(const struct kt_buffer_type *buft);   /* data addressable by the CPU */
size_t kt_buft_alloc_size(const struct kt_buffer_type *buft, const struct kt_tensor *t); /* >= kt_nbytes */
struct kt_device *kt_buft_device(const struct kt_buffer_type *buft);

/* ---- buffer */
void kt_buffer_free(struct kt_buffer *buf);
void *kt_buffer_base(const struct kt_buffer *buf);
size_t kt_buffer_size(const struct kt_buffer *buf);
void kt_buffer_clear(struct kt_buffer *buf, uint8_t value);
void kt_buffer_set_usage(struct kt_buffer *buf, enum kt_buffer_usage usage);
enum kt_buffer_usage kt_buffer_get_usage(const struct kt_buffer *buf);
struct kt_buffer_type *kt_buffer_get_type(const struct kt_buffer *buf);
bool kt_buffer_is_host(const struct kt_buffer *buf);
/* A CPU buffer over memory the caller owns (a file mapping): never freed or copied by kt. */
struct kt_buffer *kt_buffer_from_host_ptr(void *ptr, size_t size);
/* Called with a tensor's bytes (address, size) each time kt_backend_move_ctx_tensors has
 * copied a tensor of buf out of it: the owner of the memory may hand those pages back (a
 * loader drops a file mapping's pages; they are read from the file again if touched). */
void kt_buffer_set_release_callback(struct kt_buffer *buf, void (*fn)(void *data, const void *addr, size_t size),
                                    void *data);
/* Place t (not a view) at addr inside buf; views of t follow. false if it does not fit. */
bool kt_buffer_bind_tensor(struct kt_buffer *buf, struct kt_tensor *t, void *addr);

/* Allocate every tensor of a no_alloc context (views excluded) in one new buffer; NULL on failure. */
struct kt_buffer *kt_backend_alloc_ctx_tensors(struct kt_context *ctx, struct kt_buffer_type *buft);
/* Move the tensors of ctx that select() accepts (views excluded) into one new buffer of buft,
 * each copied from where it was (a mapping, another buffer); their views follow. Weights to a
 * GPU, say. An extra buffer type may instead leave a tensor where it was and keep only its own
 * form of it (kt_dev_extra_bufts). NULL on failure. */
struct kt_buffer *kt_backend_move_ctx_tensors(struct kt_context *ctx, struct kt_buffer_type *buft,
                                              bool (*select)(const struct kt_tensor *t, void *data), void *data);

/* ---- tensor data (works for any buffer; offset/size in bytes within the tensor)
 * false (kt_last_error) when the range is outside the tensor or it has no memory; then
 * nothing was read or written. */
bool kt_tensor_set(struct kt_tensor *t, const void *data, size_t offset, size_t size);
bool kt_tensor_get(const struct kt_tensor *t, void *data, size_t offset, size_t size);
bool kt_tensor_memset(struct kt_tensor *t, uint8_t value, size_t offset, size_t size);
/* copy between tensors of the same type and shape, across buffers/devices */
bool kt_tensor_copy(const struct kt_tensor *src, struct kt_tensor *dst);

/* ---- backend */
const char *kt_backend_name(const struct kt_backend *b);
void kt_backend_free(struct kt_backend *b);
struct kt_device *kt_backend_get_device(const struct kt_backend *b);
struct kt_buffer_type *kt_backend_get_default_buffer_type(struct kt_backend *b);
enum kt_status kt_backend_graph_compute(struct kt_backend *b, struct kt_cgraph *gf);
bool kt_backend_supports_op(const struct kt_backend *b, const struct kt_tensor *op);
bool kt_backend_supports_buft(const struct kt_backend *b, const struct kt_buffer_type *buft);
void kt_backend_synchronize(struct kt_backend *b);
/* Threads a backend computes with (1..512). false (kt_last_error) for a count out of range
 * or when the threads cannot be started (the old ones stay); a backend without threads of its
 * own (a GPU) accepts any count in range and ignores it. */
bool kt_backend_set_n_threads(struct kt_backend *b, int n_threads);
/* Ask cb between nodes from now on (NULL: never). false when this backend cannot stop inside
 * a graph (a GPU queues it whole): the scheduler still asks between splits. */
bool kt_backend_set_abort_callback(struct kt_backend *b, kt_abort_callback cb, void *data);

#ifdef __cplusplus
}
#endif

#endif /* KT_BACKEND_H */
