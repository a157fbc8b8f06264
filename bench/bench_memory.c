/*
 * bench_memory.c - peak resident memory of a 16-token forward pass over a
 * 1.1B-parameter Q4_0 model (TinyLlama shapes), against the file's size.
 * Weights stay in the read-only mapping of the GGUF file (bound zero-copy);
 * activations live in one compute buffer planned by the scheduler's graph
 * allocator. Target: peak RSS <= 1.10 x file size + 32 MiB.
 *
 *   bench_memory [model.gguf]     (default /tmp/kiln-bench-tinyllama-q4_0.gguf;
 *                                   written first if absent, by a child process)
 *
 * The graph is llama's without a KV cache: get_rows, rms_norm, q/k/v
 * projections, rope, causal softmax attention (grouped-query), output
 * projection, silu-gated FFN, residual adds, final norm and logits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "kt-alloc.h"
#include "kt-cpu.h"

enum { N_LAYER = 22, N_EMBD = 2048, N_HEAD = 32, N_HEAD_KV = 4, HEAD_DIM = 64, N_FF = 5632, N_VOCAB = 32000 };
enum { N_TOK = 16 };

static const char *DEFAULT_PATH = "/tmp/kiln-bench-tinyllama-q4_0.gguf";

struct wdesc {
    char name[64];
    enum kt_type type;
    int n_dims;
    int64_t ne[2];
};

/* Every weight of the model, in file order. */
static int weight_list(struct wdesc *w) {
    int n = 0;
#define W(t, d0, d1, ...)                                                              \
    do {                                                                               \
        snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__);                            \
        w[n].type = (t);                                                               \
        w[n].n_dims = (d1) > 1 ? 2 : 1;                                                \
        w[n].ne[0] = (d0);                                                             \
        w[n].ne[1] = (d1);                                                             \
        n++;                                                                           \
    } while (0)
    W(KT_TYPE_Q4_0, N_EMBD, N_VOCAB, "token_embd.weight");
    for (int l = 0; l < N_LAYER; l++) {
        W(KT_TYPE_F32, N_EMBD, 1, "blk.%d.attn_norm.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_EMBD, "blk.%d.attn_q.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_HEAD_KV * HEAD_DIM, "blk.%d.attn_k.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_HEAD_KV * HEAD_DIM, "blk.%d.attn_v.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_EMBD, "blk.%d.attn_output.weight", l);
        W(KT_TYPE_F32, N_EMBD, 1, "blk.%d.ffn_norm.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_FF, "blk.%d.ffn_gate.weight", l);
        W(KT_TYPE_Q4_0, N_EMBD, N_FF, "blk.%d.ffn_up.weight", l);
        W(KT_TYPE_Q4_0, N_FF, N_EMBD, "blk.%d.ffn_down.weight", l);
    }
    W(KT_TYPE_F32, N_EMBD, 1, "output_norm.weight");
    W(KT_TYPE_Q4_0, N_EMBD, N_VOCAB, "output.weight");
#undef W
    return n;
}

/* Write the model file: random Q4_0 blocks with small scales (so activations stay finite), norms of
 * ones. Every Q4_0 tensor references the same random bytes: the writer keeps pointers until write. */
