/*
 * backend_cuda.cu - the CUDA backend behind backend-impl.h: one device per
 * visible GPU (the first is "CUDA0"), device-memory buffers whose set/get
 * and copies run on the device's stream, and a backend that queues each
 * node's kernel on that stream and waits once per graph. supports_op answers
 * per op and type exactly what ops_cuda.cu computes; everything else stays
 * on the CPU through the scheduler.
 *
 * Without a driver or a device the registry row is absent and
 * kt_dev_unavailable() says why, so a CUDA build still runs on the CPU.
 */
#include "cuda_impl.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU_ALIGN 256

struct cu_device {
    int id;
    char name[16];
    char desc[400];
    cudaStream_t stream;
    struct kt_buffer_type buft;
    struct kt_device dev;
};

static struct cu_device g_dev;
static bool g_probed, g_present;
static char g_why[256];

static bool cu_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    kt_set_error("CUDA: %s: %s", what, cudaGetErrorString(e));
    return false;
}

static struct cu_device *cu_of(const struct kt_device *d) { return (struct cu_device *)d->context; }

/* ------------------------------------------------------------------ buffers */

struct cu_buffer {
    void *ptr;
    struct cu_device *dev;
};

static void cu_buf_free(struct kt_buffer *buf) {
    struct cu_buffer *c = (struct cu_buffer *)buf->context;
    cudaSetDevice(c->dev->id);
    cudaFree(c->ptr);
    free(c);
}

static void *cu_buf_base(const struct kt_buffer *buf) { return ((struct cu_buffer *)buf->context)->ptr; }

static cudaStream_t buf_stream(const struct kt_buffer *buf) { return ((struct cu_buffer *)buf->context)->dev->stream; }

/* Queued work on buf's stream, then waited for: set/get/copy return with the bytes in place. */
static bool wait_for(const struct kt_buffer *buf, cudaError_t queued, const char *what) {
    const bool ok = cu_ok(queued, what);
    return cu_ok(cudaStreamSynchronize(buf_stream(buf)), what) && ok;
}

static void cu_buf_set(struct kt_buffer *buf, struct kt_tensor *t, const void *data, size_t offset, size_t size) {
    wait_for(buf, cudaMemcpyAsync((char *)t->data + offset, data, size, cudaMemcpyHostToDevice, buf_stream(buf)),
             "set tensor");
}

static void cu_buf_get(struct kt_buffer *buf, const struct kt_tensor *t, void *data, size_t offset, size_t size) {
    wait_for(buf, cudaMemcpyAsync(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost, buf_stream(buf)),
             "get tensor");
}

static void cu_buf_memset(struct kt_buffer *buf, struct kt_tensor *t, uint8_t value, size_t offset, size_t size) {
    wait_for(buf, cudaMemsetAsync((char *)t->data + offset, value, size, buf_stream(buf)), "memset tensor");
}

static bool is_cuda_buffer(const struct kt_buffer *b);

/* Contiguous copies into device memory in one transfer, from host or device memory. */
static bool cu_buf_cpy(struct kt_buffer *buf, const struct kt_tensor *src, struct kt_tensor *dst) {
    if (!kt_is_contiguous(src) || !kt_is_contiguous(dst)) return false;
    const bool from_dev = src->buffer && is_cuda_buffer(src->buffer);
    if (!from_dev && src->buffer && !kt_buffer_is_host(src->buffer)) return false;
    return wait_for(buf,
                    cudaMemcpyAsync(dst->data, src->data, kt_nbytes(src),
                                    from_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, buf_stream(buf)),
                    "copy tensor");
}

static void cu_buf_clear(struct kt_buffer *buf, uint8_t value) {
    wait_for(buf, cudaMemsetAsync(cu_buf_base(buf), value, buf->size, buf_stream(buf)), "clear buffer");
}

static const struct kt_buffer_i cu_buffer_i = {
    cu_buf_free, cu_buf_base, NULL, cu_buf_set, cu_buf_get, cu_buf_memset, cu_buf_cpy, cu_buf_clear,
};

static bool is_cuda_buffer(const struct kt_buffer *b) { return b->iface.get_base == cu_buf_base; }

/* ------------------------------------------------------------------ buffer type */

static const char *cu_buft_name(const struct kt_buffer_type *buft) { return cu_of(buft->device)->name; }

