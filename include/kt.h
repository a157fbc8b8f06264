/*
 * kt.h - kiln's tensor library.
 *
 * kt builds compute graphs over tensors whose elements may be stored in
 * quantized block formats (the same type ids and block layouts as GGUF files,
 * so that weights mapped from a file are used as they are), and runs them on
 * the CPU with a persistent thread pool (kt-cpu.h) or through a backend
 * (kt-backend.h).
 *
 * Overview
 *   - A context (struct kt_context) is an arena: tensors, graphs and (unless
 *     no_alloc) tensor data are carved from it in order; kt_free() releases
 *     everything at once.
 *   - A tensor is plain data: type, ne[] (elements per dim, ne[0] innermost and
 *     contiguous within a row), nb[] (strides in bytes), the op that produces
 *     it and its sources. Views share their source's data with other strides.
 *   - Op constructors (kt_add, kt_mul_mat, ...) check shapes, compute the
 *     result shape and record the op; nothing is computed until a graph runs.
 *   - Errors are values: a function that fails returns NULL or false and
 *     kt_last_error() says why (per thread). A constructor given a NULL source
 *     returns NULL, so a builder can check once at the end.
 *
 * Example: f(x) = a*x^2 + b
 *
 *   struct kt_context *ctx = kt_init((struct kt_init_params){ .mem_size = 1 << 20 });
 *   struct kt_tensor *x = kt_new_tensor_1d(ctx, KT_TYPE_F32, 4);
 *   struct kt_tensor *a = kt_new_tensor_1d(ctx, KT_TYPE_F32, 1);
 *   struct kt_tensor *b = kt_new_tensor_1d(ctx, KT_TYPE_F32, 1);
 *   struct kt_tensor *f = kt_add(ctx, kt_mul(ctx, kt_sqr(ctx, x), a), b);
 *   struct kt_cgraph *gf = kt_new_graph(ctx);
 *   kt_build_forward_expand(gf, f);
 *   ... fill x, a, b (kt_set_f32_1d or ->data) ...
 *   kt_graph_compute_with_ctx(ctx, gf, 2);          // kt-cpu.h (the CPU backend)
 *   kt_free(ctx);
 */
#ifndef KT_H
#define KT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_MAX_DIMS 4
#define KT_MAX_SRC 6
#define KT_MAX_OP_PARAMS 64 /* bytes */
#define KT_MAX_NAME 64
#define KT_MEM_ALIGN 64
#define KT_DEFAULT_GRAPH_SIZE 2048

/* ------------------------------------------------------------------ types */

/* Type ids are GGUF's (they are on disk): never renumber, only append.
 * Gaps are ids GGUF retired. */
enum kt_type {
    KT_TYPE_F32 = 0,
    KT_TYPE_F16 = 1,
    KT_TYPE_Q4_0 = 2,
    KT_TYPE_Q4_1 = 3,
    /* 4, 5: retired Q4_2, Q4_3 */
    KT_TYPE_Q5_0 = 6,
    KT_TYPE_Q5_1 = 7,
    KT_TYPE_Q8_0 = 8,
    KT_TYPE_Q8_1 = 9,
    KT_TYPE_Q2_K = 10,
    KT_TYPE_Q3_K = 11,
    KT_TYPE_Q4_K = 12,
    KT_TYPE_Q5_K = 13,
    KT_TYPE_Q6_K = 14,
    KT_TYPE_Q8_K = 15,
    KT_TYPE_IQ2_XXS = 16,
    KT_TYPE_IQ2_XS = 17,
    KT_TYPE_IQ3_XXS = 18,
    KT_TYPE_IQ1_S = 19,
    KT_TYPE_IQ4_NL = 20,
    KT_TYPE_IQ3_S = 21,
    KT_TYPE_IQ2_S = 22,
    KT_TYPE_IQ4_XS = 23,
    KT_TYPE_I8 = 24,
    KT_TYPE_I16 = 25,
    KT_TYPE_I32 = 26,
    KT_TYPE_I64 = 27,
    KT_TYPE_F64 = 28,
    KT_TYPE_IQ1_M = 29,
    KT_TYPE_BF16 = 30,
    /* 31..33: retired repacked Q4_0 variants */
    KT_TYPE_TQ1_0 = 34,
    KT_TYPE_TQ2_0 = 35,
    /* 36..38: retired repacked IQ4_NL variants */
    KT_TYPE_MXFP4 = 39, /* OCP microscaling FP4: 32 E2M1 values, one E8M0 scale */
    KT_TYPE_COUNT = 40,
};

