/*
 * repack.c - the CPU device's extra buffer type "CPU_REPACK": weights kept in
 * the layout the CPU's mul_mat kernels read fastest, each matrix as 16-row
 * groups of a compact packer (gemm.h), built once at load in one anonymous
 * allocation. Decode then streams every weight byte once in one sequential
 * pass per thread, with no gathers and no reductions; prompts skip the
 * per-thread packing. A packed tensor itself is left where it was (its data
 * and buffer), so every other op (get_rows of tied embeddings, views that do
 * not start at a group, dequantization, tests) reads it as before; mul_mat
 * finds the groups through the tensor's extra pointer. Any other tensor is
 * copied in as it is: a large model's copy sits in transparent huge pages,
 * which stream faster than the file mapping's 4 KiB pages (F16 1.1B tg 13.2 ->
 * 15.3 t/s, 2 threads), and once the loader drops the file's pages nothing
 * touches the mapping again (a file system with large folios maps 2 MiB of it
 * for one read norm weight).
 */
#define _DEFAULT_SOURCE /* madvise, MAP_ANONYMOUS */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend-impl.h"
#include "cpu.h"
#include "gemm.h"

#define REPACK_MAGIC 0x6b63707265706bULL /* "kprepck" */

/* One packed tensor: its extra points here. It sits in the buffer, before the groups. */
struct entry {
    uint64_t magic;
    const struct kt_lanes_packer *pk;
    enum kt_type type;
    int64_t K, M;  /* elements per row, rows */
    size_t nb1;    /* the tensor's row bytes */
    size_t gsize;  /* bytes per 16-row group */
    uint8_t *base; /* group 0, inside the buffer */
    struct kt_tensor *t;
    struct entry *next;
};
#define ENTRY_BYTES 128 /* keeps the groups 64-byte aligned */
_Static_assert(sizeof(struct entry) <= ENTRY_BYTES, "entry header");

/* A CPU_REPACK buffer: one anonymous mapping, and the tensors packed in it. */
struct repack_buf {
    void *mem;
    struct entry *entries;
};

/* The packer a weight can be kept in, or NULL (then it is copied as it is): a compact
 * one for its type on this CPU (none with KT_CPU_GEMM=off or below AVX-512). */
