/*
 * test_gguf_bad.c - the GGUF reader on malformed files: each crafted bad file
 * must be rejected with its specific message and byte offset; every prefix of a
 * valid file must be rejected; every input that ever crashed the fuzzer
 * (tests/data/gguf-crashes/) must open or fail cleanly. Inputs are given in
 * exactly-sized heap copies so the sanitizer build catches any overread.
 */
#include "gguf.h"
#include "test_gguf_build.h"
#include "testutil.h"

#include <dirent.h>

/* Open a heap copy of exactly n bytes; returns the file or NULL with err filled. */
static struct gguf_file *open_copy(const uint8_t *p, size_t n, char *err, size_t errlen) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    struct gguf_file *g = gguf_open_memory(copy, n, err, errlen);
    if (g) {
        /* the reader keeps pointers into the bytes: walk them before freeing */
        for (int64_t i = 0; i < gguf_n_kv(g); i++) (void)gguf_key(g, i);
        gguf_close(g);
        g = (struct gguf_file *)1;
    }
    free(copy);
    return g;
}

/* The file in b must be rejected with a message containing want and "at byte AT" (AT < 0: any offset). */
static void expect_bad(const char *label, struct tb *b, const char *want, long long at) {
    char err[256] = "";
    struct gguf_file *g = open_copy(b->p, b->n, err, sizeof err);
    CHECKF(g == NULL, "%s: accepted", label);
    CHECKF(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", label, err, want);
    if (at >= 0) {
        char where[64];
        snprintf(where, sizeof where, "at byte %lld", at);
        CHECKF(strstr(err, where) != NULL, "%s: message '%s' lacks '%s'", label, err, where);
    } else {
        CHECKF(strstr(err, "at byte ") != NULL, "%s: message '%s' has no byte offset", label, err);
    }
    free(b->p);
    *b = (struct tb){0};
}

static void expect_good(const char *label, struct tb *b) {
    char err[256] = "";
    CHECKF(open_copy(b->p, b->n, err, sizeof err) != NULL, "%s: rejected: %s", label, err);
    free(b->p);
    *b = (struct tb){0};
}

static const int64_t ne_8x2[2] = {8, 2};

static void test_header(void) {
    struct tb b = {0};
    tb_bytes(&b, "GGUX", 4);
    tb_u32(&b, 3), tb_u64(&b, 0), tb_u64(&b, 0);
    expect_bad("magic", &b, "bad magic 'GGUX'", 0);

    tb_header(&b, 1, 0, 0);
    expect_bad("v1", &b, "unsupported GGUF version 1", 4);
    tb_header(&b, 4, 0, 0);
    expect_bad("v4", &b, "unsupported GGUF version 4", 4);
    tb_header(&b, 0, 0, 0);
    expect_bad("v0", &b, "unsupported GGUF version 0", 4);
    tb_header(&b, 0x03000000, 0, 0);
    expect_bad("big-endian", &b, "big-endian", 4);
    tb_header(&b, 2, 0, 0);
    expect_good("v2 empty", &b);
    tb_header(&b, 3, 0, 0);
    expect_good("v3 empty", &b);

    tb_bytes(&b, "GG", 2);
    expect_bad("short magic", &b, "truncated: magic", 0);
    tb_bytes(&b, "GGUF", 4), tb_u32(&b, 3), tb_u32(&b, 0);
    expect_bad("short count", &b, "truncated: tensor count", 8);

    /* counts larger than the bytes left could hold, checked before anything is allocated */
    tb_header(&b, 3, 0, UINT64_MAX);
    expect_bad("n_kv huge", &b, "key/value count 18446744073709551615", 16);
    tb_header(&b, 3, 0, 2);
    tb_kv_u32(&b, "a", 1);
    expect_bad("n_kv > bytes", &b, "key/value count 2 is more than", 16);
    tb_header(&b, 3, (uint64_t)1 << 62, 0);
    expect_bad("n_tensors huge", &b, "tensor count 4611686018427387904", 8);
}

static void test_kv(void) {
    struct tb b = {0};
    /* key length beyond the file */
    tb_header(&b, 3, 0, 1);
    tb_u64(&b, 1000), tb_fill(&b, 20, 0);
    expect_bad("key length", &b, "key length 1000 exceeds the 20 bytes left", 24);
    tb_header(&b, 3, 0, 1);
    tb_u64(&b, UINT64_MAX), tb_fill(&b, 20, 0);
    expect_bad("key length max", &b, "key length 18446744073709551615 exceeds", 24);
    /* empty key */
    tb_header(&b, 3, 0, 1);
    tb_kv_u32(&b, "", 5);
    expect_bad("empty key", &b, "key 0 is empty", 24);
    /* string value length beyond the file */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_STR), tb_u64(&b, (uint64_t)1 << 40), tb_bytes(&b, "xy", 2);
    expect_bad("string length", &b, "string value length 1099511627776 exceeds the 2 bytes left", 24 + 9 + 4);
    /* unknown value type */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, 13), tb_u32(&b, 0);
    expect_bad("value type", &b, "key 'k' has unknown value type 13", 24 + 9);
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, 0xffffffffu), tb_u32(&b, 0);
    expect_bad("value type max", &b, "unknown value type 4294967295", 24 + 9);
    /* truncated scalar */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_U64), tb_u32(&b, 7);
    expect_bad("short u64", &b, "truncated: u64 needs 8 bytes but only 4 remain", 24 + 9 + 4);
    /* array length beyond the file: numeric, string, nested */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR), tb_u32(&b, T_U32), tb_u64(&b, (uint64_t)1 << 61), tb_u32(&b, 1);
    expect_bad("u32 array length", &b, "array length 2305843009213693952 (u32", 24 + 9 + 4 + 4);
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR), tb_u32(&b, T_STR), tb_u64(&b, 3), tb_str(&b, "ab");
    expect_bad("str array length", &b, "array length 3 (str", 24 + 9 + 4 + 4);
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR), tb_u32(&b, T_ARR), tb_u64(&b, UINT64_MAX);
    expect_bad("nested array length", &b, "array length 18446744073709551615 (arr", 24 + 9 + 4 + 4);
    /* a string inside a string array that runs past the end */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR), tb_u32(&b, T_STR), tb_u64(&b, 2), tb_str(&b, "ab");
    tb_u64(&b, 50), tb_bytes(&b, "cd", 2);
    expect_bad("str array element", &b, "string value length 50 exceeds", 24 + 9 + 4 + 12 + 10);
    /* unknown array element type */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR), tb_u32(&b, 77), tb_u64(&b, 0);
    expect_bad("elem type", &b, "unknown array element type 77", 24 + 9 + 4);
    /* nesting deeper than the reader allows */
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k"), tb_u32(&b, T_ARR);
    for (int d = 0; d < 20; d++) tb_u32(&b, T_ARR), tb_u64(&b, 1);
    expect_bad("deep nesting", &b, "nested deeper than", -1);
    /* duplicate keys */
    tb_header(&b, 3, 0, 3);
    tb_kv_u32(&b, "a", 1), tb_kv_u32(&b, "b", 2), tb_kv_u32(&b, "a", 3);
    expect_bad("duplicate key", &b, "duplicate key 'a'", 24 + 2 * 17);

    /* keys must be UTF-8 (the spec's strings; llama.cpp accepts these): the offset is the bad byte */
    tb_header(&b, 3, 0, 1);
    tb_kv_u32(&b, "\xff\xfe", 1);
    expect_bad("key ff fe", &b, "key '?\?' is not valid UTF-8", 24 + 8);
    tb_header(&b, 3, 0, 1);
    tb_kv_u32(&b, "general.n\xe2\x82", 1); /* a character cut short */
    expect_bad("key cut char", &b, "is not valid UTF-8", 24 + 8 + 9);
    tb_header(&b, 3, 0, 1);
    tb_kv_u32(&b, "k\xed\xa0\x80", 1); /* a surrogate */
    expect_bad("key surrogate", &b, "is not valid UTF-8", 24 + 8 + 1);
    tb_header(&b, 3, 0, 1);
    tb_kv_u32(&b, "caf\xc3\xa9.\xf0\x9f\x94\xa5", 1);
    expect_good("key utf8", &b);
    /* string VALUES may hold any bytes (real token texts do): accepted, deliberately */
    tb_header(&b, 3, 0, 1);
    tb_kv_str(&b, "k", "\xff\xfe\x1b[31m");
    expect_good("value not utf8", &b);
}

