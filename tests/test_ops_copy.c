/*
 * test_ops_copy.c - the CPU ops that move data: cpy/dup/cont/cast between
 * F32, F16, BF16, Q8_0 and Q4_0 (any layout and any shape of the same count;
 * quantized targets against the type table's reference quantizer), concat
 * along every dim, and get_rows for F32/F16/Q8_0/Q4_0/Q6_K against to_float,
 * bad ids included; every result bit-identical for 1, 2 and 4 threads.
 */
#include "optest.h"

/* ------------------------------------------------------------------ copies */

/* Expected contents (as floats, in dst's logical order) of src converted to a scalar type. */
static double round_to(enum kt_type t, double x) {
    if (t == KT_TYPE_F16) return kt_fp16_to_fp32(kt_fp32_to_fp16((float)x));
    if (t == KT_TYPE_BF16) return kt_bf16_to_fp32(kt_fp32_to_bf16((float)x));
    return (float)x;
}

static void test_cpy(void) {
    const enum kt_type srcs[3] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_BF16};
    const enum kt_type dsts[5] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_BF16, KT_TYPE_Q8_0, KT_TYPE_Q4_0};
    for (int c = 0; c < 45; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_type ts = srcs[c % 3], td = dsts[(c / 3) % 5];
        enum layout lay = (enum layout)(c % L_COUNT);
        const bool q = kt_is_quantized(td);
        /* src shape; dst holds the same count in another shape (a KV-cache slot) */
        int64_t ne[4];
        rand_shape(ne, 4, 7);
        if (q) ne[0] = 32 * (1 + rnd(3)), ne[1] = 1 + rnd(5);
        const int64_t n = nel(ne);
        struct kt_tensor *a = mk(ctx, ts, ne, lay, -3, 3);
        struct kt_tensor *b;
        if (q) {
            /* rows of whole blocks, in a bigger tensor (a slot of a cache) */
            int64_t rows = n / 64 >= 1 && n % 64 == 0 && c % 2 ? n / 64 : n / 32, k0 = n / rows;
            struct kt_tensor *big = kt_new_tensor_2d(ctx, td, k0, rows + 3);
            b = kt_view_2d(ctx, big, k0, rows, big->nb[1], big->nb[1] * 2);
        } else if (c % 2) {
            struct kt_tensor *big = kt_new_tensor_2d(ctx, td, n + 5, 2);
            b = kt_view_2d(ctx, big, n, 1, big->nb[1], big->nb[1] + 2 * big->nb[0]);
        } else {
            b = kt_new_tensor_4d(ctx, td, ne[3], ne[2], ne[1], ne[0]); /* reversed shape */
        }
        double *x = read_all(a);
        char label[128];
        snprintf(label, sizeof label, "CPY %s -> %s %lld elements (%s)", kt_type_name(ts), kt_type_name(td),
                 (long long)n, layout_name[lay]);
        struct kt_tensor *out = kt_cpy(ctx, a, b);
        if (!q) {
            double *want = malloc((size_t)n * sizeof *want);
            for (int64_t k = 0; k < n; k++) want[k] = round_to(td, x[k]);
            run_check(ctx, out, want, 0, 0, label);
            free(want);
        } else if (run_check(ctx, out, NULL, 0, 0, label)) {
            const struct kt_type_traits *tr = kt_get_type_traits(td);
            const int64_t k0 = b->ne[0], rows = b->ne[1];
            float *xf = malloc((size_t)n * sizeof *xf), *got = malloc((size_t)n * sizeof *got),
                  *ref = malloc((size_t)n * sizeof *ref);
            void *qb = malloc(kt_row_size(td, k0));
            for (int64_t k = 0; k < n; k++) xf[k] = (float)x[k];
            for (int64_t r = 0; r < rows; r++) {
                tr->from_float_ref(xf + r * k0, qb, k0);
                tr->to_float(qb, ref + r * k0, k0);
                tr->to_float((char *)b->data + r * b->nb[1], got + r * k0, k0);
            }
            CHECKF(tu_close(label, got, ref, n, 0, 0), "vs dequant(quant_ref(x))");
            CHECKF(tu_nmse(got, xf, n) < (td == KT_TYPE_Q8_0 ? 1e-4 : 1e-2), "%s: nmse %g", label,
                   tu_nmse(got, xf, n));
            free(xf), free(got), free(ref), free(qb);
        }
        free(x);
        kt_free(ctx);
    }

    /* dup / cont / cont_4d / cast of permuted sources, and dequantizing casts */
    struct kt_context *ctx = new_ctx();
    int64_t ne[4] = {5, 7, 3, 2};
    struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, L_PERM, -1, 1);
    double *x = read_all(a), *h = malloc(210 * sizeof *h);
    for (int k = 0; k < 210; k++) h[k] = round_to(KT_TYPE_F16, x[k]);
    run_check(ctx, kt_dup(ctx, a), x, 0, 0, "DUP permuted f32");
    run_check(ctx, kt_cont(ctx, a), x, 0, 0, "CONT permuted f32");
    struct kt_tensor *c4 = kt_cont_4d(ctx, a, 35, 6, 1, 1);
    run_check(ctx, c4, x, 0, 0, "CONT_4D permuted f32 -> [35,6]");
    CHECK(c4 && c4->ne[0] == 35 && c4->ne[1] == 6 && kt_is_contiguous(c4));
    run_check(ctx, kt_cast(ctx, a, KT_TYPE_F16), h, 0, 0, "CAST permuted f32 -> f16");
    run_check(ctx, kt_cont(ctx, kt_transpose(ctx, kt_cast(ctx, a, KT_TYPE_F16))), NULL, 0, 0,
              "CONT f16 chain");

    /* reshaping copies of packed rows: runs end at src and dst row ends that do not line up */
    for (int k = 0; k < 4; k++) {
        const enum layout lay = k % 2 ? L_PAD : L_CONT;
        const enum kt_type to = k < 2 ? KT_TYPE_F32 : KT_TYPE_F16;
        struct kt_tensor *s = mk(ctx, KT_TYPE_F32, (int64_t[]){13, 6, 5, 1}, lay, -1, 1);
        double *xs = read_all(s);
        for (int j = 0; j < 390; j++) xs[j] = round_to(to, xs[j]);
        char label[64];
        snprintf(label, sizeof label, "CPY f32 [13,6,5] (%s) -> %s [10,39]", layout_name[lay],
                 kt_type_name(to));
        run_check(ctx, kt_cpy(ctx, s, kt_new_tensor_2d(ctx, to, 10, 39)), xs, 0, 0, label);
        snprintf(label, sizeof label, "CPY f32 [13,6,5] (%s) -> %s [30,13]", layout_name[lay],
                 kt_type_name(to));
        run_check(ctx, kt_cpy(ctx, s, kt_new_tensor_2d(ctx, to, 30, 13)), xs, 0, 0, label);
        free(xs);
    }

    /* packed rows between F32 and F16/BF16 (the row-converter path), both ways */
    struct kt_tensor *ac = mk(ctx, KT_TYPE_F32, ne, L_CONT, -70000, 70000); /* beyond f16's range too */
    double *xc = read_all(ac), *r16 = malloc(210 * sizeof *r16), *rbf = malloc(210 * sizeof *rbf);
    for (int k = 0; k < 210; k++)
        r16[k] = round_to(KT_TYPE_F16, xc[k]), rbf[k] = round_to(KT_TYPE_BF16, xc[k]);
    struct kt_tensor *c16 = kt_cast(ctx, ac, KT_TYPE_F16), *cbf = kt_cast(ctx, ac, KT_TYPE_BF16);
    run_check(ctx, c16, r16, 0, 0, "CAST contiguous f32 -> f16");
    run_check(ctx, cbf, rbf, 0, 0, "CAST contiguous f32 -> bf16");
    run_check(ctx, kt_cast(ctx, c16, KT_TYPE_F32), r16, 0, 0, "CAST contiguous f16 -> f32");
    run_check(ctx, kt_cast(ctx, cbf, KT_TYPE_F32), rbf, 0, 0, "CAST contiguous bf16 -> f32");
    run_check(ctx, kt_cpy(ctx, c16, kt_new_tensor_4d(ctx, KT_TYPE_BF16, 5, 7, 3, 2)), NULL, 0, 0,
              "CPY f16 -> bf16");
    free(xc), free(r16), free(rbf);

    const enum kt_type qt[2] = {KT_TYPE_Q8_0, KT_TYPE_Q4_0};
    for (int k = 0; k < 2; k++) {
        const struct kt_type_traits *tr = kt_get_type_traits(qt[k]);
        struct kt_tensor *w = kt_new_tensor_2d(ctx, qt[k], 64, 3);
        float src[192], want_f[192];
        for (int j = 0; j < 192; j++) src[j] = rndf();
        kt_quantize_chunk(qt[k], src, w->data, 3, 64, NULL);
        tr->to_float(w->data, want_f, 192);
        double want[192];
        for (int j = 0; j < 192; j++) want[j] = want_f[j];
        char label[64];
        snprintf(label, sizeof label, "CAST %s -> f32", kt_type_name(qt[k]));
        run_check(ctx, kt_cast(ctx, w, KT_TYPE_F32), want, 0, 0, label);
        struct kt_tensor *wc = kt_cont(ctx, w);
        snprintf(label, sizeof label, "CONT %s", kt_type_name(qt[k]));
        if (run_check(ctx, wc, NULL, 0, 0, label)) CHECK(memcmp(wc->data, w->data, kt_nbytes(w)) == 0);
    }
    free(x), free(h);
    kt_free(ctx);
}

