/*
 * test_legacy.c - legacy GGML/GGMF/GGJT files (src/gguf/legacy.c). Files crafted
 * here field by field as seed 000 describes them: every format accepted with its
 * tensors' bytes in place and its hyper-parameters derived; damaged ones (bad magic,
 * truncated at every offset, absurd counts, unknown types, n_dims > 4, old quantized
 * layouts) refused with their message. A GGJT v3 file written here from a GGUF
 * converts back to identical tensor bytes and vocabulary. With ../shared: the
 * legacy KJV model converted with --gqa 2 --eps 1e-5 -c 512 gives llama.cpp's
 * prompt tokens, logits and greedy tokens (reference/legacy), and loading the legacy
 * file directly gives the same logits, bit for bit, as its conversion with defaults.
 */
#include "gguf.h"
#include "kiln.h"
#include "refjson.h"
#include "test_gguf_build.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <unistd.h>

enum { GGML_T_F32 = 0, GGML_T_F16 = 1, GGML_T_Q4_0 = 2, GGML_T_Q8_0 = 8 };

/* ---- a legacy file, written field by field */

struct ltensor {
    char name[64]; /* legacy name */
    uint32_t type, n_dims, ne[4];
    const void *data;
    size_t size;
};

struct lspec {
    const char *magic; /* "lmgg", "fmgg", "tjgg" */
    uint32_t version;  /* not written for lmgg */
    uint32_t hp[7];    /* n_vocab n_embd n_mult n_head n_layer n_rot ftype */
    const char **tok;  /* hp[0] tokens */
    const float *score;
    struct ltensor *t;
    int n_t;
};

static void write_legacy(struct tb *b, const struct lspec *s) {
    b->n = 0;
    tb_bytes(b, s->magic, 4);
    if (strcmp(s->magic, "lmgg") != 0) tb_u32(b, s->version);
    for (int i = 0; i < 7; i++) tb_u32(b, s->hp[i]);
    for (uint32_t i = 0; i < s->hp[0]; i++) {
        tb_u32(b, (uint32_t)strlen(s->tok[i]));
        tb_bytes(b, s->tok[i], strlen(s->tok[i]));
        if (strcmp(s->magic, "lmgg") != 0) {
            uint32_t bits;
            memcpy(&bits, &s->score[i], 4);
            tb_u32(b, bits);
        }
    }
    for (int i = 0; i < s->n_t; i++) {
        const struct ltensor *t = &s->t[i];
        tb_u32(b, t->n_dims);
        tb_u32(b, (uint32_t)strlen(t->name));
        tb_u32(b, t->type);
        for (uint32_t j = 0; j < t->n_dims; j++) tb_u32(b, t->ne[j]);
        tb_bytes(b, t->name, strlen(t->name));
        if (!strcmp(s->magic, "tjgg")) tb_pad(b, 32);
        tb_bytes(b, t->data, t->size);
    }
}

/* ---- a tiny llama: 1 layer, n_embd 32, 2 heads, 1 KV head, n_ff 96 (from n_mult 32) */

#define E 32
#define FF 96
#define NV 6
static const char *tiny_tok[NV] = {"<unk>", "<s>", "</s>", "\x41", " the", ""};
static const float tiny_score[NV] = {0, 0, 0, -1, -2, -3};
static uint8_t tiny_bytes[1 << 16];

static size_t tsize(uint32_t type, uint32_t ne0, uint32_t ne1) {
    size_t n = (size_t)ne0 * ne1;
    return type == GGML_T_F32 ? n * 4 : type == GGML_T_F16 ? n * 2 : type == GGML_T_Q8_0 ? n / 32 * 34 : n / 32 * 18;
}