static struct kt_buffer *cu_buft_alloc(struct kt_buffer_type *buft, size_t size) {
    struct cu_device *d = cu_of(buft->device);
    struct cu_buffer *c = (struct cu_buffer *)calloc(1, sizeof *c);
    if (!c) {
        kt_set_error("%s: out of host memory", d->name);
        return NULL;
    }
    c->dev = d;
    cudaSetDevice(d->id);
    /* at least one aligned unit, so that an empty buffer still has a base */
    cudaError_t e = cudaMalloc(&c->ptr, size ? size : CU_ALIGN);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        kt_set_error("%s: cannot allocate %zu MiB of device memory (%zu MiB free of %zu): %s", d->name, size >> 20,
                     fr >> 20, tot >> 20, cudaGetErrorString(e));
        free(c);
        return NULL;
    }
    struct kt_buffer *b = kt_buffer_init(buft, cu_buffer_i, c, size);
    if (!b) {
        cudaFree(c->ptr);
        free(c);
    }
    return b;
}

static size_t cu_buft_align(const struct kt_buffer_type *) { return CU_ALIGN; }

static const struct kt_buffer_type_i cu_buft_i = {cu_buft_name, cu_buft_alloc, cu_buft_align, NULL, NULL, NULL};

/* ------------------------------------------------------------------ backend */

/* A backend's scratch memory (F16 operands for cuBLAS, attention splits): grows to
 * the largest need seen and is then reused, so steady decoding allocates nothing. */
struct cu_backend {
    void *scratch;
    size_t scratch_size;
    /* the tensor (and its address) whose int8 quants the scratch holds, so that the
     * products sharing an input (q, k, v; gate, up) quantize it once per graph; NULL
     * once anything may have changed either */
    const struct kt_tensor *q8_of;
    const void *q8_data;
    /* decoding's graphs are captured and replayed as one CUDA graph (exec, updated in place
     * while the node list keeps its shape); off with KILN_CUDA_GRAPHS=0, or for good once a
     * capture fails */
    bool graphs;
    cudaGraphExec_t exec;
    /* KILN_CUDA_PROFILE=1: each node timed alone (events around it, then a wait), summed
     * per op and printed when the backend is freed */
    bool profile;
    cudaEvent_t ev[2];
    double op_ms[KT_OP_COUNT];
    long op_n[KT_OP_COUNT];
};

static const char *cu_backend_name(const struct kt_backend *b) { return cu_of(b->device)->name; }

static void cu_backend_free(struct kt_backend *b) {
    struct cu_backend *c = (struct cu_backend *)b->context;
    if (c->profile) {
        double total = 0.0;
        for (int i = 0; i < KT_OP_COUNT; i++) total += c->op_ms[i];
        fprintf(stderr, "CUDA profile (each node alone): %.1f ms in all\n", total);
        for (int i = 0; i < KT_OP_COUNT; i++)
            if (c->op_n[i])
                fprintf(stderr, "  %-10s %8ld nodes %10.2f ms %5.1f%%\n", kt_op_name((enum kt_op)i), c->op_n[i],
                        c->op_ms[i], 100.0 * c->op_ms[i] / total);
        cudaEventDestroy(c->ev[0]);
        cudaEventDestroy(c->ev[1]);
    }
    if (c->scratch) cudaFree(c->scratch);
    if (c->exec) cudaGraphExecDestroy(c->exec);
    free(c);
    free(b);
}

