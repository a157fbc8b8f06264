/*
 * test_dequant.c - dequantization of real model tensors against ggml's:
 * for every entry of ../shared/reference/dequant/index.json, open the model
 * with the GGUF reader, take the tensor, dequantize its first rows with the
 * type's to_float and compare bit for bit with the float32 file ggml wrote.
 */
#include "gguf.h"
#include "kt.h"
#include "testutil.h"

/* The index is flat: an "entries" array of objects without nesting. These two
 * helpers read one field of one object (the text between its braces). */
static bool field_str(const char *obj, const char *end, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return false;
    p = strchr(p + strlen(pat), '"');
    if (!p || p >= end) return false;
    const char *q = strchr(p + 1, '"');
    if (!q || q >= end || (size_t)(q - p - 1) >= cap) return false;
    memcpy(out, p + 1, (size_t)(q - p - 1));
    out[q - p - 1] = 0;
    return true;
}

static bool field_int(const char *obj, const char *end, const char *key, long long *out) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return false;
    p = strchr(p + strlen(pat), ':');
    if (!p || p >= end) return false;
    char *e;
    *out = strtoll(p + 1, &e, 10);
    return e != p + 1 && e <= end;
}

static void check_entry(const char *shared, const char *obj, const char *end) {
    char model[256], tensor[256], file[256];
    long long type_id, ne0, rows;
    if (!field_str(obj, end, "model", model, sizeof model) || !field_str(obj, end, "tensor", tensor, sizeof tensor) ||
        !field_str(obj, end, "file", file, sizeof file) || !field_int(obj, end, "type_id", &type_id) ||
        !field_int(obj, end, "ne0", &ne0) || !field_int(obj, end, "rows", &rows)) {
        CHECKF(false, "malformed entry in index.json near: %.60s", obj);
        return;
    }
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/models/%s", shared, model);
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    CHECKF(g != NULL, "%s: %s", path, err);
    if (!g) return;
    int64_t ti = gguf_find_tensor(g, tensor);
    const struct gguf_tensor_info *info = ti >= 0 ? gguf_tensor(g, ti) : NULL;
    CHECKF(info != NULL, "%s: no tensor %s", model, tensor);
    if (!info) { gguf_close(g); return; }
    const struct kt_type_traits *tr = kt_get_type_traits(info->type);
    CHECKF((long long)info->type == type_id && info->ne[0] == ne0 && info->ne[1] >= rows && tr->to_float,
           "%s %s: type %d ne0 %lld (index: type %lld ne0 %lld rows %lld)", model, tensor, (int)info->type,
           (long long)info->ne[0], type_id, ne0, rows);
    if ((long long)info->type != type_id || info->ne[0] != ne0 || info->ne[1] < rows || !tr->to_float) {
        gguf_close(g);
        return;
    }
    snprintf(path, sizeof path, "%s/reference/dequant/%s", shared, file);
    size_t len = 0;
    float *want = (float *)tu_read_file(path, &len);
    CHECKF(want && len == (size_t)(rows * ne0) * sizeof(float), "%s: %zu bytes", path, len);
    if (want && len == (size_t)(rows * ne0) * sizeof(float)) {
        float *got = malloc(len);
        const size_t row_bytes = kt_row_size(info->type, ne0);
        for (long long r = 0; r < rows; r++)
            tr->to_float((const char *)info->data + r * row_bytes, got + r * ne0, ne0);
        long long first = -1;
        for (long long i = 0; i < rows * ne0 && first < 0; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0) first = i;
        CHECKF(first < 0, "%s %s (%s): element %lld is %.9g, ggml %.9g", model, tensor, kt_type_name(info->type),
               first, first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
        if (first < 0) printf("  %-16s %-20s %-5s %lld x %lld bit-identical\n", model, tensor,
                              kt_type_name(info->type), rows, ne0);
        free(got);
    }
    free(want);
    gguf_close(g);
}

int main(void) {
    const char *shared = tu_shared_or_skip("test_dequant");
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/dequant/index.json", shared);
    char *json = tu_read_file(path, NULL);
    CHECKF(json != NULL, "cannot read %s", path);
    if (!json) return tu_finish("test_dequant");
    const char *p = strstr(json, "\"entries\"");
    int n = 0;
    while (p && (p = strchr(p, '{')) != NULL) {
        const char *end = strchr(p, '}');
        if (!end) break;
        check_entry(shared, p, end);
        n++;
        p = end + 1;
    }
    CHECKF(n >= 10, "only %d entries in index.json", n);
    free(json);
    return tu_finish("test_dequant");
}