/* tensors of the tiny model, matrices of type mt, each filled with distinct bytes */
static int tiny_tensors(struct ltensor *t, uint32_t mt) {
    static const struct {
        const char *name;
        int dims;
        uint32_t ne0, ne1;
    } L[] = {{"tok_embeddings.weight", 2, E, NV},
             {"norm.weight", 1, E, 1},
             {"output.weight", 2, E, NV},
             {"layers.0.attention.wq.weight", 2, E, E},
             {"layers.0.attention.wk.weight", 2, E, E / 2},
             {"layers.0.attention.wv.weight", 2, E, E / 2},
             {"layers.0.attention.wo.weight", 2, E, E},
             {"layers.0.attention_norm.weight", 1, E, 1},
             {"layers.0.feed_forward.w1.weight", 2, E, FF},
             {"layers.0.feed_forward.w2.weight", 2, FF, E},
             {"layers.0.feed_forward.w3.weight", 2, E, FF},
             {"layers.0.ffn_norm.weight", 1, E, 1}};
    size_t off = 0;
    int n = (int)(sizeof L / sizeof L[0]);
    for (int i = 0; i < n; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", L[i].name);
        t[i].type = L[i].dims == 1 ? GGML_T_F32 : mt;
        t[i].n_dims = (uint32_t)L[i].dims;
        t[i].ne[0] = L[i].ne0;
        t[i].ne[1] = L[i].ne1;
        t[i].size = tsize(t[i].type, L[i].ne0, L[i].ne1);
        for (size_t k = 0; k < t[i].size; k++) tiny_bytes[off + k] = (uint8_t)(i * 31 + k * 7);
        if (t[i].type == GGML_T_F32) /* real numbers, so that a model can run on them */
            for (size_t k = 0; k < t[i].size / 4; k++) {
                float f = L[i].dims == 1 ? 1.0f : 0.05f * sinf((float)(i * 131 + k));
                memcpy(tiny_bytes + off + 4 * k, &f, 4);
            }
        t[i].data = tiny_bytes + off;
        off += t[i].size;
    }
    return n;
}

static void tiny_spec(struct lspec *s, struct ltensor *t, const char *magic, uint32_t version, uint32_t mt) {
    *s = (struct lspec){magic, version, {NV, E, 32, 2, 1, 16, mt == GGML_T_F32 ? 0 : mt == GGML_T_F16 ? 1 : 7},
                        tiny_tok, tiny_score, t, tiny_tensors(t, mt)};
}

static int64_t kv_int(const struct gguf_file *g, const char *key) {
    int64_t v = -1;
    CHECKF(gguf_get_int(g, key, &v), "%s: %s", key, gguf_error(g));
    return v;
}

static bool str_is(struct gguf_str s, const char *want) {
    return s.len == strlen(want) && !memcmp(s.ptr, want, s.len);
}

