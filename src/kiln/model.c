/*
 * model.c - loading a model from GGUF: architecture row, vocabulary,
 * hyper-parameters (hparams.c), and the weights the row lists checked for type
 * and shape (per layer: a layer's own head counts and sizes) and bound zero-copy
 * into the file mapping through a host buffer (the file's pages are the
 * weights); a file tensor the row does not list is refused.
 */
#include "errf.h"
#include "kiln-offline.h"
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct kiln_model_params kiln_model_default_params(void) { return (struct kiln_model_params){0}; }

/* ------------------------------------------------------------------ tensors */

struct binder {
    struct kiln_model *m;
    char *err;
    size_t errlen;
    int64_t n_done, n_total;
    struct kiln_model_params params;
    bool *used; /* per file tensor: bound by some spec (a file tensor nobody binds is refused) */
};

/* Find name in the file, check its type is usable and its shape is exactly ne[0..n_dims), bind it. */
static struct kt_tensor *bind(struct binder *b, const char *name, int n_dims, const int64_t *want, bool optional) {
    struct kiln_model *m = b->m;
    int64_t ti = gguf_find_tensor(m->gguf, name);
    if (ti < 0) {
        if (!optional) kiln_errf(b->err, b->errlen, "missing tensor '%s'", name);
        return NULL;
    }
    b->used[ti] = true;
    const struct gguf_tensor_info *info = gguf_tensor(m->gguf, ti);
    bool ok = info->ne[3] == 1;
    for (int i = 0; i < 3 && ok; i++) ok = info->ne[i] == (i < n_dims ? want[i] : 1);
    if (!ok) {
        char shape[96] = "";
        for (int i = 0, at = 0; i < (n_dims > 2 ? 3 : 2) && at < (int)sizeof shape; i++)
            at += snprintf(shape + at, sizeof shape - (size_t)at, "%s%lld", i ? ", " : "",
                           (long long)(i < n_dims ? want[i] : 1));
        kiln_errf(b->err, b->errlen, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%s]", name,
                  (long long)info->ne[0], (long long)info->ne[1], (long long)info->ne[2], (long long)info->ne[3],
                  shape);
        return NULL;
    }
    const struct kt_type_traits *tr = kt_get_type_traits(info->type);
    if (!tr->to_float || (n_dims > 1 && !tr->vec_dot)) {
        kiln_errf(b->err, b->errlen, "tensor '%s' has type %s, which kiln cannot compute with", name,
             kt_type_name(info->type));
        return NULL;
    }
    struct kt_tensor *t = kt_new_tensor(m->wctx, info->type, n_dims, want);
    if (!t || !kt_buffer_bind_tensor(m->wbuf, t, (void *)info->data)) {
        kiln_errf(b->err, b->errlen, "tensor '%s': %s", name, kt_last_error());
        return NULL;
    }
    kt_set_name(t, name);
    kt_set_param(t);
    m->n_params += kt_nelements(t);
    m->weight_bytes += kt_nbytes(t);
    return t;
}

/* Bind one spec of the architecture's row into the struct at base (the model or
 * layer il); a fused tensor's row ranges become views (no copies: the mapping's
 * pages are shared). Absent and optional leaves the field NULL. */