static void test_alignment(void) {
    struct tb b = {0};
    uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tb_header(&b, 3, 0, 2);
        tb_kv_u32(&b, "x", 1);
        tb_kv_u32(&b, "general.alignment", bad[i]);
        char want[80];
        snprintf(want, sizeof want, "general.alignment %u is not a non-zero power of two", bad[i]);
        expect_bad("alignment", &b, want, 24 + 17);
    }
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "general.alignment"), tb_u32(&b, T_I32), tb_u32(&b, 64);
    expect_bad("alignment type", &b, "general.alignment must be u32, not i32", 24);
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "general.alignment"), tb_u32(&b, T_U64), tb_u64(&b, 64);
    expect_bad("alignment u64", &b, "general.alignment must be u32, not u64", 24);
    /* a good non-default alignment moves the data section */
    tb_header(&b, 3, 1, 1);
    tb_kv_u32(&b, "general.alignment", 256);
    tb_tensor(&b, "t", 2, ne_8x2, 0, 0);
    tb_pad(&b, 256), tb_fill(&b, 64, 1);
    expect_good("alignment 256", &b);
}

/* A header with one key, then the tensor infos the caller adds. Returns where the infos start. */
static size_t begin(struct tb *b, uint64_t n_tensors) {
    tb_header(b, 3, n_tensors, 1);
    tb_kv_str(b, "general.architecture", "llama");
    return b->n;
}

