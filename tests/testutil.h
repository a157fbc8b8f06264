/*
 * testutil.h - what every kiln test shares: checks that say what failed and
 * where, comparison of float arrays with a stated tolerance (first mismatch
 * printed), access to ../shared (skip visibly, exit 77, when it is absent),
 * and reading whole files.
 */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int tu_failures = 0;
static int tu_checks = 0;
static int tu_skipped_parts = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        tu_checks++;                                                                  \
        if (!(cond)) {                                                                \
            tu_failures++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

#define CHECKF(cond, ...)                                                     \
    do {                                                                      \
        tu_checks++;                                                          \
        if (!(cond)) {                                                        \
            tu_failures++;                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

/* A part of the test that cannot run here (its data or a tool is absent): said, and
 * counted, so that the test reports itself skipped rather than passed. */
#define tu_skip_part(...)        \
    do {                         \
        printf("SKIP: ");        \
        printf(__VA_ARGS__);     \
        putchar('\n');           \
        tu_skipped_parts++;      \
    } while (0)

/* Ends the test: prints "N passed, N failed" (checks) and returns the exit code: 1 on a
 * failure, else 77 (ctest: skipped) when a part was skipped, so that a pass means every
 * check ran. */
static inline int tu_finish(const char *name) {
    printf("%s: %d passed, %d failed", name, tu_checks - tu_failures, tu_failures);
    if (tu_skipped_parts) printf(", %d parts skipped", tu_skipped_parts);
    putchar('\n');
    return tu_failures ? 1 : tu_skipped_parts ? 77 : 0;
}

/* Relative RMS error of got vs want; prints the first element off by more than tol
 * (absolute + relative) with label. Returns true when every element is within tol. */
static inline bool tu_close(const char *label, const float *got, const float *want, int64_t n, double atol,
                            double rtol) {
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(w) ? !isnan(g) : !(fabs(g - w) <= atol + rtol * fabs(w))) {
            fprintf(stderr, "%s: element %lld: got %.9g want %.9g (atol %g rtol %g)\n", label, (long long)i, g, w,
                    atol, rtol);
            return false;
        }
    }
    return true;
}

/* Normalized mean squared error: sum (a-b)^2 / sum b^2 */
static inline double tu_nmse(const float *got, const float *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

/* ../shared, or NULL. Tests that need it call tu_shared_or_skip. */
static inline const char *tu_shared(void) {
    const char *s = getenv("KILN_SHARED");
    struct stat st;
    if (s && stat(s, &st) == 0 && S_ISDIR(st.st_mode)) return s;
    if (stat("../shared", &st) == 0 && S_ISDIR(st.st_mode)) return "../shared";
    return NULL;
}

static inline const char *tu_shared_or_skip(const char *test) {
    const char *s = tu_shared();
    if (!s) {
        printf("SKIP %s: ../shared is absent (set KILN_SHARED)\n", test);
        exit(77);
    }
    return s;
}

/* Whole file into malloc'd memory (NUL-terminated); NULL if unreadable. */
static inline char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return NULL; }
    buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

/* Deterministic pseudo-random numbers for tests (xorshift64*). */
static inline uint64_t tu_rand_u64(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static inline float tu_rand_f(uint64_t *s) { /* uniform [-1, 1) */
    return (float)((tu_rand_u64(s) >> 40) * (2.0 / 16777216.0) - 1.0);
}

#ifdef KT_H
/* rows x ne0 floats as a tensor of type `type` stores them: F32 as they are, F16
 * rounded, anything else through kt's reference quantizer. (Tests that include
 * kt.h before this file.) */
static inline void tu_encode(enum kt_type type, const float *v, void *raw, int64_t rows, int64_t ne0) {
    if (type == KT_TYPE_F32)
        memcpy(raw, v, (size_t)(rows * ne0) * sizeof(float));
    else if (type == KT_TYPE_F16)
        for (int64_t i = 0; i < rows * ne0; i++) ((kt_fp16_t *)raw)[i] = kt_fp32_to_fp16(v[i]);
    else
        kt_quantize_chunk(type, v, raw, rows, ne0, NULL);
}
#endif

#ifdef KT_BACKEND_H
/* Random contents for t from seed, through its buffer: an I32 tensor named "ids<N>" gets
 * integers in [0, N), any other uniform [-1, 1) floats stored in t's type. special (may be
 * NULL) sees the floats and the generator first and returns true when it wrote raw itself. */
typedef bool (*tu_fill_fn)(const struct kt_tensor *t, const float *v, uint64_t *s, void *raw);
static inline void tu_fill(struct kt_tensor *t, uint64_t seed, tu_fill_fn special) {
    const int64_t n = kt_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) v[i] = tu_rand_f(&s);
    const size_t bytes = kt_nbytes(t);
    void *raw = malloc(bytes);
    long long bound;
    if (!special || !special(t, v, &s, raw)) {
        if (t->type == KT_TYPE_I32 && sscanf(t->name, "ids%lld", &bound) == 1)
            for (int64_t i = 0; i < n; i++) ((int32_t *)raw)[i] = (int32_t)(tu_rand_u64(&s) % (uint64_t)bound);
        else
            tu_encode(t->type, v, raw, kt_nrows(t), t->ne[0]);
    }
    kt_tensor_set(t, raw, 0, bytes);
    free(raw);
    free(v);
}
#endif

#endif
