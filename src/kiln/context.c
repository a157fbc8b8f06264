/*
 * context.c - a decode context over a model: its sequence memory (memory.h: the
 * KV caches its layers need), the backend and scheduler that run graphs,
 * batches, kiln_decode and the logits it leaves.
 *
 * Every decode builds the graph anew into a metadata arena that is reused (no
 * allocation), and the scheduler places it in compute memory sized once at
 * creation by reserving the largest graph (n_batch tokens over every whole cache).
 */
#include "runtime.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_context_params kiln_context_default_params(void) {
    return (struct kiln_context_params){
        .n_ctx = 0, .n_batch = 512, .n_seq_max = 1, .n_threads = 2, .type_k = KT_TYPE_F16, .type_v = KT_TYPE_F16,
        .pooling = KILN_POOLING_UNSPECIFIED};
}

/* ------------------------------------------------------------------ batches */

struct kiln_batch kiln_batch_init(int32_t capacity) {
    struct kiln_batch b = {0};
    if (capacity <= 0) return b;
    b.token = malloc(sizeof(int32_t) * (size_t)capacity);
    b.pos = malloc(sizeof(int32_t) * (size_t)capacity);
    b.seq_id = malloc(sizeof(int32_t) * (size_t)capacity);
    b.logits = malloc((size_t)capacity);
    if (!b.token || !b.pos || !b.seq_id || !b.logits) {
        kiln_batch_free(&b);
        return b;
    }
    b.capacity = capacity;
    return b;
}

void kiln_batch_free(struct kiln_batch *b) {
    free(b->token);
    free(b->pos);
    free(b->seq_id);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

void kiln_batch_clear(struct kiln_batch *b) { b->n_tokens = 0; }

bool kiln_batch_add(struct kiln_batch *b, int32_t token, int32_t pos, int32_t seq_id, bool logits) {
    if (b->n_tokens >= b->capacity) return false;
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    b->pos[i] = pos;
    b->seq_id[i] = seq_id;
    b->logits[i] = logits;
    return true;
}

/* ------------------------------------------------------------------ graph */

/* Build the graph for n_tokens tokens with n_outputs logits rows (with embeddings: n_seq
 * sequences pooled) over what each memory part placed (reserve: the largest batch over
 * every part's whole extent). */
static struct kt_cgraph *build_graph(struct kiln_context *ctx, int64_t n_tokens, int64_t n_outputs, int64_t n_seq,
                                     bool reserve, struct kiln_graph_in *in) {
    struct kt_context *mctx =
        kt_init((struct kt_init_params){.mem_size = ctx->meta_size, .mem_buffer = ctx->meta_buf, .no_alloc = true});
    if (!mctx) return NULL;
    *in = (struct kiln_graph_in){.ctx = mctx, .model = ctx->model, .kctx = ctx, .n_tokens = n_tokens,
                                 .n_outputs = n_outputs, .embeddings = ctx->params.embeddings};
    in->tokens = kt_set_name(kt_new_tensor_1d(mctx, KT_TYPE_I32, n_tokens), "inp_tokens");
    in->pos = kt_set_name(kt_new_tensor_1d(mctx, KT_TYPE_I32, n_tokens), "inp_pos");
    in->out_ids = kt_set_name(kt_new_tensor_1d(mctx, KT_TYPE_I32, n_outputs), "inp_out_ids");
    struct kt_cgraph *gf = kt_new_graph_custom(mctx, ctx->graph_size);
    if (!in->tokens || !in->pos || !in->out_ids || !gf) goto fail;
    kt_set_input(in->tokens);
    kt_set_input(in->pos);
    kt_set_input(in->out_ids);
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        struct kiln_mem_part *p = ctx->mem.parts[i];
        if (!p->ops->inputs(p, mctx, n_tokens, reserve, &in->mem[i])) goto fail;
    }
    struct kt_tensor *logits = ctx->model->arch->build(in);
    if (logits && in->embeddings) {
        /* a builder that does not return the hidden states of every token cannot be pooled */
        if (logits->ne[0] != ctx->model->hp.n_embd || logits->ne[1] != n_tokens) {
            snprintf(ctx->err, sizeof ctx->err, "architecture '%s' does not make embeddings",
                     ctx->model->arch->name);
            kt_free(mctx);
            return NULL;
        }
        logits = kiln_pool_build(in, &ctx->pool, logits, ctx->pooling, n_seq);
    }
    if (!logits || !kt_build_forward_expand(gf, logits)) goto fail;
    /* the arena lives in meta_buf; the context object itself is not needed after building */
    kt_free(mctx);
    return gf;
fail:
    snprintf(ctx->err, sizeof ctx->err, "building the graph failed: %s", kt_last_error());
    kt_free(mctx);
    return NULL;
}