/* Every accepted format: names mapped, bytes in place, hyper-parameters and vocabulary as GGUF has them. */
static void test_formats(void) {
    static const struct {
        const char *magic;
        uint32_t version, mt;
        const char *fmt;
    } cases[] = {{"lmgg", 0, GGML_T_F32, "GGML"},    {"fmgg", 1, GGML_T_F16, "GGMF v1"},
                 {"tjgg", 1, GGML_T_F32, "GGJT v1"}, {"tjgg", 2, GGML_T_F16, "GGJT v2"},
                 {"tjgg", 3, GGML_T_Q8_0, "GGJT v3"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct ltensor t[16];
        struct lspec s;
        tiny_spec(&s, t, cases[c].magic, cases[c].version, cases[c].mt);
        struct tb b = {0};
        write_legacy(&b, &s);
        char err[256];
        struct gguf_file *g = gguf_open_legacy_memory(b.p, b.n, NULL, err, sizeof err);
        CHECKF(g, "%s: %s", cases[c].fmt, err);
        if (!g) {
            free(b.p);
            continue;
        }
        CHECKF(!strcmp(gguf_legacy_format(g), cases[c].fmt), "%s named %s", cases[c].fmt, gguf_legacy_format(g));
        /* GGJT's data is mapped in place; GGML/GGMF's is unaligned, so it is copied aligned */
        const bool in_place = !strcmp(cases[c].magic, "tjgg");
        const uint8_t *base = gguf_base(g);
        CHECK(in_place ? base == b.p && gguf_size(g) == b.n : base != b.p);
        static const char *gguf_names[] = {
            "token_embd.weight",       "output_norm.weight",      "output.weight",
            "blk.0.attn_q.weight",     "blk.0.attn_k.weight",     "blk.0.attn_v.weight",
            "blk.0.attn_output.weight", "blk.0.attn_norm.weight", "blk.0.ffn_gate.weight",
            "blk.0.ffn_down.weight",   "blk.0.ffn_up.weight",     "blk.0.ffn_norm.weight"};
        CHECK(gguf_n_tensors(g) == s.n_t);
        for (int i = 0; i < s.n_t && i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor_info *ti = gguf_tensor(g, i);
            CHECKF(str_is(ti->name, gguf_names[i]), "%s: tensor %d is %.*s", cases[c].fmt, i, (int)ti->name.len,
                   ti->name.ptr);
            /* data not copied: it points at the crafted bytes, which hold what was written */
            const uint8_t *where = (const uint8_t *)ti->data;
            CHECK(where >= base && where + ti->size <= base + gguf_size(g) && ti->size == t[i].size &&
                  !memcmp(where, t[i].data, t[i].size));
            CHECK((int)ti->type == (int)t[i].type && ti->ne[0] == t[i].ne[0] && ti->n_dims == (int)t[i].n_dims);
            CHECK((uintptr_t)where % 32 == 0 && (where - base) % 32 == 0);
        }
        CHECK(kv_int(g, "llama.feed_forward_length") == FF);
        CHECK(kv_int(g, "llama.attention.head_count") == 2);
        CHECK(kv_int(g, "llama.attention.head_count_kv") == 1); /* from wk's 16 rows */
        CHECK(kv_int(g, "llama.context_length") == GGUF_LEGACY_DEFAULT_CTX);
        CHECK(kv_int(g, "llama.rope.dimension_count") == 16);
        CHECK(kv_int(g, "tokenizer.ggml.bos_token_id") == 1 && kv_int(g, "tokenizer.ggml.eos_token_id") == 2 &&
              kv_int(g, "tokenizer.ggml.unknown_token_id") == 0);
        float eps = 0;
        CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps == (float)5e-6);
        int64_t ki = gguf_find_key(g, "tokenizer.ggml.tokens"), kt = gguf_find_key(g, "tokenizer.ggml.token_type"),
                ks = gguf_find_key(g, "tokenizer.ggml.scores");
        CHECK(ki >= 0 && kt >= 0 && ks >= 0 && gguf_arr_n(g, ki) == NV);
        /* the raw byte 'A' becomes <0x41>, ' the' gets SPM's U+2581, the empty token is control */
        static const char *want_tok[NV] = {"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81the", ""};
        static const int want_type[NV] = {2, 3, 3, 6, 1, 3};
        for (int i = 0; ki >= 0 && kt >= 0 && i < NV; i++) {
            struct gguf_str st;
            int64_t ty;
            double sc;
            CHECK(gguf_arr_get_str(g, ki, (uint64_t)i, &st) && str_is(st, want_tok[i]));
            CHECKF(gguf_arr_get_int(g, kt, (uint64_t)i, &ty) && ty == want_type[i], "%s token %d type %lld",
                   cases[c].fmt, i, (long long)ty);
            CHECK(gguf_arr_get_float(g, ks, (uint64_t)i, &sc) &&
                  sc == (strcmp(cases[c].magic, "lmgg") ? tiny_score[i] : 0.0)); /* GGML had no scores */
        }
        gguf_close(g);

        /* options: what the header cannot say */
        struct gguf_legacy_opts o = {.gqa = 2, .eps = 1e-5, .n_ctx = 512, .name = "tiny"};
        g = gguf_open_legacy_memory(b.p, b.n, &o, err, sizeof err);
        CHECKF(g, "%s with options: %s", cases[c].fmt, err);
        if (g) {
            struct gguf_str name;
            CHECK(kv_int(g, "llama.context_length") == 512 && kv_int(g, "llama.attention.head_count_kv") == 1);
            CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps == 1e-5f);
            CHECK(gguf_get_str(g, "general.name", &name) && str_is(name, "tiny"));
            gguf_close(g);
        }
        /* gguf_open_memory takes a legacy file too */
        g = gguf_open_memory(b.p, b.n, err, sizeof err);
        CHECKF(g && gguf_legacy_format(g), "%s via gguf_open_memory: %s", cases[c].fmt, err);
        gguf_close(g);
        free(b.p);
    }
}

static int argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

/* Logits of every position of ids (one batch) into out; then greedy tokens after them into greedy. */
static bool eval(struct kiln_model *m, const int32_t *ids, int n, float *out, int n_greedy, int *greedy) {
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    char err[256];
    struct kiln_context *ctx = kiln_context_new(m, cp, err, sizeof err);
    CHECKF(ctx, "context: %s", err);
    if (!ctx) return false;
    const int64_t V = kiln_model_hparams(m)->n_vocab;
    struct kiln_batch b = kiln_batch_init(n);
    for (int i = 0; i < n; i++) kiln_batch_add(&b, ids[i], i, 0, true);
    bool ok = kiln_decode(ctx, &b) == 0;
    for (int i = 0; ok && i < n; i++) memcpy(out + (size_t)i * V, kiln_get_logits_ith(ctx, i), sizeof(float) * V);
    int tok = ok ? argmax(out + (size_t)(n - 1) * V, V) : -1;
    for (int s = 0; ok && s < n_greedy; s++) {
        greedy[s] = tok;
        kiln_batch_clear(&b);
        kiln_batch_add(&b, tok, n + s, 0, true);
        ok = kiln_decode(ctx, &b) == 0;
        if (ok) tok = argmax(kiln_get_logits_ith(ctx, 0), V);
    }
    CHECKF(ok, "decode: %s", kiln_context_error(ctx));
    kiln_batch_free(&b);
    kiln_context_free(ctx);
    return ok;
}

