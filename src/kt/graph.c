/*
 * graph.c - compute graphs: a depth-first walk from the outputs puts every
 * tensor with an op into `nodes` in an order where each node follows its
 * sources, and every tensor without one into `leafs`. A visited set (open
 * addressing over pointers) makes the walk linear and expansion idempotent.
 */
#include "kt-impl.h"

#include <string.h>

static size_t hash_size_for(int size) {
    /* power of two, at least twice the tensors a graph can hold */
    size_t n = 16;
    while (n < (size_t)size * 4) n <<= 1;
    return n;
}

size_t kt_graph_overhead_custom(size_t size) {
    size_t bytes = sizeof(struct kt_cgraph) + 2 * size * sizeof(struct kt_tensor *) +
                   hash_size_for((int)size) * sizeof(struct kt_tensor *);
    return kt_object_overhead() + ((bytes + KT_MEM_ALIGN - 1) & ~(size_t)(KT_MEM_ALIGN - 1));
}

size_t kt_graph_overhead(void) { return kt_graph_overhead_custom(KT_DEFAULT_GRAPH_SIZE); }

struct kt_cgraph *kt_new_graph_custom(struct kt_context *ctx, int size) {
    if (size < 1 || size > (1 << 26)) {
        kt_set_error("kt_new_graph: size %d out of range", size);
        return NULL;
    }
    size_t hs = hash_size_for(size);
    size_t bytes = sizeof(struct kt_cgraph) + 2 * (size_t)size * sizeof(struct kt_tensor *) +
                   hs * sizeof(struct kt_tensor *);
    struct kt_object *obj = kt_new_object(ctx, KT_OBJ_GRAPH, bytes);
    if (!obj) return NULL;
    struct kt_cgraph *gf = obj->data;
    struct kt_tensor **p = (struct kt_tensor **)(gf + 1);
    *gf = (struct kt_cgraph){.size = size, .nodes = p, .leafs = p + size, .hash_size = hs, .hash_keys = p + 2 * size};
    memset(gf->hash_keys, 0, hs * sizeof(struct kt_tensor *));
    return gf;
}

struct kt_cgraph *kt_new_graph(struct kt_context *ctx) { return kt_new_graph_custom(ctx, KT_DEFAULT_GRAPH_SIZE); }

void kt_graph_clear(struct kt_cgraph *gf) {
    gf->n_nodes = 0;
    gf->n_leafs = 0;
    memset(gf->hash_keys, 0, gf->hash_size * sizeof(struct kt_tensor *));
}

static size_t hash_slot(const struct kt_cgraph *gf, const struct kt_tensor *t) {
    size_t mask = gf->hash_size - 1;
    size_t i = ((uintptr_t)t >> 6) * 0x9E3779B97F4A7C15ULL & mask;
    while (gf->hash_keys[i] && gf->hash_keys[i] != t) i = (i + 1) & mask;
    return i;
}

bool kt_graph_contains(const struct kt_cgraph *gf, const struct kt_tensor *t) {
    return gf->hash_keys[hash_slot(gf, t)] == t;
}

/* Recursive walk; depth is bounded by the graph size. Returns false when full. */
static bool visit(struct kt_cgraph *gf, struct kt_tensor *t) {
    size_t slot = hash_slot(gf, t);
    if (gf->hash_keys[slot] == t) return true;
    gf->hash_keys[slot] = t;
    for (int i = 0; i < KT_MAX_SRC; i++)
        if (t->src[i] && !visit(gf, t->src[i])) return false;
    if (t->op == KT_OP_NONE) {
        if (gf->n_leafs >= gf->size) {
            kt_set_error("kt graph is full: more than %d leafs (create it with a larger size)", gf->size);
            return false;
        }
        gf->leafs[gf->n_leafs++] = t;
    } else {
        if (gf->n_nodes >= gf->size) {
            kt_set_error("kt graph is full: more than %d nodes (create it with a larger size)", gf->size);
            return false;
        }
        gf->nodes[gf->n_nodes++] = t;
    }
    return true;
}

bool kt_build_forward_expand(struct kt_cgraph *gf, struct kt_tensor *t) {
    if (!gf || !t) {
        if (!t && !kt_last_error()[0]) kt_set_error("kt_build_forward_expand: no tensor");
        return false;
    }
    return visit(gf, t);
}

int kt_graph_n_nodes(const struct kt_cgraph *gf) { return gf->n_nodes; }

struct kt_tensor *kt_graph_node(const struct kt_cgraph *gf, int i) {
    if (i < 0) i += gf->n_nodes;
    return i >= 0 && i < gf->n_nodes ? gf->nodes[i] : NULL;
}

struct kt_tensor *kt_graph_get_tensor(const struct kt_cgraph *gf, const char *name) {
    for (int i = 0; i < gf->n_leafs; i++)
        if (!strcmp(gf->leafs[i]->name, name)) return gf->leafs[i];
    for (int i = 0; i < gf->n_nodes; i++)
        if (!strcmp(gf->nodes[i]->name, name)) return gf->nodes[i];
    return NULL;
}
