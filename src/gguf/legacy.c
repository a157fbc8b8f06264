/*
 * legacy.c - llama.cpp's weight files before GGUF (GGML 'lmgg', GGMF v1 'fmgg', GGJT
 * v1-v3 'tjgg'), read with reader.c's rules (every count, length and size checked
 * against the bytes left, failures named with their offset) and described as a llama
 * GGUF: tensor names mapped to GGUF's, hyper-parameters and SPM tokenizer metadata
 * synthesized, tensor data left where it is in the legacy file's bytes.
 */
#include "gguf_impl.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEGACY_ALIGN 32        /* GGJT pads each tensor's data to 32 bytes in the file */
#define LEGACY_MAX_LAYERS 4096 /* far beyond any llama; bounds the layer number in names */

enum legacy_kind { LEGACY_GGML, LEGACY_GGMF, LEGACY_GGJT };

/* The header's seven u32, in file order. */
enum { HP_VOCAB, HP_EMBD, HP_MULT, HP_HEAD, HP_LAYER, HP_ROT, HP_FTYPE, HP_COUNT };
static const char *const hp_names[HP_COUNT] = {"n_vocab", "n_embd", "n_mult", "n_head",
                                               "n_layer", "n_rot",  "ftype"};

/* llama.cpp's legacy file types (LLAMA_FTYPE_*); the gaps (5, 6) were removed formats. */
static const char *ftype_name(uint32_t f) {
    static const char *const names[] = {
        "ALL_F32",     "MOSTLY_F16",    "MOSTLY_Q4_0",   "MOSTLY_Q4_1",   "MOSTLY_Q4_1_SOME_F16",
        NULL,          NULL,            "MOSTLY_Q8_0",   "MOSTLY_Q5_0",   "MOSTLY_Q5_1",
        "MOSTLY_Q2_K", "MOSTLY_Q3_K_S", "MOSTLY_Q3_K_M", "MOSTLY_Q3_K_L", "MOSTLY_Q4_K_S",
        "MOSTLY_Q4_K_M", "MOSTLY_Q5_K_S", "MOSTLY_Q5_K_M", "MOSTLY_Q6_K",
    };
    return f < sizeof names / sizeof names[0] ? names[f] : NULL;
}

struct ltensor {
    char name[KT_MAX_NAME]; /* the GGUF name */
    size_t at;              /* where its header starts in the file (for messages) */
    enum kt_type type;
    int n_dims;
    int64_t ne[KT_MAX_DIMS];
    const uint8_t *data;
    size_t size;
};

struct legacy {
    enum legacy_kind kind;
    uint32_t version;
    uint32_t hp[HP_COUNT];
    size_t hp_at; /* offset of n_vocab */
    const uint8_t **tok;
    uint32_t *tok_len;
    float *score;
    struct ltensor *t;
    size_t n_t, cap_t;
    struct gguf_index index; /* GGUF name -> tensor */
    char fmt[16];
};

static struct gguf_str ltensor_name_of(const void *ctx, int64_t i) {
    const struct ltensor *t = &((const struct ltensor *)ctx)[i];
    return (struct gguf_str){t->name, strlen(t->name)};
}

static void legacy_free(struct legacy *L) {
    free(L->tok);
    free(L->tok_len);
    free(L->score);
    free(L->t);
    gguf_index_free(&L->index);
}

bool gguf_legacy_magic(const void *data, size_t size) {
    return size >= 4 && (!memcmp(data, "lmgg", 4) || !memcmp(data, "fmgg", 4) || !memcmp(data, "tjgg", 4));
}

static bool parse_magic(struct legacy *L, struct gguf_cursor *c) {
    if (!gguf_cur_need(c, 4, "magic")) return false;
    const char *m = (const char *)c->base;
    L->kind = !memcmp(m, "lmgg", 4) ? LEGACY_GGML : !memcmp(m, "fmgg", 4) ? LEGACY_GGMF : LEGACY_GGJT;
    c->pos = 4;
    if (L->kind == LEGACY_GGML) {
        snprintf(L->fmt, sizeof L->fmt, "GGML");
        return true;
    }
    if (!gguf_cur_u32(c, &L->version, "version")) return false;
    const char *kind = L->kind == LEGACY_GGMF ? "GGMF" : "GGJT";
    uint32_t max = L->kind == LEGACY_GGMF ? 1 : 3;
    if (L->version < 1 || L->version > max)
        return gguf_cur_fail(c, 4, "unsupported %s version %u (versions 1 to %u are read)", kind, L->version, max);
    snprintf(L->fmt, sizeof L->fmt, "%s v%u", kind, L->version);
    return true;
}

