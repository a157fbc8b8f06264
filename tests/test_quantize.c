/*
 * test_quantize.c - kiln_quantize_file against llama.cpp's quantizer: the KJV
 * model quantized from kjv-f16.gguf to Q8_0 and Q4_0 must give every tensor the
 * type and bytes of ../shared/models/kjv-q8_0.gguf / kjv-q4_0.gguf (made by
 * llama.cpp), Q4_K_M the types of kjv-q4_k_m.gguf (bytes counted); the mixes of
 * a 32-layer model against the layer lists llama.cpp's rules give (written out
 * by hand); thread-count invariance; failures (damaged input, requantizing,
 * cancel, bad paths) leave no output; the writer's streaming mode over slabs.
 */
#include "gguf.h"
#include "kiln.h"
#include "quant_mix.h"
#include "testutil.h"

#include <unistd.h>

static char tmpdir[] = "/tmp/kiln-test-quantize-XXXXXX";

static void tmp_path(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }
static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* ------------------------------------------------------------------ names */

static void test_names(void) {
    enum kiln_ftype f;
    CHECK(kiln_ftype_from_name("q4_k_m", &f) && f == KILN_FTYPE_MOSTLY_Q4_K_M && f == 15);
    CHECK(kiln_ftype_from_name("Q8_0", &f) && f == 7);
    CHECK(kiln_ftype_from_name("bf16", &f) && f == 32);
    CHECK(kiln_ftype_from_name("Q4_K", &f) && f == KILN_FTYPE_MOSTLY_Q4_K_M); /* llama-quantize's alias */
    CHECK(kiln_ftype_from_name("f32", &f) && f == 0);
    CHECK(!kiln_ftype_from_name("Q4_K_X", &f) && !kiln_ftype_from_name("", &f) && !kiln_ftype_from_name(NULL, &f));
    CHECK(!strcmp(kiln_ftype_name(KILN_FTYPE_MOSTLY_Q3_K_L), "Q3_K_L"));
    CHECK(!strcmp(kiln_ftype_name((enum kiln_ftype)99), "?"));
}

/* ------------------------------------------------------------------ mixes */

/* Types of a 32-layer llama (n_head 32, n_head_kv 8: GQA 4) as llama.cpp's rules give them. */
static void mix_32(enum kiln_ftype ftype, enum kt_type v[32], enum kt_type d[32], enum kt_type *out,
                   enum kt_type *embd) {
    static char names[3 + 32 * 2][KT_MAX_NAME];
    const char *ptr[3 + 32 * 2];
    int n = 0;
    snprintf(names[n++], KT_MAX_NAME, "output.weight");
    snprintf(names[n++], KT_MAX_NAME, "output_norm.weight");
    snprintf(names[n++], KT_MAX_NAME, "token_embd.weight");
    for (int l = 0; l < 32; l++) {
        snprintf(names[n++], KT_MAX_NAME, "blk.%d.attn_v.weight", l);
        snprintf(names[n++], KT_MAX_NAME, "blk.%d.ffn_down.weight", l);
    }
    for (int i = 0; i < n; i++) ptr[i] = names[i];
    struct kiln_qmix m;
    kiln_qmix_init(&m, ftype, false, "llama", 32, 32, 8, 0, ptr, n);
    const int64_t wide[2] = {4096, 32000}, kv[2] = {4096, 1024}, down[2] = {11008, 4096}, norm[2] = {4096, 1};
    *out = kiln_qmix_type(&m, "output.weight", 2, wide, KT_TYPE_F16);
    CHECK(kiln_qmix_type(&m, "output_norm.weight", 1, norm, KT_TYPE_F32) == KT_TYPE_F32);
    *embd = kiln_qmix_type(&m, "token_embd.weight", 2, wide, KT_TYPE_F16);
    for (int l = 0; l < 32; l++) {
        v[l] = kiln_qmix_type(&m, names[3 + 2 * l], 2, kv, KT_TYPE_F16);
        d[l] = kiln_qmix_type(&m, names[4 + 2 * l], 2, down, KT_TYPE_F16);
    }
}

static bool in_list(int l, const int *list) {
    for (; *list >= 0; list++)
        if (*list == l) return true;
    return false;
}