/* ------------------------------------------------------------------ context */

struct kiln_context *kiln_context_new(const struct kiln_model *model, struct kiln_context_params params, char *err,
                                      size_t errlen) {
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    if (!model->layers) {
        snprintf(err, errlen, "the model was loaded without weights (vocab only)");
        return NULL;
    }
    if (params.n_ctx == 0) params.n_ctx = (uint32_t)(model->hp.n_ctx_train < (1 << 20) ? model->hp.n_ctx_train : (1 << 20));
    if (params.n_ctx > (1u << 24)) {
        snprintf(err, errlen, "n_ctx %u is too large", params.n_ctx);
        return NULL;
    }
    if (params.n_batch == 0 || params.n_batch > params.n_ctx) params.n_batch = params.n_ctx;
    if (params.n_seq_max < 1 || params.n_seq_max > 64) {
        snprintf(err, errlen, "n_seq_max %u out of range (1..64)", params.n_seq_max);
        return NULL;
    }
    if (params.n_threads < 1 || params.n_threads > 512) {
        snprintf(err, errlen, "n_threads %d out of range (1..512)", params.n_threads);
        return NULL;
    }
    const struct kiln_hparams *mhp = &model->hp;
    enum kiln_pooling pooling = params.pooling == KILN_POOLING_UNSPECIFIED ? mhp->pooling : params.pooling;
    if (params.embeddings) {
        if (pooling < KILN_POOLING_NONE || pooling > KILN_POOLING_RANK) {
            snprintf(err, errlen, "pooling %d is not one kiln knows (none, mean, cls, last, rank)", (int)pooling);
            return NULL;
        }
        if (pooling == KILN_POOLING_RANK && !model->cls && !model->cls_out) {
            snprintf(err, errlen, "rank pooling needs a classifier head (cls.output.weight), which this %s file lacks",
                     model->arch->name);
            return NULL;
        }
        /* every decode holds whole sequences, attending to each other's tokens only within one */
        params.n_batch = params.n_ctx;
    } else if (model->arch->encoder) {
        snprintf(err, errlen, "architecture '%s' makes embeddings only (it has no output head): make the context with "
                 "embeddings on", model->arch->name);
        return NULL;
    }
    struct kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ctx->pooling = pooling;
    ctx->model = model;
    ctx->params = params;
    ctx->graph_size = (int)(model->hp.n_layer * model->arch->graph_per_layer + model->arch->graph_extra);
    /* a routed feed-forward adds its routing and one view and add per expert used */
    for (int64_t il = 0; il < model->hp.n_layer; il++)
        if (model->lhp[il].n_expert > 0) ctx->graph_size += (int)(24 + 2 * model->lhp[il].n_expert_used);
    ctx->meta_size = (size_t)ctx->graph_size * 2 * kt_tensor_overhead() + kt_graph_overhead_custom((size_t)ctx->graph_size) +
                     4096;
    ctx->meta_buf = malloc(ctx->meta_size);
    if (params.embeddings) {
        ctx->n_embd_out = pooling == KILN_POOLING_RANK ? mhp->n_cls_out : mhp->n_embd;
        const size_t rows = pooling == KILN_POOLING_NONE ? params.n_batch : params.n_seq_max;
        ctx->embd = malloc(sizeof(float) * (size_t)ctx->n_embd_out * rows);
        ctx->embd_seq_row = malloc(sizeof(int32_t) * params.n_seq_max);
    } else {
        ctx->logits = malloc(sizeof(float) * (size_t)model->hp.n_vocab * params.n_batch);
    }
    ctx->logits_row = malloc(sizeof(int32_t) * params.n_batch);
    struct kt_device *cpu = kt_dev_by_type(KT_DEVICE_TYPE_CPU);
    ctx->backend = cpu ? kt_dev_init_backend(cpu) : NULL;
    if (!ctx->meta_buf || (!ctx->logits && !ctx->embd) || (params.embeddings && !ctx->embd_seq_row) ||
        !ctx->logits_row || !ctx->backend ||
        !kt_backend_set_n_threads(ctx->backend, params.n_threads)) {
        snprintf(err, errlen, "cannot create the context: %s", kt_last_error()[0] ? kt_last_error() : "out of memory");
        goto fail;
    }
    /* with layers on the GPU its backend goes first and the CPU takes what it cannot run;
     * the cache goes to the GPU when every layer does (else attention reads it on the CPU) */
    struct kt_backend *bes[2] = {ctx->backend, NULL};
    int n_be = 1;
    struct kt_buffer_type *kv_buft = kt_backend_get_default_buffer_type(ctx->backend);
    if (model->gpu) {
        ctx->gpu = kt_dev_init_backend(model->gpu);
        if (!ctx->gpu) {
            snprintf(err, errlen, "cannot start %s: %s", kt_dev_name(model->gpu), kt_last_error());
            goto fail;
        }
        bes[0] = ctx->gpu, bes[1] = ctx->backend, n_be = 2;
        const bool gpu_kv_type = (params.type_k == KT_TYPE_F16 || params.type_k == KT_TYPE_F32) &&
                                 (params.type_v == KT_TYPE_F16 || params.type_v == KT_TYPE_F32);
        if (model->gpu_layer0 == 0 && gpu_kv_type) kv_buft = kt_dev_buffer_type(model->gpu);
    }
    if (!kiln_memory_init(&ctx->mem, model, params.n_ctx, params.n_seq_max, params.n_batch, params.type_k,
                          params.type_v, kv_buft, err, errlen))
        goto fail;
    ctx->sched = kt_sched_new(bes, n_be, ctx->graph_size);
    if (!ctx->sched) {
        snprintf(err, errlen, "cannot create the scheduler: %s", kt_last_error());
        goto fail;
    }
    /* size compute memory once, for the largest batch over the whole cache */
    struct kiln_graph_in in;
    struct kt_cgraph *gf = build_graph(ctx, params.n_batch, params.n_batch, params.n_seq_max, true, &in);
    if (!gf || !kt_sched_reserve(ctx->sched, gf)) {
        snprintf(err, errlen, "cannot reserve compute memory: %s", gf ? kt_last_error() : ctx->err);
        goto fail;
    }
    kt_sched_reset(ctx->sched);
    return ctx;
fail:
    kiln_context_free(ctx);
    return NULL;
}

