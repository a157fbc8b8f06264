/*
 * pooling.c - embeddings out of a builder's last hidden states, in the graph: each
 * sequence's mean (a product with a [tokens, sequences] matrix of 1/length), its
 * first or last token's row, or (rank) its first token's row through the classifier
 * head; and the inputs that say which tokens belong to which sequence. Also the
 * normalizations llama-server applies (kiln_embd_normalize) and the pooling names.
 */
#include "runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"none", "mean", "cls", "last", "rank"};

const char *kiln_pooling_name(enum kiln_pooling p) {
    return p >= KILN_POOLING_NONE && p <= KILN_POOLING_RANK ? names[p] : "unspecified";
}

bool kiln_pooling_from_name(const char *name, enum kiln_pooling *out) {
    for (int i = 0; i <= KILN_POOLING_RANK; i++)
        if (!strcmp(name, names[i])) {
            *out = (enum kiln_pooling)i;
            return true;
        }
    return false;
}

struct kt_tensor *kiln_pool_build(const struct kiln_graph_in *in, struct kiln_pool_inputs *pi, struct kt_tensor *x,
                                  enum kiln_pooling pooling, int64_t n_seq) {
    struct kt_context *ctx = in->ctx;
    const struct kiln_model *m = in->model;
    *pi = (struct kiln_pool_inputs){.n_seq = n_seq};
    switch (pooling) {
    case KILN_POOLING_NONE: return x;
    case KILN_POOLING_MEAN:
        pi->mean = kt_set_name(kt_new_tensor_2d(ctx, KT_TYPE_F32, in->n_tokens, n_seq), "inp_mean");
        if (!pi->mean) return NULL;
        kt_set_input(pi->mean);
        /* [T, n_embd] x [T, n_seq] -> [n_embd, n_seq] */
        return kt_mul_mat(ctx, kt_cont(ctx, kt_transpose(ctx, x)), pi->mean);
    case KILN_POOLING_CLS:
    case KILN_POOLING_LAST:
    case KILN_POOLING_RANK: break;
    default: return NULL;
    }
    pi->rows = kt_set_name(kt_new_tensor_1d(ctx, KT_TYPE_I32, n_seq), "inp_cls");
    if (!pi->rows) return NULL;
    kt_set_input(pi->rows);
    struct kt_tensor *cur = kt_get_rows(ctx, x, pi->rows); /* [n_embd, n_seq] */
    if (pooling != KILN_POOLING_RANK) return cur;
    if (m->cls) { /* the pooler: dense and tanh (a soft-cap of 1 is tanh) */
        cur = kt_mul_mat(ctx, m->cls, cur);
        if (m->cls_b) cur = kt_add(ctx, cur, m->cls_b);
        cur = kt_softcap(ctx, cur, 1.0f);
    }
    if (m->cls_out) {
        cur = kt_mul_mat(ctx, m->cls_out, cur); /* [n_cls_out, n_seq] */
        if (m->cls_out_b) cur = kt_add(ctx, cur, m->cls_out_b);
    }
    return cur;
}

int32_t kiln_pool_seqs(const struct kiln_batch *b, int32_t n_seq_max, int32_t *seq_row) {
    for (int32_t s = 0; s < n_seq_max; s++) seq_row[s] = -1;
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_tokens; i++)
        if (seq_row[b->seq_id[i]] < 0) seq_row[b->seq_id[i]] = n++;
    return n;
}

bool kiln_pool_set_inputs(const struct kiln_pool_inputs *pi, const struct kiln_batch *b, enum kiln_pooling pooling,
                          const int32_t *seq_row) {
    const int64_t T = b->n_tokens, S = pi->n_seq;
    if (pi->mean) {
        float *w = calloc((size_t)(T * S), sizeof *w);
        int64_t *len = calloc((size_t)S, sizeof *len);
        bool ok = w && len;
        for (int64_t t = 0; ok && t < T; t++) len[seq_row[b->seq_id[t]]]++;
        for (int64_t t = 0; ok && t < T; t++) {
            const int64_t s = seq_row[b->seq_id[t]];
            w[s * T + t] = 1.0f / (float)len[s];
        }
        ok = ok && kt_tensor_set(pi->mean, w, 0, sizeof *w * (size_t)(T * S));
        free(w);
        free(len);
        if (!ok) return false;
    }
    if (pi->rows) {
        /* the token at the sequence's first position (cls, rank) or its last (last) */
        int32_t *rows = malloc(sizeof *rows * (size_t)S);
        if (!rows) return false;
        for (int64_t s = 0; s < S; s++) rows[s] = -1;
        for (int32_t t = 0; t < (int32_t)T; t++) {
            int32_t *r = &rows[seq_row[b->seq_id[t]]];
            const bool later = *r >= 0 && b->pos[t] > b->pos[*r];
            if (*r < 0 || (pooling == KILN_POOLING_LAST ? later : !later && b->pos[t] < b->pos[*r])) *r = t;
        }
        const bool ok = kt_tensor_set(pi->rows, rows, 0, sizeof *rows * (size_t)S);
        free(rows);
        if (!ok) return false;
    }
    return true;
}

void kiln_embd_normalize(const float *in, float *out, int64_t n, int norm) {
    double sum = 0.0;
    switch (norm) {
    case -1: sum = 1.0; break;
    case 0: /* the largest magnitude to 32760: int16's range */
        for (int64_t i = 0; i < n; i++) sum = fabs(in[i]) > sum ? fabs(in[i]) : sum;
        sum /= 32760.0;
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) sum += (double)in[i] * in[i];
        sum = sqrt(sum);
        break;
    default: /* p-norm; 1 is taxicab */
        for (int64_t i = 0; i < n; i++) sum += pow(fabs(in[i]), norm);
        sum = pow(sum, 1.0 / norm);
        break;
    }
    const float k = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * k;
}