/* Quantized block layouts changed twice before GGJT v3 (Q4/Q8 in v2, again in v3);
 * bytes in the old layouts would read as garbage, so such files are refused. */
static const char *old_layout(const struct legacy *L, enum kt_type t) {
    if (L->kind != LEGACY_GGJT || L->version < 2)
        return t == KT_TYPE_F32 || t == KT_TYPE_F16
                   ? NULL
                   : "quantization block layouts changed in GGJT v2 and v3: only F32/F16 files this old can be "
                     "converted";
    if (L->version == 2 && (t == KT_TYPE_Q4_0 || t == KT_TYPE_Q4_1 || t == KT_TYPE_Q8_0 || t == KT_TYPE_Q8_1))
        return "the Q4 and Q8 block layouts changed in GGJT v3";
    return NULL;
}

static bool parse_hparams(struct legacy *L, struct gguf_cursor *c) {
    L->hp_at = c->pos;
    for (int i = 0; i < HP_COUNT; i++)
        if (!gguf_cur_u32(c, &L->hp[i], hp_names[i])) return false;
    const uint32_t *hp = L->hp;
#define AT(i) (L->hp_at + 4 * (size_t)(i))
    if (hp[HP_VOCAB] < 3)
        return gguf_cur_fail(c, AT(HP_VOCAB), "n_vocab %u is too small (a llama vocabulary starts <unk> <s> </s>)",
                             hp[HP_VOCAB]);
    size_t min_tok = L->kind == LEGACY_GGML ? 4 : 8; /* length (+ score) */
    if (hp[HP_VOCAB] > gguf_cur_left(c) / min_tok)
        return gguf_cur_fail(c, AT(HP_VOCAB), "n_vocab %u is more than the %zu bytes left can hold", hp[HP_VOCAB],
                             gguf_cur_left(c));
    if (hp[HP_EMBD] == 0 || hp[HP_EMBD] > (1u << 20))
        return gguf_cur_fail(c, AT(HP_EMBD), "n_embd %u is out of range (1..%u)", hp[HP_EMBD], 1u << 20);
    if (hp[HP_MULT] == 0 || hp[HP_MULT] > (1u << 20))
        return gguf_cur_fail(c, AT(HP_MULT), "n_mult %u is out of range (1..%u)", hp[HP_MULT], 1u << 20);
    if (hp[HP_HEAD] == 0 || hp[HP_EMBD] % hp[HP_HEAD] != 0)
        return gguf_cur_fail(c, AT(HP_HEAD), "n_head %u does not divide n_embd %u", hp[HP_HEAD], hp[HP_EMBD]);
    if (hp[HP_LAYER] == 0 || hp[HP_LAYER] > LEGACY_MAX_LAYERS)
        return gguf_cur_fail(c, AT(HP_LAYER), "n_layer %u is out of range (1..%d)", hp[HP_LAYER], LEGACY_MAX_LAYERS);
    uint32_t head_dim = hp[HP_EMBD] / hp[HP_HEAD];
    if (hp[HP_ROT] < 2 || hp[HP_ROT] > head_dim || hp[HP_ROT] % 2)
        return gguf_cur_fail(c, AT(HP_ROT), "n_rot %u is not an even number in 2..%u (the head size)", hp[HP_ROT],
                             head_dim);
    const char *fname = ftype_name(hp[HP_FTYPE]);
    if (!fname) return gguf_cur_fail(c, AT(HP_FTYPE), "unknown ftype %u", hp[HP_FTYPE]);
    if (hp[HP_FTYPE] > 1) {
        /* the ftype names the file's main type: refuse old layouts before reading on */
        enum kt_type main_t = hp[HP_FTYPE] == 3 || hp[HP_FTYPE] == 4 ? KT_TYPE_Q4_1
                              : hp[HP_FTYPE] == 7                    ? KT_TYPE_Q8_0
                              : hp[HP_FTYPE] == 2                    ? KT_TYPE_Q4_0
                                                                     : KT_TYPE_Q5_0;
        const char *why = old_layout(L, main_t);
        if (why)
            return gguf_cur_fail(c, AT(HP_FTYPE), "%s file of ftype %s cannot be converted: %s", L->fmt, fname, why);
    }
#undef AT
    return true;
}

