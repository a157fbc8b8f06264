/*
 * test_ops_tanh.c - the tanh-based ops Gemma needs, on the CPU's best kernels
 * and on KT_CPU_ISA=ref: GEGLU = gelu(a) * b and SOFTCAP = cap * tanh(x / cap)
 * against double-precision references over every input layout (contiguous,
 * permuted, transposed, strided), identical bits for 1, 2 and 4 threads, and
 * their constructors refusing what they cannot compute. (Soft-capped attention
 * is in test_attn.c.)
 */
#include "optest.h"

static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_geglu_softcap(void) {
    for (int c = 0; c < 16; c++) {
        struct kt_context *ctx = new_ctx();
        const bool geglu = c % 2 == 0;
        enum layout lay = (enum layout)((c / 2) % L_COUNT);
        int64_t ne[4];
        rand_shape(ne, 4, 11);
        if (c % 4 == 1) ne[0] = 1 + rnd(70);
        /* soft-capping logits: values well past the cap, where tanh bends them most */
        const double range = geglu ? (c >= 8 ? 12 : 4) : 90;
        const float cap = 30.0f - (float)rnd(20);
        struct kt_tensor *a = mk(ctx, KT_TYPE_F32, ne, lay, -range, range);
        struct kt_tensor *b = geglu ? mk(ctx, KT_TYPE_F32, ne, (enum layout)(c % L_COUNT), -3, 3) : NULL;
        struct kt_tensor *out = geglu ? kt_geglu(ctx, a, b) : kt_softcap(ctx, a, cap);
        CHECK(out != NULL);
        const int64_t n = nel(ne);
        int64_t i[4];
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t k = 0; k < n; k++) {
            unflat(ne, k, i);
            const double x = tget(a, i);
            want[k] = geglu ? gelu_d(x) * tget(b, i) : cap * tanh(x / cap);
        }
        char label[128];
        snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld] (%s)", geglu ? "geglu" : "softcap", (long long)ne[0],
                 (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_name[lay]);
        run_check(ctx, out, want, 1e-5, 2e-6, label);
        free(want);
        kt_free(ctx);
    }
}

static void test_errors(void) {
    struct kt_context *ctx = new_ctx();
    struct kt_tensor *a = kt_new_tensor_2d(ctx, KT_TYPE_F32, 4, 3), *b = kt_new_tensor_2d(ctx, KT_TYPE_F32, 3, 3);
    struct kt_tensor *h = kt_new_tensor_2d(ctx, KT_TYPE_F16, 4, 3);
    CHECK(kt_geglu(ctx, a, b) == NULL && strstr(kt_last_error(), "shapes differ"));
    CHECK(kt_geglu(ctx, h, h) == NULL && strstr(kt_last_error(), "F32 expected"));
    CHECK(kt_softcap(ctx, a, 0.0f) == NULL && strstr(kt_last_error(), "cap"));
    CHECK(kt_softcap(ctx, a, -30.0f) == NULL);
    CHECK(kt_softcap(ctx, a, NAN) == NULL);
    CHECK(kt_softcap(ctx, h, 30.0f) == NULL);
    CHECK(kt_geglu(ctx, NULL, b) == NULL && kt_softcap(ctx, NULL, 1.0f) == NULL);
    CHECK(!strcmp(kt_op_name(KT_OP_GEGLU), "GEGLU") && !strcmp(kt_op_name(KT_OP_SOFTCAP), "SOFTCAP"));
    kt_free(ctx);
}

int main(void) {
    pool = kt_threadpool_new(4);
    if (!pool) {
        fprintf(stderr, "kt_threadpool_new: %s\n", kt_last_error());
        return 1;
    }
    test_geglu_softcap();
    test_errors();
    setenv("KT_CPU_ISA", "ref", 1);
    kt_cpu_kernels_reinit();
    pass_name = "KT_CPU_ISA=ref";
    test_geglu_softcap();
    kt_threadpool_free(pool);
    return tu_finish("test_ops_tanh");
}
