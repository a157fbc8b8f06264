/*
 * optest.h - what the op tests share: element access through strides written
 * here (so the reference never reads data through the kernels under test),
 * inputs in several memory layouts (contiguous, permuted, transposed, strided
 * view), and run_check: compute with 1, 2 and 4 threads of one pool, demand
 * identical bits, compare with a double-precision reference.
 * Include once per test program, after testutil.h; main creates `pool`.
 */
#ifndef KILN_OPTEST_H
#define KILN_OPTEST_H

#include "kt.h"
#include "kt-cpu.h"
#include "cpu/cpu.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static const char *pass_name = "default ISA"; /* which kernels: the CPU's best, or KT_CPU_ISA=ref */
static struct kt_threadpool *pool;            /* 4 threads, shared by every run_check */
static inline int64_t rnd(int64_t n) {
    return (int64_t)(tu_rand_u64(&rng) % (uint64_t)n);
}
static inline float rndf(void) {
    return tu_rand_f(&rng);
}

/* ------------------------------------------------------------------ element access (independent of kernels)
 */

static inline char *eptr(const struct kt_tensor *t, const int64_t *i) {
    return (char *)t->data + i[0] * t->nb[0] + i[1] * t->nb[1] + i[2] * t->nb[2] + i[3] * t->nb[3];
}

static inline double tget(const struct kt_tensor *t, const int64_t *i) {
    const char *p = eptr(t, i);
    switch (t->type) {
    case KT_TYPE_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case KT_TYPE_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return kt_fp16_to_fp32(h);
    }
    case KT_TYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return kt_bf16_to_fp32(h);
    }
    case KT_TYPE_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default:
        return NAN;
    }
}

static inline void tset(struct kt_tensor *t, const int64_t *i, double v) {
    char *p = eptr(t, i);
    switch (t->type) {
    case KT_TYPE_F32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        break;
    }
    case KT_TYPE_F16: {
        uint16_t h = kt_fp32_to_fp16((float)v);
        memcpy(p, &h, 2);
        break;
    }
    case KT_TYPE_BF16: {
        uint16_t h = kt_fp32_to_bf16((float)v);
        memcpy(p, &h, 2);
        break;
    }
    case KT_TYPE_I32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    default:
        break;
    }
}

/* flat row-major index k (i0 fastest) -> indices over ne */
static inline void unflat(const int64_t *ne, int64_t k, int64_t *i) {
    for (int d = 0; d < 4; d++) {
        i[d] = k % ne[d];
        k /= ne[d];
    }
}

static inline int64_t nel(const int64_t *ne) {
    return ne[0] * ne[1] * ne[2] * ne[3];
}

/* all elements of t in logical order */
static inline double *read_all(const struct kt_tensor *t) {
    int64_t n = kt_nelements(t), i[4];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) {
        unflat(t->ne, k, i);
        v[k] = tget(t, i);
    }
    return v;
}

/* ------------------------------------------------------------------ inputs in several layouts */

enum layout { L_CONT, L_PERM, L_TRANS, L_PAD, L_COUNT };
static const char *layout_name[L_COUNT] = {"contiguous", "permuted", "transposed", "strided view"};

