/*
 * Makes sampling_llama_cpp.txt (read by tests/test_sampling.c): random logits
 * through llama.cpp's own samplers (llama_sampler_apply). A line
 *   logits n logit...
 * sets the input of the case lines after it:
 *   stage a b c d nhist hist... m id... logit...   (the candidate list after the stage)
 * floats as C99 hex (%a). Stages: top_k(a) top_p(a, b=min_keep) min_p(a, b)
 * typical(a, b) temp(a) penalties(last_n, repeat, freq, present) and
 * chain = penalties(64, a, b, c) top_k(d) typical(0.9) top_p(0.9) min_p(0.05) temp(0.7);
 * the penalties see the nhist tokens accepted first.
 * Logits are distinct (llama.cpp leaves the order of ties open) and p values are
 * moved away from cumulative sums they would nearly equal (float vs double sums).
 * Build as chat_llama_cpp_gen.c says; ./gen > sampling_llama_cpp.txt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static uint64_t rs = 2024;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }

static int n;
static float logits[6000];
static llama_token_data data[6000];

static void make_logits(int count, float spread) {
    n = count;
    int *perm = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) { int j = (int)(rnd() % (uint64_t)(i + 1)); int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    /* distinct values; a few far above the rest, like a model's */
    for (int i = 0; i < n; i++) logits[i] = (float)perm[i] * (spread / (float)n) + (perm[i] >= n - n / 50 - 1 ? spread : 0.0f) - spread / 2;
    free(perm);
}

/* closest distance of p to a cumulative sum of the softmax in the given order (double) */
static double margin_cum(const int *order, int m, double p) {
    double mx = -INFINITY, sum = 0, cum = 0, best = 1;
    for (int i = 0; i < n; i++) mx = fmax(mx, logits[i]);
    for (int i = 0; i < n; i++) sum += exp(logits[i] - mx);
    for (int i = 0; i < m; i++) { cum += exp(logits[order[i]] - mx) / sum; best = fmin(best, fabs(cum - p)); }
    return best;
}

static int cmp_desc(const void *a, const void *b) { float x = logits[*(const int *)a], y = logits[*(const int *)b]; return x < y ? 1 : x > y ? -1 : 0; }

static void emit(const char *stage, double a, double b, double c, double d, const int *hist, int nhist, struct llama_sampler *s) {
    for (int i = 0; i < nhist; i++) llama_sampler_accept(s, hist[i]);
    for (int i = 0; i < n; i++) data[i] = (llama_token_data){i, logits[i], 0.0f};
    llama_token_data_array arr = {data, (size_t)n, -1, false};
    llama_sampler_apply(s, &arr);
    printf("%s %a %a %a %a %d", stage, a, b, c, d, nhist);
    for (int i = 0; i < nhist; i++) printf(" %d", hist[i]);
    printf(" %zu", arr.size);
    for (size_t i = 0; i < arr.size; i++) printf(" %d", arr.data[i].id);
    for (size_t i = 0; i < arr.size; i++) printf(" %a", (double)arr.data[i].logit);
    printf("\n");
    llama_sampler_free(s);
}

static struct llama_sampler *chain1(struct llama_sampler *x) {
    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, x);
    return c;
}

int main(void) {
    static const int sizes[] = {8, 100, 1200, 2000};
    static const float spreads[] = {4.0f, 10.0f, 30.0f, 20.0f};
    int *order = malloc(sizeof(int) * 6000);
    for (int si = 0; si < 4; si++) {
        make_logits(sizes[si], spreads[si]);
        printf("logits %d", n);
        for (int i = 0; i < n; i++) printf(" %a", (double)logits[i]);
        printf("\n");
        for (int i = 0; i < n; i++) order[i] = i;
        qsort(order, (size_t)n, sizeof *order, cmp_desc);
        static const int ks[] = {1, 3, 40, 10000};
        for (int k = 0; k < 4; k++) emit("top_k", ks[k], 0, 0, 0, NULL, 0, chain1(llama_sampler_init_top_k(ks[k])));
        static const float ps[] = {0.05f, 0.5f, 0.9f, 0.95f, 0.999f};
        for (int k = 0; k < 5; k++)
            for (int mk = 0; mk <= 5; mk += 5) {
                float p = ps[k];
                while (margin_cum(order, n, p) < 1e-4) p += 3e-4f;
                emit("top_p", p, mk, 0, 0, NULL, 0, chain1(llama_sampler_init_top_p(p, (size_t)mk)));
            }
        static const float mps[] = {0.01f, 0.05f, 0.3f, 0.9f};
        for (int k = 0; k < 4; k++)
            for (int mk = 0; mk <= 5; mk += 5) {
                float p = mps[k];
                double thr = logits[order[0]] + log(p);
                for (int i = 0; i < n; i++)
                    while (fabs(logits[i] - (logits[order[0]] + log(p))) < 1e-4) p *= 1.001f;
                (void)thr;
                emit("min_p", p, mk, 0, 0, NULL, 0, chain1(llama_sampler_init_min_p(p, (size_t)mk)));
            }
        static const float tps[] = {0.2f, 0.5f, 0.9f};
        for (int k = 0; k < 3; k++)
            for (int mk = 0; mk <= 5; mk += 5)
                emit("typical", tps[k], mk, 0, 0, NULL, 0, chain1(llama_sampler_init_typical(tps[k], (size_t)mk)));
        static const float ts[] = {0.0f, 0.3f, 1.0f, 1.7f};
        if (n <= 100)
            for (int k = 0; k < 4; k++) emit("temp", ts[k], 0, 0, 0, NULL, 0, chain1(llama_sampler_init_temp(ts[k])));
        int hist[100];
        for (int i = 0; i < 100; i++) hist[i] = i % 3 ? order[(int)(rnd() % 10)] : (int)(rnd() % (uint64_t)n);
        if (n <= 100) {
        emit("penalties", 16, 1.3, 0, 0, hist, 100, chain1(llama_sampler_init_penalties(n, 16, 1.3f, 0.0f, 0.0f)));
        emit("penalties", 64, 1.0, 0.4, 0.7, hist, 100, chain1(llama_sampler_init_penalties(n, 64, 1.0f, 0.4f, 0.7f)));
        emit("penalties", 64, 0.8, -0.2, 0.1, hist, 100, chain1(llama_sampler_init_penalties(n, 64, 0.8f, -0.2f, 0.1f)));
        emit("penalties", 0, 1.5, 0.5, 0.5, hist, 100, chain1(llama_sampler_init_penalties(n, 0, 1.5f, 0.5f, 0.5f)));
        }
        struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(c, llama_sampler_init_penalties(n, 64, 1.1f, 0.1f, 0.2f));
        llama_sampler_chain_add(c, llama_sampler_init_top_k(40));
        llama_sampler_chain_add(c, llama_sampler_init_typical(0.9f, 0));
        llama_sampler_chain_add(c, llama_sampler_init_top_p(0.9f, 0));
        llama_sampler_chain_add(c, llama_sampler_init_min_p(0.05f, 0));
        llama_sampler_chain_add(c, llama_sampler_init_temp(0.7f));
        emit("chain", 1.1, 0.1, 0.2, 40, hist, 100, c);
    }
    free(order);
    return 0;
}
