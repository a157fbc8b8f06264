/*
 * test_vocab_bad.c - crafted vocabularies (written with the gguf writer): a
 * small consistent SPM and BPE vocab must load and tokenize as worked out by
 * hand; each broken variant must fail to load with a message naming the key.
 * Every pre-tokenizer name llama.cpp knows must load (its regexes compile).
 */
#include "gguf.h"
#include "kiln.h"
#include "testutil.h"

#include <unistd.h>

static char dir[] = "/tmp/kiln_vocab_bad_XXXXXX";

static struct gguf_str S(const char *s) { return (struct gguf_str){s, strlen(s)}; }

/* A tiny SPM vocabulary: <unk> <s> </s>, byte tokens for 'a' and '\n', and pieces. */
static const char *spm_tokens[] = {"<unk>", "<s>", "</s>", "<0x0A>", "<0x61>", "\xe2\x96\x81", "a", "b",
                                   "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "c"};
static const float spm_scores[] = {0, 0, 0, 0, 0, -1, -2, -3, -1.5f, -0.5f, -0.25f, -4};
static const int32_t spm_types[] = {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1};
#define N_SPM (int)(sizeof spm_tokens / sizeof spm_tokens[0])

static struct gguf_writer *spm_writer(void) {
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_str t[N_SPM];
    for (int i = 0; i < N_SPM; i++) t[i] = S(spm_tokens[i]);
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", t, N_SPM);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, spm_scores, N_SPM);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, spm_types, N_SPM);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    return w;
}

/* A tiny byte-level BPE vocabulary: the 256 byte characters plus merges. */
static struct gguf_writer *bpe_writer(const char *pre, bool bad_merge) {
    static char bytes[256][4];
    static struct gguf_str t[260];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        /* GPT-2's byte -> character mapping, written out independently here */
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        int k = 0;
        for (int i = 0; i < b; i++)
            if (!((i >= 0x21 && i <= 0x7e) || (i >= 0xa1 && i <= 0xac) || (i >= 0xae))) k++;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)k;
        if (cp < 0x80) bytes[b][0] = (char)cp, bytes[b][1] = 0;
        else bytes[b][0] = (char)(0xc0 | (cp >> 6)), bytes[b][1] = (char)(0x80 | (cp & 0x3f)), bytes[b][2] = 0;
        t[n++] = S(bytes[b]);
    }
    t[n++] = S("he");
    t[n++] = S("ll");
    t[n++] = S("hell");
    t[n++] = S("\xc4\xa0" "hell"); /* "Ġhell": space + hell */
    struct gguf_str merges[] = {S("h e"), S("l l"), S("he ll"), S(bad_merge ? "\xc4\xa0 hellx" : "\xc4\xa0 hell")};
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", t, (uint64_t)n);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    return w;
}

/* write, open, load; returns the vocab or NULL with the message in err */
static struct kiln_vocab *roundtrip(struct gguf_writer *w, const char *name, struct gguf_file **g, char *err,
                                    size_t errlen) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    bool wrote = gguf_writer_write(w, path);
    CHECKF(wrote, "%s: %s", name, gguf_writer_error(w));
    gguf_writer_free(w);
    *g = wrote ? gguf_open(path, err, errlen) : NULL;
    CHECKF(*g != NULL, "%s: reader refused: %s", name, err);
    struct kiln_vocab *v = *g ? kiln_vocab_load(*g, err, errlen) : NULL;
    unlink(path);
    return v;
}

static void expect_error(struct gguf_writer *w, const char *name, const char *key) {
    struct gguf_file *g;
    char err[512] = "";
    struct kiln_vocab *v = roundtrip(w, name, &g, err, sizeof err);
    CHECKF(v == NULL, "%s: loaded although broken", name);
    CHECKF(v != NULL || strstr(err, key), "%s: message '%s' does not name %s", name, err, key);
    kiln_vocab_free(v);
    gguf_close(g);
}

