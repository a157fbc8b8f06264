/*
 * synth.c - kiln_synth: deterministic llama-family models with random weights,
 * the tensors of any architecture row (arch.c) kiln runs. Every
 * row of every tensor has its own counter-based random stream (seed, tensor,
 * row), so the bytes are the same on any machine and for any thread count, and
 * rows are generated while the writer streams them to the file.
 */
#include "errf.h"
#include "kiln-offline.h"
#include "quant_mix.h"
#include "runtime.h"
#include "synth_family.h"

#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct preset {
    const char *name;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    const char *arch;  /* the architecture without --arch (NULL: llama) */
    int64_t head_dim;  /* 0: n_embd / n_head */
    int64_t n_swa;     /* sliding window (Gemma) */
    /* Gemma's soft-caps: on the small presets near the size of random weights' scores and
     * logits, so that they bend them (a model that ignored them would not match) */
    float final_cap, attn_cap;
    float rope_factor; /* linear RoPE scaling on global layers (0: none) */
    bool tied;         /* no output.weight: the output is the embedding (as Gemma 3's files) */
    /* experts (for an architecture with them; 0: synth's small default, see experts()) */
    int64_t n_expert, n_expert_used, n_ff_exp;
    double freq_base;  /* 0: 10000 */
};

/* n_vocab is the synthetic vocabulary's size (a --vocab file brings its own). */
static const struct preset presets[] = {
    {"tiny", 64, 2, 4, 2, 128, 512, 256, NULL, 0, 16, 0.3f, 0.5f, 0, false, 0, 0, 0, 0},
    /* grouped-query attention (4 heads per KV head), 8 layers and a feed-forward width
     * that is not a multiple of 256: exercises every branch of the quantization mixes */
    {"small", 256, 8, 8, 2, 672, 512, 512, NULL, 0, 32, 0.3f, 0.5f, 0, false, 0, 0, 0, 0},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048, NULL, 0, 1024, 30.0f, 50.0f, 0, false, 0, 0, 0, 0},
    {"llama-7b", 4096, 32, 32, 32, 11008, 32000, 4096, NULL, 0, 4096, 30.0f, 50.0f, 0, false, 0, 0, 0, 0},
    /* Gemma 3 4B's shape: head 256 (not n_embd / n_head), window 1024 on 29 of 34 layers,
     * RoPE scaled by 8 on the global ones, a vocabulary of 262144, the output tied */
    {"gemma3-4b", 2560, 34, 8, 4, 10240, 262144, 131072, "gemma3", 256, 1024, 0.0f, 0.0f, 8.0f, true, 0, 0, 0, 0},
    /* BGE-small's shape (33M parameters with BGE's vocabulary: --vocab ggml-vocab-bert-bge.gguf) */
    {"bge-small", 384, 12, 12, 12, 1536, 512, 512, "bert", 0, 0, 0.0f, 0.0f, 0, false, 0, 0, 0, 0},
    /* Qwen3-30B-A3B's shape: 48 layers of 128 experts (8 used, 768 wide), head 128, untied */
    {"qwen3-30b-a3b", 2048, 48, 32, 4, 6144, 151936, 40960, "qwen3moe", 128, 0, 0.0f, 0.0f, 0, false, 128, 8, 768,
     1e6},
    /* gpt-oss-20b's shape: 24 layers of 32 experts (4 used, 2880 wide), head 64, a window of
     * 128 on every other layer, YaRN by 32 over 4096 positions */
    {"gpt-oss-20b", 2880, 24, 64, 8, 2880, 201088, 131072, "gpt-oss", 64, 128, 0.0f, 0.0f, 32.0f, false, 32, 4, 2880,
     150000},
};

static const char *const preset_names[] = {"tiny", "small", "tinyllama-1.1b", "llama-7b", "gemma3-4b",
                                           "bge-small",
                                           "qwen3-30b-a3b", "gpt-oss-20b", NULL};