static bool bind_spec(struct binder *b, const struct kiln_tensor_spec *s, int64_t il, void *base) {
    const struct kiln_hparams *hp = &b->m->hp;
    const struct kiln_layer_hp *l = s->per_layer ? &b->m->lhp[il] : NULL;
    /* a dense layer binds no expert tensors and a routed one no dense feed-forward: a
     * file holding the other kind's tensor is then refused by name below */
    const bool routed = l && l->n_expert > 0;
    if ((s->when == KILN_WHEN_DENSE && routed) || (s->when == KILN_WHEN_EXPERTS && !routed)) return true;
    char name[128];
    if (s->per_layer)
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)il, s->name);
    else
        snprintf(name, sizeof name, "%s", s->name);
    const int n_dims = s->ne1 == KILN_DIM_NONE ? 1 : s->ne2 == KILN_DIM_NONE ? 2 : 3;
    const int64_t ne[3] = {kiln_dim_size(hp, l, s->ne0), kiln_dim_size(hp, l, s->ne1), kiln_dim_size(hp, l, s->ne2)};
    struct kt_tensor *t = bind(b, name, n_dims, ne, s->optional);
    if (!t) return !b->err[0];
    *(struct kt_tensor **)((char *)base + s->field) = t;
    int64_t row0 = 0;
    for (int k = 0; k < 3 && s->split[k].rows != KILN_DIM_NONE; k++) {
        const int64_t rows = kiln_dim_size(hp, l, s->split[k].rows);
        struct kt_tensor *v = kt_view_2d(b->m->wctx, t, t->ne[0], rows, t->nb[1], (size_t)row0 * t->nb[1]);
        if (!v) return kiln_errf(b->err, b->errlen, "tensor '%s': %s", name, kt_last_error());
        kt_format_name(v, "%.40s[%lld:%lld]", name, (long long)row0, (long long)(row0 + rows));
        kt_set_param(v);
        *(struct kt_tensor **)((char *)base + s->split[k].field) = v;
        row0 += rows;
    }
    return true;
}

static bool progress(struct binder *b) {
    b->n_done++;
    if (b->params.progress && !b->params.progress((float)b->n_done / (float)b->n_total, b->params.progress_data))
        return kiln_errf(b->err, b->errlen, "loading cancelled");
    return true;
}

static bool bind_all(struct binder *b) {
    struct kiln_model *m = b->m;
    const struct kiln_arch *a = m->arch;
    for (size_t i = 0; i < a->n_tensors; i++)
        if (!a->tensors[i].per_layer && !bind_spec(b, &a->tensors[i], 0, m)) return false;
    if (!m->output) m->output = m->tok_embd; /* tied embeddings */
    if (!progress(b)) return false;

    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) return kiln_errf(b->err, b->errlen, "out of memory");
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        for (size_t i = 0; i < a->n_tensors; i++)
            if (a->tensors[i].per_layer && !bind_spec(b, &a->tensors[i], il, &m->layers[il])) return false;
        if (!progress(b)) return false;
    }
    /* nothing is ignored: a tensor no spec binds would change the model's meaning
     * (as llama.cpp, which refuses a file whose tensor count differs from what it loads) */
    for (int64_t ti = 0; ti < gguf_n_tensors(m->gguf); ti++) {
        if (b->used[ti]) continue;
        const struct gguf_str *n = &gguf_tensor(m->gguf, ti)->name;
        return kiln_errf(b->err, b->errlen, "tensor '%.*s' is not used by architecture '%s' (kiln cannot run this file)",
                         (int)(n->len > 96 ? 96 : n->len), n->ptr, a->name);
    }
    return true;
}

/* Which weights the CPU reads only as matrix products: every 2-D tensor but an untied
 * token embedding (only get_rows reads it); the GPU's are already on it. */
static bool cpu_matrix(const struct kt_tensor *t, void *data) {
    const struct kiln_model *m = data;
    return t->buffer != m->gpu_buf && kt_n_dims(t) == 2 && (t != m->tok_embd || m->output == m->tok_embd);
}
static bool cpu_other(const struct kt_tensor *t, void *data) {
    const struct kiln_model *m = data;
    return t->buffer != m->gpu_buf && !cpu_matrix(t, data);
}

/* Every weight out of the file mapping into memory the CPU reads fastest: the matrices into
 * the buffer type the CPU device offers for them (its kernels' own layout where it has one),
 * the rest copied into its default memory. The file's pages are handed back as each tensor
 * is copied (release_mapped), so memory holds one copy and the mapping is not touched again.
 * A device that offers no such buffer type (KT_CPU_REPACK=off) keeps them in the mapping. */
