/*
 * memory.h - a context's sequence memory: one part per kind its layers need
 * (struct kiln_layer_hp.kind decides), every part answering the same questions
 * through struct kiln_mem_ops, so that the context, the public kiln_kv_* calls and
 * the server never look inside a kind. Kinds: the full KV cache (every position
 * of every sequence) and the windowed KV cache (the last n_swa positions of each
 * sequence plus the batch in flight, in cells of its own: kv_cache.c); a recurrent
 * state (conv + state per sequence) is a third kind of the same shape.
 *
 * Key: a part holds positions of sequences; "resume at n" means decoding position n
 * of a sequence next, which needs whatever the kind keeps of positions < n.
 */
#ifndef KILN_MEMORY_H
#define KILN_MEMORY_H

#include "kiln.h"
#include "kt.h"

#define KILN_MEM_MAX_PARTS 4

enum kiln_mem_status {
    KILN_MEM_OK = 0,
    KILN_MEM_NO_ROOM,     /* place: no cells for the batch (nothing changed) */
    KILN_MEM_UNSUPPORTED, /* an operation the kind cannot do (a recurrent state drops only whole sequences) */
};

/* What one part gives a graph for one batch (KV kinds: the cells attention reads). */
struct kiln_mem_inputs {
    struct kt_tensor *mask;  /* F32 [n_kv, n_tokens]: 0 where a token sees a cell, -inf elsewhere */
    struct kt_tensor *order; /* I32 [n_kv]: the cells by position (attention visits them so) */
    int64_t n_kv;            /* cells [0, n_kv) attended */
    int64_t head;            /* first cell of this batch (its cells are [head, head + n_tokens)) */
};

struct kiln_mem_part;
struct kiln_mem_ops {
    const char *kind; /* "kv", "kv-window" */
    /* claim room for every token of b (head fixed until the next place), or NO_ROOM with nothing changed */
    enum kiln_mem_status (*place)(struct kiln_mem_part *p, const struct kiln_batch *b);
    /* undo the last place: computed says whether the graph may have written the claimed cells */
    void (*unplace)(struct kiln_mem_part *p, const struct kiln_batch *b, bool computed);
    /* graph inputs for the placed batch (reserve: the largest batch over the whole part) */
    bool (*inputs)(struct kiln_mem_part *p, struct kt_context *ctx, int64_t n_tokens, bool reserve,
                   struct kiln_mem_inputs *out);
    /* their values, once the graph is allocated (host pointers, or NULL to go through tensor_set) */
    bool (*set_inputs)(const struct kiln_mem_part *p, const struct kiln_batch *b, const struct kiln_mem_inputs *in);
    void (*clear)(struct kiln_mem_part *p);
    /* positions [p0, p1) of seq (seq < 0: every sequence; p1 < 0: to the end) */
    enum kiln_mem_status (*seq_rm)(struct kiln_mem_part *p, int32_t seq, int32_t p0, int32_t p1);
    /* what src holds of [p0, p1) also belongs to dst */
    enum kiln_mem_status (*seq_cp)(struct kiln_mem_part *p, int32_t src, int32_t dst, int32_t p0, int32_t p1);
    int32_t (*seq_pos_min)(const struct kiln_mem_part *p, int32_t seq); /* -1: nothing held */
    int32_t (*seq_pos_max)(const struct kiln_mem_part *p, int32_t seq);
    /* the largest m <= n at which seq can resume from what is held (0 always can) */
    int32_t (*seq_resume)(const struct kiln_mem_part *p, int32_t seq, int32_t n);
    size_t (*bytes)(const struct kiln_mem_part *p);
    void (*free)(struct kiln_mem_part *p);
};

struct kiln_mem_part {
    const struct kiln_mem_ops *ops;
};

/* A context's memory: its parts and which part each layer keeps its state in. */
struct kiln_memory {
    struct kiln_mem_part *parts[KILN_MEM_MAX_PARTS];
    int n_parts;
    int8_t *layer_part; /* n_layer: index into parts */
};

struct kiln_model;
struct kt_buffer_type;

/* The parts the model's layers need, for n_ctx cells, n_seq sequences and batches of n_batch. */
bool kiln_memory_init(struct kiln_memory *mem, const struct kiln_model *m, uint32_t n_ctx, uint32_t n_seq,
                      uint32_t n_batch, enum kt_type type_k, enum kt_type type_v, struct kt_buffer_type *buft,
                      char *err, size_t errlen);
void kiln_memory_free(struct kiln_memory *mem);

/* The KV kinds (kv_cache.c): n_swa 0 is the full cache. Cache tensors for the layers
 * where layers[il] is true. NULL with a message in err. */
struct kiln_mem_part *kiln_kv_part_new(const struct kiln_model *m, const bool *layers, uint32_t size, int64_t n_swa,
                                       enum kt_type type_k, enum kt_type type_v, struct kt_buffer_type *buft,
                                       char *err, size_t errlen);
/* layer il's K and V cache tensors [D, cells, Hkv] in a KV part (graph side) */
void kiln_kv_part_tensors(const struct kiln_mem_part *p, int il, struct kt_tensor **k, struct kt_tensor **v);
/* Move the used cells of a KV part to the front (data and bookkeeping, order kept); false, unchanged,
 * when memory for the move runs out. */
bool kiln_kv_part_defrag(struct kiln_mem_part *p);

#endif