static void test_mixes(void) {
    enum kt_type v[32], d[32], out, embd;
    /* Q4_K_M: more bits for the first and last 4 of 32 layers and every third between */
    static const int more[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31, -1};
    mix_32(KILN_FTYPE_MOSTLY_Q4_K_M, v, d, &out, &embd);
    CHECK(out == KT_TYPE_Q6_K && embd == KT_TYPE_Q4_K);
    for (int l = 0; l < 32; l++) {
        enum kt_type want = in_list(l, more) ? KT_TYPE_Q6_K : KT_TYPE_Q4_K;
        CHECKF(v[l] == want && d[l] == want, "Q4_K_M layer %d: attn_v %s ffn_down %s", l, kt_type_name(v[l]),
               kt_type_name(d[l]));
    }
    /* Q2_K with GQA 4: attn_v Q4_K everywhere, ffn_down Q3_K */
    mix_32(KILN_FTYPE_MOSTLY_Q2_K, v, d, &out, &embd);
    CHECK(out == KT_TYPE_Q6_K && embd == KT_TYPE_Q2_K);
    for (int l = 0; l < 32; l++) CHECK(v[l] == KT_TYPE_Q4_K && d[l] == KT_TYPE_Q3_K);
    /* Q3_K_M: attn_v Q5_K for the first two, then Q4_K; ffn_down Q5_K below layer 2, then Q4_K */
    mix_32(KILN_FTYPE_MOSTLY_Q3_K_M, v, d, &out, &embd);
    for (int l = 0; l < 32; l++)
        CHECKF(v[l] == (l < 2 ? KT_TYPE_Q5_K : KT_TYPE_Q4_K) && d[l] == (l < 2 ? KT_TYPE_Q5_K : KT_TYPE_Q4_K),
               "Q3_K_M layer %d", l);
    /* Q4_K_S: attn_v Q5_K for the first 4, ffn_down Q5_K for the first 4 (32 / 8) */
    mix_32(KILN_FTYPE_MOSTLY_Q4_K_S, v, d, &out, &embd);
    for (int l = 0; l < 32; l++) CHECK(v[l] == (l < 4 ? KT_TYPE_Q5_K : KT_TYPE_Q4_K) && d[l] == v[l]);
    /* Q8_0: output stays Q8_0; Q4_0: output Q6_K, everything else Q4_0 */
    mix_32(KILN_FTYPE_MOSTLY_Q8_0, v, d, &out, &embd);
    CHECK(out == KT_TYPE_Q8_0 && embd == KT_TYPE_Q8_0 && v[5] == KT_TYPE_Q8_0);
    mix_32(KILN_FTYPE_MOSTLY_Q4_0, v, d, &out, &embd);
    CHECK(out == KT_TYPE_Q6_K && embd == KT_TYPE_Q4_0 && v[0] == KT_TYPE_Q4_0 && d[31] == KT_TYPE_Q4_0);
    /* F16: every 2-D weight F16, output included */
    mix_32(KILN_FTYPE_MOSTLY_F16, v, d, &out, &embd);
    CHECK(out == KT_TYPE_F16 && v[3] == KT_TYPE_F16);

    /* fallbacks for rows that are not whole 256-blocks */
    struct kiln_qmix m;
    const char *one[] = {"blk.0.ffn_down.weight"};
    const int64_t r672[2] = {672, 8}, r80[2] = {80, 8}, r48[2] = {48, 8};
    kiln_qmix_init(&m, KILN_FTYPE_MOSTLY_Q4_K_S, true, "llama", 1, 1, 1, 0, one, 1);
    CHECK(kiln_qmix_type(&m, one[0], 2, r672, KT_TYPE_F16) == KT_TYPE_Q5_0);
    CHECK(kiln_qmix_type(&m, one[0], 2, r48, KT_TYPE_F16) == KT_TYPE_F16); /* not even 32-blocks */
    kiln_qmix_init(&m, KILN_FTYPE_MOSTLY_Q6_K, true, "llama", 1, 1, 1, 0, one, 1);
    CHECK(kiln_qmix_type(&m, one[0], 2, r672, KT_TYPE_F16) == KT_TYPE_Q8_0);
    kiln_qmix_init(&m, KILN_FTYPE_MOSTLY_Q4_0, true, "llama", 1, 1, 1, 0, one, 1);
    CHECK(kiln_qmix_type(&m, one[0], 2, r80, KT_TYPE_F16) == KT_TYPE_F16);
    CHECK(m.n_fallback == 1);
    /* tied embeddings: without output.weight the token embedding gets the output's type */
    const char *tied[] = {"token_embd.weight"};
    const int64_t e[2] = {4096, 32000};
    kiln_qmix_init(&m, KILN_FTYPE_MOSTLY_Q4_0, false, "llama", 1, 1, 1, 0, tied, 1);
    CHECK(kiln_qmix_type(&m, tied[0], 2, e, KT_TYPE_F16) == KT_TYPE_Q6_K);
    /* kept as they are: norms, 1-D, gate_inp */
    CHECK(!kiln_qmix_allows("blk.0.attn_norm.weight", 2) && !kiln_qmix_allows("blk.0.attn_q.weight", 1));
    CHECK(!kiln_qmix_allows("blk.0.ffn_gate_inp.weight", 2) && !kiln_qmix_allows("blk.0.attn_q.bias", 2));
    CHECK(kiln_qmix_allows("blk.0.attn_q.weight", 2));
    /* loader order: outside blocks first, then by block number (10 after 9), then by name */
    CHECK(kiln_qmix_order("token_embd.weight", "blk.0.attn_k.weight") < 0);
    CHECK(kiln_qmix_order("blk.9.ffn_up.weight", "blk.10.attn_k.weight") < 0);
    CHECK(kiln_qmix_order("blk.1.attn_k.weight", "blk.1.attn_norm.weight") < 0);
}