static void *scratch(struct cu_backend *c, cudaStream_t s, size_t need) {
    if (need <= c->scratch_size) return c->scratch;
    const size_t size = (need + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    cudaStreamSynchronize(s);
    c->q8_of = NULL;
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_size = 0;
    if (!cu_ok(cudaMalloc(&c->scratch, size), "scratch memory")) return NULL;
    c->scratch_size = size;
    return c->scratch;
}

static bool f32(const struct kt_tensor *t) { return t && t->type == KT_TYPE_F32; }

static bool cu_supports_op(const struct kt_backend *, const struct kt_tensor *op) {
    const struct kt_tensor *a = op->src[0], *b = op->src[1];
    switch (op->op) {
    case KT_OP_NONE: case KT_OP_RESHAPE: case KT_OP_VIEW: case KT_OP_PERMUTE: case KT_OP_TRANSPOSE:
        return true;
    case KT_OP_ADD: case KT_OP_SUB: case KT_OP_MUL: case KT_OP_DIV: case KT_OP_SWIGLU: case KT_OP_GEGLU:
        return f32(op) && f32(a) && f32(b);
    case KT_OP_SCALE: case KT_OP_SQR: case KT_OP_SQRT: case KT_OP_SILU: case KT_OP_GELU: case KT_OP_RELU:
    case KT_OP_SOFTCAP:
        return f32(op) && f32(a);
    case KT_OP_NORM: case KT_OP_RMS_NORM:
        return f32(op) && f32(a);
    case KT_OP_ARGMAX:
        return f32(a) && a->ne[2] == 1 && a->ne[3] == 1;
    case KT_OP_SOFT_MAX:
        return f32(op) && f32(a) && kt_get_op_param_f32(op, 1) == 0.0f &&
               (!b || b->type == KT_TYPE_F32 || b->type == KT_TYPE_F16);
    case KT_OP_ROPE: {
        /* no YaRN in the rope kernel (gpt-oss's stays on the CPU) */
        struct kt_rope_params rp;
        memcpy(&rp, op->op_params, sizeof rp);
        return f32(op) && f32(a) && b && b->type == KT_TYPE_I32 && (!op->src[2] || f32(op->src[2])) &&
               rp.ext_factor == 0.0f && (rp.attn_factor == 0.0f || rp.attn_factor == 1.0f);
    }
    case KT_OP_GET_ROWS:
        return f32(op) && kt_cu_type_readable(a->type) && b->type == KT_TYPE_I32;
    case KT_OP_DUP: case KT_OP_CONT: case KT_OP_CPY: {
        const struct kt_tensor *d = op->op == KT_OP_CPY ? b : op;
        if (a->type != KT_TYPE_F32 && a->type != KT_TYPE_F16) return false;
        /* not into Q8_0 yet: a first kernel's blocks came back from the H100 with their fp16
         * scales' low byte zeroed (cause not found); a Q8_0 cache stays on the CPU */
        return d->type == KT_TYPE_F32 || d->type == KT_TYPE_F16;
    }
    case KT_OP_MUL_MAT:
        return f32(op) && f32(b) && kt_cu_type_readable(a->type) && a->ne[0] == b->ne[0] &&
               (kt_blck_size(a->type) == 1 || a->nb[0] == kt_type_size(a->type));
    case KT_OP_ATTN: {
        const struct kt_tensor *k = op->src[1], *v = op->src[2], *m = op->src[3], *o = op->src[4];
        /* the attention kernels do not soft-cap their scores (Gemma 2) nor take sinks (gpt-oss):
         * those stay on the CPU */
        return f32(op) && f32(a) && a->ne[0] <= 256 && kt_get_op_param_f32(op, 1) == 0.0f && !op->src[5] &&
               kt_cu_type_readable(k->type) &&
               kt_cu_type_readable(v->type) && k->nb[0] == kt_type_size(k->type) &&
               v->nb[0] == kt_type_size(v->type) && (!m || f32(m)) && (!o || (o->type == KT_TYPE_I32 && kt_is_contiguous(o)));
    }
    /* MUL_MAT_ID, TOP_K, SWIGLU_OAI (mixtures of experts): no kernels here; the scheduler
     * keeps them on the CPU */
    default:
        return false;
    }
}

static bool cu_supports_buft(const struct kt_backend *b, const struct kt_buffer_type *buft) {
    return buft == &cu_of(b->device)->buft;
}

/* Whether the kernels queued for node t were launched. */
static enum kt_status cu_launched(const struct kt_tensor *t) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        kt_set_error("CUDA: %s '%s': %s", kt_op_name(t->op), t->name, cudaGetErrorString(e));
        return KT_STATUS_FAILED;
    }
    return KT_STATUS_SUCCESS;
}

