/*
 * quant_mix.c - per-tensor type choice for a file type, with the same outcomes
 * as llama.cpp's quantizer (so that a kiln-quantized file has the tensor types
 * of a llama.cpp-quantized one): the output projection keeps more bits, and the
 * _S/_M/_L mixes give some attn_v and ffn_down layers more bits than the rest.
 */
#include "quant_mix.h"

#include <stdlib.h>
#include <string.h>

bool kiln_ftype_default_type(enum kiln_ftype ftype, enum kt_type *out) {
    enum kt_type t;
    switch (ftype) {
    case KILN_FTYPE_ALL_F32: t = KT_TYPE_F32; break;
    case KILN_FTYPE_MOSTLY_F16: t = KT_TYPE_F16; break;
    case KILN_FTYPE_MOSTLY_BF16: t = KT_TYPE_BF16; break;
    case KILN_FTYPE_MOSTLY_Q4_0: t = KT_TYPE_Q4_0; break;
    case KILN_FTYPE_MOSTLY_Q4_1: t = KT_TYPE_Q4_1; break;
    case KILN_FTYPE_MOSTLY_Q5_0: t = KT_TYPE_Q5_0; break;
    case KILN_FTYPE_MOSTLY_Q5_1: t = KT_TYPE_Q5_1; break;
    case KILN_FTYPE_MOSTLY_Q8_0: t = KT_TYPE_Q8_0; break;
    case KILN_FTYPE_MOSTLY_Q2_K: t = KT_TYPE_Q2_K; break;
    case KILN_FTYPE_MOSTLY_Q3_K_S:
    case KILN_FTYPE_MOSTLY_Q3_K_M:
    case KILN_FTYPE_MOSTLY_Q3_K_L: t = KT_TYPE_Q3_K; break;
    case KILN_FTYPE_MOSTLY_Q4_K_S:
    case KILN_FTYPE_MOSTLY_Q4_K_M: t = KT_TYPE_Q4_K; break;
    case KILN_FTYPE_MOSTLY_Q5_K_S:
    case KILN_FTYPE_MOSTLY_Q5_K_M: t = KT_TYPE_Q5_K; break;
    case KILN_FTYPE_MOSTLY_Q6_K: t = KT_TYPE_Q6_K; break;
    case KILN_FTYPE_MOSTLY_IQ4_NL: t = KT_TYPE_IQ4_NL; break;
    case KILN_FTYPE_MOSTLY_IQ4_XS: t = KT_TYPE_IQ4_XS; break;
    case KILN_FTYPE_MOSTLY_MXFP4_MOE: t = KT_TYPE_MXFP4; break;
    default: return false;
    }
    if (out) *out = t;
    return true;
}

/* ------------------------------------------------------------------ tensor roles */

enum role { R_OTHER, R_OUTPUT, R_TOKEN_EMBD, R_ATTN_V, R_ATTN_K, R_ATTN_Q, R_ATTN_OUT, R_FFN_UP, R_FFN_GATE, R_FFN_DOWN };

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* Broad role by name (any architecture's naming). The fused qkv and the kv_b
 * projection are treated as attn_v: in llama.cpp's chain the attn_v rule catches
 * them first, so that is their effective treatment. */
static enum role role_of(const char *name) {
    if (!strcmp(name, "output.weight")) return R_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return R_TOKEN_EMBD;
    if (has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight") || has(name, "attn_v.weight")) return R_ATTN_V;
    if (has(name, "attn_k.weight")) return R_ATTN_K;
    if (has(name, "attn_q.weight")) return R_ATTN_Q;
    if (has(name, "attn_output.weight")) return R_ATTN_OUT;
    if (has(name, "ffn_up")) return R_FFN_UP;
    if (has(name, "ffn_gate")) return R_FFN_GATE;
    if (has(name, "ffn_down")) return R_FFN_DOWN;
    return R_OTHER;
}

bool kiln_qmix_allows(const char *name, int n_dims) {
    /* Small or special tensors that quantizing would hurt for no gain in size. */
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
        "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
        "a.rvq.codebook", "mm.a.code_embd",
    };
    if (n_dims < 2) return false; /* norms, biases: always kept as they are */
    size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 6, "weight") != 0) return false;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return false;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (has(name, keep[i])) return false;
    return true;
}

/* ------------------------------------------------------------------ state */