/* A GGML file (unaligned tensor data) loaded by the runtime and decoded: under the
 * sanitizers, no misaligned access, no leak. */
static void test_run_unaligned(void) {
    struct ltensor t[16];
    struct lspec s;
    tiny_spec(&s, t, "lmgg", 0, GGML_T_F32);
    struct tb b = {0};
    write_legacy(&b, &s);
    char path[] = "/tmp/kiln-test-legacy-ggml-XXXXXX", err[256];
    int fd = mkstemp(path);
    bool wrote = fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n;
    if (fd >= 0) close(fd);
    CHECK(wrote);
    struct kiln_model *m = kiln_model_load(path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m, "GGML model: %s", err);
    if (m) {
        const struct kiln_hparams *hp = kiln_model_hparams(m);
        CHECK(hp->n_layer == 1 && hp->n_head_kv == 1 && hp->n_ff == FF && hp->n_vocab == NV);
        int32_t ids[3] = {1, 3, 4};
        float logits[3 * NV];
        int greedy[2];
        if (eval(m, ids, 3, logits, 2, greedy)) {
            bool finite = true;
            for (int i = 0; i < 3 * NV; i++) finite = finite && isfinite(logits[i]);
            CHECK(finite && greedy[0] >= 0 && greedy[0] < NV);
        }
        kiln_model_free(m);
    }
    unlink(path);
    free(b.p);
}

/* ---- damaged files */

static void expect_fail(const struct tb *b, const struct gguf_legacy_opts *o, const char *what, const char *want) {
    char err[256] = "";
    uint8_t *copy = malloc(b->n ? b->n : 1); /* exact size: ASan sees any read past the end */
    memcpy(copy, b->p, b->n);
    struct gguf_file *g = gguf_open_legacy_memory(copy, b->n, o, err, sizeof err);
    CHECKF(!g, "%s: accepted", what);
    CHECKF(strstr(err, want), "%s: message '%s' lacks '%s'", what, err, want);
    gguf_close(g);
    free(copy);
}

/* Patch a u32 at byte at of a fresh tiny file and expect the message. */
static void patched(const char *magic, uint32_t version, uint32_t mt, size_t at, uint32_t v, const char *what,
                    const char *want) {
    struct ltensor t[16];
    struct lspec s;
    tiny_spec(&s, t, magic, version, mt);
    struct tb b = {0};
    write_legacy(&b, &s);
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    memcpy(b.p + at, x, 4);
    expect_fail(&b, NULL, what, want);
    free(b.p);
}

/* offset of the first tensor's header in the tiny tjgg/fmgg file */
static size_t first_tensor_at(void) {
    size_t at = 8 + 28;
    for (int i = 0; i < NV; i++) at += 4 + strlen(tiny_tok[i]) + 4;
    return at;
}

