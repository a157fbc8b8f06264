/*
 * model.c - loading a llama-family model from GGUF: architecture row,
 * hyper-parameters from <arch>.* keys (checked for sense), vocabulary, and
 * every weight checked for type and shape and bound zero-copy into the file
 * mapping through a host buffer (the file's pages are the weights).
 */
#include "errf.h"
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct kiln_model_params kiln_model_default_params(void) { return (struct kiln_model_params){0}; }

/* ------------------------------------------------------------------ hyper-parameters */

/* <arch>.<suffix> as an integer; absent -> def (or an error when def < 0) */
static bool hp_int(const struct gguf_file *g, const char *arch, const char *suffix, int64_t def, int64_t lo,
                   int64_t hi, int64_t *out, char *err, size_t errlen) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (gguf_find_key(g, key) < 0) {
        if (def < 0) return kiln_errf(err, errlen, "missing hyper-parameter %s", key);
        *out = def;
        return true;
    }
    int64_t v;
    if (!gguf_get_int(g, key, &v)) return kiln_errf(err, errlen, "hyper-parameter %s: %s", key, gguf_error(g));
    if (v < lo || v > hi)
        return kiln_errf(err, errlen, "hyper-parameter %s = %lld is out of range [%lld, %lld]", key, (long long)v,
                    (long long)lo, (long long)hi);
    *out = v;
    return true;
}

static bool hp_float(const struct gguf_file *g, const char *arch, const char *suffix, double def, double lo,
                     double hi, float *out, char *err, size_t errlen) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (gguf_find_key(g, key) < 0) {
        *out = (float)def;
        return true;
    }
    double v;
    if (!gguf_get_float(g, key, &v)) return kiln_errf(err, errlen, "hyper-parameter %s: %s", key, gguf_error(g));
    if (!(v >= lo && v <= hi)) return kiln_errf(err, errlen, "hyper-parameter %s = %g is out of range", key, v);
    *out = (float)v;
    return true;
}

static bool load_hparams(struct kiln_model *m, const char *arch, char *err, size_t errlen) {
    const struct gguf_file *g = m->gguf;
    struct kiln_hparams *hp = &m->hp;
    const int64_t big = (int64_t)1 << 31;
    if (!hp_int(g, arch, "context_length", -1, 1, big, &hp->n_ctx_train, err, errlen) ||
        !hp_int(g, arch, "embedding_length", -1, 1, 1 << 20, &hp->n_embd, err, errlen) ||
        !hp_int(g, arch, "block_count", -1, 1, KILN_MAX_LAYERS, &hp->n_layer, err, errlen) ||
        !hp_int(g, arch, "attention.head_count", -1, 1, 1 << 14, &hp->n_head, err, errlen) ||
        !hp_int(g, arch, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv, err, errlen) ||
        !hp_int(g, arch, "feed_forward_length", -1, 1, 1 << 22, &hp->n_ff, err, errlen))
        return false;
    if (hp->n_head % hp->n_head_kv != 0)
        return kiln_errf(err, errlen, "%lld heads cannot be grouped over %lld KV heads", (long long)hp->n_head,
                    (long long)hp->n_head_kv);
    int64_t def_head = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : -1;
    if (!hp_int(g, arch, "attention.key_length", def_head, 2, 1 << 14, &hp->n_embd_head, err, errlen)) {
        if (def_head < 0)
            return kiln_errf(err, errlen, "embedding length %lld is not a multiple of %lld heads",
                        (long long)hp->n_embd, (long long)hp->n_head);
        return false;
    }
    int64_t vlen;
    if (!hp_int(g, arch, "attention.value_length", hp->n_embd_head, 1, 1 << 14, &vlen, err, errlen)) return false;
    if (vlen != hp->n_embd_head)
        return kiln_errf(err, errlen, "value length %lld differs from key length %lld (not supported)", (long long)vlen,
                    (long long)hp->n_embd_head);
    if (!hp_int(g, arch, "rope.dimension_count", hp->n_embd_head, 2, hp->n_embd_head, &hp->n_rot, err, errlen))
        return false;
    if (hp->n_rot % 2) return kiln_errf(err, errlen, "rope dimension count %lld is odd", (long long)hp->n_rot);
    if (!hp_float(g, arch, "rope.freq_base", 10000.0, 1e-3, 1e12, &hp->rope_freq_base, err, errlen) ||
        !hp_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0, &hp->norm_rms_eps, err, errlen))
        return false;
    /* linear rope scaling: rope.scaling.factor (with scaling.type linear) or the older rope.scale_linear */
    float factor = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    struct gguf_str stype = {0};
    bool has_type = gguf_find_key(g, key) >= 0 && gguf_get_str(g, key, &stype);
    if (!hp_float(g, arch, "rope.scale_linear", 1.0, 1e-6, 1e6, &factor, err, errlen)) return false;
    if (!has_type || (stype.len == 6 && !memcmp(stype.ptr, "linear", 6))) {
        float f2;
        if (!hp_float(g, arch, "rope.scaling.factor", 0.0, 0.0, 1e6, &f2, err, errlen)) return false;
        if (f2 > 0.0f) factor = f2;
    } else if (!(stype.len == 4 && !memcmp(stype.ptr, "none", 4))) {
        return kiln_errf(err, errlen, "rope scaling type '%.*s' is not supported", (int)(stype.len > 32 ? 32 : stype.len),
                    stype.ptr);
    }
    hp->rope_freq_scale = 1.0f / factor;
    return true;
}

