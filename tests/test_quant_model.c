/*
 * test_quant_model.c - the reference quantizers on real weights: every
 * quantized tensor of kjv-q8_0/q4_0/q4_k_m.gguf (made by llama.cpp's quantizer
 * from kjv-f16.gguf without an importance matrix) must come out byte for byte
 * when kiln quantizes the same tensor of kjv-f16.gguf to the same type.
 */
#include "gguf.h"
#include "kt.h"
#include "testutil.h"

static void check_model(const char *shared, struct gguf_file *f16, const char *name) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/models/%s", shared, name);
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    CHECKF(g != NULL, "%s: %s", path, err);
    if (!g) return;
    int64_t same[KT_TYPE_COUNT] = {0}, total[KT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *q = gguf_tensor(g, i);
        if (!kt_is_quantized(q->type)) continue;
        char tname[256];
        snprintf(tname, sizeof tname, "%.*s", (int)q->name.len, q->name.ptr);
        int64_t si = gguf_find_tensor(f16, tname);
        const struct gguf_tensor_info *src = si >= 0 ? gguf_tensor(f16, si) : NULL;
        CHECKF(src && src->ne[0] == q->ne[0], "%s: %s missing or reshaped in kjv-f16.gguf", name, tname);
        if (!src || src->ne[0] != q->ne[0]) continue;
        const int64_t ne0 = src->ne[0], rows = src->ne[1] * src->ne[2] * src->ne[3];
        float *x = malloc((size_t)(ne0 * rows) * sizeof(float));
        void *out = malloc(q->size);
        const struct kt_type_traits *st = kt_get_type_traits(src->type);
        st->to_float(src->data, x, ne0 * rows);
        const size_t n = kt_quantize_chunk(q->type, x, out, rows, ne0, NULL);
        total[q->type]++;
        if (n == q->size && memcmp(out, q->data, n) == 0) {
            same[q->type]++;
        } else {
            size_t off = 0;
            while (n == q->size && off < n && ((unsigned char *)out)[off] == ((const unsigned char *)q->data)[off]) off++;
            CHECKF(false, "%s %s (%s): differs from llama.cpp's bytes at %zu of %zu", name, tname,
                   kt_type_name(q->type), off, q->size);
        }
        free(x);
        free(out);
    }
    for (int t = 0; t < KT_TYPE_COUNT; t++)
        if (total[t]) printf("  %-16s %-5s %3lld / %3lld tensors byte-identical\n", name, kt_type_name((enum kt_type)t),
                             (long long)same[t], (long long)total[t]);
    gguf_close(g);
}

int main(void) {
    const char *shared = tu_shared_or_skip("test_quant_model");
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/models/kjv-f16.gguf", shared);
    struct gguf_file *f16 = gguf_open(path, err, sizeof err);
    CHECKF(f16 != NULL, "%s: %s", path, err);
    if (!f16) return tu_finish("test_quant_model");
    check_model(shared, f16, "kjv-q8_0.gguf");
    check_model(shared, f16, "kjv-q4_0.gguf");
    check_model(shared, f16, "kjv-q4_k_m.gguf");
    gguf_close(f16);
    return tu_finish("test_quant_model");
}