static void test_tensors(void) {
    struct tb b = {0};
    size_t at;
    int64_t ne[5] = {8, 2, 1, 1, 1};

    at = begin(&b, 1);
    tb_tensor(&b, "t", 5, ne, 0, 0);
    expect_bad("n_dims 5", &b, "tensor 't' has n_dims 5 (must be 1..4)", (long long)at + 9);
    at = begin(&b, 1);
    tb_tensor(&b, "t", 0, ne, 0, 0);
    expect_bad("n_dims 0", &b, "tensor 't' has n_dims 0", (long long)at + 9);

    int64_t zero[2] = {8, 0}, neg[3] = {8, 2, -5};
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, zero, 0, 0);
    expect_bad("dim 0", &b, "tensor 't' dimension 1 is 0 (must be positive)", (long long)at + 13 + 8);
    at = begin(&b, 1);
    tb_tensor(&b, "t", 3, neg, 0, 0);
    expect_bad("dim < 0", &b, "tensor 't' dimension 2 is -5", (long long)at + 13 + 16);

    int64_t big[3] = {(int64_t)1 << 32, (int64_t)1 << 30, 4};
    at = begin(&b, 1);
    tb_tensor(&b, "t", 3, big, 0, 0);
    expect_bad("element overflow", &b, "tensor 't': element count overflows at dimension 2",
               (long long)at + 13 + 16);
    int64_t bytes_big[2] = {(int64_t)1 << 61, 2}; /* 2^62 elements fit int64, 2^65 bytes of f64 do not */
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, bytes_big, 28 /* f64 */, 0);
    expect_bad("byte overflow", &b, "tensor 't': byte size overflows", (long long)at + 13 + 16);

    uint32_t bad_types[] = {4, 5, 31, 33, 38, 40, 1000, 0x80000000u};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        at = begin(&b, 1);
        tb_tensor(&b, "t", 2, ne_8x2, bad_types[i], 0);
        char want[64];
        snprintf(want, sizeof want, "tensor 't' has unknown type id %u", bad_types[i]);
        expect_bad("type id", &b, want, (long long)at + 13 + 16);
    }

    int64_t odd[2] = {33, 2};
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, odd, 2 /* q4_0 */, 0);
    expect_bad("block size", &b, "row length 33 is not a multiple of q4_0's block size 32",
               (long long)at + 13 + 16);
    int64_t k_odd[2] = {128, 2};
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, k_odd, 12 /* q4_K */, 0);
    expect_bad("k block size", &b, "not a multiple of q4_K's block size 256", (long long)at + 13 + 16);

    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, ne_8x2, 0, 8);
    expect_bad("misaligned", &b, "tensor 't': offset 8 is not a multiple of the alignment 32",
               (long long)at + 33);

    /* data past the end: 8x2 f32 = 64 bytes, only 60 present */
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, ne_8x2, 0, 0);
    tb_pad(&b, 32), tb_fill(&b, 60, 0);
    expect_bad("past end", &b, "tensor 't': data [0, 64) of the data section runs past the end",
               (long long)at + 33);
    at = begin(&b, 2);
    tb_tensor(&b, "a", 2, ne_8x2, 0, 0);
    tb_tensor(&b, "b", 2, ne_8x2, 0, (uint64_t)1 << 63);
    tb_pad(&b, 32), tb_fill(&b, 128, 0);
    expect_bad("offset huge", &b, "tensor 'b': data [9223372036854775808, ", (long long)at + 41 + 33);
    /* the data section itself would start past the end */
    at = begin(&b, 1);
    tb_tensor(&b, "t", 2, ne_8x2, 0, 0);
    if (b.n % 32 == 0) tb_u8(&b, 0);
    expect_bad("data start", &b, "truncated: the data section would start at byte", -1);

    /* overlap: a [0,64) and b [32,96) */
    at = begin(&b, 2);
    tb_tensor(&b, "a", 2, ne_8x2, 0, 0);
    tb_tensor(&b, "b", 2, ne_8x2, 0, 32);
    tb_pad(&b, 32), tb_fill(&b, 128, 0);
    expect_bad("overlap", &b, "tensors 'a' [0, 64) and 'b' [32, 96) overlap", (long long)at + 41 + 33);
    /* same offset, not neighbours in file order */
    at = begin(&b, 3);
    tb_tensor(&b, "a", 2, ne_8x2, 0, 64);
    tb_tensor(&b, "b", 2, ne_8x2, 0, 0);
    tb_tensor(&b, "c", 2, ne_8x2, 0, 64);
    tb_pad(&b, 32), tb_fill(&b, 128, 0);
    expect_bad("same offset", &b, "overlap", -1);
    /* touching is fine */
    begin(&b, 2);
    tb_tensor(&b, "a", 2, ne_8x2, 0, 64);
    tb_tensor(&b, "b", 2, ne_8x2, 0, 0);
    tb_pad(&b, 32), tb_fill(&b, 128, 0);
    expect_good("adjacent", &b);

    /* duplicate tensor names */
    at = begin(&b, 2);
    tb_tensor(&b, "w", 2, ne_8x2, 0, 0);
    tb_tensor(&b, "w", 2, ne_8x2, 0, 64);
    tb_pad(&b, 32), tb_fill(&b, 128, 0);
    expect_bad("duplicate tensor", &b, "duplicate tensor name 'w'", (long long)at + 41);

    /* a name longer than the runtime's tensor names */
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = 0;
    at = begin(&b, 1);
    tb_tensor(&b, longname, 2, ne_8x2, 0, 0);
    expect_bad("long name", &b, "is 64 bytes (at most 63)", (long long)at);
    at = begin(&b, 1);
    tb_u64(&b, 1u << 20), tb_bytes(&b, "x", 1);
    expect_bad("name length", &b, "tensor name length 1048576 exceeds", (long long)at);

    /* a tensor name that is not UTF-8: refused at its first bad byte */
    at = begin(&b, 1);
    tb_tensor(&b, "w\xc0\xaf", 2, ne_8x2, 0, 0); /* an overlong '/' */
    tb_pad(&b, 32), tb_fill(&b, 64, 0);
    expect_bad("tensor name utf8", &b, "tensor name 'w?\?' is not valid UTF-8", (long long)at + 8 + 1);
}

