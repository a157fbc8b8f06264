/*
 * repack.c - weights kept in the layout the CPU's mul_mat kernels read fastest:
 * each matrix as 16-row groups of a compact packer (gemm.h), built once at load
 * into one anonymous allocation. Decode then streams every weight byte once in
 * one sequential pass per thread, with no gathers and no reductions; prompts
 * skip the per-thread packing. The tensor's own data is left as it was, so every
 * other op (get_rows of tied embeddings, dequantization, tests) reads it as
 * before; mul_mat finds the copy through the tensor's extra pointer. Any other
 * tensor listed is copied as it is and its data pointer moved to the copy: a large
 * model's copy sits in transparent huge pages, which stream faster than the file
 * mapping's 4 KiB pages (F16 1.1B tg 13.2 -> 15.3 t/s, 2 threads), and once the
 * file's pages are dropped nothing touches the mapping again (a file system with
 * large folios maps 2 MiB of it for one read norm weight).
 */
#define _DEFAULT_SOURCE /* madvise, MAP_ANONYMOUS */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu.h"
#include "gemm.h"

#define REPACK_MAGIC 0x6b63707265706bULL /* "kprepck" */

/* One repacked tensor: extra points here. */
struct entry {
    uint64_t magic;
    const struct kt_lanes_packer *pk;
    enum kt_type type;
    int64_t K, M;  /* elements per row, rows */
    size_t nb1;    /* the tensor's row bytes */
    size_t gsize;  /* bytes per 16-row group */
    uint8_t *base; /* group 0 */
    struct kt_tensor *t;
};

struct kt_cpu_repack {
    void *mem;
    size_t size;
    size_t n;
    struct entry *e;
};

/* Whether a tensor is copied at all (not with KT_CPU_REPACK=off; not twice). */
static bool copyable(const struct kt_tensor *t) {
    if (kt_cpu_env()->repack_off) return false;
    return !t->view_src && t->data && kt_is_contiguous(t) && !t->extra;
}

/* The packer a weight can be kept in, or NULL (then it is copied as it is): a compact
 * one for its type on this CPU (none with KT_CPU_GEMM=off or below AVX-512). */
static const struct kt_lanes_packer *packer_for(const struct kt_tensor *t) {
    if (kt_n_dims(t) > 2) return NULL;
    int bias;
    if (!kt_cpu_lanes(t->type, &bias)) return NULL;
    const struct kt_lanes_packer *pk = kt_cpu_lanes_packer(t->type);
    if (!pk || t->ne[0] % kt_blck_size(t->type) != 0) return NULL;
    /* the packers gather with 32-bit offsets of up to 15 rows */
    if (t->nb[1] > (size_t)INT32_MAX / 16) return NULL;
    return pk;
}

static size_t groups(int64_t M) { return (size_t)((M + 15) / 16); }

bool kt_cpu_drop_pages(const void *p, size_t n, uint8_t **lo, uint8_t **hi) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b <= a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) return false;
    if (lo) *lo = (uint8_t *)a;
    if (hi) *hi = (uint8_t *)b;
    return true;
}

struct kt_cpu_repack *kt_cpu_repack_weights(struct kt_tensor *const *ts, const bool *matmul, size_t n, bool release) {
    struct kt_cpu_repack *r = calloc(1, sizeof *r);
    if (!r || (n && !(r->e = calloc(n, sizeof *r->e)))) {
        free(r);
        kt_set_error("kt_cpu_repack_weights: out of memory");
        return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        struct kt_tensor *t = ts[i];
        if (!t || !copyable(t)) continue; /* (a tensor listed twice has its extra set already) */
        const struct kt_lanes_packer *pk = matmul[i] ? packer_for(t) : NULL;
        struct entry *e = &r->e[r->n++];
        *e = (struct entry){REPACK_MAGIC, pk, t->type, t->ne[0], t->ne[1], t->nb[1], pk ? pk->size(t->ne[0]) : 0, NULL, t};
        e->base = (uint8_t *)total;
        total += pk ? e->gsize * groups(e->M) : (kt_nbytes(t) + 63) & ~(size_t)63;
        t->extra = e; /* claims it (duplicates skip); set for real below */
    }
    if (total) {
        r->mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r->mem == MAP_FAILED) {
            r->mem = NULL;
            for (size_t i = 0; i < r->n; i++) r->e[i].t->extra = NULL;
            free(r->e);
            free(r);
            kt_set_error("kt_cpu_repack_weights: cannot allocate %zu bytes", total);
            return NULL;
        }
        r->size = total;
#ifdef MADV_HUGEPAGE
        /* fewer TLB misses while streaming a large model (small ones keep 4 KiB pages:
         * their memory stays as small and as predictable as their files) */
        if (total >= ((size_t)256 << 20)) madvise(r->mem, total, MADV_HUGEPAGE);
#endif
    }
    for (size_t i = 0; i < r->n; i++) {
        struct entry *e = &r->e[i];
        e->base = (uint8_t *)r->mem + (size_t)e->base;
        const uint8_t *w = e->t->data;
        if (!e->pk) {
            memcpy(e->base, w, kt_nbytes(e->t));
            e->t->data = e->base; /* (views of it must follow: the caller re-points them) */
        }
        for (size_t g = 0; e->pk && g < groups(e->M); g++) {
            const int64_t r0 = (int64_t)g * 16;
            const int nr = (int)(e->M - r0 < 16 ? e->M - r0 : 16);
            e->pk->pack(e->K, w + (size_t)r0 * e->nb1, e->nb1, nr, e->base + g * e->gsize);
        }
        /* the file's pages: read back from the file if anything touches them again */
        if (release) kt_cpu_drop_pages(w, kt_nbytes(e->t), NULL, NULL);
    }
    return r;
}

size_t kt_cpu_repack_size(const struct kt_cpu_repack *r) { return r ? r->size : 0; }
size_t kt_cpu_repack_count(const struct kt_cpu_repack *r) { return r ? r->n : 0; }

void kt_cpu_repack_free(struct kt_cpu_repack *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].t->extra == &r->e[i]) r->e[i].t->extra = NULL;
    if (r->mem) munmap(r->mem, r->size);
    free(r->e);
    free(r);
}

const struct kt_lanes_packer *kt_cpu_repacked(const struct kt_tensor *a, const uint8_t **group0, size_t *gsize) {
    const struct kt_tensor *t = a->view_src ? a->view_src : a;
    const struct entry *e = t->extra;
    if (!e || e->magic != REPACK_MAGIC || e->t != t || !e->pk) return NULL;
    if (a->type != e->type || a->ne[0] != e->K || a->nb[1] != e->nb1 || a->ne[2] != 1 || a->ne[3] != 1) return NULL;
    const size_t off = a->view_src ? a->view_offs : 0, gbytes = 16 * e->nb1;
    if (off % gbytes != 0 || off / e->nb1 + (size_t)a->ne[1] > (size_t)e->M) return NULL;
    /* the kernel table may have changed since (tests switch ISAs): only the same packer reads it */
    if (kt_cpu_lanes_packer(a->type) != e->pk) return NULL;
    *group0 = e->base + off / gbytes * e->gsize;
    *gsize = e->gsize;
    return e->pk;
}

