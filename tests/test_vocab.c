/*
 * test_vocab.c - tokenizer edge cases on llama.cpp's vocab files (empty text,
 * spaces, long whitespace runs, emoji with joiners, invalid UTF-8, a 100 KB
 * word, buffer sizes, special-token parsing, concurrent use) and load errors on
 * crafted vocabularies (each must fail naming the offending key). Expectations
 * come from llama.cpp's behaviour (documented per check), not from kiln.
 */
#include "gguf.h"
#include "kiln.h"
#include "testutil.h"

#include <pthread.h>
#include <unistd.h>

static struct kiln_vocab *open_vocab(const char *shared, const char *name, struct gguf_file **g) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    *g = gguf_open(path, err, sizeof err);
    CHECKF(*g != NULL, "%s: %s", path, err);
    struct kiln_vocab *v = *g ? kiln_vocab_load(*g, err, sizeof err) : NULL;
    CHECKF(v != NULL, "%s: %s", name, err);
    return v;
}

static int64_t tok(const struct kiln_vocab *v, const char *s, size_t n, int32_t **ids, bool add, bool special) {
    int64_t need = kiln_tokenize(v, s, n, NULL, 0, add, special);
    if (need >= 0) {
        *ids = NULL;
        return need;
    }
    *ids = malloc((size_t)-need * sizeof **ids);
    int64_t got = kiln_tokenize(v, s, n, *ids, -need, add, special);
    CHECKF(got == -need, "second call gave %lld, first asked for %lld", (long long)got, (long long)-need);
    return got;
}

static char *detok(const struct kiln_vocab *v, const int32_t *ids, int64_t n, int64_t *len) {
    int64_t need = kiln_detokenize(v, ids, n, NULL, 0, false, false);
    char *buf = malloc(need < 0 ? (size_t)-need + 1 : 1);
    *len = need < 0 ? kiln_detokenize(v, ids, n, buf, (size_t)-need, false, false) : need;
    return buf;
}

/* text -> ids -> text must give `want` back */
static void roundtrip(const struct kiln_vocab *v, const char *label, const char *text, size_t n, const char *want,
                      size_t wn) {
    int32_t *ids;
    int64_t k = tok(v, text, n, &ids, false, false);
    CHECKF(k > 0, "%s: no tokens", label);
    bool in_range = true;
    for (int64_t i = 0; i < k; i++) in_range = in_range && ids[i] >= 0 && ids[i] < kiln_vocab_n_tokens(v);
    CHECKF(in_range, "%s: id out of range", label);
    int64_t m;
    char *back = detok(v, ids, k, &m);
    CHECKF(m == (int64_t)wn && !memcmp(back, want, wn), "%s: round trip differs (%lld bytes, want %zu)", label,
           (long long)m, wn);
    /* deterministic */
    int32_t *ids2;
    int64_t k2 = tok(v, text, n, &ids2, false, false);
    CHECKF(k2 == k && !memcmp(ids, ids2, (size_t)k * sizeof *ids), "%s: not deterministic", label);
    free(ids);
    free(ids2);
    free(back);
}

/* invalid UTF-8 bytes: BPE sees U+FFFD (llama.cpp decodes them so); SPM keeps the bytes via <0xXX> */
static char *fffd_of(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0xff || c == 0xfe || c == 0xc3) memcpy(o + k, "\xef\xbf\xbd", 3), k += 3;
        else o[k++] = (char)c;
    }
    *out_n = k;
    return o;
}