void kiln_context_free(struct kiln_context *ctx) {
    if (!ctx) return;
    if (ctx->sched) kt_sched_free(ctx->sched);
    kiln_memory_free(&ctx->mem);
    if (ctx->backend) kt_backend_free(ctx->backend);
    if (ctx->gpu) kt_backend_free(ctx->gpu);
    free(ctx->meta_buf);
    free(ctx->logits);
    free(ctx->logits_row);
    free(ctx->embd);
    free(ctx->embd_seq_row);
    free(ctx);
}

uint32_t kiln_n_ctx(const struct kiln_context *ctx) { return ctx->params.n_ctx; }
uint32_t kiln_n_batch(const struct kiln_context *ctx) { return ctx->params.n_batch; }
uint32_t kiln_n_seq_max(const struct kiln_context *ctx) { return ctx->params.n_seq_max; }
const char *kiln_context_error(const struct kiln_context *ctx) { return ctx->err; }
enum kiln_status kiln_set_n_threads(struct kiln_context *ctx, int n_threads) {
    if (n_threads < 1 || n_threads > 512) {
        snprintf(ctx->err, sizeof ctx->err, "n_threads %d out of range (1..512)", n_threads);
        return KILN_ERR_ARG;
    }
    if (!kt_backend_set_n_threads(ctx->backend, n_threads)) {
        snprintf(ctx->err, sizeof ctx->err, "cannot start %d threads: %s", n_threads, kt_last_error());
        return KILN_ERR_NO_MEMORY;
    }
    ctx->params.n_threads = n_threads;
    return KILN_OK;
}

void kiln_set_abort_callback(struct kiln_context *ctx, kiln_abort_fn fn, void *data) {
    kt_sched_set_abort_callback(ctx->sched, fn, data);
}
size_t kiln_compute_buffer_size(const struct kiln_context *ctx) {
    return kt_sched_get_buffer_size(ctx->sched, ctx->backend);
}

/* ------------------------------------------------------------------ decode */

const char *kiln_status_name(enum kiln_status st) {
    switch (st) {
    case KILN_OK: return "ok";
    case KILN_ERR_ARG: return "bad argument";
    case KILN_ERR_NO_ROOM: return "no room in the KV cache";
    case KILN_ERR_COMPUTE: return "compute failed";
    case KILN_ERR_ABORTED: return "aborted";
    case KILN_ERR_NO_MEMORY: return "out of memory";
    }
    return "unknown status";
}