/* ------------------------------------------------------------------ ../shared */

/* Compare every tensor of got with want: same names in the same order, same types; bytes counted. */
static void compare_files(const char *label, const char *got_path, const char *want_path, bool bytes_must_match) {
    char err[256];
    struct gguf_file *got = gguf_open(got_path, err, sizeof err), *want = gguf_open(want_path, err, sizeof err);
    CHECKF(got && want, "%s: %s", label, err);
    if (!got || !want) {
        gguf_close(got);
        gguf_close(want);
        return;
    }
    CHECK(gguf_n_tensors(got) == gguf_n_tensors(want));
    int64_t same = 0, n = gguf_n_tensors(want) < gguf_n_tensors(got) ? gguf_n_tensors(want) : gguf_n_tensors(got);
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor_info *a = gguf_tensor(got, i), *b = gguf_tensor(want, i);
        bool name_ok = a->name.len == b->name.len && !memcmp(a->name.ptr, b->name.ptr, (size_t)a->name.len);
        CHECKF(name_ok, "%s: tensor %lld is %.*s, want %.*s", label, (long long)i, (int)a->name.len, a->name.ptr,
               (int)b->name.len, b->name.ptr);
        CHECKF(a->type == b->type, "%s: %.*s is %s, want %s", label, (int)b->name.len, b->name.ptr,
               kt_type_name(a->type), kt_type_name(b->type));
        bool eq = a->size == b->size && !memcmp(a->data, b->data, a->size);
        same += eq;
        if (bytes_must_match)
            CHECKF(eq, "%s: %.*s bytes differ from llama.cpp's", label, (int)b->name.len, b->name.ptr);
    }
    uint32_t ft = 0, qv = 0, want_ft = 1;
    CHECK(gguf_get_u32(got, "general.file_type", &ft) && gguf_get_u32(want, "general.file_type", &want_ft) &&
          ft == want_ft);
    CHECK(gguf_get_u32(got, "general.quantization_version", &qv) && qv == 2);
    CHECK(gguf_n_kv(got) == gguf_n_kv(want));
    printf("%s: %lld of %lld tensors byte-identical to llama.cpp's\n", label, (long long)same, (long long)n);
    gguf_close(got);
    gguf_close(want);
}

static bool quantize(const char *in, const char *out, enum kiln_ftype ftype, int threads) {
    struct kiln_quantize_params p = kiln_quantize_default_params();
    p.ftype = ftype;
    p.n_threads = threads;
    char err[512];
    bool ok = kiln_quantize_file(in, out, &p, err, sizeof err);
    CHECKF(ok, "quantize %s -> %s: %s", in, out, err);
    return ok;
}

static void on_tensor(const struct kiln_quantize_tensor *t, void *data) {
    if (t->requantized) ++*(int *)data;
}
static bool cancel_at_half(float f, void *data) {
    (void)data;
    return f < 0.5f;
}

