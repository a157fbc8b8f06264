/*
 * quantize.c - kiln_quantize_file: plan every tensor's type (quant_mix.c), then
 * stream the output through the GGUF writer, converting rows slab by slab on
 * n threads (each row is quantized on its own, so the bytes do not depend on
 * the thread count). Also the file-type names.
 */
#include "errf.h"
#include "quant_mix.h"

#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ names */

static const struct {
    const char *name;
    enum kiln_ftype ftype;
} ftype_names[] = {
    {"F32", KILN_FTYPE_ALL_F32},         {"F16", KILN_FTYPE_MOSTLY_F16},       {"BF16", KILN_FTYPE_MOSTLY_BF16},
    {"Q4_0", KILN_FTYPE_MOSTLY_Q4_0},    {"Q4_1", KILN_FTYPE_MOSTLY_Q4_1},     {"Q5_0", KILN_FTYPE_MOSTLY_Q5_0},
    {"Q5_1", KILN_FTYPE_MOSTLY_Q5_1},    {"Q8_0", KILN_FTYPE_MOSTLY_Q8_0},     {"Q2_K", KILN_FTYPE_MOSTLY_Q2_K},
    {"Q3_K_S", KILN_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", KILN_FTYPE_MOSTLY_Q3_K_M}, {"Q3_K_L", KILN_FTYPE_MOSTLY_Q3_K_L},
    {"Q4_K_S", KILN_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", KILN_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", KILN_FTYPE_MOSTLY_Q5_K_S},
    {"Q5_K_M", KILN_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", KILN_FTYPE_MOSTLY_Q6_K},    {"IQ4_NL", KILN_FTYPE_MOSTLY_IQ4_NL},
    {"IQ4_XS", KILN_FTYPE_MOSTLY_IQ4_XS}, {"MXFP4_MOE", KILN_FTYPE_MOSTLY_MXFP4_MOE},
    /* aliases last, so that kiln_ftype_name finds the full names first */
    {"Q3_K", KILN_FTYPE_MOSTLY_Q3_K_M},  {"Q4_K", KILN_FTYPE_MOSTLY_Q4_K_M},   {"Q5_K", KILN_FTYPE_MOSTLY_Q5_K_M},
    {"MXFP4", KILN_FTYPE_MOSTLY_MXFP4_MOE},
};

bool kiln_ftype_from_name(const char *name, enum kiln_ftype *out) {
    for (size_t i = 0; name && i < sizeof ftype_names / sizeof ftype_names[0]; i++)
        if (!strcasecmp(name, ftype_names[i].name)) {
            if (out) *out = ftype_names[i].ftype;
            return true;
        }
    return false;
}

const char *kiln_ftype_name(enum kiln_ftype ftype) {
    for (size_t i = 0; i < sizeof ftype_names / sizeof ftype_names[0]; i++)
        if (ftype_names[i].ftype == ftype) return ftype_names[i].name;
    return "?";
}

struct kiln_quantize_params kiln_quantize_default_params(void) {
    return (struct kiln_quantize_params){.ftype = KILN_FTYPE_MOSTLY_Q8_0, .n_threads = 1};
}

/* ------------------------------------------------------------------ conversion */

/* Shared by every tensor of one run: progress over the output bytes. */
struct qrun {
    int n_threads;
    size_t done, total;
    kiln_progress_fn progress;
    void *progress_data;
};

/* One output tensor: where its rows come from and what they become. */
struct qtensor {
    char name[KT_MAX_NAME];
    const struct gguf_tensor_info *src;
    enum kt_type to;
    struct qrun *run;
};

/* One slab of a tensor's output: buf holds rows from row0 on. */
struct qslab {
    const struct qtensor *t;
    int64_t row0;
    uint8_t *buf;
};

/* Floats converted at once: bounds scratch memory whatever the slab size. */
#define QCHUNK_FLOATS ((int64_t)1 << 18)

/* kiln_rows_fn: source rows [r0, r1) to floats, checked, then to the target type. */
static bool convert_rows(void *ctx, int64_t r0, int64_t r1, char *err, size_t errlen) {
    const struct qslab *sl = ctx;
    const struct qtensor *t = sl->t;
    const int64_t ne0 = t->src->ne[0];
    const size_t src_row = kt_row_size(t->src->type, ne0), dst_row = kt_row_size(t->to, ne0);
    const kt_to_float_fn to_float = kt_get_type_traits(t->src->type)->to_float;
    const int64_t per = ne0 >= QCHUNK_FLOATS ? 1 : QCHUNK_FLOATS / ne0;
    const int64_t n = r1 - r0 < per ? r1 - r0 : per;
    float *f = malloc((size_t)n * (size_t)ne0 * sizeof(float));
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    bool ok = true;
    for (int64_t r = r0; ok && r < r1; r += per) {
        const int64_t nr = r1 - r < per ? r1 - r : per;
        const uint8_t *src = (const uint8_t *)t->src->data + (size_t)r * src_row;
        for (int64_t i = 0; i < nr; i++) to_float(src + (size_t)i * src_row, f + i * ne0, ne0);
        /* NaN or Inf in a weight is a damaged file (llama.cpp's loader rejects it too) */
        for (int64_t i = 0; ok && i < nr * ne0; i++)
            if (!isfinite(f[i])) {
                snprintf(err, errlen, "row %lld holds a non-finite value (%g): the input is damaged",
                         (long long)(r + i / ne0), (double)f[i]);
                ok = false;
            }
        if (ok && kt_quantize_chunk(t->to, f, sl->buf + (size_t)(r - sl->row0) * dst_row, nr, ne0, NULL) == 0) {
            snprintf(err, errlen, "%s", kt_last_error());
            ok = false;
        }
    }
    free(f);
    return ok;
}

/* gguf_fill_fn: rows [row0, row0 + nrows) of one output tensor, split over threads. */
static bool fill_tensor(void *user, int64_t row0, int64_t nrows, void *buf, char *err, size_t errlen) {
    const struct qtensor *t = user;
    struct qrun *run = t->run;
    const size_t dst_row = kt_row_size(t->to, t->src->ne[0]);
    if (t->to == t->src->type) {
        memcpy(buf, (const uint8_t *)t->src->data + (size_t)row0 * dst_row, (size_t)nrows * dst_row);
    } else {
        struct qslab sl = {.t = t, .row0 = row0, .buf = buf};
        if (!kiln_rows_parallel(run->n_threads, row0, row0 + nrows, convert_rows, &sl, err, errlen)) return false;
    }
    run->done += (size_t)nrows * dst_row;
    if (run->progress && !run->progress(run->total ? (float)((double)run->done / (double)run->total) : 1.0f,
                                        run->progress_data)) {
        snprintf(err, errlen, "cancelled");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ planning */


/* An integer hyper-parameter stored as a scalar or as a per-layer array (first layer). */
static int64_t hparam(const struct gguf_file *g, const char *arch, const char *suffix, int64_t dflt) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v, i = gguf_find_key(g, key);
    if (i < 0) return dflt;
    if (gguf_kv_type(g, i) == GGUF_TYPE_ARRAY) return gguf_arr_n(g, i) > 0 && gguf_arr_get_int(g, i, 0, &v) ? v : dflt;
    return gguf_get_int(g, key, &v) ? v : dflt;
}

/* A tensor's place in the input, sorted into llama.cpp's output order. */
struct slot {
    const char *name;
    int64_t index;
};
static int cmp_order(const void *a, const void *b) {
    return kiln_qmix_order(((const struct slot *)a)->name, ((const struct slot *)b)->name);
}

/* Effective dimensions: trailing 1s do not count (a [256, 1] tensor is 1-D). */
static int eff_dims(const struct gguf_tensor_info *t) {
    int n = 1;
    for (int j = 1; j < KT_MAX_DIMS; j++)
        if (t->ne[j] > 1) n = j + 1;
    return n;
}

bool kiln_quantize_file(const char *in, const char *out, const struct kiln_quantize_params *p, char *err,
                        size_t errlen) {
    if (!in || !out || !p) return kiln_errf(err, errlen, "kiln_quantize_file: NULL argument");
    enum kt_type dflt;
    if (!kiln_ftype_default_type(p->ftype, &dflt)) return kiln_errf(err, errlen, "unknown file type %d", (int)p->ftype);
    char gerr[1024];
    struct gguf_file *g = gguf_open(in, gerr, sizeof gerr);
    /* the reader names the file when it cannot open it, not when the content is bad */
    if (!g) return strstr(gerr, in) ? kiln_errf(err, errlen, "%s", gerr) : kiln_errf(err, errlen, "%s: %s", in, gerr);

    bool ok = false;
    struct gguf_writer *w = NULL;
    const int64_t n = gguf_n_tensors(g);
    char(*names)[KT_MAX_NAME] = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
    const char **name_ptr = calloc((size_t)(n > 0 ? n : 1), sizeof *name_ptr);
    struct slot *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
    struct qtensor *qt = calloc((size_t)(n > 0 ? n : 1), sizeof *qt);
    struct qrun run = {.n_threads = p->n_threads, .progress = p->progress, .progress_data = p->progress_data};
    if (!names || !name_ptr || !order || !qt) {
        kiln_errf(err, errlen, "out of memory");
        goto done;
    }

    /* the model facts the mixes depend on */
    char arch[64] = "";
    struct gguf_str s;
    if (gguf_get_str(g, "general.architecture", &s) && s.len < sizeof arch) memcpy(arch, s.ptr, (size_t)s.len);
    int64_t max_blk = -1;
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor_info *ti = gguf_tensor(g, i);
        memcpy(names[i], ti->name.ptr, (size_t)ti->name.len);
        name_ptr[i] = names[i];
        order[i] = (struct slot){names[i], i};
        if (!strncmp(names[i], "blk.", 4)) {
            long b = strtol(names[i] + 4, NULL, 10);
            if (b > max_blk && b < (1L << 20)) max_blk = b;
        }
    }
    /* a file without block_count (not a loadable model, but quantizable): count the blocks */
    const int64_t n_layer = hparam(g, arch, "block_count", max_blk + 1);
    const int64_t n_head = hparam(g, arch, "attention.head_count", 0);
    struct kiln_qmix mix;
    kiln_qmix_init(&mix, p->ftype, p->pure, arch, n_layer, n_head, hparam(g, arch, "attention.head_count_kv", n_head),
                   hparam(g, arch, "expert_count", 0), name_ptr, n);

    qsort(order, (size_t)n, sizeof *order, cmp_order);

    w = gguf_writer_new();
    /* the two keys quantizing sets go last, and split keys go (the output is one file): llama.cpp's layout */
    if (!w || !gguf_writer_copy_kv(w, g) || !gguf_writer_remove_key(w, "general.quantization_version") ||
        !gguf_writer_remove_key(w, "general.file_type") || !gguf_writer_remove_key(w, "split.no") ||
        !gguf_writer_remove_key(w, "split.count") || !gguf_writer_remove_key(w, "split.tensors.count") ||
        !gguf_writer_set_u32(w, "general.quantization_version", 2) ||
        !gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype)) {
        kiln_errf(err, errlen, "%s", w ? gguf_writer_error(w) : "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = order[k].index;
        const struct gguf_tensor_info *ti = gguf_tensor(g, i);
        struct qtensor *t = &qt[k];
        memcpy(t->name, names[i], sizeof t->name);
        t->src = ti;
        t->run = &run;
        t->to = kiln_qmix_type(&mix, t->name, eff_dims(ti), ti->ne, ti->type);
        const bool requant = t->to != ti->type && kt_is_quantized(ti->type);
        if (t->to != ti->type) {
            if (!kt_get_type_traits(ti->type)->to_float) {
                kiln_errf(err, errlen, "tensor '%s': cannot convert from %s", t->name, kt_type_name(ti->type));
                goto done;
            }
            if (requant && !p->allow_requantize) {
                kiln_errf(err, errlen,
                     "tensor '%s' is already quantized (%s): requantizing to %s loses precision twice",
                     t->name, kt_type_name(ti->type), kt_type_name(t->to));
                goto done;
            }
        }
        if (p->on_tensor) {
            struct kiln_quantize_tensor info = {.name = t->name, .n_dims = ti->n_dims, .from = ti->type, .to = t->to,
                                                .requantized = requant};
            memcpy(info.ne, ti->ne, sizeof info.ne);
            p->on_tensor(&info, p->on_tensor_data);
        }
        if (!gguf_writer_add_tensor_fill(w, t->name, t->to, ti->n_dims, ti->ne, fill_tensor, t)) {
            kiln_errf(err, errlen, "%s", gguf_writer_error(w));
            goto done;
        }
        int64_t rows = 1;
        for (int j = 1; j < KT_MAX_DIMS; j++) rows *= ti->ne[j];
        run.total += kt_row_size(t->to, ti->ne[0]) * (size_t)rows;
    }
    if (!gguf_writer_write(w, out)) {
        kiln_errf(err, errlen, "%s", gguf_writer_error(w));
        goto done;
    }
    ok = true;
done:
    gguf_writer_free(w);
    free(qt);
    free(order);
    free(name_ptr);
    free(names);
    gguf_close(g);
    return ok;
}