void kiln_qmix_init(struct kiln_qmix *m, enum kiln_ftype ftype, bool pure, const char *arch, int64_t n_layer,
                    int64_t n_head, int64_t n_head_kv, int64_t n_expert, const char *const *names, int64_t n_names) {
    memset(m, 0, sizeof *m);
    m->ftype = ftype;
    if (!kiln_ftype_default_type(ftype, &m->default_type)) m->default_type = KT_TYPE_F16;
    m->pure = pure;
    m->falcon = arch && !strcmp(arch, "falcon");
    m->is_70b = arch && !strcmp(arch, "llama") && n_layer == 80 && n_head != n_head_kv;
    m->tied = true;
    for (int64_t i = 0; i < n_names; i++) {
        enum role r = role_of(names[i]);
        if (r == R_OUTPUT) m->tied = false;
        if (r == R_ATTN_V) m->n_attn_v++;
    }
    m->n_layer = n_layer;
    m->n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 0;
    m->n_expert = n_expert;
}

/* Layers that get more bits in the _M mixes: the first and last eighth, and every third between. */
static bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The layer a counted tensor belongs to: the count itself, except in mixture-of-experts
 * models whose expert tensors are not in layer order (then the name says). */
static int64_t layer_of(const struct kiln_qmix *m, const char *name, int64_t counter) {
    if (m->n_expert > 1 && !strncmp(name, "blk.", 4)) return strtoll(name + 4, NULL, 10);
    return counter;
}

/* The output projection (and a tied token embedding) keeps more bits. */
static enum kt_type output_type(const struct kiln_qmix *m, enum kt_type t, int64_t ncols) {
    if (m->falcon || ncols % kt_blck_size(t) != 0) return KT_TYPE_Q8_0;
    return t == KT_TYPE_Q8_0 ? t : KT_TYPE_Q6_K;
}

static enum kt_type attn_v_type(struct kiln_qmix *m, enum kt_type t) {
    const enum kiln_ftype f = m->ftype;
    if (f == KILN_FTYPE_MOSTLY_Q2_K) t = m->n_gqa >= 4 ? KT_TYPE_Q4_K : KT_TYPE_Q3_K;
    else if ((f == KILN_FTYPE_MOSTLY_IQ4_NL || f == KILN_FTYPE_MOSTLY_IQ4_XS) && m->n_gqa >= 4) t = KT_TYPE_Q5_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_M) t = m->i_attn_v < 2 ? KT_TYPE_Q5_K : KT_TYPE_Q4_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_L) t = KT_TYPE_Q5_K;
    else if ((f == KILN_FTYPE_MOSTLY_Q4_K_M || f == KILN_FTYPE_MOSTLY_Q5_K_M) && more_bits(m->i_attn_v, m->n_attn_v))
        t = KT_TYPE_Q6_K;
    else if (f == KILN_FTYPE_MOSTLY_Q4_K_S && m->i_attn_v < 4) t = KT_TYPE_Q5_K;
    /* 70B shares each attn_v among 8 heads: it is small, so more bits cost little */
    if (m->is_70b && (t == KT_TYPE_Q3_K || t == KT_TYPE_Q4_K)) t = KT_TYPE_Q5_K;
    if (m->n_expert == 8) t = KT_TYPE_Q8_0;
    m->i_attn_v++;
    return t;
}

static enum kt_type ffn_down_type(struct kiln_qmix *m, enum kt_type t, const char *name) {
    const enum kiln_ftype f = m->ftype;
    const int64_t i = layer_of(m, name, m->i_ffn_down), n = m->n_layer;
    if (f == KILN_FTYPE_MOSTLY_Q2_K) t = KT_TYPE_Q3_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_M)
        t = i < n / 16 ? KT_TYPE_Q5_K : (!m->falcon || more_bits(i, n)) ? KT_TYPE_Q4_K : KT_TYPE_Q3_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_L) t = m->falcon ? KT_TYPE_Q4_K : KT_TYPE_Q5_K;
    else if (f == KILN_FTYPE_MOSTLY_Q4_K_M) {
        if (m->falcon) t = i < n / 16 ? KT_TYPE_Q6_K : more_bits(i, n) ? KT_TYPE_Q5_K : KT_TYPE_Q4_K;
        else if (more_bits(i, n)) t = KT_TYPE_Q6_K;
    } else if (i < n / 8 && (f == KILN_FTYPE_MOSTLY_IQ4_NL || f == KILN_FTYPE_MOSTLY_IQ4_XS)) t = KT_TYPE_Q5_K;
    else if (f == KILN_FTYPE_MOSTLY_Q5_K_M && more_bits(i, n)) t = KT_TYPE_Q6_K;
    else if (f == KILN_FTYPE_MOSTLY_Q4_K_S && !m->falcon && i < n / 8) t = KT_TYPE_Q5_K;
    m->i_ffn_down++;
    return t;
}