static void test_damaged(void) {
    struct ltensor t[16];
    struct lspec s;
    struct tb b = {0};
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    write_legacy(&b, &s);

    /* truncated anywhere: refused with a message naming an offset, never read past the end */
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        char err[256] = "";
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        struct gguf_file *g = gguf_open_legacy_memory(copy, n, NULL, err, sizeof err);
        if (g || (n >= 4 && !strstr(err, "at byte"))) {
            if (bad++ < 3) CHECKF(false, "cut at %zu: %s", n, g ? "accepted" : err);
        }
        gguf_close(g);
        free(copy);
    }
    CHECKF(bad == 0, "%d truncations misjudged", bad);
    struct tb cut = b;
    cut.n = b.n - 1;
    expect_fail(&cut, NULL, "last byte cut", "truncated: tensor 'layers.0.ffn_norm.weight' data needs 128 bytes");

    b.p[0] = 'x';
    expect_fail(&b, NULL, "bad magic", "not a legacy GGML/GGMF/GGJT file");
    char err[256];
    CHECK(!gguf_open_memory(b.p, b.n, err, sizeof err) && strstr(err, "bad magic"));
    free(b.p);
    b = (struct tb){0};

    const size_t hp = 8, tensor = first_tensor_at();
    patched("tjgg", 3, GGML_T_Q8_0, 4, 4, "GGJT v4", "unsupported GGJT version 4 (versions 1 to 3 are read) at byte 4");
    patched("fmgg", 1, GGML_T_F32, 4, 2, "GGMF v2", "unsupported GGMF version 2");
    patched("tjgg", 3, GGML_T_Q8_0, hp, 0xffffffffu, "absurd n_vocab", "n_vocab 4294967295 is more than the");
    patched("tjgg", 3, GGML_T_Q8_0, hp, 2, "n_vocab 2", "n_vocab 2 is too small");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 4, 0, "n_embd 0", "n_embd 0 is out of range (1..1048576) at byte 12");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 12, 3, "n_head 3", "n_head 3 does not divide n_embd 32 at byte 20");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 16, 1u << 30, "absurd n_layer", "n_layer 1073741824 is out of range");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 20, 17, "odd n_rot", "n_rot 17 is not an even number");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 24, 5, "unknown ftype", "unknown ftype 5 at byte 32");
    patched("tjgg", 3, GGML_T_Q8_0, hp + 28, 0x7fffffff, "absurd token length", "token 0: length 2147483647 exceeds");
    patched("tjgg", 3, GGML_T_Q8_0, tensor, 5, "n_dims 5", "has n_dims 5 (must be 1..4)");
    patched("tjgg", 3, GGML_T_Q8_0, tensor, 0, "n_dims 0", "has n_dims 0 (must be 1..4)");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 4, 0x7fffffff, "absurd name length", "name length 2147483647");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 8, 99, "unknown type", "tensor 0 has unknown type id 99");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 8, 4, "removed Q4_2", "unknown type id 4");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 12, 0, "zero dim", "dimension 0 is 0");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 12, 0xffffffe0u, "absurd dim", "data needs");
    patched("tjgg", 3, GGML_T_Q8_0, tensor + 12, 33, "row not whole blocks", "not a multiple of q8_0's block size");
    /* old quantized layouts refused, by ftype and by tensor */
    patched("tjgg", 2, GGML_T_Q8_0, hp + 24, 2, "GGJT v2 Q4_0", "Q4 and Q8 block layouts changed in GGJT v3");
    patched("tjgg", 1, GGML_T_F32, hp + 24, 7, "GGJT v1 Q8_0", "changed in GGJT v2 and v3");
    patched("fmgg", 1, GGML_T_F32, tensor + 8, GGML_T_Q4_0, "GGMF q4_0 tensor",
            "tensor 'tok_embeddings.weight' is q4_0 in a GGMF v1 file and cannot be converted");
    patched("tjgg", 2, GGML_T_F16, tensor + 8, GGML_T_Q8_0, "GGJT v2 q8_0 tensor", "changed in GGJT v3");

    /* names: unknown, a layer past n_layer, the same tensor twice */
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    memcpy(t[3].name, "layers.0.attention.wx.weight", 28);
    write_legacy(&b, &s);
    expect_fail(&b, NULL, "unknown name", "tensor 'layers.0.attention.wx.weight' is not a llama tensor");
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    t[3].name[7] = '1';
    write_legacy(&b, &s);
    expect_fail(&b, NULL, "layer past n_layer", "'layers.1.attention.wq.weight' is not a llama tensor");
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    t[6] = t[3];
    write_legacy(&b, &s);
    expect_fail(&b, NULL, "duplicate", "duplicate tensor 'blk.0.attn_q.weight'");
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    t[4].ne[1] = 24; /* K projection: one and a half heads of 16 */
    t[4].size = tsize(t[4].type, E, 24);
    write_legacy(&b, &s);
    expect_fail(&b, NULL, "K rows not whole heads", "layers.0.attention.wk.weight has 24 rows: not a whole number");
    /* --gqa against the shapes */
    tiny_spec(&s, t, "tjgg", 3, GGML_T_Q8_0);
    write_legacy(&b, &s);
    struct gguf_legacy_opts o = {.gqa = 1};
    expect_fail(&b, &o, "gqa 1 vs 1 KV head", "GQA factor 1 means 2 KV heads, but layers.0.attention.wk.weight has 16 rows");
    o.gqa = 3;
    expect_fail(&b, &o, "gqa 3", "GQA factor 3 does not divide the 2 heads");
    free(b.p);
}

/* ---- GGUF -> GGJT v3 (written here) -> GGUF: tensor bytes and vocabulary come back */

static const char *legacy_name(const char *gguf, char *out, size_t n) {
    static const char *const map[][2] = {
        {"token_embd", "tok_embeddings"},         {"output_norm", "norm"},
        {"output", "output"},                     {"attn_q", "attention.wq"},
        {"attn_k", "attention.wk"},               {"attn_v", "attention.wv"},
        {"attn_output", "attention.wo"},          {"attn_norm", "attention_norm"},
        {"ffn_gate", "feed_forward.w1"},          {"ffn_down", "feed_forward.w2"},
        {"ffn_up", "feed_forward.w3"},            {"ffn_norm", "ffn_norm"}};
    int layer = -1, used = 0;
    char stem[64];
    if (sscanf(gguf, "blk.%d.%63[^.].weight%n", &layer, stem, &used) != 2 &&
        sscanf(gguf, "%63[^.].weight%n", stem, &used) != 1)
        return NULL;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(stem, map[i][0]) != 0) continue;
        if (layer >= 0) snprintf(out, n, "layers.%d.%s.weight", layer, map[i][1]);
        else snprintf(out, n, "%s.weight", map[i][1]);
        return out;
    }
    return NULL;
}