static void edge_cases(const char *shared, const char *name, bool spm, bool wpm) {
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(shared, name, &g);
    if (!v) {
        gguf_close(g);
        return;
    }
    int32_t one[4];
    /* empty text: nothing; with add_special, just the BOS where the model adds one */
    CHECKF(kiln_tokenize(v, "", 0, one, 4, false, false) == 0, "%s: empty text", name);
    int64_t ne = kiln_tokenize(v, "", 0, one, 4, true, false);
    if (spm) CHECKF(ne == 1 && one[0] == kiln_vocab_bos(v), "%s: empty text + BOS", name);
    /* a too small buffer reports the size needed */
    int64_t need = kiln_tokenize(v, "Hello world", 11, one, 1, false, false);
    CHECKF(need == -2, "%s: need %lld for 'Hello world'", name, (long long)need);
    if (!wpm) {
        roundtrip(v, "spaces", "   ", 3, "   ", 3);
        char *ws = malloc(20002);
        memset(ws, ' ', 10000);
        memset(ws + 10000, '\n', 5000);
        memset(ws + 15000, '\t', 5000);
        ws[20000] = 'x';
        roundtrip(v, "long whitespace", ws, 20001, ws, 20001);
        free(ws);
        const char *zwj = "family \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 ok";
        roundtrip(v, "emoji zwj", zwj, strlen(zwj), zwj, strlen(zwj));
        const char *bad = "a\xff\xfe b \xc3";
        if (spm) {
            /* SPM cuts characters by their lead byte: 0xff claims 4 bytes and so swallows
             * the first two bytes of the escaped space (U+2581); those come back as raw
             * bytes through <0xXX> tokens, i.e. as "\u2581" rather than " " */
            const char *want = "a\xff\xfe\xe2\x96\x81" "b \xc3";
            roundtrip(v, "invalid utf-8", bad, strlen(bad), want, strlen(want));
        } else {
            size_t bn;
            char *want = fffd_of(bad, strlen(bad), &bn);
            roundtrip(v, "invalid utf-8", bad, strlen(bad), want, bn);
            free(want);
        }
        size_t big = 100 * 1024;
        char *word = malloc(big);
        for (size_t i = 0; i < big; i++) word[i] = "abcdefghij"[i % 7];
        roundtrip(v, "100 KB word", word, big, word, big);
        free(word);
    } else {
        /* WordPiece lowercases and splits punctuation: text comes back normalized */
        int32_t *ids;
        int64_t k = tok(v, "Hello, WORLD!", 13, &ids, false, false);
        int64_t m;
        char *back = detok(v, ids, k, &m);
        /* "##"-less pieces carry the word's "▁" as a space; WPM strips no leading space */
        CHECKF(m == 14 && !memcmp(back, " hello, world!", 14), "%s: '%.*s'", name, (int)m, back);
        free(ids);
        free(back);
        k = tok(v, "   ", 3, &ids, false, false);
        CHECKF(k == 0, "%s: spaces alone give no words", name);
        free(ids);
        size_t big = 100 * 1024;
        char *word = malloc(big);
        memset(word, 'a', big);
        k = tok(v, word, big, &ids, false, false);
        CHECKF(k > 0, "%s: 100 KB word", name);
        free(ids);
        free(word);
    }
    /* ids out of range are errors, not crashes */
    char piece[8];
    CHECK(kiln_token_to_piece(v, -1, piece, sizeof piece, true) == KILN_ERR_INVALID);
    CHECK(kiln_token_to_piece(v, kiln_vocab_n_tokens(v), piece, sizeof piece, true) == KILN_ERR_INVALID);
    int32_t badid = kiln_vocab_n_tokens(v);
    CHECK(kiln_detokenize(v, &badid, 1, piece, sizeof piece, false, false) == KILN_ERR_INVALID);
    if (kiln_vocab_eos(v) >= 0) CHECK(kiln_vocab_is_eog(v, kiln_vocab_eos(v)));
    kiln_vocab_free(v);
    gguf_close(g);
}

/* ---- random bytes (mostly UTF-8, spaces, specials' text): any input gives valid ids,
 * the same ids twice, and text back without error */
static void random_inputs(const char *shared, const char *name) {
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(shared, name, &g);
    if (!v) {
        gguf_close(g);
        return;
    }
    static const char *bits[] = {" ", "  ", "\n", "\t", "a", "Z", "7", "'s", "\xc3\xa9", "\xe2\x96\x81",
                                 "\xe4\xb8\xad", "\xf0\x9f\x99\x82", "\xe2\x80\x8d", "<s>", "</s>",
                                 "<|endoftext|>", "[CLS]", "\xc2\xa0", "\x00", "\xff", "\x80", "\xf0\x9f"};
    uint64_t seed = 12345;
    bool ok = true;
    char text[512];
    int32_t ids[1024], ids2[1024];
    char back[8192];
    for (int r = 0; r < 300 && ok; r++) {
        size_t n = 0;
        int k = (int)(tu_rand_u64(&seed) % 40);
        for (int j = 0; j < k; j++) {
            uint64_t x = tu_rand_u64(&seed);
            if (x % 5 == 0) {
                text[n++] = (char)(x >> 8); /* any byte */
            } else {
                const char *b = bits[(x >> 8) % (sizeof bits / sizeof bits[0])];
                size_t bl = b[0] ? strlen(b) : 1; /* "\x00" is one NUL byte */
                memcpy(text + n, b, bl);
                n += bl;
            }
        }
        bool add = tu_rand_u64(&seed) & 1, special = tu_rand_u64(&seed) & 1;
        int64_t c = kiln_tokenize(v, text, n, ids, 1024, add, special);
        int64_t c2 = kiln_tokenize(v, text, n, ids2, 1024, add, special);
        ok = c >= 0 && c == c2 && !memcmp(ids, ids2, (size_t)c * sizeof *ids);
        for (int64_t i = 0; ok && i < c; i++) ok = ids[i] >= 0 && ids[i] < kiln_vocab_n_tokens(v);
        if (ok) ok = kiln_detokenize(v, ids, c, back, sizeof back, add, special) >= 0;
        CHECKF(ok, "%s: random input %d", name, r);
    }
    kiln_vocab_free(v);
    gguf_close(g);
}

