/*
 * fuzz_gguf.c - libFuzzer harness for the GGUF reader: any input either fails
 * to open with a message, or opens and then every accessor is safe on it
 * (each key through every getter, array elements, tensor data at both ends).
 * Build: cmake -DCMAKE_C_COMPILER=clang -DKILN_FUZZ=ON -DKILN_SANITIZE=ON; run: scripts/fuzz.sh.
 */
#include "gguf.h"

#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void walk_key(const struct gguf_file *g, int64_t i) {
    struct gguf_str k = gguf_key(g, i);
    char key[256];
    size_t n = k.len < sizeof key - 1 ? (size_t)k.len : sizeof key - 1;
    memcpy(key, k.ptr, n);
    key[n] = 0;
    if (n == k.len && !memchr(key, 0, n) && gguf_find_key(g, key) != i) abort(); /* index must agree */

    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    struct gguf_str s;
    sink += gguf_get_u8(g, key, &u8) + gguf_get_i8(g, key, &i8) + gguf_get_u16(g, key, &u16) +
            gguf_get_i16(g, key, &i16) + gguf_get_u32(g, key, &u32) + gguf_get_i32(g, key, &i32) +
            gguf_get_u64(g, key, &u64) + gguf_get_i64(g, key, &i64) + gguf_get_f32(g, key, &f32) +
            gguf_get_f64(g, key, &f64) + gguf_get_bool(g, key, &b) + gguf_get_int(g, key, &i64) +
            gguf_get_float(g, key, &f64);
    if (gguf_get_str(g, key, &s) && s.len) sink += (unsigned char)s.ptr[0] + (unsigned char)s.ptr[s.len - 1];
    sink += strlen(gguf_error(g));

    size_t size = 0;
    const uint8_t *raw = gguf_kv_data(g, i, &size);
    if (raw && size) sink += raw[0] + raw[size - 1];
    if (gguf_kv_type(g, i) != GGUF_TYPE_ARRAY) return;
    enum gguf_type et = gguf_arr_type(g, i);
    uint64_t an = gguf_arr_n(g, i);
    /* first, last and a few more elements through each element getter (one past the end must fail) */
    for (uint64_t j = 0; j < an + 1 && j < 64; j++) {
        uint64_t idx = j < 32 ? j : an - (j - 32);
        if (idx > an) continue;
        bool ok = gguf_arr_get_str(g, i, idx, &s);
        if (ok && s.len) sink += (unsigned char)s.ptr[s.len - 1];
        if (ok && idx >= an) abort();
        sink += gguf_arr_get_int(g, i, idx, &i64) + gguf_arr_get_float(g, i, idx, &f64);
    }
    if (et != GGUF_TYPE_STRING && et != GGUF_TYPE_ARRAY && et < GGUF_TYPE_COUNT && size <= (1u << 20)) {
        void *out = malloc(size ? size : 1);
        if (out && gguf_arr_copy(g, i, et, out, an) && size) sink += ((uint8_t *)out)[size - 1];
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy, so reading one byte past the input is caught */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    char err[256];
    struct gguf_file *g = gguf_open_memory(copy, size, err, sizeof err);
    if (!g) {
        if (!strstr(err, "at byte ")) abort(); /* every rejection names its offset */
        free(copy);
        return 0;
    }
    sink += gguf_version(g) + gguf_alignment(g) + gguf_data_offset(g) + gguf_size(g);
    if (gguf_data_offset(g) > size) abort();
    for (int64_t i = 0; i < gguf_n_kv(g); i++) walk_key(g, i);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        const uint8_t *p = t->data;
        if (t->size) sink += p[0] + p[t->size - 1];
        char name[KT_MAX_NAME];
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = 0;
        if (!memchr(name, 0, (size_t)t->name.len) && gguf_find_tensor(g, name) != i) abort();
        if (kt_row_size(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]) != t->size) abort();
    }
    gguf_close(g);
    free(copy);
    return 0;
}