static bool repack(struct kiln_model *m, char *err, size_t errlen) {
    struct kt_device *cpu = kt_dev_by_type(KT_DEVICE_TYPE_CPU);
    struct kt_buffer_type *buft = cpu ? kt_dev_extra_bufts(cpu)[0] : NULL;
    if (!buft) return true;
    m->cpu_buf[0] = kt_backend_move_ctx_tensors(m->wctx, buft, cpu_matrix, m);
    m->cpu_buf[1] = m->cpu_buf[0] ? kt_backend_move_ctx_tensors(m->wctx, kt_dev_buffer_type(cpu), cpu_other, m) : NULL;
    if (!m->cpu_buf[0] || !m->cpu_buf[1]) return kiln_errf(err, errlen, "%s", kt_last_error());
    for (int i = 0; i < 2; i++) kt_buffer_set_usage(m->cpu_buf[i], KT_BUFFER_USAGE_WEIGHTS);
    return true;
}

/* The mapping's pages of a tensor copied elsewhere (no-op for a read() copy of the file). */
static void release_mapped(void *data, const void *addr, size_t size) {
    gguf_release_pages(((struct kiln_model *)data)->gguf, addr, size);
}

/* ------------------------------------------------------------------ GPU offload */

/* Whether weight t goes to the GPU: layers from gpu_layer0 on but their expert stacks, the
 * output when asked, and rope_freqs (every layer's rope reads it) with any layer. The token
 * embedding stays: only get_rows reads it, on the CPU, like llama.cpp. */
static bool on_gpu(const struct kt_tensor *t, void *data) {
    const struct kiln_model *m = data;
    int il;
    /* expert stacks (and their biases) stay: only the CPU has expert kernels, and the
     * scheduler would copy a whole stack to it each step */
    if (strstr(t->name, "_exps.")) return false;
    if (sscanf(t->name, "blk.%d.", &il) == 1) return il >= m->gpu_layer0;
    if (t == m->tok_embd) return false;
    if (t == m->output || t == m->output_norm) return m->gpu_output;
    return t == m->rope_freqs && m->gpu_layer0 < m->hp.n_layer;
}

/* The chosen weights out of the mapping into one device buffer, uploaded once. */
static bool offload(struct kiln_model *m, int32_t ngl, char *err, size_t errlen) {
    const int64_t L = m->hp.n_layer;
    m->gpu_layer0 = (int32_t)L;
    if (ngl <= 0) return true;
    const char *why = kt_dev_unavailable(KT_DEVICE_TYPE_GPU);
    if (why) {
        snprintf(m->gpu_note, sizeof m->gpu_note, "GPU not used (%s); running on the CPU", why);
        return true;
    }
    m->gpu = kt_dev_by_type(KT_DEVICE_TYPE_GPU);
    m->gpu_layer0 = (int32_t)(ngl >= L ? 0 : L - ngl);
    m->gpu_output = ngl > L && m->output != m->tok_embd;
    m->gpu_buf = kt_backend_move_ctx_tensors(m->wctx, kt_dev_buffer_type(m->gpu), on_gpu, m);
    if (!m->gpu_buf) return kiln_errf(err, errlen, "-ngl %d: %s", (int)ngl, kt_last_error());
    kt_buffer_set_usage(m->gpu_buf, KT_BUFFER_USAGE_WEIGHTS);
    snprintf(m->gpu_note, sizeof m->gpu_note, "%s: %lld of %lld layers%s on the GPU (%zu MiB)", kt_dev_name(m->gpu),
             (long long)(L - m->gpu_layer0), (long long)L, m->gpu_output ? " and the output" : "",
             kt_buffer_size(m->gpu_buf) >> 20);
    return true;
}

const char *kiln_model_gpu_note(const struct kiln_model *m) { return m->gpu_note; }
const char *kiln_model_backends(const struct kiln_model *m) {
    const struct kt_device *d = m->gpu_buf ? m->gpu : kt_dev_by_type(KT_DEVICE_TYPE_CPU);
    return kt_dev_backend_name(d);
}