static void test_concat(void) {
    for (int c = 0; c < 16; c++) {
        struct kt_context *ctx = new_ctx();
        int dim = c % 4;
        int64_t ne[4], ne1[4];
        rand_shape(ne, 4, 6);
        memcpy(ne1, ne, sizeof ne);
        ne1[dim] = 1 + rnd(5);
        enum kt_type t = c % 5 == 4 ? KT_TYPE_F16 : KT_TYPE_F32;
        struct kt_tensor *a = mk(ctx, t, ne, (enum layout)(c % L_COUNT), -1, 1);
        struct kt_tensor *b = mk(ctx, t, ne1, (enum layout)((c + 1) % L_COUNT), -1, 1);
        int64_t neo[4];
        memcpy(neo, ne, sizeof ne);
        neo[dim] += ne1[dim];
        int64_t n = nel(neo), i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(neo, k, i);
            if (i[dim] < ne[dim])
                want[k] = tget(a, i);
            else
                i[dim] -= ne[dim], want[k] = tget(b, i);
        }
        char label[96];
        snprintf(label, sizeof label, "CONCAT %s dim %d [%lld,%lld,%lld,%lld]", kt_type_name(t), dim,
                 (long long)neo[0], (long long)neo[1], (long long)neo[2], (long long)neo[3]);
        run_check(ctx, kt_concat(ctx, a, b, dim), want, 0, 0, label);
        free(want);
        kt_free(ctx);
    }
}