static enum kt_type attn_out_type(const struct kiln_qmix *m, enum kt_type t) {
    const enum kiln_ftype f = m->ftype;
    if (m->falcon) return f == KILN_FTYPE_MOSTLY_Q3_K_L ? KT_TYPE_Q4_K : t;
    if (m->n_expert == 8) {
        if (f == KILN_FTYPE_MOSTLY_Q2_K || f == KILN_FTYPE_MOSTLY_Q3_K_S || f == KILN_FTYPE_MOSTLY_Q3_K_M ||
            f == KILN_FTYPE_MOSTLY_IQ4_NL || f == KILN_FTYPE_MOSTLY_Q4_K_S || f == KILN_FTYPE_MOSTLY_Q4_K_M ||
            f == KILN_FTYPE_MOSTLY_IQ4_XS)
            t = KT_TYPE_Q5_K;
        return t;
    }
    if (f == KILN_FTYPE_MOSTLY_Q2_K) t = KT_TYPE_Q3_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_M) t = KT_TYPE_Q4_K;
    else if (f == KILN_FTYPE_MOSTLY_Q3_K_L) t = KT_TYPE_Q5_K;
    return t;
}

/* Rows that are not whole blocks of t: a type of 32-element blocks with about as many
 * bits, or F16 when even that does not fit. */
static enum kt_type fallback(struct kiln_qmix *m, enum kt_type t, int64_t ncols) {
    if (ncols % kt_blck_size(t) == 0) return t;
    m->n_fallback++;
    switch (t) {
    case KT_TYPE_Q2_K:
    case KT_TYPE_Q3_K: t = KT_TYPE_Q4_0; break;
    case KT_TYPE_Q4_K: t = KT_TYPE_Q5_0; break;
    case KT_TYPE_Q5_K: t = KT_TYPE_Q5_1; break;
    case KT_TYPE_Q6_K: t = KT_TYPE_Q8_0; break;
    case KT_TYPE_IQ4_XS: t = KT_TYPE_IQ4_NL; break;
    default: break;
    }
    return ncols % kt_blck_size(t) == 0 ? t : KT_TYPE_F16;
}

enum kt_type kiln_qmix_type(struct kiln_qmix *m, const char *name, int n_dims, const int64_t *ne, enum kt_type cur) {
    if (!kiln_qmix_allows(name, n_dims)) return cur;
    enum kt_type t = m->default_type;
    if (!kt_is_quantized(t)) return t;
    if (!m->pure && m->ftype == KILN_FTYPE_MOSTLY_MXFP4_MOE) {
        /* MXFP4 is for expert stacks (one matrix per expert: a third dimension); every
         * other matrix, the output projection included, keeps 8 bits */
        const enum role r = role_of(name);
        t = r != R_OUTPUT && !(r == R_TOKEN_EMBD && m->tied) && n_dims >= 3 && ne[2] > 1 ? KT_TYPE_MXFP4
                                                                                           : KT_TYPE_Q8_0;
    } else if (!m->pure) {
        switch (role_of(name)) {
        case R_OUTPUT: t = output_type(m, t, ne[0]); break;
        case R_TOKEN_EMBD:
            if (m->tied) t = output_type(m, t, ne[0]);
            break;
        case R_ATTN_V: t = attn_v_type(m, t); break;
        case R_ATTN_K:
            if (m->n_expert == 8) t = KT_TYPE_Q8_0;
            break;
        case R_FFN_DOWN: t = ffn_down_type(m, t, name); break;
        case R_ATTN_OUT: t = attn_out_type(m, t); break;
        case R_FFN_GATE: m->i_ffn_gate++; break;
        case R_FFN_UP: m->i_ffn_up++; break;
        default: break;
        }
    }
    return fallback(m, t, ne[0]);
}

/* ------------------------------------------------------------------ order */

static long block_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long b = strtol(name + 4, &end, 10);
    return end != name + 4 ? b : -1; /* as sscanf("blk.%d.") counts it: the number is enough */
}

int kiln_qmix_order(const char *a, const char *b) {
    long la = block_of(a), lb = block_of(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}
