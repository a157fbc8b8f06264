/*
 * finite.c - logits that carry no prediction (not finite, or all equal: weights
 * damaged where no format check can see, or a computation that overflowed) stop a
 * command instead of becoming a plausible perplexity or token 0. The check runs on
 * rows the tools hold anyway; the diagnosis (which weight of the model file is not
 * finite) only on failure.
 */
#include "kiln-offline.h"
#include "model_args.h"

#include "gguf.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Index of the first non-finite value of row r of tensor t, or -1 (also for a type
 * that holds no floats). */
static int64_t tensor_nonfinite(const struct gguf_tensor_info *t, float *buf, int64_t r) {
    const int64_t ne0 = t->ne[0];
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r * kt_row_size(t->type, ne0);
    if (t->type == KT_TYPE_F32) memcpy(buf, src, (size_t)ne0 * sizeof *buf); /* unaligned in the mapping */
    else kt_get_type_traits(t->type)->to_float(src, buf, ne0);
    for (int64_t j = 0; j < ne0; j++)
        if (!isfinite(buf[j])) return j;
    return -1;
}

/* The first tensor of the file (in file order) with a non-finite value: its index, or -1. */
static int64_t damaged_tensor(const struct gguf_file *g) {
    float *buf = NULL;
    int64_t found = -1;
    for (int64_t i = 0; g && found < 0 && i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        const struct kt_type_traits *tr = kt_get_type_traits(t->type);
        if (t->type != KT_TYPE_F32 && (!tr || !tr->to_float)) continue;
        float *nb = realloc(buf, (size_t)t->ne[0] * sizeof *buf);
        if (!nb) break;
        buf = nb;
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        for (int64_t r = 0; found < 0 && r < rows; r++)
            if (tensor_nonfinite(t, buf, r) >= 0) found = i;
    }
    free(buf);
    return found;
}

bool tool_logits_ok(const char *cmd, const struct kiln_model *model, const float *l, int64_t n,
                    const char *where_fmt, ...) {
    /* all equal is what NaN activations become through the int8 activation quantizers
     * of quantized matrices (their scale reads as 0): a uniform draw, not a prediction */
    int64_t j = 0;
    bool varied = n < 2;
    for (; j < n && isfinite(l[j]); j++) varied |= l[j] != l[0];
    if (j == n && varied) return true;
    char where[160];
    va_list ap;
    va_start(ap, where_fmt);
    vsnprintf(where, sizeof where, where_fmt, ap);
    va_end(ap);
    if (j < n)
        fprintf(stderr, "kiln %s: the logits at %s are not finite (token %lld's is %s)", cmd, where, (long long)j,
                isnan(l[j]) ? "NaN" : l[j] > 0 ? "+inf" : "-inf");
    else
        fprintf(stderr, "kiln %s: the logits at %s are all equal (%g): no prediction", cmd, where, (double)l[0]);
    const struct gguf_file *g = model ? kiln_model_gguf(model) : NULL;
    int64_t ti = damaged_tensor(g);
    if (ti >= 0) {
        struct gguf_str name = gguf_tensor(g, ti)->name;
        int layer = -1;
        char head[24];
        snprintf(head, sizeof head, "%.*s", (int)(name.len < 23 ? name.len : 23), name.ptr);
        if (sscanf(head, "blk.%d.", &layer) == 1 && layer >= 0)
            fprintf(stderr, ": the weight %.*s (layer %d) holds non-finite values: the model file is damaged\n",
                    (int)name.len, name.ptr, layer);
        else
            fprintf(stderr, ": the weight %.*s holds non-finite values: the model file is damaged\n", (int)name.len,
                    name.ptr);
    } else {
        fprintf(stderr, "; every weight in the model file is finite, so the computation %s\n",
                j < n ? "overflowed" : "lost its input");
    }
    return false;
}