typedef uint16_t kt_fp16_t;
typedef uint16_t kt_bf16_t;

/* Row kernels. n is a number of elements (a multiple of the block size). */
typedef void (*kt_to_float_fn)(const void *restrict x, float *restrict y, int64_t n);
typedef void (*kt_from_float_fn)(const float *restrict x, void *restrict y, int64_t n);
/* *s = dot(x, y) over n elements; x is of the weight type, y of its vec_dot_type. */
typedef void (*kt_vec_dot_fn)(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);

/* One row per type: everything that varies by type lives here. A type whose
 * name is NULL is not known (a retired or unsupported id). Function pointers
 * are NULL where the operation does not exist for the type. */
struct kt_type_traits {
    const char *name;          /* "f32", "q4_0", "q6_K" ... as GGUF tools print them */
    int64_t blck_size;         /* elements per block */
    size_t type_size;          /* bytes per block */
    bool is_quantized;
    kt_to_float_fn to_float;   /* dequantize (bit-exact with the format) */
    kt_from_float_fn from_float_ref; /* reference scalar quantizer */
    kt_from_float_fn from_float;     /* fastest quantizer that gives the same bytes as _ref */
    kt_vec_dot_fn vec_dot;     /* reference dot product against vec_dot_type */
    enum kt_type vec_dot_type; /* the activation type the dot product pairs with */
};

/* Returns the row for type (never NULL: unknown ids get a row with name NULL). */
const struct kt_type_traits *kt_get_type_traits(enum kt_type type);
const char *kt_type_name(enum kt_type type); /* "?" for unknown */
bool kt_type_is_valid(int type);             /* known id with a block layout */
int64_t kt_blck_size(enum kt_type type);
size_t kt_type_size(enum kt_type type);
size_t kt_row_size(enum kt_type type, int64_t ne); /* bytes of ne elements; ne % blck_size == 0 */
bool kt_is_quantized(enum kt_type type);
/* type by name ("q4_0", "Q4_0", "f16" ...); returns false if unknown */
bool kt_type_from_name(const char *name, enum kt_type *out);

float kt_fp16_to_fp32(kt_fp16_t h);
kt_fp16_t kt_fp32_to_fp16(float f); /* round to nearest even */
float kt_bf16_to_fp32(kt_bf16_t h);
kt_bf16_t kt_fp32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* Quantize nrows rows of n_per_row floats with the reference quantizer; returns
 * bytes written. imatrix may be NULL (only types that use one read it). */
size_t kt_quantize_chunk(enum kt_type type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                         const float *imatrix);

/* ------------------------------------------------------------------ errors */

/* Message of the last failure on this thread ("" if none). */
const char *kt_last_error(void);
/* Set the message (printf style); library-internal but public for layers above. */
void kt_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void kt_clear_error(void);

/* What computing a graph came to, on any backend. */
enum kt_status {
    KT_STATUS_SUCCESS = 0,
    KT_STATUS_FAILED = 1, /* kt_last_error() says why */
    KT_STATUS_ABORTED = 2, /* the abort callback asked to stop */
    KT_STATUS_ALLOC_FAILED = 3,
};

/* Asked between the nodes of a computation (by the thread that runs it): return true
 * to stop it; the compute then returns KT_STATUS_ABORTED. */
typedef bool (*kt_abort_callback)(void *data);

/* ------------------------------------------------------------------ ops */