const char *const *kiln_synth_presets(void) { return preset_names; }

/* --arch names synth takes beyond the table's rows: mixtral is a llama file with experts */
bool kiln_synth_arch_known(const char *arch) {
    return arch && (kiln_arch_supported(arch) || !strcmp(arch, "mixtral"));
}

struct kiln_synth_params kiln_synth_default_params(void) {
    return (struct kiln_synth_params){.preset = "tiny", .type = KT_TYPE_F16, .n_threads = 1,
                                      .pooling = KILN_POOLING_UNSPECIFIED};
}


/* ------------------------------------------------------------------ random numbers */

/* SplitMix64's finalizer: a bijective 64-bit mix; used both to seed streams and as the stream. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Irwin-Hall sum of four 16-bit uniforms: bell-shaped, exact in integers, so the
 * float that comes out is the same on every machine (one correctly rounded product). */
#define IH_MEAN 131070 /* 4 * 65535 / 2 */
#define IH_STD 37837.23f /* sqrt(4 * (65536^2 - 1) / 12) */

static void random_row(uint64_t seed, int64_t tensor, int64_t row, float std, float *out, int64_t n) {
    uint64_t state = mix64(seed ^ mix64(((uint64_t)tensor << 40) ^ (uint64_t)row ^ 0x9e3779b97f4a7c15ull));
    const float scale = std / IH_STD;
    for (int64_t i = 0; i < n; i++) {
        state += 0x9e3779b97f4a7c15ull;
        uint64_t r = mix64(state);
        int32_t sum = (int32_t)(r & 0xffff) + (int32_t)((r >> 16) & 0xffff) + (int32_t)((r >> 32) & 0xffff) +
                      (int32_t)(r >> 48);
        out[i] = (float)(sum - IH_MEAN) * scale;
    }
}

/* ------------------------------------------------------------------ tensors */

struct stensor {
    char name[KT_MAX_NAME];
    int n_dims;
    int64_t ne[3];
    enum kt_type type;
    int64_t index;  /* stream id */
    bool ones;      /* norm weights: 1.0 */
    float std;      /* random weights' standard deviation */
    const struct srun *run;
};

struct srun {
    const char *arch;
    uint64_t seed;
    int n_threads;
    kiln_progress_fn progress;
    void *progress_data;
    size_t *done, total;
};

struct sslab {
    const struct stensor *t;
    int64_t row0;
    uint8_t *buf;
};

#define SCHUNK_FLOATS ((int64_t)1 << 16)

static bool gen_rows(void *ctx, int64_t r0, int64_t r1, char *err, size_t errlen) {
    const struct sslab *sl = ctx;
    const struct stensor *t = sl->t;
    const int64_t ne0 = t->ne[0];
    const size_t row = kt_row_size(t->type, ne0);
    const int64_t per = ne0 >= SCHUNK_FLOATS ? 1 : SCHUNK_FLOATS / ne0;
    const int64_t n = r1 - r0 < per ? r1 - r0 : per;
    float *f = malloc((size_t)n * (size_t)ne0 * sizeof(float));
    if (!f) return kiln_errf(err, errlen, "out of memory");
    bool ok = true;
    for (int64_t r = r0; ok && r < r1; r += per) {
        const int64_t nr = r1 - r < per ? r1 - r : per;
        for (int64_t i = 0; i < nr; i++) {
            float c;
            if (kiln_synth_rope_freqs(t->run->arch, t->name, 0, ne0, &c))
                for (int64_t j = 0; j < ne0; j++) kiln_synth_rope_freqs(t->run->arch, t->name, j, ne0, f + i * ne0 + j);
            else if (kiln_synth_constant(t->run->arch, t->name, &c))
                for (int64_t j = 0; j < ne0; j++) f[i * ne0 + j] = c;
            else if (t->ones)
                for (int64_t j = 0; j < ne0; j++) f[i * ne0 + j] = 1.0f;
            else random_row(t->run->seed, t->index, r + i, t->std, f + i * ne0, ne0);
        }
        if (kt_quantize_chunk(t->type, f, sl->buf + (size_t)(r - sl->row0) * row, nr, ne0, NULL) == 0)
            ok = kiln_errf(err, errlen, "%s", kt_last_error());
    }
    free(f);
    return ok;
}