static bool parse_vocab(struct legacy *L, struct gguf_cursor *c) {
    uint32_t n = L->hp[HP_VOCAB]; /* bounded by the bytes left (parse_hparams) */
    L->tok = malloc(n * sizeof *L->tok);
    L->tok_len = malloc(n * sizeof *L->tok_len);
    L->score = calloc(n, sizeof *L->score);
    if (!L->tok || !L->tok_len || !L->score) return gguf_cur_fail(c, c->pos, "out of memory for %u tokens", n);
    for (uint32_t i = 0; i < n; i++) {
        size_t at = c->pos;
        if (!gguf_cur_u32(c, &L->tok_len[i], "token length")) return false;
        if (L->tok_len[i] > gguf_cur_left(c))
            return gguf_cur_fail(c, at, "token %u: length %u exceeds the %zu bytes left", i, L->tok_len[i],
                                 gguf_cur_left(c));
        L->tok[i] = c->base + c->pos;
        c->pos += L->tok_len[i];
        if (L->kind == LEGACY_GGML) continue; /* the first format had no scores */
        size_t score_at = c->pos;
        uint32_t bits;
        if (!gguf_cur_u32(c, &bits, "token score")) return false;
        memcpy(&L->score[i], &bits, 4);
        if (!isfinite(L->score[i])) return gguf_cur_fail(c, score_at, "token %u: score is not finite", i);
    }
    return true;
}

/* Legacy llama tensor name -> GGUF name (false: not a llama tensor). */
static bool map_name(const char *in, uint32_t n_layer, char *out, size_t outlen) {
    static const char *const top[][2] = {
        {"tok_embeddings", "token_embd"}, {"norm", "output_norm"}, {"output", "output"}};
    static const char *const layer[][2] = {
        {"attention.wq", "attn_q"},       {"attention.wk", "attn_k"},       {"attention.wv", "attn_v"},
        {"attention.wo", "attn_output"},  {"attention_norm", "attn_norm"},  {"feed_forward.w1", "ffn_gate"},
        {"feed_forward.w2", "ffn_down"},  {"feed_forward.w3", "ffn_up"},    {"ffn_norm", "ffn_norm"}};
    const char *dot = strrchr(in, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0)) return false;
    size_t stem = (size_t)(dot - in);
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strlen(top[i][0]) == stem && !memcmp(in, top[i][0], stem))
            return snprintf(out, outlen, "%s%s", top[i][1], dot) < (int)outlen;
    if (strncmp(in, "layers.", 7) != 0) return false;
    const char *p = in + 7;
    uint32_t il = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) il = il * 10 + (uint32_t)(*p - '0');
    if (digits == 0 || (digits > 1 && p[-digits] == '0') || *p != '.' || il >= n_layer) return false;
    p++;
    stem = (size_t)(dot - p);
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (strlen(layer[i][0]) == stem && !memcmp(p, layer[i][0], stem))
            return snprintf(out, outlen, "blk.%u.%s%s", il, layer[i][1], dot) < (int)outlen;
    return false;
}