static void test_get_rows(void) {
    const enum kt_type types[5] = {KT_TYPE_F32, KT_TYPE_F16, KT_TYPE_Q8_0, KT_TYPE_Q4_0, KT_TYPE_Q6_K};
    for (int c = 0; c < 15; c++) {
        struct kt_context *ctx = new_ctx();
        enum kt_type t = types[c % 5];
        const struct kt_type_traits *tr = kt_get_type_traits(t);
        int64_t n0 = t == KT_TYPE_Q6_K    ? 256 * (1 + rnd(2))
                     : kt_is_quantized(t) ? 32 * (1 + rnd(4))
                                          : 1 + rnd(40);
        int64_t rows = 1 + rnd(20), a2 = c < 10 ? 1 : 2, a3 = c < 10 ? 1 : 1 + rnd(2), nid = 1 + rnd(9);
        struct kt_tensor *a = kt_new_tensor_4d(ctx, t, n0, rows, a2, a3);
        const int64_t nrows = rows * a2 * a3;
        float *src = malloc((size_t)(n0 * nrows) * sizeof *src);
        for (int64_t k = 0; k < n0 * nrows; k++) src[k] = 2 * rndf();
        if (t == KT_TYPE_F32)
            memcpy(a->data, src, (size_t)(n0 * nrows) * sizeof *src);
        else
            kt_quantize_chunk(t, src, a->data, nrows, n0, NULL);
        struct kt_tensor *ids = kt_new_tensor_3d(ctx, KT_TYPE_I32, nid, a2, a3);
        int32_t *id = ids->data;
        for (int64_t k = 0; k < nid * a2 * a3; k++) id[k] = (int32_t)rnd(rows);
        struct kt_tensor *out = kt_get_rows(ctx, a, ids);
        double *want = malloc((size_t)(n0 * nid * a2 * a3) * sizeof *want);
        float *row = malloc((size_t)n0 * sizeof *row);
        for (int64_t k = 0; k < nid * a2 * a3; k++) {
            int64_t j2 = (k / nid) % a2, j3 = k / (nid * a2);
            const char *r = (const char *)a->data + id[k] * a->nb[1] + j2 * a->nb[2] + j3 * a->nb[3];
            if (t == KT_TYPE_F32)
                memcpy(row, r, (size_t)n0 * sizeof *row);
            else
                tr->to_float(r, row, n0);
            for (int64_t i0 = 0; i0 < n0; i0++) want[k * n0 + i0] = row[i0];
        }
        char label[96];
        snprintf(label, sizeof label, "GET_ROWS %s [%lld,%lld,%lld,%lld] %lld ids", kt_type_name(t),
                 (long long)n0, (long long)rows, (long long)a2, (long long)a3, (long long)nid);
        run_check(ctx, out, want, 0, 0, label);
        free(src), free(want), free(row);
        kt_free(ctx);
    }

    /* ids are data (token ids): one out of range must not read outside src0 (ASan
     * watches) and gives a row of zeros; the rows around it are unaffected */
    struct kt_context *ctx = new_ctx();
    /* src0 is the first 4 rows of 8: rows 4..7 are readable memory, so reading them shows */
    struct kt_tensor *base = mk(ctx, KT_TYPE_F32, (int64_t[]){6, 8, 1, 1}, L_CONT, 1, 2);
    struct kt_tensor *a = kt_view_2d(ctx, base, 6, 4, base->nb[1], 0);
    struct kt_tensor *ids = kt_new_tensor_1d(ctx, KT_TYPE_I32, 4);
    const int32_t bad[4] = {1, -1, 4, 3};
    memcpy(ids->data, bad, sizeof bad);
    double want[24], *x = read_all(a);
    for (int r = 0; r < 4; r++)
        for (int i0 = 0; i0 < 6; i0++)
            want[r * 6 + i0] = bad[r] >= 0 && bad[r] < 4 ? x[bad[r] * 6 + i0] : 0.0;
    run_check(ctx, kt_get_rows(ctx, a, ids), want, 0, 0, "GET_ROWS with ids -1 and 4 of 4 rows");
    free(x);
    kt_free(ctx);
}

