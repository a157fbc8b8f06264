/*
 * kt-alloc.h - planned memory for graphs, and the scheduler over several backends.
 *
 * The graph allocator gives every intermediate tensor an offset in one compute
 * buffer: a tensor's memory is reused once its last consumer has run,
 * element-wise ops write in place over an input that dies with them, and views
 * share their parent. Reserving on the largest graph (a full batch) sizes the
 * buffer once; later graphs of that size or smaller allocate nothing.
 *
 * The scheduler takes backends in priority order, assigns each node to the
 * first backend that supports it and can reach its inputs, splits the graph
 * where the backend changes, copies inputs across, and runs the splits.
 */
#ifndef KT_ALLOC_H
#define KT_ALLOC_H

#include "kt-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear allocator: tensors of a context, one after another, in a buffer */
struct kt_tallocr {
    struct kt_buffer *buffer;
    void *base;
    size_t alignment;
    size_t offset;
};
struct kt_tallocr kt_tallocr_new(struct kt_buffer *buffer);
bool kt_tallocr_alloc(struct kt_tallocr *talloc, struct kt_tensor *t);

/* ---- graph allocator */
struct kt_gallocr;
struct kt_gallocr *kt_gallocr_new(struct kt_buffer_type *buft);
void kt_gallocr_free(struct kt_gallocr *galloc);
/* Plan gf and size the buffer for it (grows, never shrinks). */
bool kt_gallocr_reserve(struct kt_gallocr *galloc, struct kt_cgraph *gf);
/* Assign memory to every tensor of gf that has none (re-plans; grows the buffer only if
 * gf needs more than reserved, counted in kt_gallocr_n_reallocs). */
bool kt_gallocr_alloc_graph(struct kt_gallocr *galloc, struct kt_cgraph *gf);
size_t kt_gallocr_get_buffer_size(const struct kt_gallocr *galloc);
int kt_gallocr_n_reallocs(const struct kt_gallocr *galloc);

/* ---- scheduler */
struct kt_sched;
/* backends[0] has the highest priority; the last must be a CPU device's backend reaching host
 * memory (the fallback). NULL (kt_last_error) otherwise. */
struct kt_sched *kt_sched_new(struct kt_backend **backends, int n_backends, int graph_size);
void kt_sched_free(struct kt_sched *sched);
bool kt_sched_reserve(struct kt_sched *sched, struct kt_cgraph *gf);
bool kt_sched_alloc_graph(struct kt_sched *sched, struct kt_cgraph *gf);
/* allocates if needed, then computes every split in order */
enum kt_status kt_sched_graph_compute(struct kt_sched *sched, struct kt_cgraph *gf);
void kt_sched_reset(struct kt_sched *sched);
int kt_sched_get_n_splits(const struct kt_sched *sched);
int kt_sched_get_n_copies(const struct kt_sched *sched);
size_t kt_sched_get_buffer_size(const struct kt_sched *sched, const struct kt_backend *b);
/* pin a node to a backend before alloc (e.g. weights' backend decides); false (kt_last_error)
 * when b is not one of the scheduler's backends or memory runs out */
bool kt_sched_set_tensor_backend(struct kt_sched *sched, struct kt_tensor *t, struct kt_backend *b);
/* Ask cb before every split and pass it to each backend that can ask it between nodes
 * (kt_backend_set_abort_callback): kt_sched_graph_compute then returns KT_STATUS_ABORTED. */
void kt_sched_set_abort_callback(struct kt_sched *sched, kt_abort_callback cb, void *data);
struct kt_backend *kt_sched_get_tensor_backend(const struct kt_sched *sched, const struct kt_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* KT_ALLOC_H */