static enum kiln_status decode_error(struct kiln_context *ctx, enum kiln_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum kiln_status decode_error(struct kiln_context *ctx, enum kiln_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    return code;
}

/* Output ids go straight into the tensor's memory when it is host memory (the CPU
 * backend), else through a scratch copy; each memory part fills its own inputs. */
static bool set_inputs(struct kiln_context *ctx, const struct kiln_batch *b, const struct kiln_graph_in *in,
                       bool all_out) {
    const int64_t T = in->n_tokens;
    if (in->embeddings) { /* no logits: the pooling's inputs say which rows come out */
        for (int32_t i = 0; i < T; i++) ctx->logits_row[i] = -1;
        if (!kiln_pool_set_inputs(&ctx->pool, b, ctx->pooling, ctx->embd_seq_row)) {
            snprintf(ctx->err, sizeof ctx->err, "out of memory");
            return false;
        }
        goto memory;
    }
    bool host = in->out_ids->buffer && kt_buffer_is_host(in->out_ids->buffer);
    int32_t *ids = host ? in->out_ids->data : malloc(sizeof(int32_t) * (size_t)in->n_outputs);
    if (!ids) {
        snprintf(ctx->err, sizeof ctx->err, "out of memory");
        return false;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < T; i++) {
        bool want = all_out ? i == T - 1 : b->logits[i] != 0;
        ctx->logits_row[i] = want ? k : -1;
        if (want) ids[k++] = i;
    }
    if (!host) {
        kt_tensor_set(in->out_ids, ids, 0, sizeof(int32_t) * (size_t)in->n_outputs);
        free(ids);
    }
memory:
    for (int i = 0; i < ctx->mem.n_parts; i++) {
        const struct kiln_mem_part *p = ctx->mem.parts[i];
        if (!p->ops->set_inputs(p, b, &in->mem[i])) {
            snprintf(ctx->err, sizeof ctx->err, "out of memory");
            return false;
        }
    }
    return true;
}

enum kiln_status kiln_decode(struct kiln_context *ctx, const struct kiln_batch *b) {
    const struct kiln_hparams *hp = &ctx->model->hp;
    const int32_t T = b->n_tokens;
    if (T <= 0) return decode_error(ctx, KILN_ERR_ARG, "empty batch");
    if ((uint32_t)T > ctx->params.n_batch)
        return decode_error(ctx, KILN_ERR_ARG, "batch of %d tokens exceeds n_batch %u", T, ctx->params.n_batch);
    int32_t n_out = 0;
    for (int32_t i = 0; i < T; i++) {
        if (b->token[i] < 0 || b->token[i] >= hp->n_vocab)
            return decode_error(ctx, KILN_ERR_ARG, "token %d at batch index %d is not in the vocabulary (0..%lld)", b->token[i],
                                i, (long long)hp->n_vocab - 1);
        if (b->pos[i] < 0) return decode_error(ctx, KILN_ERR_ARG, "negative position %d at batch index %d", b->pos[i], i);
        if (ctx->model->pos_embd && b->pos[i] >= hp->n_ctx_train)
            return decode_error(ctx, KILN_ERR_ARG, "position %d at batch index %d is past the model's %lld positions",
                                b->pos[i], i, (long long)hp->n_ctx_train);
        if (b->seq_id[i] < 0 || (uint32_t)b->seq_id[i] >= ctx->params.n_seq_max)
            return decode_error(ctx, KILN_ERR_ARG, "sequence %d at batch index %d out of range (0..%u)", b->seq_id[i], i,
                                ctx->params.n_seq_max - 1);
        n_out += b->logits[i] != 0;
    }
    bool all_out = n_out == 0; /* no flags: like llama.cpp, keep the last token's logits */
    if (all_out) n_out = 1;
    int32_t n_seq = 0;
    if (ctx->params.embeddings) { /* each decode stands alone (include/kiln.h) */
        kiln_kv_clear(ctx);
        n_seq = kiln_pool_seqs(b, (int32_t)ctx->params.n_seq_max, ctx->embd_seq_row);
    }

    /* every memory part finds cells for the batch (or nothing changes) */
    int placed = 0;
    for (; placed < ctx->mem.n_parts; placed++) {
        struct kiln_mem_part *p = ctx->mem.parts[placed];
        if (p->ops->place(p, b) != KILN_MEM_OK) {
            for (int i = placed - 1; i >= 0; i--) ctx->mem.parts[i]->ops->unplace(ctx->mem.parts[i], b, false);
            return decode_error(ctx, KILN_ERR_NO_ROOM, "no room in the KV cache for %d tokens (its %s part is full; n_ctx %u)", T,
                                p->ops->kind, kiln_n_ctx(ctx));
        }
    }
    bool computed = false;

    enum kiln_status st = KILN_ERR_COMPUTE;
    struct kiln_graph_in in;
    struct kt_cgraph *gf = build_graph(ctx, T, n_out, n_seq, false, &in);
    kt_sched_reset(ctx->sched);
    if (!gf || !kt_sched_alloc_graph(ctx->sched, gf)) {
        if (gf) snprintf(ctx->err, sizeof ctx->err, "cannot allocate the graph: %s", kt_last_error());
        goto rollback;
    }
    if (!kt_tensor_set(in.tokens, b->token, 0, sizeof(int32_t) * (size_t)T) ||
        !kt_tensor_set(in.pos, b->pos, 0, sizeof(int32_t) * (size_t)T)) {
        snprintf(ctx->err, sizeof ctx->err, "cannot set the inputs: %s", kt_last_error());
        goto rollback;
    }
    if (!set_inputs(ctx, b, &in, all_out)) {
        st = KILN_ERR_NO_MEMORY;
        goto rollback;
    }
    computed = true;
    const enum kt_status cs = kt_sched_graph_compute(ctx->sched, gf);
    if (cs == KT_STATUS_ABORTED) {
        snprintf(ctx->err, sizeof ctx->err, "decode aborted by the abort callback");
        st = KILN_ERR_ABORTED;
        goto rollback;
    }
    struct kt_tensor *logits = kt_graph_node(gf, -1);
    const bool got = ctx->params.embeddings ? kt_tensor_get(logits, ctx->embd, 0, kt_nbytes(logits))
                                            : kt_tensor_get(logits, ctx->logits, 0,
                                                            sizeof(float) * (size_t)hp->n_vocab * (size_t)n_out);
    if (cs != KT_STATUS_SUCCESS || !got) {
        snprintf(ctx->err, sizeof ctx->err, "compute failed: %s", kt_last_error());
        goto rollback;
    }
    ctx->n_outputs = n_out;
    ctx->n_batch_last = T;
    return KILN_OK;

rollback:
    for (int i = ctx->mem.n_parts - 1; i >= 0; i--) ctx->mem.parts[i]->ops->unplace(ctx->mem.parts[i], b, computed);
    ctx->n_outputs = 0;
    ctx->n_batch_last = 0;
    return st;
}

const float *kiln_get_logits_ith(const struct kiln_context *ctx, int32_t i) {
    if (i < 0) i += ctx->n_batch_last;
    if (i < 0 || i >= ctx->n_batch_last || ctx->logits_row[i] < 0) return NULL;
    return ctx->logits + (size_t)ctx->logits_row[i] * (size_t)ctx->model->hp.n_vocab;
}

/* ------------------------------------------------------------------ embeddings */

enum kiln_pooling kiln_context_pooling(const struct kiln_context *ctx) {
    return ctx->params.embeddings ? ctx->pooling : KILN_POOLING_UNSPECIFIED;
}
int64_t kiln_n_embd_out(const struct kiln_context *ctx) { return ctx->n_embd_out; }

const float *kiln_get_embeddings_seq(const struct kiln_context *ctx, int32_t seq) {
    if (!ctx->embd || ctx->pooling == KILN_POOLING_NONE || ctx->n_batch_last == 0 || seq < 0 ||
        (uint32_t)seq >= ctx->params.n_seq_max || ctx->embd_seq_row[seq] < 0)
        return NULL;
    return ctx->embd + (size_t)ctx->embd_seq_row[seq] * (size_t)ctx->n_embd_out;
}

const float *kiln_get_embeddings_ith(const struct kiln_context *ctx, int32_t i) {
    if (i < 0) i += ctx->n_batch_last;
    if (!ctx->embd || ctx->pooling != KILN_POOLING_NONE || i < 0 || i >= ctx->n_batch_last) return NULL;
    return ctx->embd + (size_t)i * (size_t)ctx->n_embd_out;
}

bool kiln_model_generates(const struct kiln_model *m) { return !m->arch->encoder; }
