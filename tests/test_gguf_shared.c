/*
 * test_gguf_shared.c - the GGUF reader and writer on real files from
 * ../shared (made by llama.cpp's converters; skipped when absent): every model
 * and vocabulary opens, the model facts documented in ../shared/README.md are
 * read back, the legacy GGJT file is refused by its magic, and a model
 * rewritten through reader + writer is byte-identical to the file ggml wrote.
 */
#include "gguf.h"
#include "testutil.h"

#include <dirent.h>
#include <unistd.h>

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int open_all(const char *dir, bool models) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!has_suffix(e->d_name, ".gguf")) continue;
        char path[2048], err[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct gguf_file *g = gguf_open(path, err, sizeof err);
        CHECKF(g != NULL, "%s: %s", path, err);
        if (!g) continue;
        n++;
        struct gguf_str arch;
        CHECKF(gguf_get_str(g, "general.architecture", &arch), "%s: %s", path, gguf_error(g));
        int64_t tok = gguf_find_key(g, "tokenizer.ggml.tokens");
        CHECKF(tok >= 0 && gguf_arr_type(g, tok) == GGUF_TYPE_STRING && gguf_arr_n(g, tok) > 1000,
               "%s tokens", path);
        struct gguf_str s;
        CHECK(tok < 0 || gguf_arr_get_str(g, tok, gguf_arr_n(g, tok) - 1, &s));
        if (!models) {
            CHECKF(gguf_n_tensors(g) == 0, "%s: vocabulary file with tensors", path);
        } else {
            /* ../shared/README.md: 4 layers, 256 wide, 8 heads, 4 KV heads, ff 768, context 512, 32000 tokens
             */
            char key[128];
            int64_t v;
            const char *suffix[] = {"block_count",          "embedding_length",
                                    "attention.head_count", "attention.head_count_kv",
                                    "feed_forward_length",  "context_length"};
            const int64_t want[] = {4, 256, 8, 4, 768, 512};
            for (int k = 0; k < 6; k++) {
                snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.ptr, suffix[k]);
                CHECKF(gguf_get_int(g, key, &v) && v == want[k], "%s: %s", path, key);
            }
            CHECK(gguf_arr_n(g, tok) == 32000);
            const struct gguf_tensor_info *t = gguf_tensor(g, gguf_find_tensor(g, "token_embd.weight"));
            CHECKF(t && t->ne[0] == 256 && t->ne[1] == 32000, "%s: token_embd.weight", path);
            bool tied = strstr(e->d_name, "tied") != NULL;
            CHECKF((gguf_find_tensor(g, "output.weight") < 0) == tied, "%s: output.weight", path);
            for (int l = 0; l < 4; l++) {
                snprintf(key, sizeof key, "blk.%d.ffn_down.weight", l);
                t = gguf_tensor(g, gguf_find_tensor(g, key));
                CHECKF(t && t->ne[0] == 768 && t->ne[1] == 256, "%s: %s", path, key);
            }
            int64_t end = 0;
            for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
                t = gguf_tensor(g, i);
                if ((int64_t)(t->offset + t->size) > end) end = (int64_t)(t->offset + t->size);
            }
            CHECKF(gguf_data_offset(g) + (size_t)end <= gguf_size(g), "%s: extent", path);
        }
        gguf_close(g);
    }
    closedir(d);
    return n;
}

/* Rewrite src through copy_kv + add_tensor; the bytes must equal the original (ggml's layout). */
static void test_rewrite(const char *src, const char *tmp) {
    char err[256];
    struct gguf_file *g = gguf_open(src, err, sizeof err);
    CHECKF(g != NULL, "%s: %s", src, err);
    if (!g) return;
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_copy_kv(w, g));
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        char name[KT_MAX_NAME];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        CHECKF(gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data), "%s",
               gguf_writer_error(w));
    }
    CHECKF(gguf_writer_write(w, tmp), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    size_t n;
    char *got = tu_read_file(tmp, &n);
    bool same = got && n == gguf_size(g) && !memcmp(got, gguf_base(g), n);
    CHECKF(same, "%s rewritten by kiln differs (%zu vs %zu bytes)", src, got ? n : 0, gguf_size(g));
    free(got);
    unlink(tmp);
    gguf_close(g);
}

int main(void) {
    const char *shared = tu_shared_or_skip("test_gguf_shared");
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/models", shared);
    int nm = open_all(dir, true);
    snprintf(dir, sizeof dir, "%s/vocab", shared);
    int nv = open_all(dir, false);
    printf("opened %d models, %d vocabularies\n", nm, nv);
    CHECK(nm >= 6 && nv >= 12);

    char err[256];
    snprintf(path, sizeof path, "%s/models/legacy/kjv-q4_0.ggjt.bin", shared);
    if (access(path, R_OK) == 0) { /* a legacy GGJT file opens as a GGUF description (tests/test_legacy.c) */
        struct gguf_file *g = gguf_open(path, err, sizeof err);
        CHECKF(g, "%s", err);
        if (g) CHECK(gguf_legacy_format(g) && !strcmp(gguf_legacy_format(g), "GGJT v3") && gguf_n_tensors(g) == 39);
        gguf_close(g);
    } else {
        tu_skip_part("%s absent (a legacy file read as GGUF)", path);
    }

    char tmp[] = "/tmp/kiln-test-gguf-rewrite-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd >= 0) close(fd);
    const char *files[] = {"models/kjv-q4_0.gguf", "models/qwen2-kjv-tied-q8_0.gguf"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", shared, files[i]);
        test_rewrite(path, tmp);
    }
    unlink(tmp);
    return tu_finish("test_gguf_shared");
}
