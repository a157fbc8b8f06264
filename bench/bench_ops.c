/*
 * bench_ops.c - time of the non-matmul CPU ops (soft_max, rope, rms_norm, mul,
 * add, swiglu, silu, cpy to F16) at the shapes a prompt of 512 tokens gives the
 * KJV model and a 7B-sized layer, side by side with llama.cpp's CPU library on
 * the same shapes when it can be loaded (KILN_GGML_DIR, default: the peer build
 * under /tmp/kiln-peer).
 *   bench_ops [reps (default 20)] [threads (default 1)]
 * Milliseconds of the fastest of reps runs (thread CPU time with one thread, else
 * wall time); ratio = ggml / kiln (above 1: kiln
 * is faster). KT_CPU_ISA=ref times kiln's scalar kernels.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kt-cpu.h"
#include "kt.h"

/* ------------------------------------------------------------------ llama.cpp, loaded at run time */

/* The few ggml entry points used, declared here (ggml.h is not ours to include). */
struct g_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
enum { G_F32 = 0, G_F16 = 1, G_I32 = 26 };
struct g_api {
    void *(*init)(struct g_init_params);
    void (*free)(void *);
    void *(*new_1d)(void *, int, int64_t);
    void *(*new_2d)(void *, int, int64_t, int64_t);
    void *(*new_3d)(void *, int, int64_t, int64_t, int64_t);
    void *(*get_data)(const void *);
    void *(*soft_max_ext)(void *, void *, void *, float, float);
    void *(*rope_ext)(void *, void *, void *, void *, int, int, int, float, float, float, float, float,
                      float);
    void *(*rms_norm)(void *, void *, float);
    void *(*mul)(void *, void *, void *);
    void *(*add)(void *, void *, void *);
    void *(*swiglu_split)(void *, void *, void *);
    void *(*silu)(void *, void *);
    void *(*cpy)(void *, void *, void *);
    void *(*new_graph)(void *);
    void (*build_forward_expand)(void *, void *);
    int (*compute_with_ctx)(void *, void *, int);
};

static bool sym(void *h, const char *name, void *fnp) {
    void *p = dlsym(h, name);
    if (!p) fprintf(stderr, "no llama.cpp column: %s missing\n", name);
    /* POSIX dlsym returns functions as void *: copy the bits (ISO C has no such cast) */
    memcpy(fnp, &p, sizeof p);
    return p != NULL;
}

static bool load_ggml(struct g_api *g) {
    const char *dir = getenv("KILN_GGML_DIR");
    if (!dir) dir = "/tmp/kiln-peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64";
    char path[1024];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu-zen4.so", dir);
    void *cpu = base ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!cpu) {
        fprintf(stderr, "no llama.cpp column: %s\n", dlerror());
        return false;
    }
    return sym(base, "ggml_init", &g->init) && sym(base, "ggml_free", &g->free) &&
           sym(base, "ggml_new_tensor_1d", &g->new_1d) && sym(base, "ggml_new_tensor_2d", &g->new_2d) &&
           sym(base, "ggml_new_tensor_3d", &g->new_3d) && sym(base, "ggml_get_data", &g->get_data) &&
           sym(base, "ggml_soft_max_ext", &g->soft_max_ext) && sym(base, "ggml_rope_ext", &g->rope_ext) &&
           sym(base, "ggml_rms_norm", &g->rms_norm) && sym(base, "ggml_mul", &g->mul) &&
           sym(base, "ggml_add", &g->add) && sym(base, "ggml_swiglu_split", &g->swiglu_split) &&
           sym(base, "ggml_silu", &g->silu) && sym(base, "ggml_cpy", &g->cpy) &&
           sym(base, "ggml_new_graph", &g->new_graph) &&
           sym(base, "ggml_build_forward_expand", &g->build_forward_expand) &&
           sym(cpu, "ggml_graph_compute_with_ctx", &g->compute_with_ctx);
}

/* ------------------------------------------------------------------ cases */

enum op { OP_SOFT_MAX, OP_ROPE, OP_RMS_NORM, OP_MUL, OP_ADD, OP_SWIGLU, OP_SILU, OP_CPY_F16, OP_COUNT };
static const char *op_names[OP_COUNT] = {"soft_max+mask", "rope normal", "rms_norm", "mul (bcast row)",
                                         "add",           "swiglu",      "silu",     "cpy f32->f16"};

struct shape {
    const char *name;
    int64_t d0, d1, d2; /* op-specific: see build_* */
};
/* per op: KJV (head 32, 8 heads, embd 256, ff 768) and a 7B layer (head 128, 32 heads, embd 4096,
 * ff 11008) at 512 tokens; soft_max is one layer's attention scores */
static const struct shape shapes[2][OP_COUNT] = {
    {{"kjv", 512, 512, 8},
     {"kjv", 32, 8, 512},
     {"kjv", 256, 512, 1},
     {"kjv", 256, 512, 1},
     {"kjv", 256, 512, 1},
     {"kjv", 768, 512, 1},
     {"kjv", 768, 512, 1},
     {"kjv", 256, 512, 1}},
    {{"7b", 512, 512, 32},
     {"7b", 128, 32, 512},
     {"7b", 4096, 512, 1},
     {"7b", 4096, 512, 1},
     {"7b", 4096, 512, 1},
     {"7b", 11008, 512, 1},
     {"7b", 11008, 512, 1},
     {"7b", 4096, 512, 1}},
};

/* One thread: CPU time of this thread, which other jobs on a shared machine do not
 * inflate; more threads: wall time. */
static int bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fill(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
}