/* ------------------------------------------------------------------ tensors */

struct binder {
    struct kiln_model *m;
    char *err;
    size_t errlen;
    int64_t n_done, n_total;
    struct kiln_model_params params;
};

/* Find name in the file, check its type is usable and its shape is exactly ne, bind it. */
static struct kt_tensor *bind(struct binder *b, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                              bool optional) {
    struct kiln_model *m = b->m;
    int64_t ti = gguf_find_tensor(m->gguf, name);
    if (ti < 0) {
        if (!optional) kiln_errf(b->err, b->errlen, "missing tensor '%s'", name);
        return NULL;
    }
    const struct gguf_tensor_info *info = gguf_tensor(m->gguf, ti);
    const int64_t want[2] = {ne0, ne1};
    bool ok = info->n_dims <= 2 || (info->ne[2] == 1 && info->ne[3] == 1);
    for (int i = 0; i < 2 && ok; i++) ok = info->ne[i] == (i < n_dims ? want[i] : 1);
    if (!ok) {
        kiln_errf(b->err, b->errlen, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
             (long long)info->ne[0], (long long)info->ne[1], (long long)info->ne[2], (long long)info->ne[3],
             (long long)ne0, (long long)(n_dims > 1 ? ne1 : 1));
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

static bool progress(struct binder *b) {
    b->n_done++;
    if (b->params.progress && !b->params.progress((float)b->n_done / (float)b->n_total, b->params.progress_data))
        return kiln_errf(b->err, b->errlen, "loading cancelled");
    return true;
}

#define BIND(dst, ...)                                 \
    do {                                               \
        if (!((dst) = bind(&b, __VA_ARGS__, false)))   \
            return false;                              \
    } while (0)

static bool load_tensors(struct kiln_model *m, struct kiln_model_params params, char *err, size_t errlen) {
    const struct kiln_hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_q = hp->n_embd_head * hp->n_head, n_kv = hp->n_embd_head * hp->n_head_kv;
    size_t meta = (size_t)(hp->n_layer * 16 + 8) * kt_tensor_overhead();
    m->wctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
    m->wbuf = kt_buffer_from_host_ptr((void *)gguf_base(m->gguf), gguf_size(m->gguf));
    if (!m->wctx || !m->wbuf) return kiln_errf(err, errlen, "%s", kt_last_error());
    kt_buffer_set_usage(m->wbuf, KT_BUFFER_USAGE_WEIGHTS);

    struct binder b = {m, err, errlen, 0, 3 + hp->n_layer, params};
    BIND(m->tok_embd, "token_embd.weight", 2, n_embd, hp->n_vocab);
    BIND(m->output_norm, "output_norm.weight", 1, n_embd, 1);
    m->output = bind(&b, "output.weight", 2, n_embd, hp->n_vocab, true);
    if (!m->output) {
        if (err[0]) return false; /* present but wrong */
        m->output = m->tok_embd;  /* tied embeddings */
    }
    if (!progress(&b) || !progress(&b) || !progress(&b)) return false;

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return kiln_errf(err, errlen, "out of memory");
    for (int64_t il = 0; il < hp->n_layer; il++) {
        struct kiln_layer *L = &m->layers[il];
        char name[96];
#define LNAME(s) (snprintf(name, sizeof name, "blk.%lld." s, (long long)il), name)
        BIND(L->attn_norm, LNAME("attn_norm.weight"), 1, n_embd, 1);
        BIND(L->wq, LNAME("attn_q.weight"), 2, n_embd, n_q);
        BIND(L->wk, LNAME("attn_k.weight"), 2, n_embd, n_kv);
        BIND(L->wv, LNAME("attn_v.weight"), 2, n_embd, n_kv);
        BIND(L->wo, LNAME("attn_output.weight"), 2, n_q, n_embd);
        if (m->arch->qkv_bias) {
            BIND(L->bq, LNAME("attn_q.bias"), 1, n_q, 1);
            BIND(L->bk, LNAME("attn_k.bias"), 1, n_kv, 1);
            BIND(L->bv, LNAME("attn_v.bias"), 1, n_kv, 1);
        }
        BIND(L->ffn_norm, LNAME("ffn_norm.weight"), 1, n_embd, 1);
        BIND(L->w_gate, LNAME("ffn_gate.weight"), 2, n_embd, hp->n_ff);
        BIND(L->w_up, LNAME("ffn_up.weight"), 2, n_embd, hp->n_ff);
        BIND(L->w_down, LNAME("ffn_down.weight"), 2, hp->n_ff, n_embd);
#undef LNAME
        if (!progress(&b)) return false;
    }
    /* bias and norm weights are read as F32 by the element-wise kernels */
    for (struct kt_tensor *t = kt_get_first_tensor(m->wctx); t; t = kt_get_next_tensor(m->wctx, t))
        if (kt_n_dims(t) == 1 && t->type != KT_TYPE_F32)
            return kiln_errf(err, errlen, "tensor '%s' is %s; 1-D weights must be f32", t->name, kt_type_name(t->type));
    return true;
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
        kiln_errf(err, errlen, "%s: architecture '%s' is not supported (kiln runs llama, qwen2)", path, arch_name);
        goto error;
    }
    struct gguf_str name;
    if (gguf_find_key(m->gguf, "general.name") >= 0 && gguf_get_str(m->gguf, "general.name", &name))
        snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len < 127 ? name.len : 127), name.ptr);

    m->vocab = kiln_vocab_load(m->gguf, err, errlen);
    if (!m->vocab) goto error;
    if (params.vocab_only) return m;

    if (!load_hparams(m, arch_name, err, errlen)) goto error;
    int64_t nv = kiln_vocab_n_tokens(m->vocab);
    if (!hp_int(m->gguf, arch_name, "vocab_size", nv, 1, (int64_t)1 << 31, &m->hp.n_vocab, err, errlen)) goto error;
    if (m->hp.n_vocab != nv) {
        kiln_errf(err, errlen, "vocab_size %lld differs from the %lld tokens of the vocabulary", (long long)m->hp.n_vocab,
             (long long)nv);
        goto error;
    }
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

void kiln_model_desc(const struct kiln_model *m, char *buf, size_t size) {
    /* the most common 2-D weight type names the model, as llama-bench does */
    int64_t count[KT_TYPE_COUNT] = {0};
    for (struct kt_tensor *t = m->wctx ? kt_get_first_tensor(m->wctx) : NULL; t; t = kt_get_next_tensor(m->wctx, t))
        if (kt_n_dims(t) == 2 && (unsigned)t->type < KT_TYPE_COUNT) count[t->type] += kt_nelements(t);
    int best = 0;
    for (int i = 1; i < KT_TYPE_COUNT; i++)
        if (count[i] > count[best]) best = i;
    double params = (double)m->n_params;
    const char *unit = params >= 1e9 ? "B" : "M";
    double scaled = params >= 1e9 ? params / 1e9 : params / 1e6;
    snprintf(buf, size, "%s %.1f%s %s", m->arch->name, scaled, unit, kt_type_name((enum kt_type)best));
}