enum kt_op {
    KT_OP_NONE = 0,
    KT_OP_DUP,          /* copy src0 into a new contiguous tensor of the result's type */
    KT_OP_ADD,          /* src0 + src1, src1 broadcast (kt_can_repeat) */
    KT_OP_SUB,
    KT_OP_MUL,
    KT_OP_DIV,
    KT_OP_SCALE,        /* src0 * s + b; params: float s, float b */
    KT_OP_SQR,
    KT_OP_SQRT,
    KT_OP_SUM_ROWS,     /* [n0,n1,n2,n3] -> [1,n1,n2,n3] */
    KT_OP_MEAN,         /* same shape as SUM_ROWS */
    KT_OP_ARGMAX,       /* [n0,n1] -> I32 [n1] */
    KT_OP_NORM,         /* (x - mean) / sqrt(var + eps) per row; params: float eps */
    KT_OP_RMS_NORM,     /* x / sqrt(mean(x^2) + eps) per row; params: float eps */
    KT_OP_MUL_MAT,      /* src0 [K,M,a2,a3] (weights, any type) x src1 [K,N,b2,b3] F32 -> F32 [M,N,b2,b3];
                           b2 % a2 == 0 and b3 % a3 == 0 (src0 broadcast: grouped-query attention) */
    KT_OP_ROPE,         /* src0 [d,n_head,n_tok,1] F32, src1 I32 positions [n_tok], src2 optional F32
                           frequency divisors [n_dims/2] (Llama 3's rope_freqs); params: kt_rope_params */
    KT_OP_SOFT_MAX,     /* softmax(src0*scale + mask*slope) per row; src1 mask (F32/F16, optional)
                           [n0, >=n1] broadcast over dims 2,3; params: float scale, float max_bias */
    KT_OP_DIAG_MASK_INF,/* elements with col > n_past + row set to -inf; params: int32 n_past */
    KT_OP_SILU,
    KT_OP_GELU,         /* tanh approximation */
    KT_OP_RELU,
    KT_OP_SWIGLU,       /* silu(src0) * src1, same shapes */
    KT_OP_CPY,          /* src0 converted into src1 (any layout of the same element count); result views src1 */
    KT_OP_CONCAT,       /* src0 ++ src1 along dim; params: int32 dim */
    KT_OP_CONT,         /* contiguous copy of (possibly strided) src0, same type */
    KT_OP_GET_ROWS,     /* src0 [n0,rows,a2,a3] any type, src1 I32 [n,a2,a3] -> F32 [n0,n,a2,a3] */
    /* ---- mixtures of experts (MoE feed-forward, gpt-oss) */
    KT_OP_MUL_MAT_ID,   /* src0 [K,M,n_expert] (one weight matrix per expert, any type), src1 F32 [K,n_b,T],
                           src2 I32 ids [n_used,T] (n_used a multiple of n_b) -> F32 [M,n_used,T]: column (j, t)
                           is expert ids[j,t]'s matrix times src1's row (j % n_b, t); an id outside
                           [0, n_expert) gives zeros. Each element is one dot product as in MUL_MAT */
    KT_OP_TOP_K,        /* src0 F32 [n,rows...] -> I32 [k,rows...]: per row the indices of the k largest values,
                           largest first, equal values by lower index, NaN below everything; params: int32 k */
    KT_OP_SWIGLU_OAI,   /* gpt-oss's clamped SwiGLU: g = min(src0, limit), u = clamp(src1, -limit, limit),
                           out = g * sigmoid(alpha * g) * (u + 1), same shapes; params: float alpha, limit */
    /* ---- */
    KT_OP_ATTN,         /* fused attention: src0 q F32 [D,H,T], src1 k and src2 v [D,n_kv,Hkv] (rows of any
                           type with to_float), src3 mask F32 [n_kv, >=T] (optional), src4 order I32 [n_kv]
                           (optional) -> F32 [D,H,T]; per (token, head) softmax(q.k * scale + mask) . v
                           over the cells the mask leaves finite, visited in the order src4 lists them
                           (cell order without it; entries outside [0, n_kv) are skipped) and packed
                           first, so a sequence's result depends on its cells' order in that list and on
                           nothing else: not on which other cells lie between its own, nor, with an order
                           by position, on where its cells sit; params: float scale, float softcap (0: none,
                           else each score q.k * scale becomes softcap * tanh(q.k * scale / softcap)
                           before the mask is added); src5 sinks F32 [H] (optional): head h's softmax
                           also counts exp(sinks[h]) in its denominator (gpt-oss) */
    KT_OP_RESHAPE,      /* no-op views: no kernel */
    KT_OP_VIEW,
    KT_OP_PERMUTE,
    KT_OP_TRANSPOSE,
    /* soft-capping and gated GELU (Gemma) */
    KT_OP_GEGLU,        /* gelu(src0) * src1 (tanh form, as KT_OP_GELU), same shapes */
    KT_OP_SOFTCAP,      /* cap * tanh(src0 / cap); params: float cap (> 0) */
    KT_OP_COUNT,
};

const char *kt_op_name(enum kt_op op);

/* Tensor flags */
enum {
    KT_FLAG_INPUT = 1,  /* set by the caller before compute: allocators never reuse its memory early */
    KT_FLAG_OUTPUT = 2, /* read after compute: allocators never reuse its memory */
    KT_FLAG_PARAM = 4,  /* a weight */
};

