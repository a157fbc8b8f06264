/*
 * test_gguf_peer.c - llama.cpp's own GGUF reader must accept what kiln's writer
 * writes: `peer gguf FILE` (../shared/peer, built into /tmp/kiln-peer or
 * $KILN_PEER) exits 0 when ggml accepts FILE. Skips (77) when the peer is absent.
 * A file ggml must refuse is checked too, so the test can fail.
 */
#include "gguf.h"
#include "testutil.h"

#include <sys/wait.h>
#include <unistd.h>

static const char *peer;

static int peer_gguf(const char *path) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "'%s' gguf '%s' >/dev/null 2>&1", peer, path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(void) {
    peer = getenv("KILN_PEER");
    if (!peer) peer = "/tmp/kiln-peer/peer";
    if (access(peer, X_OK) != 0) {
        /* CI builds it: scripts/test.sh runs ../shared/peer/build.sh (llama.cpp from npm) and
         * exports KILN_PEER; absent means that build failed or ../shared/peer is missing */
        printf("SKIP test_gguf_peer: llama.cpp's peer driver %s is absent, so ggml's reader cannot be asked.\n"
               "  scripts/test.sh builds it with ../shared/peer/build.sh (needs npm; see\n"
               "  /tmp/kiln-peer-build.log) and sets KILN_PEER; or run that script and set KILN_PEER.\n",
               peer);
        return 77;
    }
    char dir[] = "/tmp/kiln-test-gguf-peer-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[1200];

    /* every value type ggml reads (it refuses nested arrays), tensors of many types, alignment 64 */
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u8(w, "t.u8", 1), gguf_writer_set_i8(w, "t.i8", -1);
    gguf_writer_set_u16(w, "t.u16", 2), gguf_writer_set_i16(w, "t.i16", -2);
    gguf_writer_set_u32(w, "t.u32", 3), gguf_writer_set_i32(w, "t.i32", -3);
    gguf_writer_set_u64(w, "t.u64", 4), gguf_writer_set_i64(w, "t.i64", -4);
    gguf_writer_set_f32(w, "t.f32", 0.5f), gguf_writer_set_f64(w, "t.f64", 0.25);
    gguf_writer_set_bool(w, "t.bool", true), gguf_writer_set_str(w, "t.str", "text");
    const int32_t ia[3] = {1, 2, 3};
    gguf_writer_set_arr(w, "t.arr_i32", GGUF_TYPE_INT32, ia, 3);
    struct gguf_str strs[2] = {{"a", 1}, {"", 0}};
    gguf_writer_set_arr_str(w, "t.arr_str", strs, 2);
    CHECK(gguf_writer_set_alignment(w, 64));
    const enum kt_type types[] = {KT_TYPE_F32,  KT_TYPE_F16,  KT_TYPE_BF16, KT_TYPE_Q4_0,   KT_TYPE_Q5_1,
                                  KT_TYPE_Q8_0, KT_TYPE_Q2_K, KT_TYPE_Q6_K, KT_TYPE_IQ4_XS, KT_TYPE_I8};
    enum { NT = sizeof types / sizeof types[0] };
    void *data[NT];
    for (int i = 0; i < NT; i++) {
        int64_t ne[3] = {kt_blck_size(types[i]) * 2, 3, 1 + i % 2};
        size_t size = kt_row_size(types[i], ne[0]) * (size_t)(ne[1] * ne[2]);
        data[i] = calloc(1, size);
        char name[32];
        snprintf(name, sizeof name, "w.%d", i);
        CHECKF(gguf_writer_add_tensor(w, name, types[i], 2 + i % 2, ne, data[i]), "%s", gguf_writer_error(w));
    }
    snprintf(path, sizeof path, "%s/kiln.gguf", dir);
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    for (int i = 0; i < NT; i++) free(data[i]);
    int rc = peer_gguf(path);
    CHECKF(rc == 0, "ggml refused kiln's file (peer exit %d)", rc);

    /* metadata only (a vocabulary-style file) */
    w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "gpt2");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, 2);
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    rc = peer_gguf(path);
    CHECKF(rc == 0, "ggml refused kiln's metadata-only file (peer exit %d)", rc);

    /* control: a file ggml must refuse */
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    FILE *f = fopen(path, "wb");
    if (f) fwrite("GGUX\3\0\0\0", 1, 8, f), fclose(f);
    CHECKF(peer_gguf(path) != 0, "peer accepted a bad magic: the check cannot fail");

    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_gguf_peer");
}