/* A tensor of logical shape ne whose memory layout is `lay`, filled with uniform [lo, hi). */
static inline struct kt_tensor *mk(struct kt_context *ctx, enum kt_type type, const int64_t *ne,
                                   enum layout lay, double lo, double hi) {
    struct kt_tensor *t = NULL;
    if (lay == L_PERM) {
        int ax[4] = {0, 1, 2, 3};
        for (int k = 3; k > 0; k--) {
            int j = (int)rnd(k + 1), s = ax[k];
            ax[k] = ax[j];
            ax[j] = s;
        }
        struct kt_tensor *b = kt_new_tensor_4d(ctx, type, ne[ax[0]], ne[ax[1]], ne[ax[2]], ne[ax[3]]);
        t = kt_permute(ctx, b, ax[0], ax[1], ax[2], ax[3]);
    } else if (lay == L_TRANS) {
        t = kt_transpose(ctx, kt_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]));
    } else if (lay == L_PAD) {
        struct kt_tensor *b = kt_new_tensor_4d(ctx, type, ne[0] + 3, ne[1] + 1, ne[2], ne[3]);
        if (b)
            t = kt_view_4d(ctx, b, ne[0], ne[1], ne[2], ne[3], b->nb[1], b->nb[2], b->nb[3],
                           b->nb[1] + b->nb[0]);
    } else {
        t = kt_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
    if (!t) {
        fprintf(stderr, "mk: %s\n", kt_last_error());
        exit(1);
    }
    int64_t i[4];
    for (int64_t k = 0; k < nel(ne); k++) {
        unflat(ne, k, i);
        tset(t, i, lo + (hi - lo) * (rndf() + 1.0) / 2.0);
    }
    return t;
}

static inline void rand_shape(int64_t *ne, int max_dims, int64_t maxd) {
    int nd = 1 + (int)rnd(max_dims);
    for (int d = 0; d < 4; d++) ne[d] = d < nd ? 1 + rnd(maxd) : 1;
}

static inline struct kt_context *new_ctx(void) {
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = 64u << 20});
    if (!ctx) {
        fprintf(stderr, "kt_init: %s\n", kt_last_error());
        exit(1);
    }
    return ctx;
}

/* ------------------------------------------------------------------ compute and compare */

static inline bool close_d(const char *label, const double *got, const double *want, int64_t n, double atol,
                           double rtol) {
    for (int64_t k = 0; k < n; k++) {
        double g = got[k], w = want[k];
        bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) {
            fprintf(stderr, "%s [%s]: element %lld: got %.9g want %.9g (atol %g rtol %g)\n", label, pass_name,
                    (long long)k, g, w, atol, rtol);
            return false;
        }
    }
    return true;
}

/*
 * Computes out's graph with 1, 2 and 4 threads of one persistent pool (output
 * memory poisoned before each run), checks the three results are bit-identical, and, when want is
 * given, compares the values with it. The 4-thread result stays in out.
 */
static inline bool run_check(struct kt_context *ctx, struct kt_tensor *out, const double *want, double atol,
                             double rtol, const char *label) {
    if (!out) {
        fprintf(stderr, "%s: constructor failed: %s\n", label, kt_last_error());
        tu_checks++, tu_failures++;
        return false;
    }
    struct kt_cgraph *gf = kt_new_graph(ctx);
    CHECKF(gf && kt_build_forward_expand(gf, out), "%s: graph: %s", label, kt_last_error());
    if (!gf) return false;
    const size_t nb = kt_nbytes(out);
    unsigned char *first = malloc(nb);
    const int nts[3] = {1, 2, 4};
    bool ok = true;
    for (int k = 0; k < 3 && ok; k++) {
        memset(out->data, 0xA5, nb);
        struct kt_cplan plan = kt_graph_plan(gf, nts[k], pool);
        CHECK(plan.n_threads == nts[k]);
        plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
        enum kt_status st = kt_graph_compute(gf, &plan);
        free(plan.work_data);
        CHECKF(st == KT_STATUS_SUCCESS, "%s: compute with %d threads: %s", label, nts[k], kt_last_error());
        if (st != KT_STATUS_SUCCESS)
            ok = false;
        else if (k == 0)
            memcpy(first, out->data, nb);
        else {
            bool same = memcmp(first, out->data, nb) == 0;
            CHECKF(same, "%s: %d threads differ from 1 thread", label, nts[k]);
            ok = same;
        }
    }
    free(first);
    if (ok && want) {
        double *got = read_all(out);
        ok = close_d(label, got, want, kt_nelements(out), atol, rtol);
        tu_checks++;
        if (!ok) tu_failures++;
        free(got);
    }
    return ok;
}

#endif