struct kt_buffer; /* kt-backend.h */

struct kt_tensor {
    enum kt_type type;
    int64_t ne[KT_MAX_DIMS]; /* elements per dim */
    size_t nb[KT_MAX_DIMS];  /* bytes: nb[0] = type_size, nb[1] = row bytes, nb[i] = nb[i-1]*ne[i-1] if contiguous */

    enum kt_op op;
    int32_t op_params[KT_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;
    struct kt_tensor *src[KT_MAX_SRC];

    struct kt_tensor *view_src; /* the tensor whose data this views, or NULL */
    size_t view_offs;           /* byte offset into view_src's data */

    void *data;                 /* NULL until allocated (no_alloc) or bound */
    struct kt_buffer *buffer;   /* backend buffer holding data, or NULL (context memory / mapping) */
    void *extra;                /* backend-private */

    char name[KT_MAX_NAME];
};

struct kt_rope_params {
    int32_t n_dims;      /* rotate the first n_dims of each head (partial rotary) */
    int32_t mode;        /* KT_ROPE_NORMAL or KT_ROPE_NEOX */
    int32_t n_ctx_orig;  /* original training context (for scaled ropes; 0 if unused) */
    float freq_base;     /* theta base, 10000 for LLaMA */
    float freq_scale;    /* 1 / linear scaling factor */
    /* YaRN (gpt-oss): with ext_factor > 0, pair i's angle mixes the scaled (interpolated)
     * angle and the unscaled one, ext_factor * ramp(i) of the latter, the ramp 1 below the
     * pair that turns beta_fast times within n_ctx_orig and 0 above the one that turns
     * beta_slow times, and cos/sin grow by 1 + 0.1 ln(1 / freq_scale). attn_factor scales
     * cos and sin in any case (0 is read as 1). All zero: the plain rope above. */
    float ext_factor;
    float attn_factor;
    float beta_fast;
    float beta_slow;
};
enum { KT_ROPE_NORMAL = 0, KT_ROPE_NEOX = 2 };

/* ------------------------------------------------------------------ context */

struct kt_init_params {
    size_t mem_size;  /* bytes of the arena */
    void *mem_buffer; /* caller's memory (not freed by kt_free), or NULL to allocate */
    bool no_alloc;    /* tensors get metadata only; data comes from a buffer or a mapping */
};

struct kt_context;

struct kt_context *kt_init(struct kt_init_params params); /* NULL + kt_last_error on failure */
void kt_free(struct kt_context *ctx);
size_t kt_used_mem(const struct kt_context *ctx);
size_t kt_get_mem_size(const struct kt_context *ctx);
bool kt_get_no_alloc(const struct kt_context *ctx);
void kt_set_no_alloc(struct kt_context *ctx, bool no_alloc);
/* Arena bytes one tensor's metadata takes (add the data size unless no_alloc). */
size_t kt_tensor_overhead(void);
/* Arena bytes a graph of `size` nodes takes. */
size_t kt_graph_overhead_custom(size_t size);
size_t kt_graph_overhead(void);
/* Iterate over a context's tensors in creation order (NULL at the end). */
struct kt_tensor *kt_get_first_tensor(const struct kt_context *ctx);
struct kt_tensor *kt_get_next_tensor(const struct kt_context *ctx, const struct kt_tensor *t);
struct kt_tensor *kt_get_tensor(const struct kt_context *ctx, const char *name);
/* Carve `size` bytes aligned to KT_MEM_ALIGN from the arena (for work buffers). */
void *kt_alloc_bytes(struct kt_context *ctx, size_t size);

/* ------------------------------------------------------------------ tensors */

struct kt_tensor *kt_new_tensor(struct kt_context *ctx, enum kt_type type, int n_dims, const int64_t *ne);
struct kt_tensor *kt_new_tensor_1d(struct kt_context *ctx, enum kt_type type, int64_t ne0);
struct kt_tensor *kt_new_tensor_2d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1);
struct kt_tensor *kt_new_tensor_3d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2);
struct kt_tensor *kt_new_tensor_4d(struct kt_context *ctx, enum kt_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2, int64_t ne3);
struct kt_tensor *kt_dup_tensor(struct kt_context *ctx, const struct kt_tensor *src); /* same type/shape */