/* One tensor: n_dims, name length, type, dims (u32, ne[0] first), name, padding (GGJT), data. */
static bool parse_tensor(struct legacy *L, struct gguf_cursor *c, struct ltensor *t) {
    size_t at = t->at = c->pos;
    uint32_t n_dims, name_len, type;
    if (!gguf_cur_u32(c, &n_dims, "tensor n_dims") || !gguf_cur_u32(c, &name_len, "tensor name length") ||
        !gguf_cur_u32(c, &type, "tensor type"))
        return false;
    size_t tensor_no = L->n_t;
    if (n_dims < 1 || n_dims > KT_MAX_DIMS)
        return gguf_cur_fail(c, at, "tensor %zu has n_dims %u (must be 1..%d)", tensor_no, n_dims, KT_MAX_DIMS);
    if (name_len == 0 || name_len >= KT_MAX_NAME)
        return gguf_cur_fail(c, at + 4, "tensor %zu: name length %u (must be 1..%d)", tensor_no, name_len,
                             KT_MAX_NAME - 1);
    if (type >= KT_TYPE_COUNT || !kt_type_is_valid((int)type))
        return gguf_cur_fail(c, at + 8, "tensor %zu has unknown type id %u", tensor_no, type);
    t->type = (enum kt_type)type;
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int j = 0; j < KT_MAX_DIMS; j++) {
        t->ne[j] = 1;
        if (j >= t->n_dims) continue;
        size_t ne_at = c->pos;
        uint32_t v;
        if (!gguf_cur_u32(c, &v, "tensor dimension")) return false;
        if (v == 0) return gguf_cur_fail(c, ne_at, "tensor %zu: dimension %d is 0", tensor_no, j);
        t->ne[j] = v;
        if (nel > ((int64_t)1 << 53) / v) /* four u32 factors could overflow int64 */
            return gguf_cur_fail(c, ne_at, "tensor %zu: element count is absurd (over 2^53)", tensor_no);
        nel *= v;
    }
    size_t name_at = c->pos;
    if (!gguf_cur_need(c, name_len, "tensor name")) return false;
    char raw[KT_MAX_NAME], shown[80];
    memcpy(raw, c->base + c->pos, name_len);
    raw[name_len] = 0;
    c->pos += name_len;
    gguf_printable((struct gguf_str){raw, name_len}, shown, sizeof shown);
    if (strlen(raw) != name_len || !map_name(raw, L->hp[HP_LAYER], t->name, sizeof t->name))
        return gguf_cur_fail(c, name_at, "tensor '%s' is not a llama tensor (no GGUF name for it)", shown);
    const char *why = old_layout(L, t->type);
    if (why)
        return gguf_cur_fail(c, at + 8, "tensor '%s' is %s in a %s file and cannot be converted: %s", shown,
                             kt_type_name(t->type), L->fmt, why);
    int64_t blck = kt_blck_size(t->type);
    if (blck <= 0 || t->ne[0] % blck != 0)
        return gguf_cur_fail(c, at + 12, "tensor '%s': row length %lld is not a multiple of %s's block size %lld",
                             shown, (long long)t->ne[0], kt_type_name(t->type), (long long)blck);
    /* bounded above: nel <= 2^53 elements, at most a few bytes each */
    uint64_t bytes = (uint64_t)(nel / blck) * kt_type_size(t->type);
    if (L->kind == LEGACY_GGJT) {
        size_t pad = (LEGACY_ALIGN - c->pos % LEGACY_ALIGN) % LEGACY_ALIGN;
        if (!gguf_cur_need(c, pad, "padding before tensor data")) return false;
        c->pos += pad;
    }
    if (bytes > gguf_cur_left(c))
        return gguf_cur_fail(c, c->pos, "truncated: tensor '%s' data needs %llu bytes but only %zu remain", shown,
                             (unsigned long long)bytes, gguf_cur_left(c));
    t->data = c->base + c->pos;
    t->size = (size_t)bytes;
    c->pos += t->size;
    return true;
}

static bool parse_tensors(struct legacy *L, struct gguf_cursor *c) {
    while (gguf_cur_left(c) > 0) {
        if (L->n_t == L->cap_t) {
            size_t ncap = L->cap_t ? L->cap_t * 2 : 64;
            void *p = realloc(L->t, ncap * sizeof *L->t);
            if (!p) return gguf_cur_fail(c, c->pos, "out of memory for tensor %zu", L->n_t);
            L->t = p;
            L->cap_t = ncap;
        }
        if (!parse_tensor(L, c, &L->t[L->n_t])) return false;
        L->n_t++;
    }
    int64_t dup = -1;
    if (!gguf_index_build(&L->index, (int64_t)L->n_t, ltensor_name_of, L->t, &dup)) return gguf_cur_fail(c, c->pos, "out of memory for the tensor index");
    if (dup >= 0)
        return gguf_cur_fail(c, L->t[dup].at, "duplicate tensor '%s'", L->t[dup].name);
    return true;
}