static bool fill(void *user, int64_t row0, int64_t nrows, void *buf, char *err, size_t errlen) {
    const struct stensor *t = user;
    const struct srun *run = t->run;
    struct sslab sl = {.t = t, .row0 = row0, .buf = buf};
    if (!kiln_rows_parallel(run->n_threads, row0, row0 + nrows, gen_rows, &sl, err, errlen)) return false;
    *run->done += (size_t)nrows * kt_row_size(t->type, t->ne[0]);
    if (run->progress &&
        !run->progress(run->total ? (float)((double)*run->done / (double)run->total) : 1.0f, run->progress_data))
        return kiln_errf(err, errlen, "cancelled");
    return true;
}

/* ------------------------------------------------------------------ vocabulary */

/* A byte-fallback SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens,
 * then pieces (with and without the word-start mark U+2581) of growing length,
 * scored so that earlier (shorter) pieces merge first. */
static bool synth_vocab(struct gguf_writer *w, int64_t n_vocab, char *err, size_t errlen) {
    static const char alphabet[] = "etaoinshrdlucmfwypvbgkjqxz";
    static const char singles[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()";
    const char *mark = "\xe2\x96\x81";
    if (n_vocab < 259 + 1) return kiln_errf(err, errlen, "vocabulary of %lld tokens is too small", (long long)n_vocab);
    char *text = malloc((size_t)n_vocab * 16);
    struct gguf_str *strs = malloc((size_t)n_vocab * sizeof *strs);
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    bool ok = text && strs && scores && types;
    if (!ok) kiln_errf(err, errlen, "out of memory");
    int64_t n = 0;
    char *p = text;
#define ADD(kind, ...)                                                  \
    do {                                                                \
        int len_ = snprintf(p, 16, __VA_ARGS__);                        \
        strs[n] = (struct gguf_str){p, (uint64_t)len_};                 \
        types[n] = (kind);                                              \
        scores[n] = (kind) == 1 ? -(float)n : 0.0f;                     \
        p += 16;                                                        \
        n++;                                                            \
    } while (0)
    if (ok) {
        ADD(2, "<unk>");
        ADD(3, "<s>");
        ADD(3, "</s>");
        for (int b = 0; b < 256; b++) ADD(6, "<0x%02X>", b);
        ADD(1, "%s", mark);
        for (const char *c = singles; *c && n + 2 <= n_vocab; c++) {
            ADD(1, "%s%c", mark, *c);
            ADD(1, "%c", *c);
        }
        /* two then three letters, most frequent letters first */
        for (int len = 2; len <= 3; len++) {
            int64_t combos = len == 2 ? 26 * 26 : 26 * 26 * 26;
            for (int64_t k = 0; k < combos && n + 2 <= n_vocab; k++) {
                char w3[4] = {0};
                for (int j = len - 1, v = (int)k; j >= 0; j--, v /= 26) w3[j] = alphabet[v % 26];
                ADD(1, "%s%s", mark, w3);
                ADD(1, "%s", w3);
            }
        }
        while (n < n_vocab) ADD(4, "<extra_%lld>", (long long)n); /* user-defined fillers */
    }
#undef ADD
    ok = ok && gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") &&
         gguf_writer_set_str(w, "tokenizer.ggml.pre", "default") &&
         gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, (uint64_t)n) &&
         gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n) &&
         gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) &&
         gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true) &&
         gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    free(text);
    free(strs);
    free(scores);
    free(types);
    return ok;
}