static bool load_tensors(struct kiln_model *m, struct kiln_model_params params, char *err, size_t errlen) {
    const struct kiln_hparams *hp = &m->hp;
    /* every spec once per layer plus up to three views each */
    size_t meta = (size_t)(hp->n_layer + 1) * (m->arch->n_tensors * 4) * kt_tensor_overhead();
    m->wctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
    m->wbuf = kt_buffer_from_host_ptr((void *)gguf_base(m->gguf), gguf_size(m->gguf));
    if (!m->wctx || !m->wbuf) return kiln_errf(err, errlen, "%s", kt_last_error());
    kt_buffer_set_usage(m->wbuf, KT_BUFFER_USAGE_WEIGHTS);
    kt_buffer_set_release_callback(m->wbuf, release_mapped, m);

    struct binder b = {m, err, errlen, 0, 1 + hp->n_layer, params, NULL};
    b.used = calloc((size_t)gguf_n_tensors(m->gguf) + 1, sizeof *b.used);
    if (!b.used) return kiln_errf(err, errlen, "out of memory");
    bool ok = bind_all(&b);
    free(b.used);
    if (!ok) return false;
    /* bias and norm weights are read as F32 by the element-wise kernels */
    for (struct kt_tensor *t = kt_get_first_tensor(m->wctx); t; t = kt_get_next_tensor(m->wctx, t))
        if (kt_n_dims(t) == 1 && t->type != KT_TYPE_F32 && t != m->cls_out) /* a one-label head is a matrix */
            return kiln_errf(err, errlen, "tensor '%s' is %s; 1-D weights must be f32", t->name, kt_type_name(t->type));
    if (!offload(m, params.n_gpu_layers, err, errlen)) return false;
    return params.no_repack || repack(m, err, errlen);
}

/* ------------------------------------------------------------------ load */

struct kiln_model *kiln_model_load(const char *path, struct kiln_model_params params, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = 0;
    struct kiln_model *m = calloc(1, sizeof *m);
    if (!m) {
        kiln_errf(err, errlen, "out of memory");
        return NULL;
    }
    m->gguf = gguf_open(path, err, errlen);
    if (!m->gguf) goto error;

    struct gguf_str arch;
    if (!gguf_get_str(m->gguf, "general.architecture", &arch)) {
        kiln_errf(err, errlen, "%s: no general.architecture: %s", path, gguf_error(m->gguf));
        goto error;
    }
    char arch_name[64];
    snprintf(arch_name, sizeof arch_name, "%.*s", (int)(arch.len < 63 ? arch.len : 63), arch.ptr);
    m->arch = kiln_arch_find(arch_name);
    if (!m->arch) {
        char list[128];
        kiln_arch_list(list, sizeof list);
        kiln_errf(err, errlen, "%s: architecture '%s' is not supported (kiln runs %s)", path, arch_name, list);
        goto error;
    }
    struct gguf_str name;
    if (gguf_find_key(m->gguf, "general.name") >= 0 && gguf_get_str(m->gguf, "general.name", &name))
        snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len < 127 ? name.len : 127), name.ptr);

    m->vocab = kiln_vocab_load(m->gguf, err, errlen);
    if (!m->vocab) goto error;
    if (params.vocab_only) return m;

    if (!kiln_load_hparams(m, arch_name, kiln_vocab_n_tokens(m->vocab), err, errlen)) goto error;
    if (gguf_n_tensors(m->gguf) == 0) { /* say so, not "missing tensor token_embd.weight" */
        kiln_errf(err, errlen,
                  "%s has no weights: all its tensors are missing (a vocabulary-only file tokenizes but cannot run)",
                  path);
        goto error;
    }
    if (!load_tensors(m, params, err, errlen)) goto error;
    return m;

