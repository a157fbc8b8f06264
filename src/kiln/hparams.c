/*
 * hparams.c - the one loader of hyper-parameters every architecture row shares:
 * the common <arch>.* keys (checked for sense) into the public kiln_hparams, each
 * layer's kind and shape (windowed or not, heads, head size, RoPE) into
 * kiln_layer_hp, and the row's own keys into its family struct (arch/families.h).
 */
#include "errf.h"
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void key_name(char *key, size_t size, const char *arch, const char *suffix) {
    snprintf(key, size, "%s.%s", arch, suffix);
}

/* <arch>.<suffix> as an integer; absent -> def (or an error when def < 0) */
static bool hp_int(const struct gguf_file *g, const char *arch, const char *suffix, int64_t def, int64_t lo,
                   int64_t hi, int64_t *out, char *err, size_t errlen) {
    char key[160];
    key_name(key, sizeof key, arch, suffix);
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
    key_name(key, sizeof key, arch, suffix);
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

/* <arch>.<suffix> as one number for every layer or an array of n_layer numbers
 * (llama.cpp's get_key_or_arr); out[0..n_layer) filled. absent -> def (< 0: required). */
static bool hp_int_layers(const struct gguf_file *g, const char *arch, const char *suffix, int64_t n_layer,
                          const int64_t *def, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen) {
    char key[160];
    key_name(key, sizeof key, arch, suffix);
    const int64_t i = gguf_find_key(g, key);
    if (i < 0 || gguf_kv_type(g, i) != GGUF_TYPE_ARRAY) {
        int64_t v;
        if (!hp_int(g, arch, suffix, def ? def[0] : -1, lo, hi, &v, err, errlen)) return false;
        for (int64_t il = 0; il < n_layer; il++) out[il] = i < 0 && def ? def[il] : v;
        return true;
    }
    if (gguf_arr_n(g, i) != (uint64_t)n_layer)
        return kiln_errf(err, errlen, "hyper-parameter %s has %llu entries for %lld layers", key,
                         (unsigned long long)gguf_arr_n(g, i), (long long)n_layer);
    for (int64_t il = 0; il < n_layer; il++) {
        int64_t v;
        if (!gguf_arr_get_int(g, i, (uint64_t)il, &v))
            return kiln_errf(err, errlen, "hyper-parameter %s[%lld]: %s", key, (long long)il, gguf_error(g));
        if (v < lo || v > hi)
            return kiln_errf(err, errlen, "hyper-parameter %s[%lld] = %lld is out of range [%lld, %lld]", key,
                             (long long)il, (long long)v, (long long)lo, (long long)hi);
        out[il] = v;
    }
    return true;
}

/* rope.scaling.factor (with scaling.type linear, or yarn where the row allows it) or the
 * older rope.scale_linear, as 1/factor */
static bool rope_scale(struct kiln_model *m, const char *arch, float *scale, char *err, size_t errlen) {
    const struct gguf_file *g = m->gguf;
    float factor = 1.0f;
    char key[160];
    key_name(key, sizeof key, arch, "rope.scaling.type");
    struct gguf_str stype = {0};
    bool has_type = gguf_find_key(g, key) >= 0 && gguf_get_str(g, key, &stype);
    if (!hp_float(g, arch, "rope.scale_linear", 1.0, 1e-6, 1e6, &factor, err, errlen)) return false;
    const bool yarn = has_type && stype.len == 4 && !memcmp(stype.ptr, "yarn", 4) && m->arch->yarn;
    if (!has_type || yarn || (stype.len == 6 && !memcmp(stype.ptr, "linear", 6))) {
        float f2;
        if (!hp_float(g, arch, "rope.scaling.factor", 0.0, 0.0, 1e6, &f2, err, errlen)) return false;
        if (f2 > 0.0f) factor = f2;
    } else if (!(stype.len == 4 && !memcmp(stype.ptr, "none", 4))) {
        return kiln_errf(err, errlen, "rope scaling type '%.*s' is not supported",
                         (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
    }
    *scale = 1.0f / factor;
    if (yarn) {
        m->yarn = (struct kiln_yarn){.on = true, .ext_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
        if (!hp_float(g, arch, "rope.scaling.attn_factor", 1.0, 1e-6, 1e6, &m->yarn.attn_factor, err, errlen) ||
            !hp_int(g, arch, "rope.scaling.original_context_length", m->hp.n_ctx_train, 1, (int64_t)1 << 31,
                    &m->yarn.n_ctx_orig, err, errlen))
            return false;
    }
    return true;
}

/* Which layers are windowed: the row's window and pattern keys (struct kiln_window_spec). */
static bool layer_kinds(struct kiln_model *m, const char *arch, char *err, size_t errlen) {
    const struct kiln_window_spec *w = &m->arch->window;
    const struct gguf_file *g = m->gguf;
    const int64_t L = m->hp.n_layer;
    m->n_swa = 0;
    for (int64_t il = 0; il < L; il++) m->lhp[il].kind = KILN_LAYER_ATTN;
    if (!w->window_key) return true;
    if (!hp_int(g, arch, w->window_key, w->window_def, 0, (int64_t)1 << 30, &m->n_swa, err, errlen)) return false;
    if (m->n_swa == 0) return true;
    char key[160];
    key_name(key, sizeof key, arch, w->pattern_key);
    const int64_t i = gguf_find_key(g, key);
    if (i >= 0 && gguf_kv_type(g, i) == GGUF_TYPE_ARRAY) {
        if (gguf_arr_n(g, i) != (uint64_t)L)
            return kiln_errf(err, errlen, "hyper-parameter %s has %llu entries for %lld layers", key,
                             (unsigned long long)gguf_arr_n(g, i), (long long)L);
        size_t size = 0;
        const uint8_t *b = gguf_kv_data(g, i, &size);
        if (gguf_arr_type(g, i) == GGUF_TYPE_BOOL && b && size >= (size_t)L) {
            for (int64_t il = 0; il < L; il++) m->lhp[il].kind = b[il] ? KILN_LAYER_ATTN_WINDOW : KILN_LAYER_ATTN;
            return true;
        }
        for (int64_t il = 0; il < L; il++) {
            int64_t v;
            if (!gguf_arr_get_int(g, i, (uint64_t)il, &v) || v < 0 || v > 1)
                return kiln_errf(err, errlen, "hyper-parameter %s: entry %lld is not a bool", key, (long long)il);
            m->lhp[il].kind = v ? KILN_LAYER_ATTN_WINDOW : KILN_LAYER_ATTN;
        }
        return true;
    }
    int64_t n;
    if (!hp_int(g, arch, w->pattern_key, w->pattern_def, 0, L > 1 ? L : 1, &n, err, errlen)) return false;
    for (int64_t il = 0; il < L; il++)
        m->lhp[il].kind = n <= 1 || il % n < n - 1 ? KILN_LAYER_ATTN_WINDOW : KILN_LAYER_ATTN;
    return true;
}

/* What embeddings need of any family: the pooling the file asks for, the classifier's
 * outputs (one per label), BERT's token types (a tokenizer key, as llama.cpp reads it). */
static bool embedding_keys(struct kiln_model *m, const char *arch, char *err, size_t errlen) {
    struct kiln_hparams *hp = &m->hp;
    int64_t v;
    if (!hp_int(m->gguf, arch, "pooling_type", KILN_POOLING_NONE, KILN_POOLING_NONE, KILN_POOLING_RANK, &v, err,
                errlen))
        return false;
    hp->pooling = (enum kiln_pooling)v;
    char key[160];
    key_name(key, sizeof key, arch, "classifier.output_labels");
    const int64_t i = gguf_find_key(m->gguf, key);
    hp->n_cls_out = 1;
    if (i >= 0) {
        if (gguf_kv_type(m->gguf, i) != GGUF_TYPE_ARRAY || gguf_arr_n(m->gguf, i) == 0 ||
            gguf_arr_n(m->gguf, i) > (1u << 20))
            return kiln_errf(err, errlen, "%s must be a list of 1 to 1048576 labels", key);
        hp->n_cls_out = (int64_t)gguf_arr_n(m->gguf, i);
    }
    hp->n_token_types = 0;
    if (gguf_find_key(m->gguf, "tokenizer.ggml.token_type_count") >= 0) {
        if (!gguf_get_int(m->gguf, "tokenizer.ggml.token_type_count", &v) || v < 0 || v > 1024)
            return kiln_errf(err, errlen, "tokenizer.ggml.token_type_count must be a count of 0 to 1024");
        hp->n_token_types = v;
    }
    return true;
}

/* Experts per layer, as the row's moe spec says (runtime.h): how many, how many
 * each token uses, each one's width. A family without experts reads none of these. */
static bool experts(struct kiln_model *m, const char *arch, char *err, size_t errlen) {
    const struct kiln_moe_spec *s = &m->arch->moe;
    const struct gguf_file *g = m->gguf;
    if (!s->allowed) return true;
    int64_t n, used, ff = 0;
    if (!hp_int(g, arch, "expert_count", s->required ? -1 : 0, s->required ? 1 : 0, KILN_MAX_EXPERTS, &n, err,
                errlen))
        return false;
    if (n == 0) return true;
    if (!hp_int(g, arch, "expert_used_count", -1, 1, n, &used, err, errlen)) return false;
    if (s->ff_key) {
        const int64_t def = s->ff_required ? -1 : s->ff_div_used ? m->hp.n_ff / used : m->hp.n_ff;
        if (!hp_int(g, arch, s->ff_key, def > 0 ? def : -1, 1, 1 << 22, &ff, err, errlen)) return false;
    }
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        struct kiln_layer_hp *l = &m->lhp[il];
        l->n_expert = n, l->n_expert_used = used, l->n_ff_exp = s->ff_key ? ff : l->n_ff;
    }
    return true;
}

/* The row's own keys into a fresh family struct. */
static bool family_keys(struct kiln_model *m, const char *arch, char *err, size_t errlen) {
    const struct kiln_arch *a = m->arch;
    if (!a->fam_size) return true;
    m->fam = calloc(1, a->fam_size);
    if (!m->fam) return kiln_errf(err, errlen, "out of memory");
    for (size_t k = 0; k < a->n_keys; k++) {
        const struct kiln_key_spec *s = &a->keys[k];
        char *f = (char *)m->fam + s->field;
        char key[160];
        key_name(key, sizeof key, arch, s->name);
        if (s->required && gguf_find_key(m->gguf, key) < 0)
            return kiln_errf(err, errlen, "missing hyper-parameter %s", key);
        switch (s->type) {
        case KILN_KEY_INT: {
            int64_t v;
            if (!hp_int(m->gguf, arch, s->name, (int64_t)s->def, (int64_t)s->lo, (int64_t)s->hi, &v, err, errlen))
                return false;
            memcpy(f, &v, sizeof v);
            break;
        }
        case KILN_KEY_FLOAT: {
            float v;
            if (!hp_float(m->gguf, arch, s->name, s->def, s->lo, s->hi, &v, err, errlen)) return false;
            memcpy(f, &v, sizeof v);
            break;
        }
        case KILN_KEY_BOOL: {
            bool v = s->def != 0.0;
            if (gguf_find_key(m->gguf, key) >= 0 && !gguf_get_bool(m->gguf, key, &v))
                return kiln_errf(err, errlen, "hyper-parameter %s: %s", key, gguf_error(m->gguf));
            memcpy(f, &v, sizeof v);
            break;
        }
        }
    }
    return true;
}

bool kiln_load_hparams(struct kiln_model *m, const char *arch, int64_t n_vocab, char *err, size_t errlen) {
    const struct gguf_file *g = m->gguf;
    struct kiln_hparams *hp = &m->hp;
    const int64_t big = (int64_t)1 << 31;
    if (!hp_int(g, arch, "context_length", -1, 1, big, &hp->n_ctx_train, err, errlen) ||
        !hp_int(g, arch, "embedding_length", -1, 1, 1 << 20, &hp->n_embd, err, errlen) ||
        !hp_int(g, arch, "block_count", -1, 1, KILN_MAX_LAYERS, &hp->n_layer, err, errlen))
        return false;
    const int64_t L = hp->n_layer;
    m->lhp = calloc((size_t)L, sizeof *m->lhp);
    int64_t *heads = calloc((size_t)L * 3, sizeof *heads);
    if (!m->lhp || !heads) {
        free(heads);
        return kiln_errf(err, errlen, "out of memory");
    }
    int64_t *heads_kv = heads + L, *ff = heads + 2 * L;
    bool ok = hp_int_layers(g, arch, "attention.head_count", L, NULL, 1, 1 << 14, heads, err, errlen) &&
              hp_int_layers(g, arch, "attention.head_count_kv", L, heads, 1, 1 << 14, heads_kv, err, errlen) &&
              hp_int_layers(g, arch, "feed_forward_length", L, NULL, 1, 1 << 22, ff, err, errlen);
    for (int64_t il = 0; ok && il < L; il++) {
        if (heads[il] % heads_kv[il] != 0)
            ok = kiln_errf(err, errlen, "%lld heads cannot be grouped over %lld KV heads", (long long)heads[il],
                           (long long)heads_kv[il]);
        m->lhp[il].n_head = heads[il], m->lhp[il].n_head_kv = heads_kv[il], m->lhp[il].n_ff = ff[il];
    }
    free(heads);
    if (!ok) return false;
    hp->n_head = m->lhp[0].n_head, hp->n_head_kv = m->lhp[0].n_head_kv, hp->n_ff = m->lhp[0].n_ff;

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
        return kiln_errf(err, errlen, "value length %lld differs from key length %lld (not supported)",
                         (long long)vlen, (long long)hp->n_embd_head);
    if (!hp_int(g, arch, "rope.dimension_count", hp->n_embd_head, 2, hp->n_embd_head, &hp->n_rot, err, errlen))
        return false;
    if (hp->n_rot % 2) return kiln_errf(err, errlen, "rope dimension count %lld is odd", (long long)hp->n_rot);
    if (!hp_float(g, arch, "rope.freq_base", 10000.0, 1e-3, 1e12, &hp->rope_freq_base, err, errlen) ||
        !hp_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0, &hp->norm_rms_eps, err, errlen) ||
        !rope_scale(m, arch, &hp->rope_freq_scale, err, errlen))
        return false;

    /* windowed layers: their own head size, RoPE dimensions and base where the file says so */
    if (!layer_kinds(m, arch, err, errlen)) return false;
    const struct kiln_window_spec *w = &m->arch->window;
    int64_t head_swa = hp->n_embd_head, rot_swa = hp->n_rot;
    float base_swa = hp->rope_freq_base;
    if (m->n_swa > 0) {
        if (!hp_int(g, arch, "attention.key_length_swa", hp->n_embd_head, 2, 1 << 14, &head_swa, err, errlen) ||
            !hp_int(g, arch, "attention.value_length_swa", head_swa, 1, 1 << 14, &vlen, err, errlen) ||
            !hp_int(g, arch, "rope.dimension_count_swa", head_swa < hp->n_rot ? head_swa : hp->n_rot, 2, head_swa,
                    &rot_swa, err, errlen) ||
            !hp_float(g, arch, "rope.freq_base_swa", w->freq_base_def > 0 ? w->freq_base_def : hp->rope_freq_base,
                      1e-3, 1e12, &base_swa, err, errlen))
            return false;
        if (vlen != head_swa)
            return kiln_errf(err, errlen, "windowed layers' value length %lld differs from their key length %lld "
                             "(not supported)", (long long)vlen, (long long)head_swa);
        if (rot_swa % 2)
            return kiln_errf(err, errlen, "windowed layers' rope dimension count %lld is odd", (long long)rot_swa);
    }
    for (int64_t il = 0; il < L; il++) {
        struct kiln_layer_hp *l = &m->lhp[il];
        const bool win = l->kind == KILN_LAYER_ATTN_WINDOW;
        l->n_embd_head = win ? head_swa : hp->n_embd_head;
        l->n_rot = win ? rot_swa : hp->n_rot;
        l->rope_freq_base = win ? base_swa : hp->rope_freq_base;
        l->rope_freq_scale = win && !w->global_scaling ? 1.0f : hp->rope_freq_scale;
    }
    if (!hp_int(g, arch, "vocab_size", n_vocab, 1, (int64_t)1 << 31, &hp->n_vocab, err, errlen)) return false;
    if (hp->n_vocab != n_vocab)
        return kiln_errf(err, errlen, "vocab_size %lld differs from the %lld tokens of the vocabulary",
                         (long long)hp->n_vocab, (long long)n_vocab);
    if (!embedding_keys(m, arch, err, errlen) || !experts(m, arch, err, errlen) || !family_keys(m, arch, err, errlen))
        return false;
    return !m->arch->prepare || m->arch->prepare(m, err, errlen);
}