/* Copy one key/value of g (any type) into w. */
static bool copy_key(struct gguf_writer *w, const struct gguf_file *g, int64_t i, const char *key) {
    size_t size = 0;
    const void *data = gguf_kv_data(g, i, &size);
    enum gguf_type t = gguf_kv_type(g, i);
    if (t == GGUF_TYPE_STRING) {
        struct gguf_str s;
        return gguf_get_str(g, key, &s) && gguf_writer_set_strn(w, key, s.ptr, (size_t)s.len);
    }
    if (t == GGUF_TYPE_ARRAY) {
        enum gguf_type at = gguf_arr_type(g, i);
        uint64_t n = gguf_arr_n(g, i);
        if (at == GGUF_TYPE_ARRAY) return true; /* nested arrays: no tokenizer key uses them */
        if (at != GGUF_TYPE_STRING) return gguf_writer_set_arr(w, key, at, data, n);
        struct gguf_str *strs = malloc((size_t)(n ? n : 1) * sizeof *strs);
        bool ok = strs != NULL;
        for (uint64_t k = 0; ok && k < n; k++) ok = gguf_arr_get_str(g, i, k, &strs[k]);
        ok = ok && gguf_writer_set_arr_str(w, key, strs, n);
        free(strs);
        return ok;
    }
    uint64_t v = 0;
    if (!data || size > sizeof v) return false;
    memcpy(&v, data, size); /* little-endian, as the setters take them */
    switch (t) {
    case GGUF_TYPE_UINT8: return gguf_writer_set_u8(w, key, (uint8_t)v);
    case GGUF_TYPE_INT8: return gguf_writer_set_i8(w, key, (int8_t)v);
    case GGUF_TYPE_UINT16: return gguf_writer_set_u16(w, key, (uint16_t)v);
    case GGUF_TYPE_INT16: return gguf_writer_set_i16(w, key, (int16_t)v);
    case GGUF_TYPE_UINT32: return gguf_writer_set_u32(w, key, (uint32_t)v);
    case GGUF_TYPE_INT32: return gguf_writer_set_i32(w, key, (int32_t)v);
    case GGUF_TYPE_UINT64: return gguf_writer_set_u64(w, key, v);
    case GGUF_TYPE_INT64: return gguf_writer_set_i64(w, key, (int64_t)v);
    case GGUF_TYPE_BOOL: return gguf_writer_set_bool(w, key, v != 0);
    case GGUF_TYPE_FLOAT32: {
        float f;
        memcpy(&f, data, sizeof f);
        return gguf_writer_set_f32(w, key, f);
    }
    case GGUF_TYPE_FLOAT64: {
        double d;
        memcpy(&d, data, sizeof d);
        return gguf_writer_set_f64(w, key, d);
    }
    default: return false;
    }
}

/* The tokenizer.* keys of a vocabulary file; *n_vocab from its token list. */
static bool file_vocab(struct gguf_writer *w, const char *path, int64_t *n_vocab, char *err, size_t errlen) {
    char gerr[1024];
    struct gguf_file *g = gguf_open(path, gerr, sizeof gerr);
    if (!g) return strstr(gerr, path) ? kiln_errf(err, errlen, "%s", gerr) : kiln_errf(err, errlen, "%s: %s", path, gerr);
    bool ok = true;
    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || gguf_kv_type(g, ti) != GGUF_TYPE_ARRAY || gguf_arr_type(g, ti) != GGUF_TYPE_STRING ||
        gguf_arr_n(g, ti) == 0 || gguf_arr_n(g, ti) > INT32_MAX)
        ok = kiln_errf(err, errlen, "%s: no tokenizer.ggml.tokens string array", path);
    else *n_vocab = (int64_t)gguf_arr_n(g, ti);
    for (int64_t i = 0; ok && i < gguf_n_kv(g); i++) {
        struct gguf_str k = gguf_key(g, i);
        char key[256];
        if (k.len >= sizeof key || k.len < 10 || memcmp(k.ptr, "tokenizer.", 10) != 0) continue;
        memcpy(key, k.ptr, (size_t)k.len);
        key[k.len] = 0;
        if (!copy_key(w, g, i, key)) ok = kiln_errf(err, errlen, "%s: cannot copy key '%s'", path, key);
    }
    gguf_close(g);
    return ok;
}