/* Every proper prefix of a valid file is rejected, with a message naming an offset. */
static void test_truncation(void) {
    struct tb b = {0};
    tb_header(&b, 3, 2, 5);
    tb_kv_str(&b, "general.architecture", "llama");
    tb_kv_u32(&b, "llama.block_count", 4);
    tb_str(&b, "tokenizer.ggml.tokens"), tb_u32(&b, T_ARR), tb_u32(&b, T_STR), tb_u64(&b, 3);
    tb_str(&b, "a"), tb_str(&b, ""), tb_str(&b, "ccc");
    tb_str(&b, "scores"), tb_u32(&b, T_ARR), tb_u32(&b, T_F32), tb_u64(&b, 3), tb_fill(&b, 12, 9);
    tb_str(&b, "nested"), tb_u32(&b, T_ARR), tb_u32(&b, T_ARR), tb_u64(&b, 2);
    tb_u32(&b, T_U8), tb_u64(&b, 2), tb_fill(&b, 2, 1);
    tb_u32(&b, T_STR), tb_u64(&b, 1), tb_str(&b, "zz");
    int64_t ne_q[2] = {32, 2};
    tb_tensor(&b, "w", 2, ne_q, 8 /* q8_0: 34 bytes per block */, 0);
    tb_tensor(&b, "n", 2, ne_8x2, 0, 96);
    tb_pad(&b, 32), tb_fill(&b, 96, 3), tb_fill(&b, 64, 4);
    char err[256];
    CHECKF(open_copy(b.p, b.n, err, sizeof err) != NULL, "full file rejected: %s", err);
    int silent = 0;
    for (size_t n = 0; n < b.n; n++) {
        err[0] = 0;
        if (open_copy(b.p, n, err, sizeof err) != NULL) {
            CHECKF(false, "prefix of %zu of %zu bytes accepted", n, b.n);
        } else if (!strstr(err, "at byte ")) {
            silent++;
            CHECKF(false, "prefix %zu: message '%s' has no offset", n, err);
        }
    }
    printf("truncation: %zu prefixes rejected (%d without offset)\n", b.n, silent);
    free(b.p);
}

/* Inputs that once crashed the fuzzer: each must open or fail cleanly. */
static void test_crash_regressions(void) {
    const char *src = getenv("KILN_SRC");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/gguf-crashes", src ? src : ".");
    DIR *d = opendir(dir);
    if (!d) {
        printf("no %s: no crash regressions to run\n", dir);
        return;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *data = tu_read_file(path, &len);
        if (!data) continue;
        char err[256];
        open_copy((const uint8_t *)data, len, err, sizeof err);
        free(data);
        n++;
    }
    closedir(d);
    printf("crash regressions: %d inputs opened without crashing\n", n);
    CHECK(n >= 0);
}

int main(void) {
    test_header();
    test_kv();
    test_alignment();
    test_tensors();
    test_truncation();
    test_crash_regressions();
    return tu_finish("test_gguf_bad");
}