static enum kt_status cu_compute_node(struct cu_backend *c, cudaStream_t s, struct kt_tensor *t) {
    struct kt_tensor *a = t->src[0], *b = t->src[1];
    const kt_cu_t d = kt_cu_desc(t);
    switch (t->op) {
    case KT_OP_ADD: case KT_OP_SUB: case KT_OP_MUL: case KT_OP_DIV: case KT_OP_SWIGLU: case KT_OP_GEGLU:
        kt_cu_binary(s, t->op, d, kt_cu_desc(a), kt_cu_desc(b));
        break;
    case KT_OP_SOFTCAP:
        kt_cu_unary(s, t->op, d, kt_cu_desc(a), kt_get_op_param_f32(t, 0), 0.0f);
        break;
    case KT_OP_SCALE:
        kt_cu_unary(s, t->op, d, kt_cu_desc(a), kt_get_op_param_f32(t, 0), kt_get_op_param_f32(t, 1));
        break;
    case KT_OP_SQR: case KT_OP_SQRT: case KT_OP_SILU: case KT_OP_GELU: case KT_OP_RELU:
        kt_cu_unary(s, t->op, d, kt_cu_desc(a), 0.0f, 0.0f);
        break;
    case KT_OP_NORM: case KT_OP_RMS_NORM:
        kt_cu_norm(s, t->op == KT_OP_RMS_NORM, d, kt_cu_desc(a), kt_get_op_param_f32(t, 0), NULL, NULL);
        break;
    case KT_OP_ARGMAX:
        kt_cu_argmax(s, d, kt_cu_desc(a));
        break;
    case KT_OP_SOFT_MAX: {
        kt_cu_t m = b ? kt_cu_desc(b) : d;
        kt_cu_soft_max(s, d, kt_cu_desc(a), b ? &m : NULL, kt_get_op_param_f32(t, 0));
        break;
    }
    case KT_OP_ROPE: {
        struct kt_rope_params rp;
        memcpy(&rp, t->op_params, sizeof rp);
        kt_cu_rope(s, d, kt_cu_desc(a), (const int32_t *)b->data, (int64_t)b->nb[0],
                   t->src[2] ? (const float *)t->src[2]->data : NULL, &rp);
        break;
    }
    case KT_OP_GET_ROWS:
        kt_cu_get_rows(s, d, kt_cu_desc(a), kt_cu_desc(b));
        break;
    case KT_OP_DUP: case KT_OP_CONT:
        kt_cu_copy(s, d, kt_cu_desc(a));
        break;
    case KT_OP_CPY:
        kt_cu_copy(s, kt_cu_desc(b), kt_cu_desc(a));
        break;
    case KT_OP_MUL_MAT: {
        const kt_cu_t da = kt_cu_desc(a), db = kt_cu_desc(b);
        const size_t need = kt_cu_mul_mat_scratch(d, da, db);
        void *sp = need ? scratch(c, s, need) : NULL;
        if (need && !sp) return KT_STATUS_FAILED;
        const bool reuse = c->q8_of == b && c->q8_data == b->data;
        c->q8_of = kt_cu_mul_mat(s, d, da, db, sp, reuse) ? b : NULL;
        c->q8_data = b->data;
        break;
    }
    case KT_OP_ATTN: {
        const kt_cu_t dq = kt_cu_desc(a), dk = kt_cu_desc(b);
        kt_cu_t m = t->src[3] ? kt_cu_desc(t->src[3]) : d;
        const size_t need = kt_cu_attn_scratch(dq, dk);
        void *sp = need ? scratch(c, s, need) : NULL;
        if (need && !sp) return KT_STATUS_FAILED;
        if (need) c->q8_of = NULL;
        kt_cu_attn(s, d, dq, dk, kt_cu_desc(t->src[2]), t->src[3] ? &m : NULL,
                   t->src[4] ? (const int32_t *)t->src[4]->data : NULL, kt_get_op_param_f32(t, 0), sp);
        break;
    }
    default:
        kt_set_error("CUDA: op %s is not supported", kt_op_name(t->op));
        return KT_STATUS_FAILED;
    }
    return cu_launched(t);
}

/* Whether node t writes any byte of u (a cpy writes its destination). */
static bool writes_into(const struct kt_tensor *t, const struct kt_tensor *u) {
    if (t->op == KT_OP_CPY) t = t->src[1];
    const char *t0 = (const char *)t->data, *u0 = (const char *)u->data;
    return t0 < u0 + kt_nbytes(u) && u0 < t0 + kt_nbytes(t);
}