error:
    if (!err[0]) snprintf(err, errlen, "cannot load %s", path);
    kiln_model_free(m);
    return NULL;
}

void kiln_model_free(struct kiln_model *m) {
    if (!m) return;
    free(m->layers);
    free(m->lhp);
    free(m->fam);
    for (int i = 0; i < 2; i++) kt_buffer_free(m->cpu_buf[i]);
    if (m->gpu_buf) kt_buffer_free(m->gpu_buf);
    if (m->wbuf) kt_buffer_free(m->wbuf);
    kt_free(m->wctx);
    kiln_vocab_free(m->vocab);
    gguf_close(m->gguf);
    free(m);
}

const struct kiln_hparams *kiln_model_hparams(const struct kiln_model *m) { return &m->hp; }
const struct kiln_vocab *kiln_model_vocab(const struct kiln_model *m) { return m->vocab; }
const char *kiln_model_arch(const struct kiln_model *m) { return m->arch->name; }
const char *kiln_model_name(const struct kiln_model *m) { return m->name; }
const struct gguf_file *kiln_model_gguf(const struct kiln_model *m) { return m->gguf; }
int64_t kiln_model_n_params(const struct kiln_model *m) { return m->n_params; }
size_t kiln_model_size(const struct kiln_model *m) { return m->weight_bytes; }

void kiln_model_experts(const struct kiln_model *m, int64_t *n_expert, int64_t *n_expert_used) {
    const bool moe = m->lhp && m->hp.n_layer > 0;
    if (n_expert) *n_expert = moe ? m->lhp[0].n_expert : 0;
    if (n_expert_used) *n_expert_used = moe ? m->lhp[0].n_expert_used : 0;
}

/* Walks the bound weights (views are their source's rows, counted once). */
static void active(const struct kiln_model *m, int64_t *params, size_t *bytes) {
    int64_t n_expert = 0, n_used = 0;
    kiln_model_experts(m, &n_expert, &n_used);
    double p = 0, b = 0;
    for (struct kt_tensor *t = m->wctx ? kt_get_first_tensor(m->wctx) : NULL; t; t = kt_get_next_tensor(m->wctx, t)) {
        if (t->view_src) continue;
        double share = 1.0;
        if (t == m->tok_embd && m->output != m->tok_embd) share = 1.0 / (double)t->ne[1]; /* one row */
        else if (n_expert > 0 && strstr(t->name, "_exps.")) share = (double)n_used / (double)n_expert;
        p += share * (double)kt_nelements(t);
        b += share * (double)kt_nbytes(t);
    }
    *params = (int64_t)(p + 0.5);
    *bytes = (size_t)(b + 0.5);
}

int64_t kiln_model_n_params_active(const struct kiln_model *m) {
    int64_t p;
    size_t b;
    active(m, &p, &b);
    return p;
}

size_t kiln_model_size_active(const struct kiln_model *m) {
    int64_t p;
    size_t b;
    active(m, &p, &b);
    return b;
}

void kiln_model_desc(const struct kiln_model *m, char *buf, size_t size) {
    /* the most common matrix type (expert stacks included) names the model, as llama-bench does */
    int64_t count[KT_TYPE_COUNT] = {0};
    for (struct kt_tensor *t = m->wctx ? kt_get_first_tensor(m->wctx) : NULL; t; t = kt_get_next_tensor(m->wctx, t))
        if (kt_n_dims(t) >= 2 && !t->view_src && (unsigned)t->type < KT_TYPE_COUNT) count[t->type] += kt_nelements(t);
    int best = 0;
    for (int i = 1; i < KT_TYPE_COUNT; i++)
        if (count[i] > count[best]) best = i;
    double params = (double)m->n_params;
    const char *unit = params >= 1e9 ? "B" : "M";
    double scaled = params >= 1e9 ? params / 1e9 : params / 1e6;
    snprintf(buf, size, "%s %.1f%s %s", m->arch->name, scaled, unit, kt_type_name((enum kt_type)best));
}