/* A GGJT v3 file from a llama GGUF (as llama.cpp's last legacy writer laid it out). */
static bool ggjt_from_gguf(const struct gguf_file *g, struct tb *b) {
    int64_t ki = gguf_find_key(g, "tokenizer.ggml.tokens"), ks = gguf_find_key(g, "tokenizer.ggml.scores");
    int64_t n_vocab = ki >= 0 ? (int64_t)gguf_arr_n(g, ki) : 0, n_ff = kv_int(g, "llama.feed_forward_length");
    int64_t n_embd = kv_int(g, "llama.embedding_length"), n_head = kv_int(g, "llama.attention.head_count");
    if (n_vocab < 3 || ks < 0 || n_ff * 3 < 8 * n_embd) return false; /* n_mult = n_ff gives n_ff back */
    b->n = 0;
    tb_bytes(b, "tjgg", 4);
    tb_u32(b, 3);
    uint32_t hp[7] = {(uint32_t)n_vocab, (uint32_t)n_embd, (uint32_t)n_ff, (uint32_t)n_head,
                      (uint32_t)kv_int(g, "llama.block_count"), (uint32_t)kv_int(g, "llama.rope.dimension_count"),
                      (uint32_t)kv_int(g, "general.file_type")};
    for (int i = 0; i < 7; i++) tb_u32(b, hp[i]);
    for (int64_t i = 0; i < n_vocab; i++) {
        struct gguf_str st;
        double sc;
        if (!gguf_arr_get_str(g, ki, (uint64_t)i, &st) || !gguf_arr_get_float(g, ks, (uint64_t)i, &sc)) return false;
        tb_u32(b, (uint32_t)st.len);
        tb_bytes(b, st.ptr, st.len);
        float f = (float)sc;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        tb_u32(b, bits);
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        char gname[80], lname[80];
        snprintf(gname, sizeof gname, "%.*s", (int)t->name.len, t->name.ptr);
        if (!legacy_name(gname, lname, sizeof lname)) return false;
        tb_u32(b, (uint32_t)t->n_dims);
        tb_u32(b, (uint32_t)strlen(lname));
        tb_u32(b, (uint32_t)t->type);
        for (int j = 0; j < t->n_dims; j++) tb_u32(b, (uint32_t)t->ne[j]);
        tb_bytes(b, lname, strlen(lname));
        tb_pad(b, 32);
        tb_bytes(b, t->data, t->size);
    }
    return true;
}