struct kt_tensor *kt_set_name(struct kt_tensor *t, const char *name);
struct kt_tensor *kt_format_name(struct kt_tensor *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *kt_get_name(const struct kt_tensor *t);
void kt_set_input(struct kt_tensor *t);
void kt_set_output(struct kt_tensor *t);
void kt_set_param(struct kt_tensor *t);

int64_t kt_nelements(const struct kt_tensor *t);
int64_t kt_nrows(const struct kt_tensor *t); /* ne1*ne2*ne3 */
size_t kt_nbytes(const struct kt_tensor *t); /* bytes spanned, honouring strides */
int kt_n_dims(const struct kt_tensor *t);    /* 1 + index of the last dim > 1 */
bool kt_is_contiguous(const struct kt_tensor *t);
bool kt_is_contiguous_rows(const struct kt_tensor *t); /* nb[0] == type_size (rows packed), rows may be strided */
bool kt_is_transposed(const struct kt_tensor *t);
bool kt_is_permuted(const struct kt_tensor *t);
bool kt_is_view_op(enum kt_op op);
bool kt_are_same_shape(const struct kt_tensor *a, const struct kt_tensor *b);
/* b can be broadcast to a: every a->ne[i] is a multiple of b->ne[i]. */
bool kt_can_repeat(const struct kt_tensor *b, const struct kt_tensor *a);

/* Element access for tests and tools (contiguous or not, any non-quantized type). */
float kt_get_f32_nd(const struct kt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void kt_set_f32_nd(struct kt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);

/* ------------------------------------------------------------------ views */

struct kt_tensor *kt_view_1d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, size_t offset);
struct kt_tensor *kt_view_2d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                             size_t offset);
struct kt_tensor *kt_view_3d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             size_t nb1, size_t nb2, size_t offset);
struct kt_tensor *kt_view_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* reshape needs a contiguous source */
struct kt_tensor *kt_reshape_1d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0);
struct kt_tensor *kt_reshape_2d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1);
struct kt_tensor *kt_reshape_3d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
struct kt_tensor *kt_reshape_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3);
/* dim i of a becomes dim axis_i of the result */
struct kt_tensor *kt_permute(struct kt_context *ctx, struct kt_tensor *a, int axis0, int axis1, int axis2, int axis3);
struct kt_tensor *kt_transpose(struct kt_context *ctx, struct kt_tensor *a); /* swap dims 0 and 1 */

/* ------------------------------------------------------------------ op constructors */