/* F32 rows into F16 (how the KV cache is written; on x86 through the kernel table's
 * F16C converter) bit for bit what kt_fp32_to_fp16 gives, on the values where a
 * converter can go wrong: NaNs with payloads and signs (every NaN becomes the quiet
 * 0x7e00), infinities, the edge of overflow (65519 stays, 65520 rounds to inf), ties
 * at the normal and subnormal ends, subnormals, zeros of both signs; in rows of 37, so
 * whole groups of eight and a tail. */
static void test_f16_special(void) {
    struct kt_context *ctx = new_ctx();
    const uint32_t bits[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x7f800000u, 0xff800000u,
                             0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x3f801000u, 0x3f803000u, 0x33000000u,
                             0x33000001u, 0x337fffffu, 0x387fe000u, 0x38800000u, 0x00000001u, 0x80000000u,
                             0x00000000u, 0x3eaaaaabu, 0xc2f6e979u};
    const int nb = (int)(sizeof bits / sizeof bits[0]);
    struct kt_tensor *a = kt_new_tensor_2d(ctx, KT_TYPE_F32, 37, 3);
    float *x = a->data;
    /* every value in turn: 5 and nb = 21 are coprime */
    for (int k = 0; k < 111; k++) memcpy(&x[k], &bits[(k * 5) % nb], sizeof(float));
    struct kt_tensor *h = kt_cast(ctx, a, KT_TYPE_F16);
    CHECK(h != NULL);
    if (h) {
        run_check(ctx, h, NULL, 0, 0, "CAST f32 -> f16 special values");
        const kt_fp16_t *got = h->data;
        int bad = 0;
        for (int k = 0; k < 111; k++)
            if (got[k] != kt_fp32_to_fp16(x[k])) bad++;
        CHECKF(bad == 0, "CAST f32 -> f16 special values: %d of 111 differ from kt_fp32_to_fp16", bad);
    }
    kt_free(ctx);
}

int main(void) {
    pool = kt_threadpool_new(4);
    if (!pool) {
        fprintf(stderr, "kt_threadpool_new: %s\n", kt_last_error());
        return 1;
    }
    test_cpy();
    test_f16_special();
    test_concat();
    test_get_rows();
    kt_threadpool_free(pool);
    return tu_finish("test_ops_copy");
}