static const struct ltensor *find(const struct legacy *L, const char *name) {
    int64_t i = gguf_index_find(&L->index, name, strlen(name), ltensor_name_of, L->t);
    return i >= 0 ? &L->t[i] : NULL;
}

/* The legacy format has no tensor count: a file cut between two tensors reads as a
 * shorter file. A llama has every one of these, so their absence is the truncation. */
static bool complete(const struct legacy *L, struct gguf_cursor *c) {
    static const char *const top[] = {"token_embd.weight", "output_norm.weight", "output.weight"};
    static const char *const per_layer[] = {"attn_q", "attn_k", "attn_v", "attn_output", "attn_norm",
                                            "ffn_gate", "ffn_down", "ffn_up", "ffn_norm"};
    char name[KT_MAX_NAME];
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!find(L, top[i]))
            return gguf_cur_fail(c, c->size, "tensor '%s' is missing (truncated file?)", top[i]);
    for (uint32_t il = 0; il < L->hp[HP_LAYER]; il++)
        for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++) {
            snprintf(name, sizeof name, "blk.%u.%s.weight", il, per_layer[i]);
            if (!find(L, name))
                return gguf_cur_fail(c, c->size, "tensor '%s' is missing (truncated file?)", name);
        }
    return true;
}

/* What the header cannot say, from the options and the tensors' shapes. */
static bool derive(const struct legacy *L, const struct gguf_legacy_opts *o, uint32_t *n_head_kv, uint32_t *n_ff,
                   struct gguf_cursor *c) {
    char *err = c->err;
    size_t errlen = c->errlen;
    const uint32_t n_embd = L->hp[HP_EMBD], n_head = L->hp[HP_HEAD], head_dim = n_embd / n_head;
    const int64_t gqa = o ? o->gqa : 0;
    if (gqa < 0 || (gqa > 0 && n_head % gqa != 0)) {
        gguf_fmt(err, errlen, "GQA factor %lld does not divide the %u heads", (long long)gqa, n_head);
        return false;
    }
    *n_head_kv = gqa > 0 ? n_head / (uint32_t)gqa : n_head;
    const struct ltensor *wk = find(L, "blk.0.attn_k.weight");
    if (wk) {
        int64_t rows = wk->ne[1];
        if (rows % head_dim != 0 || n_head % (rows / head_dim) != 0)
            return gguf_cur_fail(c, wk->at, "layers.0.attention.wk.weight has %lld rows: not a whole number of KV "
                                            "heads of %u dividing the %u heads", (long long)rows, head_dim, n_head);
        uint32_t from_shape = (uint32_t)(rows / head_dim);
        if (gqa > 0 && from_shape != *n_head_kv) {
            gguf_fmt(err, errlen, "GQA factor %lld means %u KV heads, but layers.0.attention.wk.weight has %lld rows "
                                  "(%u KV heads, GQA factor %u)", (long long)gqa, *n_head_kv, (long long)rows,
                     from_shape, n_head / from_shape);
            return false;
        }
        *n_head_kv = from_shape;
    }
    /* the legacy loader's rule: 2/3 of 4*n_embd, rounded up to a multiple of n_mult */
    const uint64_t m = L->hp[HP_MULT];
    uint64_t ff = ((2 * (4 * (uint64_t)n_embd) / 3 + m - 1) / m) * m;
    /* files whose n_mult could not express n_ff (llama 2 70B) carry it in the shape,
     * which llama.cpp's converter trusts */
    const struct ltensor *w1 = find(L, "blk.0.ffn_gate.weight");
    if (w1 && w1->n_dims == 2) ff = (uint64_t)w1->ne[1];
    *n_ff = (uint32_t)ff; /* n_embd and n_mult are at most 2^20, a dimension a u32 */
    return true;
}

/* SPM token types as GGUF numbers them */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6 };

static bool is_byte_piece(const uint8_t *p, uint32_t n) {
    return n == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && strchr("0123456789ABCDEFabcdef", p[3]) && p[3] &&
           strchr("0123456789ABCDEFabcdef", p[4]) && p[4];
}

/* Tokens as GGUF's SPM vocabulary has them: <unk> <s> </s> named, byte tokens as <0xXX>
 * (older files stored the raw byte), spaces as U+2581 (older files stored ' '). */