static void test_shared(const char *shared) {
    char f16[1024], ref[1024], out[1024], out3[1024];
    snprintf(f16, sizeof f16, "%s/models/kjv-f16.gguf", shared);
    static const struct {
        enum kiln_ftype ftype;
        const char *file;
        bool bytes;
    } cases[] = {
        {KILN_FTYPE_MOSTLY_Q8_0, "kjv-q8_0.gguf", true},
        {KILN_FTYPE_MOSTLY_Q4_0, "kjv-q4_0.gguf", true},
        {KILN_FTYPE_MOSTLY_Q4_K_M, "kjv-q4_k_m.gguf", false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(ref, sizeof ref, "%s/models/%s", shared, cases[c].file);
        tmp_path(out, sizeof out, cases[c].file);
        if (quantize(f16, out, cases[c].ftype, 2)) compare_files(cases[c].file, out, ref, cases[c].bytes);
    }
    /* the thread count does not change a byte */
    tmp_path(out, sizeof out, "t1.gguf");
    tmp_path(out3, sizeof out3, "t3.gguf");
    if (quantize(f16, out, KILN_FTYPE_MOSTLY_Q4_K_S, 1) && quantize(f16, out3, KILN_FTYPE_MOSTLY_Q4_K_S, 3)) {
        size_t n1, n3;
        char *a = tu_read_file(out, &n1), *b = tu_read_file(out3, &n3);
        CHECK(a && b && n1 == n3 && !memcmp(a, b, n1));
        free(a);
        free(b);
    }

    /* an already quantized input: refused unless allowed, then reported per tensor */
    char q8[1024], err[512];
    snprintf(q8, sizeof q8, "%s/models/kjv-q8_0.gguf", shared);
    tmp_path(out, sizeof out, "requant.gguf");
    struct kiln_quantize_params p = kiln_quantize_default_params();
    p.ftype = KILN_FTYPE_MOSTLY_Q4_0;
    CHECK(!kiln_quantize_file(q8, out, &p, err, sizeof err) && strstr(err, "already quantized") && !exists(out));
    int n_requant = 0;
    p.allow_requantize = true;
    p.on_tensor = on_tensor;
    p.on_tensor_data = &n_requant;
    CHECKF(kiln_quantize_file(q8, out, &p, err, sizeof err), "%s", err);
    CHECK(n_requant == 4 * 7 + 2); /* every 2-D weight (output.weight becomes Q6_K) */
    /* a cancel from the progress callback leaves nothing */
    p = kiln_quantize_default_params();
    p.progress = cancel_at_half;
    tmp_path(out, sizeof out, "cancel.gguf");
    CHECK(!kiln_quantize_file(f16, out, &p, err, sizeof err) && strstr(err, "cancelled") && !exists(out));
}

/* ------------------------------------------------------------------ streaming writer */

/* Rows of 4 MiB: 9 of them do not fit one slab, so the writer must come back for the rest. */
#define BIG_ROW ((int64_t)1 << 20)
struct fill_log {
    int calls;
    int64_t row0[8], nrows[8];
    int64_t fail_at; /* row at which to fail, or -1 */
};

static bool fill_rows(void *user, int64_t row0, int64_t nrows, void *buf, char *err, size_t errlen) {
    struct fill_log *log = user;
    if (log->calls < 8) {
        log->row0[log->calls] = row0;
        log->nrows[log->calls] = nrows;
    }
    log->calls++;
    if (log->fail_at >= row0 && log->fail_at < row0 + nrows) {
        snprintf(err, errlen, "row %lld refused", (long long)log->fail_at);
        return false;
    }
    float *f = buf;
    memset(buf, 0, (size_t)(nrows * BIG_ROW) * sizeof(float));
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < BIG_ROW; i += 4099) f[r * BIG_ROW + i] = (float)(row0 + r) + (float)i * 1e-7f;
    return true;
}