static enum kt_status run_nodes(struct cu_backend *c, struct cu_device *dev, struct kt_cgraph *gf) {
    c->q8_of = NULL; /* inputs may have been set since */
    for (int i = 0; i < gf->n_nodes; i++) {
        struct kt_tensor *t = gf->nodes[i];
        if (t->op == KT_OP_NONE || kt_is_view_op(t->op) || kt_nelements(t) == 0) continue;
        if (c->q8_of && t->op != KT_OP_MUL_MAT && writes_into(t, c->q8_of)) c->q8_of = NULL;
        if (c->profile) cudaEventRecord(c->ev[0], dev->stream);
        /* a norm and the multiply by its weight row that follows it: one pass */
        struct kt_tensor *u = i + 1 < gf->n_nodes ? gf->nodes[i + 1] : NULL;
        if ((t->op == KT_OP_RMS_NORM || t->op == KT_OP_NORM) && u && u->op == KT_OP_MUL && u->src[0] == t) {
            const kt_cu_t dt = kt_cu_desc(t), dw = kt_cu_desc(u->src[1]), du = kt_cu_desc(u);
            if (kt_cu_norm(dev->stream, t->op == KT_OP_RMS_NORM, dt, kt_cu_desc(t->src[0]), kt_get_op_param_f32(t, 0),
                           &dw, &du)) {
                if (c->q8_of && writes_into(u, c->q8_of)) c->q8_of = NULL;
                i++;
            }
        }
        enum kt_status st = t == gf->nodes[i] ? cu_compute_node(c, dev->stream, t) : cu_launched(t);
        if (st != KT_STATUS_SUCCESS) return st;
        if (c->profile) {
            float ms = 0.0f;
            cudaEventRecord(c->ev[1], dev->stream);
            cudaEventSynchronize(c->ev[1]);
            cudaEventElapsedTime(&ms, c->ev[0], c->ev[1]);
            c->op_ms[t->op] += ms;
            c->op_n[t->op]++;
        }
    }
    return KT_STATUS_SUCCESS;
}

/* A graph whose nodes only launch kernels (no cuBLAS, no attribute changes): products of
 * at most 16 columns, attention over fewer than 32 tokens. The scratch all its nodes need
 * goes to *need, so that nothing is allocated while the stream is captured. */
static bool capturable(const struct kt_cgraph *gf, size_t *need) {
    *need = 0;
    for (int i = 0; i < gf->n_nodes; i++) {
        const struct kt_tensor *t = gf->nodes[i];
        size_t n = 0;
        if (t->op == KT_OP_MUL_MAT) {
            if (t->src[1]->ne[1] > 16) return false;
            n = kt_cu_mul_mat_scratch(kt_cu_desc(t), kt_cu_desc(t->src[0]), kt_cu_desc(t->src[1]));
        } else if (t->op == KT_OP_ATTN) {
            if (t->src[0]->ne[2] >= 32) return false;
            n = kt_cu_attn_scratch(kt_cu_desc(t->src[0]), kt_cu_desc(t->src[1]));
        }
        if (n > *need) *need = n;
    }
    return true;
}

/* Capture the nodes' kernels and replay them as one graph: true when it was launched (*st
 * says whether the launch went); false, with nothing run, where anything in the capture
 * failed (the caller then launches the nodes as before, which reports a node's own error). */
static bool run_captured(struct cu_backend *c, struct cu_device *dev, struct kt_cgraph *gf, enum kt_status *st) {
    cudaStream_t s = dev->stream;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    const enum kt_status cst = run_nodes(c, dev, gf);
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    if (cst != KT_STATUS_SUCCESS || e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return false;
    }
    if (c->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->exec, g, &info) != cudaSuccess) { /* another shape: instantiate anew */
            cudaGetLastError();
            cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
        }
    }
    if (!c->exec && cudaGraphInstantiate(&c->exec, g, 0) != cudaSuccess) {
        cudaGetLastError();
        c->exec = NULL;
    }
    cudaGraphDestroy(g);
    if (!c->exec) return false;
    *st = cu_ok(cudaGraphLaunch(c->exec, s), "graph launch") ? KT_STATUS_SUCCESS : KT_STATUS_FAILED;
    return true;
}