static void test_round_trip(const char *path) {
    char err[256];
    struct gguf_file *src = gguf_open(path, err, sizeof err);
    CHECKF(src, "%s: %s", path, err);
    if (!src) return;
    struct tb b = {0};
    CHECKF(ggjt_from_gguf(src, &b), "%s: cannot write it as GGJT", path);
    struct gguf_legacy_opts o = {.eps = 1e-5, .n_ctx = 512};
    struct gguf_file *leg = gguf_open_legacy_memory(b.p, b.n, &o, err, sizeof err);
    CHECKF(leg, "%s as GGJT: %s", path, err);
    /* and through kiln's writer to a GGUF file, read back */
    char out[] = "/tmp/kiln-test-legacy-XXXXXX";
    int fd = mkstemp(out);
    if (fd >= 0) close(fd);
    struct gguf_file *conv = NULL;
    if (leg) {
        CHECKF(gguf_write_copy(leg, out, err, sizeof err), "write: %s", err);
        conv = gguf_open(out, err, sizeof err);
        CHECKF(conv, "converted: %s", err);
    }
    if (conv) {
        CHECK(!gguf_legacy_format(conv) && gguf_n_tensors(conv) == gguf_n_tensors(src));
        int same = 0;
        for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
            const struct gguf_tensor_info *a = gguf_tensor(src, i);
            char name[80];
            snprintf(name, sizeof name, "%.*s", (int)a->name.len, a->name.ptr);
            int64_t j = gguf_find_tensor(conv, name);
            const struct gguf_tensor_info *c = j >= 0 ? gguf_tensor(conv, j) : NULL;
            bool ok = c && c->type == a->type && c->n_dims == a->n_dims && c->size == a->size &&
                      !memcmp(c->ne, a->ne, sizeof a->ne) && !memcmp(c->data, a->data, a->size);
            CHECKF(ok, "%s: tensor %s differs after the round trip", path, name);
            same += ok;
        }
        printf("%s: %d of %lld tensors identical after GGUF -> GGJT v3 -> GGUF\n", path, same,
               (long long)gguf_n_tensors(src));
        /* hyper-parameters and the tokenizer as the original GGUF has them */
        static const char *keys[] = {"llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
                                     "llama.attention.head_count", "llama.attention.head_count_kv",
                                     "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
                                     "tokenizer.ggml.eos_token_id", "general.file_type"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            CHECKF(kv_int(conv, keys[k]) == kv_int(src, keys[k]), "%s: %s", path, keys[k]);
        static const char *arrays[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
        for (size_t k = 0; k < 3; k++) {
            int64_t x = gguf_find_key(src, arrays[k]), y = gguf_find_key(conv, arrays[k]);
            size_t nx = 0, ny = 0;
            const void *px = x >= 0 ? gguf_kv_data(src, x, &nx) : NULL, *py = y >= 0 ? gguf_kv_data(conv, y, &ny) : NULL;
            CHECKF(px && py && nx == ny && !memcmp(px, py, nx), "%s: %s differs", path, arrays[k]);
        }
    }
    unlink(out);
    gguf_close(conv);
    gguf_close(leg);
    gguf_close(src);
    free(b.p);
}

/* ---- ../shared: llama.cpp's logits of the same weights */

#define MAX_TOK 256

static void check_reference(struct kiln_model *conv, struct kiln_model *direct, struct kiln_model *conv_default,
                            const char *dir, const char *json_name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    char *json = tu_read_file(path, NULL);
    CHECKF(json, "cannot read %s", path);
    if (!json) return;
    static struct rj_prompt_ref r; /* (13 KiB: off the stack) */
    CHECK(rj_prompt_ref_read(json, &r) && r.n_tokens <= MAX_TOK);
    const char *prompt = r.prompt;
    const double *want = r.tokens, *pos = r.positions, *greedy_want = r.greedy, *margins = r.margins;
    const int64_t n_want = r.n_tokens, n_pos = r.n_positions, n_greedy = r.n_greedy;
    const int64_t V = kiln_model_hparams(conv)->n_vocab;
    int32_t ids[MAX_TOK], ids2[MAX_TOK];
    int64_t n = kiln_tokenize(kiln_model_vocab(conv), prompt, strlen(prompt), ids, MAX_TOK, true, false);
    int64_t n2 = kiln_tokenize(kiln_model_vocab(direct), prompt, strlen(prompt), ids2, MAX_TOK, true, false);
    bool same = n == n_want && n2 == n;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == (int32_t)want[i] && ids2[i] == ids[i];
    CHECKF(same, "%s: prompt tokens differ (%lld, direct %lld, reference %lld tokens)", json_name, (long long)n,
           (long long)n2, (long long)n_want);

    snprintf(path, sizeof path, "%s/%.*s.logits", dir, (int)(strlen(json_name) - 5), json_name);
    size_t ref_len = 0;
    float *ref = (float *)tu_read_file(path, &ref_len);
    CHECKF(ref && ref_len == sizeof(float) * (size_t)(n_pos * V), "%s: logits file", path);
    n = n_want;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)want[i];
    float *got = malloc(sizeof(float) * (size_t)(n * V)), *got_d = malloc(sizeof(float) * (size_t)(n * V)),
          *got_cd = malloc(sizeof(float) * (size_t)(n * V));
    int greedy[64], greedy_d[64], greedy_cd[64];
    if (ref && got && got_d && got_cd && eval(conv, ids, (int)n, got, (int)n_greedy, greedy) &&
        eval(direct, ids, (int)n, got_d, (int)n_greedy, greedy_d) &&
        eval(conv_default, ids, (int)n, got_cd, (int)n_greedy, greedy_cd)) {
        double worst = 0;
        for (int64_t k = 0; k < n_pos; k++) {
            double e = tu_nmse(got + (size_t)pos[k] * V, ref + (size_t)k * V, V);
            worst = e > worst ? e : worst;
            CHECKF(e <= 5e-4, "%s: position %d: nmse %.3g > 5e-4", json_name, (int)pos[k], e);
        }
        int matched = 0;
        for (int64_t s = 0; s < n_greedy && margins[s] > 0.02; s++) {
            CHECKF(greedy[s] == (int)greedy_want[s], "%s: greedy step %lld: %d, reference %d", json_name, (long long)s,
                   greedy[s], (int)greedy_want[s]);
            if (greedy[s] != (int)greedy_want[s]) break;
            matched++;
        }
        /* direct loading is the conversion with defaults, not a copy: same numbers */
        CHECKF(!memcmp(got_d, got_cd, sizeof(float) * (size_t)(n * V)) &&
                   !memcmp(greedy_d, greedy_cd, sizeof(int) * (size_t)n_greedy),
               "%s: the legacy file loaded directly differs from its conversion with defaults", json_name);
        printf("%s: %lld prompt tokens, worst nmse %.2e over %lld positions, %d greedy tokens match\n", json_name,
               (long long)n, worst, (long long)n_pos, matched);
    }
    free(got);
    free(got_d);
    free(got_cd);
    free(ref);
    free(json);
}