/* ---- concurrency: many threads, one vocab, same answers */
struct job {
    const struct kiln_vocab *v;
    const char *text;
    size_t n;
    const int32_t *want;
    int64_t nwant;
    int ok;
};

static void *worker(void *arg) {
    struct job *j = arg;
    int32_t *ids = malloc((size_t)j->nwant * sizeof *ids);
    j->ok = 1;
    for (int r = 0; r < 20; r++) {
        int64_t k = kiln_tokenize(j->v, j->text, j->n, ids, j->nwant, true, true);
        if (k != j->nwant || memcmp(ids, j->want, (size_t)k * sizeof *ids)) j->ok = 0;
    }
    free(ids);
    return NULL;
}

static void threads(const char *shared, const char *name) {
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(shared, name, &g);
    if (!v) {
        gguf_close(g);
        return;
    }
    const char *text = "The quick brown fox <|endoftext|> jumps over 12345 lazy dogs. \xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 ";
    int32_t *want;
    int64_t n = tok(v, text, strlen(text), &want, true, true);
    pthread_t th[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct job){v, text, strlen(text), want, n, 0};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECKF(jobs[i].ok, "%s: thread %d saw different tokens", name, i);
    }
    free(want);
    kiln_vocab_free(v);
    gguf_close(g);
}

/* ---- special tokens: llama-bpe's <|begin_of_text|> is 128000 (llama 3's tokenizer) */
static void specials(const char *shared) {
    struct gguf_file *g;
    struct kiln_vocab *v = open_vocab(shared, "llama-bpe", &g);
    if (!v) {
        gguf_close(g);
        return;
    }
    const char *t = "<|begin_of_text|>Hi";
    int32_t ids[32];
    int64_t n = kiln_tokenize(v, t, strlen(t), ids, 32, false, true);
    CHECKF(n == 2 && ids[0] == 128000, "parse_special: n=%lld first=%d", (long long)n, n > 0 ? ids[0] : -1);
    n = kiln_tokenize(v, t, strlen(t), ids, 32, false, false);
    CHECKF(n > 2 && ids[0] != 128000, "without parse_special the text is plain text");
    n = kiln_tokenize(v, "Hi", 2, ids, 32, true, false);
    CHECKF(n == 2 && ids[0] == 128000 && kiln_vocab_add_bos(v), "llama3 adds BOS");
    char buf[64];
    CHECKF(kiln_token_to_piece(v, 128000, buf, sizeof buf, false) == 0, "control token hidden without special");
    int64_t m = kiln_token_to_piece(v, 128000, buf, sizeof buf, true);
    CHECKF(m == 17 && !memcmp(buf, "<|begin_of_text|>", 17), "control token text with special");
    m = kiln_detokenize(v, ids, n, buf, sizeof buf, true, false);
    CHECKF(m == 2 && !memcmp(buf, "Hi", 2), "remove_special drops BOS");
    kiln_vocab_free(v);
    gguf_close(g);
}


int main(void) {
    const char *shared = tu_shared_or_skip("test_vocab");
    edge_cases(shared, "llama-spm", true, false);
    edge_cases(shared, "phi-3", true, false);
    edge_cases(shared, "gpt-2", false, false);
    edge_cases(shared, "llama-bpe", false, false);
    edge_cases(shared, "qwen2", false, false);
    edge_cases(shared, "deepseek-llm", false, false);
    edge_cases(shared, "falcon", false, false);
    edge_cases(shared, "bert-bge", false, true);
    static const char *all[] = {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "falcon", "mpt",
                                "starcoder", "refact", "deepseek-llm", "deepseek-coder", "bert-bge"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) random_inputs(shared, all[i]);
    threads(shared, "llama-bpe");
    threads(shared, "llama-spm");
    threads(shared, "deepseek-coder");
    specials(shared);
    return tu_finish("test_vocab");
}