static bool add_vocab(struct gguf_writer *w, const struct legacy *L) {
    const uint32_t n = L->hp[HP_VOCAB];
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += (size_t)L->tok_len[i] * 3 + 8;
    char *arena = malloc(total);
    struct gguf_str *strs = malloc(n * sizeof *strs);
    int32_t *types = malloc(n * sizeof *types);
    bool ok = arena && strs && types;
    char *q = arena;
    for (uint32_t i = 0; ok && i < n; i++) {
        const uint8_t *p = L->tok[i];
        uint32_t len = L->tok_len[i];
        strs[i].ptr = q;
        if (i <= 2) {
            const char *fixed = i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>";
            q += sprintf(q, "%s", fixed);
            types[i] = i == 0 ? TOK_UNKNOWN : TOK_CONTROL;
        } else if (len == 0) {
            types[i] = TOK_CONTROL;
        } else if ((i <= 258 && len == 1) || is_byte_piece(p, len)) {
            q += len == 1 ? sprintf(q, "<0x%02X>", p[0]) : (memcpy(q, p, 6), 6);
            types[i] = TOK_BYTE;
        } else {
            for (uint32_t k = 0; k < len; k++) {
                if (p[k] == ' ')
                    memcpy(q, "\xe2\x96\x81", 3), q += 3;
                else
                    *q++ = (char)p[k];
            }
            types[i] = TOK_NORMAL;
        }
        strs[i].len = (uint64_t)(q - strs[i].ptr);
    }
    ok = ok && gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") &&
         gguf_writer_set_str(w, "tokenizer.ggml.pre", "default") &&
         gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, n) &&
         gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, L->score, n) &&
         gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) &&
         gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    free(arena);
    free(strs);
    free(types);
    return ok;
}