static const struct kt_lanes_packer *packer_for(const struct kt_tensor *t) {
    if (kt_n_dims(t) > 2 || t->view_src || !kt_is_contiguous(t)) return NULL;
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

/* ------------------------------------------------------------------ the buffer */

static void *rp_base(const struct kt_buffer *buf) { return ((struct repack_buf *)buf->context)->mem; }

static void rp_free(struct kt_buffer *buf) {
    struct repack_buf *r = buf->context;
    for (struct entry *e = r->entries; e; e = e->next)
        if (e->t->extra == e) e->t->extra = NULL; /* (the buffer goes before its tensors' context) */
    if (r->mem) munmap(r->mem, buf->size);
    free(r);
}

static void pack(struct entry *e, const uint8_t *w) {
    for (size_t g = 0; g < groups(e->M); g++) {
        const int64_t r0 = (int64_t)g * 16;
        const int nr = (int)(e->M - r0 < 16 ? e->M - r0 : 16);
        e->pk->pack(e->K, w + (size_t)r0 * e->nb1, e->nb1, nr, e->base + g * e->gsize);
    }
}

/* A tensor copied in from host memory whose type has a packer here: the groups (after the
 * entry, at the tensor's place in the buffer), and the tensor sent back where it was (its
 * data and buffer, for every other reader); false for the rest, which the generic copy
 * puts here as they are. */
static bool rp_cpy(struct kt_buffer *buf, const struct kt_tensor *src, struct kt_tensor *dst) {
    const struct kt_lanes_packer *pk = packer_for(dst);
    if (!pk || (src->buffer && !kt_buffer_is_host(src->buffer)) || !kt_is_contiguous(src)) return false;
    struct repack_buf *r = buf->context;
    struct entry *e = dst->data;
    *e = (struct entry){REPACK_MAGIC, pk,    dst->type, dst->ne[0], dst->ne[1], dst->nb[1], pk->size(dst->ne[0]),
                        (uint8_t *)dst->data + ENTRY_BYTES, dst, r->entries};
    r->entries = e;
    pack(e, src->data);
    dst->extra = e;
    dst->data = src->data;
    dst->buffer = src->buffer;
    return true;
}

/* Host memory: reads and writes go to the tensor's data. A packed tensor is not placed
 * here (rp_cpy sent it back), so these see only tensors kept as they are. */
static void rp_set(struct kt_buffer *buf, struct kt_tensor *t, const void *data, size_t offset, size_t size) {
    memcpy((uint8_t *)t->data + offset, data, size);
}
static void rp_get(struct kt_buffer *buf, const struct kt_tensor *t, void *data, size_t offset, size_t size) {
    memcpy(data, (const uint8_t *)t->data + offset, size);
}
static void rp_memset(struct kt_buffer *buf, struct kt_tensor *t, uint8_t value, size_t offset, size_t size) {
    memset((uint8_t *)t->data + offset, value, size);
}
static void rp_clear(struct kt_buffer *buf, uint8_t value) { memset(rp_base(buf), value, buf->size); }

static const struct kt_buffer_i rp_buffer_i = {
    .free_buffer = rp_free,
    .get_base = rp_base,
    .set_tensor = rp_set,
    .get_tensor = rp_get,
    .memset_tensor = rp_memset,
    .cpy_tensor = rp_cpy,
    .clear = rp_clear,
};

/* ------------------------------------------------------------------ the buffer type */

static const char *rp_buft_name(const struct kt_buffer_type *buft) { return "CPU_REPACK"; }
static size_t rp_buft_alignment(const struct kt_buffer_type *buft) { return 64; }
static bool rp_buft_is_host(const struct kt_buffer_type *buft) { return true; }

static size_t rp_buft_alloc_size(const struct kt_buffer_type *buft, const struct kt_tensor *t) {
    /* a packable tensor allocated without a copy (kt_backend_alloc_ctx_tensors) stays plain */
    const struct kt_lanes_packer *pk = packer_for(t);
    const size_t packed = pk ? ENTRY_BYTES + pk->size(t->ne[0]) * groups(t->ne[1]) : 0;
    return packed > kt_nbytes(t) ? packed : kt_nbytes(t);
}

static struct kt_buffer *rp_buft_alloc(struct kt_buffer_type *buft, size_t size) {
    struct repack_buf *r = calloc(1, sizeof *r);
    if (!r) {
        kt_set_error("CPU_REPACK buffer: out of memory");
        return NULL;
    }
    if (size) {
        r->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r->mem == MAP_FAILED) {
            free(r);
            kt_set_error("CPU_REPACK buffer: cannot allocate %zu bytes", size);
            return NULL;
        }
#ifdef MADV_HUGEPAGE
        /* fewer TLB misses while streaming a large model (small ones keep 4 KiB pages:
         * their memory stays as small and as predictable as their files) */
        if (size >= ((size_t)256 << 20)) madvise(r->mem, size, MADV_HUGEPAGE);
#endif
    }
    struct kt_buffer *buf = kt_buffer_init(buft, rp_buffer_i, r, size);
    if (!buf) {
        if (r->mem) munmap(r->mem, size);
        free(r);
    }
    return buf;
}

static struct kt_buffer_type repack_buft = {
    .iface = {.get_name = rp_buft_name,
              .alloc_buffer = rp_buft_alloc,
              .get_alignment = rp_buft_alignment,
              .get_alloc_size = rp_buft_alloc_size,
              .is_host = rp_buft_is_host},
};

struct kt_buffer_type *kt_cpu_repack_buffer_type(void) {
    repack_buft.device = kt_cpu_device();
    return &repack_buft;
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