struct kt_tensor *kt_dup(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_cont(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_cont_4d(struct kt_context *ctx, struct kt_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3);
/* a converted into b's type and layout (b may be a view, e.g. a slot of a KV cache). b's type:
 * F32, F16, BF16, Q8_0, Q4_0 (quantized targets need contiguous rows). */
struct kt_tensor *kt_cpy(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
/* a converted into a new contiguous tensor of type */
struct kt_tensor *kt_cast(struct kt_context *ctx, struct kt_tensor *a, enum kt_type type);

struct kt_tensor *kt_add(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_add_inplace(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_sub(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_mul(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_mul_inplace(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_div(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_scale(struct kt_context *ctx, struct kt_tensor *a, float s);
struct kt_tensor *kt_scale_bias(struct kt_context *ctx, struct kt_tensor *a, float s, float b);
struct kt_tensor *kt_sqr(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_sqrt(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_sum_rows(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_mean(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_argmax(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_norm(struct kt_context *ctx, struct kt_tensor *a, float eps);
struct kt_tensor *kt_rms_norm(struct kt_context *ctx, struct kt_tensor *a, float eps);
struct kt_tensor *kt_mul_mat(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_rope(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *pos,
                          struct kt_rope_params params);
/* as kt_rope, pair i's angle divided by freq_factors[i] (F32 [n_dims/2], contiguous); NULL = kt_rope */
struct kt_tensor *kt_rope_ext(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *pos,
                              struct kt_tensor *freq_factors, struct kt_rope_params params);
struct kt_tensor *kt_soft_max(struct kt_context *ctx, struct kt_tensor *a);
/* KT_OP_ATTN (see the op list): H a multiple of Hkv (grouped-query heads share a k/v head). */
struct kt_tensor *kt_attn_ext(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k, struct kt_tensor *v,
                              struct kt_tensor *mask, struct kt_tensor *order, float scale);
/* mask may be NULL; max_bias > 0 enables ALiBi slopes per head (dim 2) */
struct kt_tensor *kt_soft_max_ext(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *mask, float scale,
                                  float max_bias);
struct kt_tensor *kt_diag_mask_inf(struct kt_context *ctx, struct kt_tensor *a, int n_past);
struct kt_tensor *kt_silu(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_gelu(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_relu(struct kt_context *ctx, struct kt_tensor *a);
struct kt_tensor *kt_swiglu(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
struct kt_tensor *kt_concat(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b, int dim);
struct kt_tensor *kt_get_rows(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *ids);

/* ---- soft-capping and gated GELU (Gemma) */
/* KT_OP_GEGLU: gelu(a) * b, F32, same shapes: a feed-forward's gate and up projections */
struct kt_tensor *kt_geglu(struct kt_context *ctx, struct kt_tensor *a, struct kt_tensor *b);
/* KT_OP_SOFTCAP: cap * tanh(a / cap), F32; cap > 0 (Gemma's final logits) */
struct kt_tensor *kt_softcap(struct kt_context *ctx, struct kt_tensor *a, float cap);
/* kt_attn_ext with attention sinks (gpt-oss): sinks F32 [H], one learned logit per head that
 * joins the softmax's denominator (exp(sink - max) added to the sum, the max taken over it
 * too) and adds nothing to the output: a head can attend to "nothing". */
struct kt_tensor *kt_attn_ext_sinks(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k,
                                    struct kt_tensor *v, struct kt_tensor *mask, struct kt_tensor *order, float scale,
                                    struct kt_tensor *sinks);
/* kt_attn_ext with the scores soft-capped (Gemma 2's attn_logit_softcapping); softcap > 0 */
struct kt_tensor *kt_attn_ext_softcap(struct kt_context *ctx, struct kt_tensor *q, struct kt_tensor *k,
                                      struct kt_tensor *v, struct kt_tensor *mask, struct kt_tensor *order, float scale,
                                      float softcap);

/* op_params helpers */
static inline float kt_get_op_param_f32(const struct kt_tensor *t, int i) {
    float v;
    __builtin_memcpy(&v, &t->op_params[i], sizeof v);
    return v;
}
static inline int32_t kt_get_op_param_i32(const struct kt_tensor *t, int i) { return t->op_params[i]; }

/* ---- mixtures of experts (the ops' contracts are in the op list) */

/* KT_OP_MUL_MAT_ID: as [K,M,n_expert] weights, b F32 [K,n_b,T], ids I32 [n_used,T]. */
struct kt_tensor *kt_mul_mat_id(struct kt_context *ctx, struct kt_tensor *as, struct kt_tensor *b,
                                struct kt_tensor *ids);
/* KT_OP_TOP_K: 1 <= k <= a->ne[0]. */
struct kt_tensor *kt_top_k(struct kt_context *ctx, struct kt_tensor *a, int k);
/* KT_OP_SWIGLU_OAI: alpha > 0, limit > 0. */
struct kt_tensor *kt_swiglu_oai(struct kt_context *ctx, struct kt_tensor *gate, struct kt_tensor *up, float alpha,
                                float limit);
/* ---- */

/* ------------------------------------------------------------------ graphs */

struct kt_cgraph {
    int size;      /* capacity (nodes and leafs each) */
    int n_nodes;   /* tensors with an op, in topological order */
    int n_leafs;   /* tensors without an op (inputs, weights, constants) */
    struct kt_tensor **nodes;
    struct kt_tensor **leafs;
    /* visited set: open addressing over tensor pointers */
    size_t hash_size;
    struct kt_tensor **hash_keys;
};

struct kt_cgraph *kt_new_graph(struct kt_context *ctx); /* KT_DEFAULT_GRAPH_SIZE */
struct kt_cgraph *kt_new_graph_custom(struct kt_context *ctx, int size);
/* Add t and everything it depends on. false (with a message naming the limit) if the graph is full. */
bool kt_build_forward_expand(struct kt_cgraph *gf, struct kt_tensor *t);
void kt_graph_clear(struct kt_cgraph *gf);
int kt_graph_n_nodes(const struct kt_cgraph *gf);
struct kt_tensor *kt_graph_node(const struct kt_cgraph *gf, int i); /* negative i counts from the end */
struct kt_tensor *kt_graph_get_tensor(const struct kt_cgraph *gf, const char *name);
bool kt_graph_contains(const struct kt_cgraph *gf, const struct kt_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* KT_H */