static enum kt_status cu_graph_compute(struct kt_backend *b, struct kt_cgraph *gf) {
    struct cu_device *dev = cu_of(b->device);
    struct cu_backend *c = (struct cu_backend *)b->context;
    cudaSetDevice(dev->id);
    enum kt_status st = KT_STATUS_SUCCESS;
    size_t need = 0;
    bool done = false;
    if (c->graphs && !c->profile && capturable(gf, &need)) {
        if (need && !scratch(c, dev->stream, need)) return KT_STATUS_FAILED;
        done = run_captured(c, dev, gf, &st);
        if (!done) c->graphs = false; /* for good: launch as before */
    }
    if (!done) st = run_nodes(c, dev, gf);
    if (st != KT_STATUS_SUCCESS) return st;
    return cu_ok(cudaStreamSynchronize(dev->stream), "graph compute") ? KT_STATUS_SUCCESS : KT_STATUS_FAILED;
}

static void cu_synchronize(struct kt_backend *b) { cudaStreamSynchronize(cu_of(b->device)->stream); }

/* no threads of its own, and a queued graph runs whole (the scheduler asks the abort
 * callback between splits) */
static const struct kt_backend_i cu_backend_i = {
    cu_backend_name, cu_backend_free, cu_graph_compute, cu_supports_op, cu_supports_buft, NULL, cu_synchronize,
    NULL,            NULL,
};

/* ------------------------------------------------------------------ device */

static const char *cu_dev_name(const struct kt_device *d) { return cu_of(d)->name; }
static const char *cu_dev_desc(const struct kt_device *d) { return cu_of(d)->desc; }
static enum kt_device_type cu_dev_type(const struct kt_device *) { return KT_DEVICE_TYPE_GPU; }

static void cu_dev_memory(const struct kt_device *d, size_t *fr, size_t *tot) {
    cudaSetDevice(cu_of(d)->id);
    if (cudaMemGetInfo(fr, tot) != cudaSuccess) *fr = *tot = 0;
}

static struct kt_buffer_type *cu_dev_buft(struct kt_device *d) { return &cu_of(d)->buft; }

static struct kt_backend *cu_dev_init_backend(struct kt_device *d) {
    struct kt_backend *b = (struct kt_backend *)calloc(1, sizeof *b);
    struct cu_backend *c = (struct cu_backend *)calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        kt_set_error("%s: out of host memory", cu_of(d)->name);
        return NULL;
    }
    b->iface = cu_backend_i;
    b->device = d;
    b->context = c;
    const char *prof = getenv("KILN_CUDA_PROFILE");
    c->profile = prof && prof[0] && strcmp(prof, "0") && cudaEventCreate(&c->ev[0]) == cudaSuccess &&
                 cudaEventCreate(&c->ev[1]) == cudaSuccess;
    const char *graphs = getenv("KILN_CUDA_GRAPHS");
    c->graphs = !graphs || strcmp(graphs, "0");
    return b;
}

static const struct kt_device_i cu_device_i = {cu_dev_name, cu_dev_desc, cu_dev_type, cu_dev_memory, cu_dev_buft,
                                               cu_dev_init_backend, NULL};

extern "C" struct kt_device *kt_cuda_device(void) {
    if (g_probed) return g_present ? &g_dev.dev : NULL;
    g_probed = true;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(g_why, sizeof g_why, "no CUDA device: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver lists none");
        cudaGetLastError();
        return NULL;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || cudaSetDevice(0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g_dev.stream, cudaStreamNonBlocking) != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "CUDA device 0 cannot be used: %s", cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    g_dev.id = 0;
    snprintf(g_dev.name, sizeof g_dev.name, "CUDA0");
    snprintf(g_dev.desc, sizeof g_dev.desc, "%s (compute %d.%d, %d SMs, %zu MiB; prompts: %s)", p.name, p.major,
             p.minor, p.multiProcessorCount, p.totalGlobalMem >> 20,
             kt_cu_cublas() ? "cuBLAS, F16 operands" : "kiln's F32 tiles (no cuBLAS)");
    g_dev.dev.iface = cu_device_i;
    g_dev.dev.context = &g_dev;
    g_dev.buft.iface = cu_buft_i;
    g_dev.buft.device = &g_dev.dev;
    g_dev.buft.context = &g_dev;
    g_present = true;
    return &g_dev.dev;
}

extern "C" const char *kt_cuda_unavailable(void) {
    kt_cuda_device();
    return g_present ? NULL : g_why;
}