static struct kiln_model *convert_and_load(const char *legacy, const struct gguf_legacy_opts *o, const char *out) {
    char err[512];
    struct gguf_file *g = gguf_open_legacy(legacy, o, err, sizeof err);
    CHECKF(g, "%s: %s", legacy, err);
    if (!g) return NULL;
    bool ok = gguf_write_copy(g, out, err, sizeof err);
    CHECKF(ok, "%s: %s", out, err);
    /* tensor bytes copied unchanged */
    struct gguf_file *c = ok ? gguf_open(out, err, sizeof err) : NULL;
    CHECKF(c, "%s: %s", out, err);
    for (int64_t i = 0; c && i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *a = gguf_tensor(g, i), *b = gguf_tensor(c, i);
        CHECK(a->size == b->size && !memcmp(a->data, b->data, a->size));
    }
    gguf_close(c);
    gguf_close(g);
    struct kiln_model *m = ok ? kiln_model_load(out, kiln_model_default_params(), err, sizeof err) : NULL;
    CHECKF(m, "%s: %s", out, err);
    return m;
}

static void test_shared(const char *shared) {
    char legacy[1024], dir[1024], gguf[1024];
    snprintf(legacy, sizeof legacy, "%s/models/legacy/kjv-q4_0.ggjt.bin", shared);
    snprintf(dir, sizeof dir, "%s/reference/legacy", shared);
    snprintf(gguf, sizeof gguf, "%s/models/kjv-q4_0.gguf", shared);
    if (access(gguf, R_OK) == 0) test_round_trip(gguf);
    else tu_skip_part("%s absent (round trip of a real model)", gguf);
    if (access(legacy, R_OK) != 0) {
        tu_skip_part("%s absent (conformance with llama.cpp)", legacy);
        return;
    }
    char out1[] = "/tmp/kiln-test-legacy-conv-XXXXXX", out2[] = "/tmp/kiln-test-legacy-def-XXXXXX";
    int fd = mkstemp(out1);
    if (fd >= 0) close(fd);
    fd = mkstemp(out2);
    if (fd >= 0) close(fd);
    struct gguf_legacy_opts o = {.gqa = 2, .eps = 1e-5, .n_ctx = 512};
    struct kiln_model *conv = convert_and_load(legacy, &o, out1);
    struct kiln_model *conv_default = convert_and_load(legacy, NULL, out2);
    char err[512];
    struct kiln_model *direct = kiln_model_load(legacy, kiln_model_default_params(), err, sizeof err);
    CHECKF(direct, "%s loaded directly: %s", legacy, err);
    if (conv) {
        const struct kiln_hparams *hp = kiln_model_hparams(conv);
        CHECK(hp->n_head == 8 && hp->n_head_kv == 4 && hp->n_ff == 768 && hp->n_ctx_train == 512 &&
              hp->norm_rms_eps == 1e-5f);
    }
    if (direct) {
        const struct kiln_hparams *hp = kiln_model_hparams(direct);
        CHECK(hp->n_head_kv == 4 && hp->n_ctx_train == GGUF_LEGACY_DEFAULT_CTX && hp->norm_rms_eps == 5e-6f);
    }
    int n_ref = 0;
    DIR *d = opendir(dir);
    CHECKF(d, "cannot open %s", dir);
    struct dirent *e;
    while (conv && direct && conv_default && d && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) {
            check_reference(conv, direct, conv_default, dir, e->d_name);
            n_ref++;
        }
    }
    if (d) closedir(d);
    CHECKF(n_ref >= 4, "%d references in %s", n_ref, dir);
    kiln_model_free(conv);
    kiln_model_free(conv_default);
    kiln_model_free(direct);
    unlink(out1);
    unlink(out2);
}

int main(void) {
    test_formats();
    test_damaged();
    test_run_unaligned();
    const char *shared = tu_shared();
    if (shared) test_shared(shared);
    else tu_skip_part("../shared absent (conformance with llama.cpp's logits, round trip of a real model)");
    return tu_finish("test_legacy");
}