static void test_writer_fill(void) {
    char path[1024], err[256];
    tmp_path(path, sizeof path, "fill.gguf");
    const int64_t ne[2] = {BIG_ROW, 9};
    struct fill_log log = {.fail_at = -1};
    struct gguf_writer *w = gguf_writer_new();
    CHECK(!gguf_writer_add_tensor_fill(w, "x", KT_TYPE_F32, 2, ne, NULL, NULL)); /* a fill is required */
    CHECK(gguf_writer_add_tensor_fill(w, "big", KT_TYPE_F32, 2, ne, fill_rows, &log));
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    /* slabs of at most GGUF_FILL_SLAB bytes, in row order */
    CHECK(log.calls == 2 && log.row0[0] == 0 && log.nrows[0] == 8 && log.row0[1] == 8 && log.nrows[1] == 1);
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    if (g) {
        const struct gguf_tensor_info *t = gguf_tensor(g, 0);
        const float *f = t->data;
        bool ok = t->size == (size_t)(9 * BIG_ROW * 4);
        for (int64_t r = 0; ok && r < 9; r++)
            for (int64_t i = 0; ok && i < BIG_ROW; i += 4099) ok = f[r * BIG_ROW + i] == (float)r + (float)i * 1e-7f;
        CHECK(ok);
        gguf_close(g);
    }
    /* a failing source abandons the file: the old one stays, no temporary is left */
    log = (struct fill_log){.fail_at = 8};
    w = gguf_writer_new();
    CHECK(gguf_writer_add_tensor_fill(w, "big", KT_TYPE_F32, 2, ne, fill_rows, &log));
    CHECK(!gguf_writer_write(w, path));
    CHECKF(strstr(gguf_writer_error(w), "tensor 'big': row 8 refused") != NULL, "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    g = gguf_open(path, err, sizeof err);
    CHECK(g && gguf_tensor(g, 0)->size == (size_t)(9 * BIG_ROW * 4));
    gguf_close(g);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    CHECK(system(cmd) != 0);
    unlink(path);
}

/* ------------------------------------------------------------------ damaged input */

static void test_bad_inputs(void) {
    char in[1024], out[1024], err[512];
    struct kiln_quantize_params p = kiln_quantize_default_params();
    tmp_path(out, sizeof out, "out.gguf");
    tmp_path(in, sizeof in, "none.gguf");
    CHECK(!kiln_quantize_file(in, out, &p, err, sizeof err) && !exists(out));
    /* a weight with a NaN */
    kt_fp16_t w[64 * 4];
    for (int i = 0; i < 64 * 4; i++) w[i] = kt_fp32_to_fp16((float)(i % 7) * 0.01f);
    w[130] = 0x7e00; /* NaN */
    struct gguf_writer *gw = gguf_writer_new();
    const int64_t ne[2] = {64, 4};
    tmp_path(in, sizeof in, "nan.gguf");
    CHECK(gguf_writer_set_str(gw, "general.architecture", "llama") &&
          gguf_writer_add_tensor(gw, "blk.0.attn_q.weight", KT_TYPE_F16, 2, ne, w) && gguf_writer_write(gw, in));
    gguf_writer_free(gw);
    CHECK(!kiln_quantize_file(in, out, &p, err, sizeof err) && !exists(out));
    CHECKF(strstr(err, "blk.0.attn_q.weight") && strstr(err, "non-finite") && strstr(err, "row 2"), "%s", err);
    /* the same file without the NaN quantizes; into a missing directory it fails cleanly */
    w[130] = 0;
    gw = gguf_writer_new();
    CHECK(gguf_writer_set_str(gw, "general.architecture", "llama") &&
          gguf_writer_add_tensor(gw, "blk.0.attn_q.weight", KT_TYPE_F16, 2, ne, w) && gguf_writer_write(gw, in));
    gguf_writer_free(gw);
    CHECKF(kiln_quantize_file(in, out, &p, err, sizeof err), "%s", err);
    tmp_path(out, sizeof out, "no/such/dir/out.gguf");
    CHECK(!kiln_quantize_file(in, out, &p, err, sizeof err) && !exists(out));
    p.ftype = (enum kiln_ftype)99;
    CHECK(!kiln_quantize_file(in, out, &p, err, sizeof err));
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_mixes();
    test_bad_inputs();
    test_writer_fill();
    const char *shared = tu_shared();
    if (shared) test_shared(shared);
    char cmd[2100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    if (!shared) {
        tu_skip_part("the ../shared part of test_quantize: ../shared is absent (set KILN_SHARED)");
        return tu_finish("test_quantize");
    }
    return tu_finish("test_quantize");
}