static bool describe(struct gguf_writer *w, const struct legacy *L, const struct gguf_legacy_opts *o,
                     const char *default_name, uint32_t n_head_kv, uint32_t n_ff) {
    const uint32_t *hp = L->hp;
    char desc[96];
    snprintf(desc, sizeof desc, "converted from legacy %s (ftype %s)", L->fmt, ftype_name(hp[HP_FTYPE]));
    double eps = o && o->eps > 0 ? o->eps : GGUF_LEGACY_DEFAULT_EPS;
    int64_t n_ctx = o && o->n_ctx > 0 ? o->n_ctx : GGUF_LEGACY_DEFAULT_CTX;
    bool ok = gguf_writer_set_str(w, "general.architecture", "llama") &&
              gguf_writer_set_str(w, "general.name", o && o->name ? o->name : default_name) &&
              gguf_writer_set_str(w, "general.description", desc) &&
              gguf_writer_set_u32(w, "general.file_type", hp[HP_FTYPE]) &&
              gguf_writer_set_u32(w, "llama.context_length", (uint32_t)(n_ctx > UINT32_MAX ? UINT32_MAX : n_ctx)) &&
              gguf_writer_set_u32(w, "llama.embedding_length", hp[HP_EMBD]) &&
              gguf_writer_set_u32(w, "llama.block_count", hp[HP_LAYER]) &&
              gguf_writer_set_u32(w, "llama.feed_forward_length", n_ff) &&
              gguf_writer_set_u32(w, "llama.rope.dimension_count", hp[HP_ROT]) &&
              gguf_writer_set_u32(w, "llama.attention.head_count", hp[HP_HEAD]) &&
              gguf_writer_set_u32(w, "llama.attention.head_count_kv", n_head_kv) &&
              gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", (float)eps);
    /* GGJT v3's quantized blocks are GGUF's quantization version 2 */
    if (ok && hp[HP_FTYPE] > 1) ok = gguf_writer_set_u32(w, "general.quantization_version", 2);
    ok = ok && add_vocab(w, L);
    for (size_t i = 0; ok && i < L->n_t; i++) {
        const struct ltensor *t = &L->t[i];
        ok = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    return ok;
}

/* GGJT pads every tensor's data to 32 bytes so that it can be mapped and computed on
 * in place; GGML and GGMF files do not (llama.cpp read them into memory). Their
 * tensors go to one aligned copy, which then stands for the file's bytes. */
static bool aligned_copy(struct legacy *L, struct gguf_file *g, const uint8_t **base, size_t *size) {
    size_t total = 0;
    bool aligned = true;
    for (size_t i = 0; i < L->n_t; i++) {
        aligned = aligned && (size_t)(L->t[i].data - *base) % LEGACY_ALIGN == 0;
        total += (L->t[i].size + LEGACY_ALIGN - 1) / LEGACY_ALIGN * LEGACY_ALIGN; /* <= file size + 32 per tensor */
    }
    if (aligned) return true;
    void *copy = NULL;
    if (posix_memalign(&copy, LEGACY_ALIGN, total ? total : LEGACY_ALIGN) != 0) return false;
    size_t off = 0;
    for (size_t i = 0; i < L->n_t; i++) {
        memcpy((uint8_t *)copy + off, L->t[i].data, L->t[i].size);
        L->t[i].data = (uint8_t *)copy + off;
        off += (L->t[i].size + LEGACY_ALIGN - 1) / LEGACY_ALIGN * LEGACY_ALIGN;
    }
    g->data_copy = copy;
    *base = copy;
    *size = total;
    return true;
}

struct gguf_file *gguf_legacy_parse(const uint8_t *data, size_t size, const struct gguf_legacy_opts *o,
                                    const char *default_name, char *err, size_t errlen) {
    struct legacy L = {0};
    struct gguf_cursor c = {.base = data, .size = size, .pos = 0, .err = err, .errlen = errlen};
    struct gguf_file *g = NULL;
    struct gguf_writer *w = NULL;
    uint8_t *meta = NULL;
    uint32_t n_head_kv = 0, n_ff = 0;
    if (!parse_magic(&L, &c) || !parse_hparams(&L, &c) || !parse_vocab(&L, &c) || !parse_tensors(&L, &c) || !complete(&L, &c) ||
        !derive(&L, o, &n_head_kv, &n_ff, &c))
        goto done;
    w = gguf_writer_new();
    size_t meta_size = 0;
    if (!w || !describe(w, &L, o, default_name, n_head_kv, n_ff) || !(meta = gguf_writer_header_bytes(w, &meta_size))) {
        gguf_fmt(err, errlen, "%s: %s", L.fmt, w ? gguf_writer_error(w) : "out of memory");
        goto done;
    }
    char perr[GGUF_ERRLEN];
    g = gguf_parse(meta, meta_size, true, perr, sizeof perr);
    if (!g || (size_t)g->n_tensors != L.n_t) { /* our own header: only memory can fail here */
        gguf_fmt(err, errlen, "%s: the synthesized GGUF header does not read back: %s", L.fmt, g ? "?" : perr);
        gguf_close(g);
        g = NULL;
        goto done;
    }
    /* the tensors' bytes stay in the legacy file (offsets count from its start), unless
     * they are not aligned for computing on in place */
    if (!aligned_copy(&L, g, &data, &size)) {
        gguf_fmt(err, errlen, "%s: out of memory for an aligned copy of the tensor data", L.fmt);
        gguf_close(g);
        g = NULL;
        goto done;
    }
    for (size_t i = 0; i < L.n_t; i++) {
        g->tensors[i].data = L.t[i].data;
        g->tensors[i].offset = (uint64_t)(L.t[i].data - data);
    }
    g->base = data;
    g->size = size;
    g->data_offset = 0;
    g->meta = meta;
    meta = NULL;
    snprintf(g->legacy, sizeof g->legacy, "%s", L.fmt);
done:
    free(meta);
    gguf_writer_free(w);
    legacy_free(&L);
    return g;
}

const char *gguf_legacy_probe(const char *path) {
    uint8_t b[8];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the probe */
    if (fd < 0) return NULL;
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    if (n < 4 || !gguf_legacy_magic(b, (size_t)n)) return NULL;
    if (!memcmp(b, "lmgg", 4)) return "GGML";
    uint32_t v = n == 8 ? gguf_le32(b + 4) : 0;
    if (!memcmp(b, "fmgg", 4)) return v == 1 ? "GGMF v1" : "GGMF";
    static const char *const ggjt[] = {"GGJT", "GGJT v1", "GGJT v2", "GGJT v3"};
    return ggjt[v <= 3 ? v : 0];
}