static int write_model(const char *path) {
    static struct wdesc w[8 + 9 * N_LAYER];
    int n = weight_list(w);
    size_t max_q = kt_row_size(KT_TYPE_Q4_0, N_EMBD) * N_VOCAB;
    uint8_t *q = malloc(max_q);
    float *ones = malloc(N_EMBD * sizeof(float));
    if (!q || !ones) return 1;
    uint64_t s = 0x1234567;
    const size_t bs = kt_type_size(KT_TYPE_Q4_0);
    for (size_t i = 0; i < max_q; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        q[i] = (uint8_t)s;
    }
    for (size_t b = 0; b < max_q / bs; b++) {
        kt_fp16_t d = kt_fp32_to_fp16(0.002f + (float)(b % 7) * 0.0005f);
        memcpy(q + b * bs, &d, sizeof d);
    }
    for (int i = 0; i < N_EMBD; i++) ones[i] = 1.0f;

    struct gguf_writer *gw = gguf_writer_new();
    bool ok = gw && gguf_writer_set_str(gw, "general.architecture", "llama") &&
              gguf_writer_set_str(gw, "general.name", "kiln bench_memory (TinyLlama shapes, random Q4_0)") &&
              gguf_writer_set_u32(gw, "llama.block_count", N_LAYER) &&
              gguf_writer_set_u32(gw, "llama.embedding_length", N_EMBD) &&
              gguf_writer_set_u32(gw, "llama.feed_forward_length", N_FF) &&
              gguf_writer_set_u32(gw, "llama.attention.head_count", N_HEAD) &&
              gguf_writer_set_u32(gw, "llama.attention.head_count_kv", N_HEAD_KV) &&
              gguf_writer_set_u32(gw, "general.file_type", 2);
    for (int i = 0; i < n && ok; i++)
        ok = gguf_writer_add_tensor(gw, w[i].name, w[i].type, w[i].n_dims, w[i].ne,
                                    w[i].type == KT_TYPE_F32 ? (const void *)ones : q);
    ok = ok && gguf_writer_write(gw, path);
    if (!ok) fprintf(stderr, "bench_memory: writing %s: %s\n", path, gw ? gguf_writer_error(gw) : "out of memory");
    gguf_writer_free(gw);
    free(q);
    free(ones);
    return ok ? 0 : 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the forward graph */

struct model {
    struct kt_tensor *tok_embd, *out_norm, *output;
    struct {
        struct kt_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *gate, *up, *down;
    } l[N_LAYER];
};

static struct kt_tensor *bind(struct kt_context *wctx, const struct gguf_file *g, struct kt_buffer *map,
                              const char *name) {
    int64_t i = gguf_find_tensor(g, name);
    if (i < 0) {
        fprintf(stderr, "bench_memory: %s is not in the file\n", name);
        return NULL;
    }
    const struct gguf_tensor_info *ti = gguf_tensor(g, i);
    struct kt_tensor *t = kt_new_tensor(wctx, ti->type, ti->n_dims, ti->ne);
    if (!t || !kt_buffer_bind_tensor(map, t, (void *)ti->data)) {
        fprintf(stderr, "bench_memory: %s: %s\n", name, kt_last_error());
        return NULL;
    }
    kt_set_name(t, name);
    return t;
}

static struct kt_tensor *norm(struct kt_context *c, struct kt_tensor *x, struct kt_tensor *w) {
    return kt_mul(c, kt_rms_norm(c, x, 1e-5f), w);
}

static struct kt_tensor *forward(struct kt_context *c, const struct model *m, struct kt_tensor *tokens,
                                 struct kt_tensor *pos, struct kt_tensor *mask) {
    struct kt_rope_params rp = {.n_dims = HEAD_DIM, .mode = KT_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    struct kt_tensor *x = kt_get_rows(c, m->tok_embd, tokens);
    for (int il = 0; il < N_LAYER; il++) {
        struct kt_tensor *h = norm(c, x, m->l[il].attn_norm);
        struct kt_tensor *q = kt_rope(c, kt_reshape_3d(c, kt_mul_mat(c, m->l[il].wq, h), HEAD_DIM, N_HEAD, N_TOK), pos, rp);
        struct kt_tensor *k = kt_rope(c, kt_reshape_3d(c, kt_mul_mat(c, m->l[il].wk, h), HEAD_DIM, N_HEAD_KV, N_TOK), pos, rp);
        struct kt_tensor *v = kt_reshape_3d(c, kt_mul_mat(c, m->l[il].wv, h), HEAD_DIM, N_HEAD_KV, N_TOK);
        /* scores [kv tok, q tok, head]; heads share kv heads by broadcast */
        struct kt_tensor *kq = kt_mul_mat(c, kt_permute(c, k, 0, 2, 1, 3), kt_permute(c, q, 0, 2, 1, 3));
        kq = kt_soft_max_ext(c, kq, mask, 1.0f / sqrtf((float)HEAD_DIM), 0.0f);
        struct kt_tensor *vt = kt_cont(c, kt_transpose(c, kt_permute(c, v, 0, 2, 1, 3))); /* [tok, dim, kv head] */
        struct kt_tensor *o = kt_cont(c, kt_permute(c, kt_mul_mat(c, vt, kq), 0, 2, 1, 3));
        x = kt_add(c, x, kt_mul_mat(c, m->l[il].wo, kt_reshape_2d(c, o, N_EMBD, N_TOK)));
        h = norm(c, x, m->l[il].ffn_norm);
        struct kt_tensor *ff = kt_mul(c, kt_silu(c, kt_mul_mat(c, m->l[il].gate, h)), kt_mul_mat(c, m->l[il].up, h));
        x = kt_add(c, x, kt_mul_mat(c, m->l[il].down, ff));
    }
    return kt_mul_mat(c, m->output, norm(c, x, m->out_norm));
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : DEFAULT_PATH;
    struct stat st;
    if (stat(path, &st) != 0) {
        /* written by a child so that its buffers never count in our peak */
        double t0 = now_s();
        pid_t pid = fork();
        if (pid == 0) _exit(write_model(path));
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_memory: could not write %s\n", path);
            return 1;
        }
        printf("wrote %s in %.1f s\n", path, now_s() - t0);
    }

    char err[256];
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    if (!g) {
        fprintf(stderr, "bench_memory: %s\n", err);
        return 1;
    }
    size_t file_size = gguf_size(g);
    struct kt_buffer *map = kt_buffer_from_host_ptr((void *)gguf_base(g), file_size);

    struct kt_context *wctx =
        kt_init((struct kt_init_params){.mem_size = 512 * kt_tensor_overhead(), .no_alloc = true});
    struct model m;
    char name[64];
    bool ok = map && wctx;
    ok = ok && (m.tok_embd = bind(wctx, g, map, "token_embd.weight")) && (m.out_norm = bind(wctx, g, map, "output_norm.weight")) &&
         (m.output = bind(wctx, g, map, "output.weight"));
#define L(field, fmt)                                                   \
    (snprintf(name, sizeof name, fmt, il), (m.l[il].field = bind(wctx, g, map, name)) != NULL)
    for (int il = 0; il < N_LAYER && ok; il++)
        ok = L(attn_norm, "blk.%d.attn_norm.weight") && L(wq, "blk.%d.attn_q.weight") && L(wk, "blk.%d.attn_k.weight") &&
             L(wv, "blk.%d.attn_v.weight") && L(wo, "blk.%d.attn_output.weight") &&
             L(ffn_norm, "blk.%d.ffn_norm.weight") && L(gate, "blk.%d.ffn_gate.weight") &&
             L(up, "blk.%d.ffn_up.weight") && L(down, "blk.%d.ffn_down.weight");
#undef L
    if (!ok) return 1;

    /* the graph: metadata only; the scheduler gives activations their memory */
    const int graph_size = 4096;
    size_t meta = 4096 * kt_tensor_overhead() + kt_graph_overhead_custom(graph_size);
    struct kt_context *ctx = kt_init((struct kt_init_params){.mem_size = meta, .no_alloc = true});
    struct kt_tensor *tokens = kt_new_tensor_1d(ctx, KT_TYPE_I32, N_TOK);
    struct kt_tensor *pos = kt_new_tensor_1d(ctx, KT_TYPE_I32, N_TOK);
    struct kt_tensor *mask = kt_new_tensor_2d(ctx, KT_TYPE_F32, N_TOK, N_TOK);
    kt_set_input(tokens);
    kt_set_input(pos);
    kt_set_input(mask);
    struct kt_tensor *logits = forward(ctx, &m, tokens, pos, mask);
    kt_set_output(logits);
    struct kt_cgraph *gf = kt_new_graph_custom(ctx, graph_size);
    if (!logits || !kt_build_forward_expand(gf, logits)) {
        fprintf(stderr, "bench_memory: graph: %s\n", kt_last_error());
        return 1;
    }

    struct kt_backend *cpu = kt_backend_cpu_init();
    struct kt_sched *sched = cpu ? kt_sched_new(&cpu, 1, graph_size) : NULL;
    if (!sched || !kt_sched_alloc_graph(sched, gf)) {
        fprintf(stderr, "bench_memory: %s\n", kt_last_error());
        return 1;
    }
    int32_t ids[N_TOK], ps[N_TOK];
    float mk[N_TOK * N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        ids[i] = (int32_t)((i * 7919 + 13) % N_VOCAB);
        ps[i] = i;
        for (int j = 0; j < N_TOK; j++) mk[i * N_TOK + j] = j <= i ? 0.0f : -INFINITY;
    }
    kt_tensor_set(tokens, ids, 0, sizeof ids);
    kt_tensor_set(pos, ps, 0, sizeof ps);
    kt_tensor_set(mask, mk, 0, sizeof mk);

    double t0 = now_s();
    enum kt_status status = kt_sched_graph_compute(sched, gf);
    double dt = now_s() - t0;
    if (status != KT_STATUS_SUCCESS) {
        fprintf(stderr, "bench_memory: compute: %s\n", kt_last_error());
        return 1;
    }
    float first[4];
    kt_tensor_get(logits, first, 0, sizeof first);
    bool finite = true;
    for (int i = 0; i < 4; i++) finite &= isfinite(first[i]);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss * 1024.0, fs = (double)file_size, mib = 1024.0 * 1024.0;
    double target = 1.10 * fs + 32 * mib;
    printf("model      %s: %zu bytes (%.1f MiB), %d weights bound zero-copy\n", path, file_size, fs / mib,
           2 + 9 * N_LAYER + 1);
    printf("graph      %d nodes, %d tokens, compute buffer %.2f MiB, %.2f s on %d thread(s), logits finite: %s\n",
           gf->n_nodes, N_TOK, (double)kt_sched_get_buffer_size(sched, cpu) / mib, dt,
           (int)sysconf(_SC_NPROCESSORS_ONLN), finite ? "yes" : "NO");
    printf("peak RSS   %.1f MiB = %.3f x file size (target <= 1.10 x file + 32 MiB = %.1f MiB): %s\n", rss / mib,
           rss / fs, target / mib, rss <= target && finite ? "PASS" : "FAIL");

    kt_sched_free(sched);
    kt_backend_free(cpu);
    kt_free(ctx);
    kt_free(wctx);
    kt_buffer_free(map);
    gguf_close(g);
    return rss <= target && finite ? 0 : 1;
}