/* ------------------------------------------------------------------ the model */

static bool ftype_of(enum kt_type t, enum kiln_ftype *out) {
    switch (t) {
    case KT_TYPE_F32: *out = KILN_FTYPE_ALL_F32; return true;
    case KT_TYPE_F16: *out = KILN_FTYPE_MOSTLY_F16; return true;
    case KT_TYPE_BF16: *out = KILN_FTYPE_MOSTLY_BF16; return true;
    case KT_TYPE_Q8_0: *out = KILN_FTYPE_MOSTLY_Q8_0; return true;
    case KT_TYPE_Q4_0: *out = KILN_FTYPE_MOSTLY_Q4_0; return true;
    case KT_TYPE_MXFP4: *out = KILN_FTYPE_MOSTLY_MXFP4_MOE; return true;
    default: return false;
    }
}

bool kiln_synth(const struct kiln_synth_params *p, const char *out, char *err, size_t errlen) {
    if (!p || !out || !p->preset) return kiln_errf(err, errlen, "kiln_synth: NULL argument");
    const struct preset *ps = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, p->preset)) ps = &presets[i];
    if (!ps) return kiln_errf(err, errlen, "unknown preset '%s'", p->preset);
    enum kiln_ftype ftype;
    if (!ftype_of(p->type, &ftype))
        return kiln_errf(err, errlen, "type %s is not one synth makes (F32, F16, BF16, Q8_0, Q4_0, MXFP4)",
                         kt_type_name(p->type));

    const char *arch_name = p->arch ? p->arch : ps->arch ? ps->arch : "llama";
    /* Mixtral: a llama file whose layers route through experts */
    const bool mixtral = !strcmp(arch_name, "mixtral");
    if (mixtral) arch_name = "llama";
    const struct kiln_arch *arch = kiln_arch_find(arch_name);
    if (!arch) return kiln_errf(err, errlen, "architecture '%s' is not one kiln runs", arch_name);
    const int64_t n_layer = p->n_layers > 0 ? p->n_layers : ps->n_layer;
    if (n_layer > KILN_MAX_LAYERS)
        return kiln_errf(err, errlen, "%lld layers: at most %d", (long long)n_layer, KILN_MAX_LAYERS);
    /* experts where the family has them: the preset's, or on the small presets 4 of which 2
     * serve each token (fewer used than exist, so that routing decides) */
    int64_t n_expert = 0, n_used = 0, n_ff_exp = 0;
    if (mixtral || arch->moe.required) {
        n_expert = ps->n_expert ? ps->n_expert : 4;
        n_used = ps->n_expert_used ? ps->n_expert_used : 2;
        n_ff_exp = mixtral ? ps->n_ff : ps->n_ff_exp ? ps->n_ff_exp : ps->n_ff / 2;
    }

    struct gguf_writer *w = gguf_writer_new();
    if (!w) return kiln_errf(err, errlen, "out of memory");
    char name[96];
    snprintf(name, sizeof name, "synth-%s", ps->name);
    const int64_t head_dim = ps->head_dim ? ps->head_dim : ps->n_embd / ps->n_head;
    int64_t n_vocab = ps->n_vocab;
    bool ok = gguf_writer_set_str(w, "general.architecture", arch_name) && gguf_writer_set_str(w, "general.name", name);
    /* <arch>.* hyper-parameters, as model.c reads them */
    static const char *const hp_keys[] = {"context_length", "embedding_length", "block_count", "feed_forward_length",
                                          "rope.dimension_count", "attention.head_count", "attention.head_count_kv"};
    const int64_t hp_vals[] = {ps->n_ctx, ps->n_embd, n_layer, ps->n_ff, head_dim, ps->n_head, ps->n_head_kv};
    char key[128];
    for (size_t i = 0; ok && i < sizeof hp_keys / sizeof hp_keys[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", arch_name, hp_keys[i]);
        ok = gguf_writer_set_u32(w, key, (uint32_t)hp_vals[i]);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch_name);
    ok = ok && gguf_writer_set_f32(w, key, 1e-5f);
    snprintf(key, sizeof key, "%s.rope.freq_base", arch_name);
    ok = ok && gguf_writer_set_f32(w, key, ps->freq_base > 0 ? (float)ps->freq_base : 10000.0f) &&
         gguf_writer_set_u64(w, "kiln.synth.seed", p->seed);
    if (!ok) kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    if (ok) ok = p->vocab_path ? file_vocab(w, p->vocab_path, &n_vocab, err, errlen)
                               : synth_vocab(w, n_vocab, err, errlen);
    /* the family's own keys (Gemma: windows, soft-caps, per-layer shapes), and every
     * layer's shape as the loader will read it back */
    struct kiln_hparams hp = {.n_ctx_train = ps->n_ctx, .n_embd = ps->n_embd, .n_layer = n_layer, .n_head = ps->n_head,
                              .n_head_kv = ps->n_head_kv, .n_embd_head = head_dim, .n_ff = ps->n_ff,
                              .n_rot = head_dim};
    bool file_types = false;
    if (p->vocab_path) {
        char gerr[256];
        struct gguf_file *vg = gguf_open(p->vocab_path, gerr, sizeof gerr);
        file_types = vg && gguf_find_key(vg, "tokenizer.ggml.token_type_count") >= 0;
        gguf_close(vg);
    }
    const struct kiln_synth_shape shape = {.n_embd = ps->n_embd, .n_layer = n_layer, .n_head = ps->n_head,
                                           .n_head_kv = ps->n_head_kv, .n_ff = ps->n_ff, .n_ctx = ps->n_ctx,
                                           .head_dim = head_dim, .n_swa = ps->n_swa, .final_cap = ps->final_cap,
                                           .attn_cap = ps->attn_cap, .rope_factor = ps->rope_factor,
                                           .pooling = p->pooling, .file_token_types = file_types,
                                           .n_expert = n_expert, .n_expert_used = n_used, .n_ff_exp = n_ff_exp};
    struct kiln_layer_hp *lhp = calloc((size_t)n_layer, sizeof *lhp);
    if (ok && !lhp) ok = kiln_errf(err, errlen, "out of memory");
    if (ok) ok = kiln_synth_family(w, arch_name, &shape, &hp, lhp, err, errlen);
    if (ok && head_dim != ps->n_embd / ps->n_head) {
        snprintf(key, sizeof key, "%s.attention.key_length", arch_name);
        ok = gguf_writer_set_u32(w, key, (uint32_t)hp.n_embd_head);
        snprintf(key, sizeof key, "%s.attention.value_length", arch_name);
        ok = ok && gguf_writer_set_u32(w, key, (uint32_t)hp.n_embd_head);
        if (!ok) kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    }
    /* the file type last, where quantizing puts it: a quantized synth file is then byte for
     * byte the F32 synth file quantized (by kiln or llama.cpp) */
    snprintf(key, sizeof key, "%s.vocab_size", arch_name);
    if (ok && !(gguf_writer_set_u32(w, key, (uint32_t)n_vocab) &&
                gguf_writer_set_u32(w, "general.quantization_version", 2) &&
                gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype)))
        ok = kiln_errf(err, errlen, "%s", gguf_writer_error(w));

    /* The row's required tensors, an untied output.weight and what else the family's
     * files hold (synth_family.c), in llama.cpp's loader order: outside blocks first, by
     * name within each group. */
    hp.n_vocab = n_vocab;
    const struct kiln_tensor_spec *global[32], *block[32];
    int64_t n_global = 0, n_block = 0;
    for (size_t i = 0; i < arch->n_tensors; i++) {
        const struct kiln_tensor_spec *sp = &arch->tensors[i];
        if (sp->optional && !sp->per_layer &&
            (!kiln_synth_wants(arch_name, sp, NULL, hp.pooling) || (ps->tied && !strcmp(sp->name, "output.weight"))))
            continue;
        /* the dense feed-forward or the experts, as the layers have them */
        if ((sp->when == KILN_WHEN_DENSE && n_expert > 0) || (sp->when == KILN_WHEN_EXPERTS && n_expert == 0)) continue;
        const struct kiln_tensor_spec **list = sp->per_layer ? block : global;
        int64_t *n = sp->per_layer ? &n_block : &n_global;
        if (*n == 32) {
            ok = kiln_errf(err, errlen, "architecture '%s' has too many tensors for synth", arch_name);
            break;
        }
        int64_t j = (*n)++; /* insertion sort by name */
        for (; j > 0 && strcmp(list[j - 1]->name, sp->name) > 0; j--) list[j] = list[j - 1];
        list[j] = sp;
    }
    const int64_t n_max = n_global + n_block * n_layer;
    struct stensor *ts = calloc((size_t)n_max, sizeof *ts);
    const char **names = calloc((size_t)n_max, sizeof *names);
    size_t done = 0;
    struct srun run = {.seed = p->seed, .n_threads = p->n_threads, .progress = p->progress,
                       .progress_data = p->progress_data, .done = &done, .arch = arch_name};
    if (ok && (!ts || !names)) ok = kiln_errf(err, errlen, "out of memory");
    int64_t n_t = 0;
    for (int64_t i = 0; ok && i < n_global + n_block * n_layer; i++) {
        const struct kiln_tensor_spec *sp;
        const struct kiln_layer_hp *l = NULL;
        struct stensor *t = &ts[n_t];
        if (i < n_global) {
            sp = global[i];
            snprintf(t->name, sizeof t->name, "%s", sp->name);
        } else {
            int64_t il = (i - n_global) / n_block, k = (i - n_global) % n_block;
            sp = block[k];
            l = &lhp[il];
            if (sp->optional && !kiln_synth_wants(arch_name, sp, l, hp.pooling)) continue;
            snprintf(t->name, sizeof t->name, "blk.%lld.%s", (long long)il, sp->name);
        }
        t->ne[0] = kiln_dim_size(&hp, l, sp->ne0);
        t->ne[1] = kiln_dim_size(&hp, l, sp->ne1);
        t->ne[2] = kiln_dim_size(&hp, l, sp->ne2);
        t->n_dims = sp->ne1 == KILN_DIM_NONE ? 1 : sp->ne2 == KILN_DIM_NONE ? 2 : 3;
        t->std = kiln_synth_std(arch_name, t->name, t->n_dims);
        if (t->n_dims == 1) kiln_synth_random_1d(arch_name, sp->name, &t->std); /* gpt-oss's biases and sinks */
        t->ones = t->std == 0.0f; /* norms (and, but in BERT and gpt-oss, biases) of ones */
        t->index = n_t;
        t->run = &run;
        names[n_t++] = t->name;
    }
    struct kiln_qmix mix;
    if (ok) kiln_qmix_init(&mix, ftype, false, arch_name, n_layer, ps->n_head, ps->n_head_kv, n_expert, names, n_t);
    for (int64_t i = 0; ok && i < n_t; i++) {
        struct stensor *t = &ts[i];
        t->type = kiln_qmix_type(&mix, t->name, t->n_dims, t->ne, KT_TYPE_F32);
        run.total += kt_row_size(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2]);
        if (!gguf_writer_add_tensor_fill(w, t->name, t->type, t->n_dims, t->ne, fill, t))
            ok = kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    }
    if (ok && !gguf_writer_write(w, out)) ok = kiln_errf(err, errlen, "%s", gguf_writer_error(w));
    free(names);
    free(ts);
    free(lhp);
    gguf_writer_free(w);
    return ok;
}