static void expect_ids(const struct kiln_vocab *v, const char *text, bool add, const int32_t *want, int nw) {
    int32_t got[64];
    int64_t n = kiln_tokenize(v, text, strlen(text), got, 64, add, false);
    bool same = n == nw;
    for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
    CHECKF(same, "'%s': got %lld ids (first %d)", text, (long long)n, n > 0 ? got[0] : -1);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    struct gguf_file *g;
    char err[512];

    /* the consistent SPM vocab. " ab": escaped "▁ab"; the pair with the best score
     * merges first: "ab" (-0.5) beats "▁a" (-1.5), then "▁" + "ab" = "▁ab" (-0.25). */
    struct kiln_vocab *v = roundtrip(spm_writer(), "spm", &g, err, sizeof err);
    CHECKF(v != NULL, "spm: %s", err);
    if (v) {
        int32_t w1[] = {1, 10};
        expect_ids(v, "ab", true, w1, 2); /* space prefix: "▁ab" */
        int32_t w2[] = {8, 8};
        expect_ids(v, "a a", false, w2, 2); /* the space prefix applies without BOS too: "▁a▁a" */
        int32_t w3[] = {10, 3};
        expect_ids(v, "ab\n", false, w3, 2); /* '\n' is no piece: byte fallback <0x0A> */
        int32_t w4[] = {5, 0, 0};
        expect_ids(v, "\xc3\xa9", false, w4, 3); /* "é" has no byte tokens here: unknown per byte */
        CHECK(kiln_vocab_nl(v) == 3);
        CHECK(kiln_vocab_is_eog(v, 2) && !kiln_vocab_is_eog(v, 1));
        char buf[16];
        int32_t ids[] = {1, 10, 3, 4};
        int64_t m = kiln_detokenize(v, ids, 4, buf, sizeof buf, false, false);
        /* BOS is skipped, and after it the piece keeps its space (llama.cpp's rule) */
        CHECKF(m == 5 && !memcmp(buf, " ab\na", 5), "detokenize: %lld", (long long)m);
        kiln_vocab_free(v);
    }
    gguf_close(g);

    /* broken SPM variants */
    struct gguf_writer *w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, spm_scores, N_SPM - 1);
    expect_error(w, "scores_short", "tokenizer.ggml.scores");
    w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, spm_types, N_SPM - 2);
    expect_error(w, "types_short", "tokenizer.ggml.token_type");
    w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_UINT8, "abcdefghijkl", N_SPM);
    expect_error(w, "scores_type", "tokenizer.ggml.scores");
    w = spm_writer();
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", N_SPM);
    expect_error(w, "bos_range", "tokenizer.ggml.bos_token_id");
    w = spm_writer();
    gguf_writer_set_i32(w, "tokenizer.ggml.padding_token_id", -5);
    expect_error(w, "pad_negative", "tokenizer.ggml.padding_token_id");
    w = spm_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.add_bos_token", "yes");
    expect_error(w, "add_bos_type", "tokenizer.ggml.add_bos_token");
    w = spm_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "sentencepiece-9");
    expect_error(w, "model_unknown", "tokenizer.ggml.model");
    w = spm_writer();
    gguf_writer_set_u32(w, "tokenizer.ggml.model", 1);
    expect_error(w, "model_type", "tokenizer.ggml.model");
    /* every token type invalid (or without text): it would load and then print nothing */
    int32_t bad_types[N_SPM];
    for (int i = 0; i < N_SPM; i++) bad_types[i] = i % 2 ? 99 : -1;
    w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, bad_types, N_SPM);
    expect_error(w, "types_all_invalid", "none of the 12 tokens has a text type");
    for (int i = 0; i < N_SPM; i++) bad_types[i] = 3; /* all control */
    w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, bad_types, N_SPM);
    expect_error(w, "types_all_control", "tokenizer.ggml.token_type");
    w = spm_writer();
    gguf_writer_set_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, spm_types, N_SPM);
    expect_error(w, "tokens_type", "tokenizer.ggml.tokens");
    w = spm_writer();
    struct gguf_str dup[] = {S("<unk>"), S("a"), S("a")};
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", dup, 3);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, spm_scores, 3);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, spm_types, 3);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 0);
    expect_error(w, "tokens_dup", "tokenizer.ggml.tokens");
    w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    expect_error(w, "tokens_missing", "tokenizer.ggml.tokens");

    /* BPE: "hello" -> "hell" + "o"; " hell" merges with its space (Ġhell) */
    v = roundtrip(bpe_writer("gpt-2", false), "bpe", &g, err, sizeof err);
    CHECKF(v != NULL, "bpe: %s", err);
    if (v) {
        int32_t w1[] = {258, 'o'};
        expect_ids(v, "hello", false, w1, 2);
        int32_t w2[] = {'a', 259};
        expect_ids(v, "a hell", false, w2, 2);
        kiln_vocab_free(v);
    }
    gguf_close(g);
    expect_error(bpe_writer("gpt-2", true), "merge_unknown", "tokenizer.ggml.merges");
    expect_error(bpe_writer("no-such-pre", false), "pre_unknown", "tokenizer.ggml.pre");
    w = bpe_writer("gpt-2", false);
    struct gguf_str nospace[] = {S("hell")};
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", nospace, 1);
    expect_error(w, "merge_nospace", "tokenizer.ggml.merges");

    /* every pre-tokenizer name llama.cpp knows loads (all regexes compile) and splits text */
    static const char *pres[] = {
        "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
        "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "falcon",
        "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "a.x-4.0", "mellum", "modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m", "sarvam-moe",
        "jina-v1-en", "jina-v2-code", "roberta-bpe", "whitespace", "refact", "command-r", "qwen2",
        "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat",
        "glm4", "chatglm-bpe", "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone",
        "exaone4", "exaone-moe", "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie",
        "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling",
        "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4", "joyai-llm",
        "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open", "mellum2"};
    size_t big_len = 200000;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++) big[i] = (i / 3) % 40 == 0 ? ' ' : (i % 997 == 0 ? '\n' : "ab cdE 1"[i % 8]);
    memset(big + 1000, ' ', 5000);
    memset(big + 20000, 'x', 50000);
    const char *text = "Hello World! It's 1234567 \xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9   \n\n\tend";
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        v = roundtrip(bpe_writer(pres[i], false), pres[i], &g, err, sizeof err);
        CHECKF(v != NULL, "pre '%s': %s", pres[i], err);
        if (v) {
            CHECKF(!strcmp(kiln_vocab_pre(v), pres[i]), "pre name %s", kiln_vocab_pre(v));
            int32_t ids[512];
            int64_t n = kiln_tokenize(v, text, strlen(text), ids, 512, false, false);
            CHECKF(n > 0, "pre '%s': tokenize gave %lld", pres[i], (long long)n);
            /* long inputs must not hit regex engine limits (backtracking, JIT stack) */
            int64_t m = kiln_tokenize(v, big, big_len, NULL, 0, false, false);
            CHECKF(m < 0 && m != KILN_ERR_INVALID, "pre '%s': long text gave %lld", pres[i], (long long)m);
            kiln_vocab_free(v);
        }
        gguf_close(g);
    }
    free(big);
    rmdir(dir);
    return tu_finish("test_vocab_bad");
}
