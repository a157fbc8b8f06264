/*
 * test_quant_peer.c - types whose ggml bytes are not in ../shared/reference/quant
 * (MXFP4), held to ggml live: rows of awkward values (block maxima just below and
 * at powers of two, values half-way between levels, subnormal and huge blocks,
 * zeros, a constant, one outlier) quantized by `peer quantfix` (llama.cpp's
 * ggml_quantize_chunk and to_float) and by kt: the blocks byte for byte, the
 * dequantized floats bit for bit, kt's dequantizer of ggml's bytes too. Skips (77)
 * when the peer is absent.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"
#include "testutil.h"

enum { NPR = 256, ROWS = 24, N = NPR * ROWS };

/* Row r of the input: each row stresses one thing, every block of it alike. */
static void fill(float *x, uint64_t *s) {
    for (int r = 0; r < ROWS; r++) {
        float *row = x + r * NPR;
        for (int j = 0; j < NPR; j++) {
            const float u = tu_rand_f(s); /* [-1, 1) */
            float v;
            switch (r % 12) {
            case 0: v = u; break;
            case 1: v = u * 1e-3f; break;
            case 2: v = ldexpf(u, -130); break;                   /* subnormal blocks */
            case 3: v = ldexpf(u, -125); break;                   /* maxima around 2^-126: the exponent wraps */
            case 4: v = ldexpf(u, 120); break;                    /* huge */
            case 5: v = (j % 32 == 0) ? 2.0f : 0.25f * (float)(j % 13) - 1.5f; break; /* exact levels, ties */
            case 6: v = (j % 32 == 0) ? 1.9999999f : u; break;    /* max just below a power of two */
            case 7: v = (j % 32 == 0) ? -4.0f : 0.75f * u; break; /* negative max at a power of two */
            case 8: v = 0.0f; break;
            case 9: v = 0.3f; break;
            case 10: v = (j == 7) ? 1000.0f : u * 0.01f; break;  /* an outlier */
            default: v = (float)(j % 32) * 0.0625f - 1.0f; break; /* a ramp through every gap */
            }
            row[j] = v;
        }
    }
}

static int run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void check_type(const char *peer, const char *dir, enum kt_type t, const float *x) {
    char in[600], prefix[600], cmd[2000], path[700];
    snprintf(in, sizeof in, "%s/in.f32", dir);
    snprintf(prefix, sizeof prefix, "%s/%s", dir, kt_type_name(t));
    FILE *f = fopen(in, "wb");
    CHECK(f && fwrite(x, sizeof(float), N, f) == N);
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' quantfix '%s' %d %d '%s' >/dev/null 2>&1", peer, in, NPR, (int)t, prefix);
    CHECKF(run(cmd) == 0, "%s", cmd);

    const size_t bytes = (size_t)ROWS * kt_row_size(t, NPR);
    size_t len = 0, dlen = 0;
    snprintf(path, sizeof path, "%s.q", prefix);
    unsigned char *ref_q = (unsigned char *)tu_read_file(path, &len);
    snprintf(path, sizeof path, "%s.deq.f32", prefix);
    float *ref_deq = (float *)tu_read_file(path, &dlen);
    CHECKF(ref_q && len == bytes, "%s: ggml wrote %zu bytes, want %zu", kt_type_name(t), len, bytes);
    CHECKF(ref_deq && dlen == N * sizeof(float), "%s: ggml's dequantized floats", kt_type_name(t));
    if (!ref_q || len != bytes || !ref_deq || dlen != N * sizeof(float)) {
        free(ref_q), free(ref_deq);
        return;
    }
    unsigned char *q = malloc(bytes);
    float *deq = malloc(N * sizeof(float));
    CHECK(kt_quantize_chunk(t, x, q, ROWS, NPR, NULL) == bytes);
    const size_t bs = kt_type_size(t);
    int bad = 0;
    for (size_t b = 0; b < bytes / bs; b++)
        if (memcmp(q + b * bs, ref_q + b * bs, bs) != 0 && bad++ < 3)
            fprintf(stderr, "%s block %zu (row %zu) differs from ggml's: scale byte %u vs %u\n", kt_type_name(t), b,
                    b * bs / kt_row_size(t, NPR), q[b * bs], ref_q[b * bs]);
    CHECKF(bad == 0, "%s: %d blocks differ from ggml's", kt_type_name(t), bad);
    /* kt's dequantizer on ggml's bytes: bit for bit */
    kt_get_type_traits(t)->to_float(ref_q, deq, N);
    int first = -1;
    for (int i = 0; i < N && first < 0; i++)
        if (memcmp(&deq[i], &ref_deq[i], sizeof(float)) != 0) first = i;
    CHECKF(first < 0, "%s dequantized differs at %d: %.9g vs %.9g", kt_type_name(t), first, first >= 0 ? deq[first] : 0,
           first >= 0 ? ref_deq[first] : 0);
    printf("  %-6s %zu blocks identical to ggml's, dequantized bit for bit\n", kt_type_name(t), bytes / bs - (size_t)bad);
    free(q), free(deq), free(ref_q), free(ref_deq);
}

int main(void) {
    const char *peer = getenv("KILN_PEER");
    if (!peer) peer = "/tmp/kiln-peer/peer";
    if (access(peer, X_OK) != 0) {
        printf("SKIP test_quant_peer: llama.cpp's peer driver %s is absent (../shared/peer/build.sh builds it;\n"
               "  set KILN_PEER), so ggml's MXFP4 bytes cannot be made.\n",
               peer);
        return 77;
    }
    char dir[] = "/tmp/kiln-test-quant-peer-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    float *x = malloc(N * sizeof(float));
    uint64_t s = 77;
    fill(x, &s);
    check_type(peer, dir, KT_TYPE_MXFP4, x);
    free(x);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (run(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_quant_peer");
}