static double time_kiln(enum op op, const struct shape *s, int reps, int threads, struct kt_threadpool *tp) {
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = (size_t)1 << 30});
    if (!ctx) return -1;
    struct kt_tensor *a = kt_new_tensor_3d(ctx, KT_TYPE_F32, s->d0, s->d1, s->d2), *out = NULL;
    fill(a->data, kt_nelements(a));
    if (op == OP_SOFT_MAX) {
        struct kt_tensor *m = kt_new_tensor_2d(ctx, KT_TYPE_F16, s->d0, s->d1);
        kt_fp16_t *mp = m->data;
        for (int64_t i = 0; i < s->d0 * s->d1; i++)
            mp[i] = kt_fp32_to_fp16(i % s->d0 > i / s->d0 ? -INFINITY : 0.0f);
        out = kt_soft_max_ext(ctx, a, m, 0.125f, 0.0f);
    } else if (op == OP_ROPE) {
        struct kt_tensor *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, s->d2);
        for (int64_t i = 0; i < s->d2; i++) ((int32_t *)pos->data)[i] = (int32_t)i;
        out = kt_rope(ctx, a, pos,
                      (struct kt_rope_params){
                          .n_dims = (int32_t)s->d0, .mode = KT_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f});
    } else if (op == OP_RMS_NORM) {
        out = kt_rms_norm(ctx, a, 1e-5f);
    } else if (op == OP_MUL) {
        out = kt_mul(ctx, a, kt_view_1d(ctx, a, s->d0, 0));
    } else if (op == OP_ADD) {
        out = kt_add(ctx, a, a);
    } else if (op == OP_SWIGLU) {
        out = kt_swiglu(ctx, a, a);
    } else if (op == OP_SILU) {
        out = kt_silu(ctx, a);
    } else {
        out = kt_cpy(ctx, a, kt_new_tensor_3d(ctx, KT_TYPE_F16, s->d0, s->d1, s->d2));
    }
    struct kt_cgraph *gf = kt_new_graph(ctx);
    kt_build_forward_expand(gf, out);
    struct kt_cplan plan = kt_graph_plan(gf, threads, tp);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (kt_graph_compute(gf, &plan) != KT_STATUS_SUCCESS) best = -1;
        double t = now() - t0;
        if (best > 0 && t < best) best = t;
    }
    kt_free(ctx);
    return best;
}

static double time_ggml(const struct g_api *g, enum op op, const struct shape *s, int reps, int threads) {
    void *ctx = g->init((struct g_init_params){.mem_size = (size_t)1 << 30});
    if (!ctx) return -1;
    void *a = g->new_3d(ctx, G_F32, s->d0, s->d1, s->d2), *out = NULL;
    fill(g->get_data(a), s->d0 * s->d1 * s->d2);
    if (op == OP_SOFT_MAX) {
        void *m = g->new_2d(ctx, G_F16, s->d0, s->d1);
        kt_fp16_t *mp = g->get_data(m);
        for (int64_t i = 0; i < s->d0 * s->d1; i++)
            mp[i] = kt_fp32_to_fp16(i % s->d0 > i / s->d0 ? -INFINITY : 0.0f);
        out = g->soft_max_ext(ctx, a, m, 0.125f, 0.0f);
    } else if (op == OP_ROPE) {
        void *pos = g->new_1d(ctx, G_I32, s->d2);
        for (int64_t i = 0; i < s->d2; i++) ((int32_t *)g->get_data(pos))[i] = (int32_t)i;
        out = g->rope_ext(ctx, a, pos, NULL, (int)s->d0, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    } else if (op == OP_RMS_NORM) {
        out = g->rms_norm(ctx, a, 1e-5f);
    } else if (op == OP_MUL) {
        out = g->mul(ctx, a, g->new_1d(ctx, G_F32, s->d0));
    } else if (op == OP_ADD) {
        out = g->add(ctx, a, a);
    } else if (op == OP_SWIGLU) {
        out = g->swiglu_split(ctx, a, a);
    } else if (op == OP_SILU) {
        out = g->silu(ctx, a);
    } else {
        out = g->cpy(ctx, a, g->new_3d(ctx, G_F16, s->d0, s->d1, s->d2));
    }
    void *gf = g->new_graph(ctx);
    g->build_forward_expand(gf, out);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        g->compute_with_ctx(ctx, gf, threads);
        double t = now() - t0;
        if (t < best) best = t;
    }
    g->free(ctx);
    return best;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20, threads = argc > 2 ? atoi(argv[2]) : 1;
    if (reps < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: bench_ops [reps >= 1] [threads 1..64]\n");
        return 2;
    }
    if (threads == 1) bench_clock = CLOCK_THREAD_CPUTIME_ID;
    struct g_api g;
    const bool have_ggml = load_ggml(&g);
    struct kt_threadpool *tp = kt_threadpool_new(threads);
    if (!tp) {
        fprintf(stderr, "kt_threadpool_new: %s\n", kt_last_error());
        return 1;
    }
    printf("%-16s %-4s %10s %10s %7s   (%d threads, best of %d)\n", "op", "size", "kiln ms", "ggml ms",
           "ratio", threads, reps);
    for (int z = 0; z < 2; z++)
        for (int op = 0; op < OP_COUNT; op++) {
            const struct shape *s = &shapes[z][op];
            double k = time_kiln((enum op)op, s, reps, threads, tp);
            double gm = have_ggml ? time_ggml(&g, (enum op)op, s, reps, threads) : -1;
            if (gm > 0)
                printf("%-16s %-4s %10.3f %10.3f %7.2f\n", op_names[op], s->name, k * 1e3, gm * 1e3, gm / k);
            else
                printf("%-16s %-4s %10.3f %10s %7s\n", op_names[op], s->name, k * 1e3, "-", "-");
        }
    kt_threadpool_free(tp);
    return 0;
}
