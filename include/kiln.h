/*
 * kiln.h - the kiln runtime: load a GGUF language model, tokenize, decode
 * batches of tokens over a KV cache, read the logits, sample the next token.
 *
 * kiln is an LLM inference engine in C11 (after ggml and llama.cpp): kt, a
 * tensor library with quantized types and CPU/CUDA backends (kt.h,
 * kt-backend.h), a GGUF reader (gguf.h), and this runtime, which runs the
 * architectures of its table (llama, qwen2, qwen3, phi3, ...: kiln_arch_list)
 * with llama.cpp's tokenizers, sampling and chat templates, and checks each
 * against llama.cpp's logits. The `kiln` binary and its server use this
 * header; offline work on files (quantize, synthetic models, a model's GGUF
 * metadata) is in kiln-offline.h.
 *
 * ---- The life of a program
 *
 * Load a model, make a context (a KV cache and the memory to compute in),
 * put the prompt in a batch, decode it, read the logits of its last token,
 * sample, decode that token, and so on; free in the reverse order. The build
 * compiles the lines between BEGIN and END as the program kiln_example, and
 * tests/test_example.sh runs it on models/kjv-q4_0.gguf against llama.cpp's
 * greedy continuations:
 *
 *   // BEGIN kiln_example.c: greedy continuation of a prompt
 *   #include <stdio.h>
 *   #include <stdlib.h>
 *   #include <string.h>
 *
 *   #include "kiln.h"
 *
 *   int main(int argc, char **argv) {
 *       if (argc != 4) {
 *           fprintf(stderr, "usage: %s MODEL PROMPT N_TOKENS\n", argv[0]);
 *           return 2;
 *       }
 *       const int n_gen = atoi(argv[3]);
 *       char err[256];
 *       struct kiln_model *model = kiln_model_load(argv[1], kiln_model_default_params(), err, sizeof err);
 *       if (!model) {
 *           fprintf(stderr, "%s\n", err);
 *           return 1;
 *       }
 *       struct kiln_context *ctx = kiln_context_new(model, kiln_context_default_params(), err, sizeof err);
 *       struct kiln_sampler *smpl = kiln_sampler_chain_new();
 *       struct kiln_batch batch = kiln_batch_init((int32_t)(ctx ? kiln_n_batch(ctx) : 0));
 *       int32_t prompt[256];
 *       const struct kiln_vocab *vocab = kiln_model_vocab(model);
 *       const int64_t n_prompt = kiln_tokenize(vocab, argv[2], strlen(argv[2]), prompt, 256, true, false);
 *       int rc = 1;
 *       if (!ctx || !kiln_sampler_chain_add(smpl, kiln_sampler_init_greedy()) || batch.capacity == 0) {
 *           fprintf(stderr, "%s\n", ctx ? "out of memory" : err);
 *           goto done;
 *       }
 *       if (n_prompt <= 0 || n_prompt > batch.capacity) {
 *           fprintf(stderr, "the prompt must be 1 to %d tokens\n", (int)batch.capacity);
 *           goto done;
 *       }
 *       for (int32_t i = 0; i < (int32_t)n_prompt; i++)   // token, position, sequence, want logits
 *           kiln_batch_add(&batch, prompt[i], i, 0, i == n_prompt - 1);
 *       for (int32_t pos = (int32_t)n_prompt; pos < n_prompt + n_gen; pos++) {
 *           const enum kiln_status st = kiln_decode(ctx, &batch);
 *           if (st != KILN_OK) {
 *               fprintf(stderr, "decode: %s (%s)\n", kiln_context_error(ctx), kiln_status_name(st));
 *               goto done;
 *           }
 *           const float *logits = kiln_get_logits_ith(ctx, -1); // valid until the next decode
 *           const int32_t tok = kiln_sampler_sample(smpl, logits, kiln_vocab_n_tokens(vocab));
 *           kiln_sampler_accept(smpl, tok);
 *           if (kiln_vocab_is_eog(vocab, tok)) break;
 *           char piece[256];
 *           const int64_t len = kiln_token_to_piece(vocab, tok, piece, sizeof piece, false);
 *           if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
 *           kiln_batch_clear(&batch);
 *           kiln_batch_add(&batch, tok, pos, 0, true);
 *       }
 *       putchar('\n');
 *       rc = 0;
 *   done:
 *       kiln_batch_free(&batch);
 *       kiln_sampler_free(smpl);
 *       kiln_context_free(ctx); // every context before its model
 *       kiln_model_free(model);
 *       return rc;
 *   }
 *   // END kiln_example.c
 *
 * For sampling with temperature, top-k, top-p and penalties, build the chain
 * from kiln_sampling_params (kiln_sampler_from_params); for a chat, render the
 * conversation with kiln_chat_apply and tokenize it with parse_special. Several
 * sequences share one context: give each its seq_id in the batch (up to
 * n_seq_max) and decode them together.
 *
 * ---- Rules
 *
 * Ownership. What a kiln_*_new / _load / _init call returns, the caller frees
 * with the matching _free. Pointers the runtime hands out (kiln_model_vocab,
 * kiln_model_hparams, names, kiln_context_error, logits) belong to the object
 * they came from and die with it. Arrays passed in (batches, chat messages,
 * logit biases) are read during the call, or copied where a parameter says so.
 *
 * Lifetimes. The model outlives its contexts: free every context (and every
 * sampler, whose state is plain memory) before kiln_model_free. A vocabulary
 * from kiln_model_vocab lives as long as its model. kiln_get_logits_ith's row
 * is valid until the next kiln_decode on that context (which overwrites it,
 * even when it fails) or kiln_context_free; copy it to keep it.
 *
 * Threads. A loaded model and its vocabulary are read-only: any number of
 * threads may use them, and create contexts on them, at once. A context is
 * used by one thread at a time (kiln_decode, the kv calls, the logits): calls
 * on one context are not synchronized. kiln_decode computes on the context's
 * own threads (n_threads, kiln_set_n_threads) and returns when they are done;
 * the abort callback runs on the thread that called kiln_decode. A sampler
 * keeps history and scratch: one per sequence, used by one thread at a time.
 * Nothing here keeps global state beyond lazily built constant tables.
 *
 * Errors. Nothing here prints, exits or aborts on bad input; every failure is
 * a value, and its message is found in one of two places:
 *   - a call that makes an object (kiln_model_load, kiln_context_new,
 *     kiln_vocab_load, and kiln-offline.h's runs) returns NULL or false and
 *     writes the message into the caller's (err, errlen) buffer;
 *   - a call on a context returns an enum kiln_status (KILN_OK or a
 *     KILN_ERR_*; false for the kv calls) and leaves the message on the
 *     context, kiln_context_error;
 *   the samplers, which are made and combined without a buffer, keep the
 *   message of their last failure per thread (kiln_sampler_last_error).
 * Counting calls (kiln_tokenize, kiln_detokenize, kiln_token_to_piece,
 * kiln_chat_apply) return the count, -(needed) when the output is too small,
 * or KILN_ERR_INVALID. Ids, positions and lengths from callers are checked.
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kt.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gguf_file;

/* =========================================================================
 * vocabulary: tokenizers built from GGUF metadata (tokenizer.ggml.*)
 *
 * Exact re-implementations of llama.cpp's SentencePiece-style (SPM, model
 * "llama"), byte-level BPE (model "gpt2", every pre-tokenizer llama.cpp knows)
 * and WordPiece (WPM, model "bert") tokenizers.
 *
 *   char err[256];
 *   struct kiln_vocab *v = kiln_vocab_load(g, err, sizeof err);
 *   int32_t ids[64];
 *   int64_t n = kiln_tokenize(v, "Hello", 5, ids, 64, true, false);
 *   if (n < 0) ... -n slots were needed ...
 *
 * The vocab copies everything it needs out of the GGUF file: the gguf_file may
 * be closed after kiln_vocab_load returns. A loaded vocab is immutable, so any
 * number of threads may tokenize/detokenize with one vocab at once (each call
 * allocates its own scratch).
 * ========================================================================= */

#define KILN_TOKEN_NULL (-1)
/* Returned by kiln_token_to_piece / kiln_detokenize for an id outside the vocab,
 * and by kiln_tokenize when memory runs out. */
#define KILN_ERR_INVALID INT64_MIN

enum kiln_vocab_type {
    KILN_VOCAB_NONE = 0, /* file without a vocabulary ("no_vocab") */
    KILN_VOCAB_SPM = 1,  /* "llama": SentencePiece, score-guided merges, byte fallback */
    KILN_VOCAB_BPE = 2,  /* "gpt2" (and "gemma4"): byte-level BPE with merges by rank */
    KILN_VOCAB_WPM = 3,  /* "bert": WordPiece */
};

/* Token attributes (bit set), derived from tokenizer.ggml.token_type and model quirks. */
enum kiln_token_attr {
    KILN_TOKEN_ATTR_UNDEFINED = 0,
    KILN_TOKEN_ATTR_UNKNOWN = 1 << 0,
    KILN_TOKEN_ATTR_UNUSED = 1 << 1,
    KILN_TOKEN_ATTR_NORMAL = 1 << 2,
    KILN_TOKEN_ATTR_CONTROL = 1 << 3,
    KILN_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    KILN_TOKEN_ATTR_BYTE = 1 << 5,
    KILN_TOKEN_ATTR_LSTRIP = 1 << 7, /* eat whitespace left of it when parsing specials */
    KILN_TOKEN_ATTR_RSTRIP = 1 << 8, /* eat whitespace right of it */
};

struct kiln_vocab;

/* Build the vocabulary from g's metadata. NULL on failure with a message in err
 * naming the offending key (missing tokens, wrong types, lengths that disagree,
 * ids out of range, merges naming unknown tokens, unknown model/pre-tokenizer). */
struct kiln_vocab *kiln_vocab_load(const struct gguf_file *g, char *err, size_t errlen);
void kiln_vocab_free(struct kiln_vocab *v);

int32_t kiln_vocab_n_tokens(const struct kiln_vocab *v);
enum kiln_vocab_type kiln_vocab_type(const struct kiln_vocab *v);
const char *kiln_vocab_type_name(enum kiln_vocab_type t); /* "none", "SPM", "BPE", "WPM" */
const char *kiln_vocab_pre(const struct kiln_vocab *v);   /* pre-tokenizer name in use ("default" if none) */

/* Special ids; KILN_TOKEN_NULL when the vocabulary has none. */
int32_t kiln_vocab_bos(const struct kiln_vocab *v);
int32_t kiln_vocab_eos(const struct kiln_vocab *v);
int32_t kiln_vocab_eot(const struct kiln_vocab *v);
int32_t kiln_vocab_eom(const struct kiln_vocab *v);
int32_t kiln_vocab_unk(const struct kiln_vocab *v);
int32_t kiln_vocab_sep(const struct kiln_vocab *v);
int32_t kiln_vocab_pad(const struct kiln_vocab *v);
int32_t kiln_vocab_mask(const struct kiln_vocab *v);
int32_t kiln_vocab_nl(const struct kiln_vocab *v); /* the token of "\n" */
bool kiln_vocab_add_bos(const struct kiln_vocab *v);
bool kiln_vocab_add_eos(const struct kiln_vocab *v);
bool kiln_vocab_add_sep(const struct kiln_vocab *v); /* a SEP after the text (BERT) */
/* End of generation: eos, eot, eom and the end-like tokens llama.cpp recognises by text. */
bool kiln_vocab_is_eog(const struct kiln_vocab *v, int32_t id);

/* Per-token queries; an id out of range gives 0 / NULL / 0.0f. */
uint32_t kiln_vocab_attr(const struct kiln_vocab *v, int32_t id);
bool kiln_vocab_is_control(const struct kiln_vocab *v, int32_t id);
bool kiln_vocab_is_byte(const struct kiln_vocab *v, int32_t id);
const char *kiln_vocab_text(const struct kiln_vocab *v, int32_t id, size_t *len); /* raw text as stored, NUL-terminated */
float kiln_vocab_score(const struct kiln_vocab *v, int32_t id);
int32_t kiln_vocab_find(const struct kiln_vocab *v, const char *text, size_t len); /* exact text -> id or KILN_TOKEN_NULL */

/* Tokenize len bytes of text (any bytes: invalid UTF-8 is handled deterministically,
 * as llama.cpp does). add_special adds BOS/EOS (WPM: [CLS]/[SEP]) per the metadata;
 * parse_special turns the text of control tokens into those tokens (user-defined
 * tokens are always matched). Returns the number of ids written, or -(needed) when
 * max is too small (nothing useful in out then), or KILN_ERR_INVALID on allocation
 * failure. */
int64_t kiln_tokenize(const struct kiln_vocab *v, const char *text, size_t len, int32_t *out, int64_t max,
                      bool add_special, bool parse_special);

/* The bytes one token stands for (SPM ▁ -> space, BPE byte-level decoding, byte
 * tokens -> their byte). Control/unknown tokens give 0 bytes unless special.
 * Returns bytes written, -(needed) if size is too small, KILN_ERR_INVALID for a bad id. */
int64_t kiln_token_to_piece(const struct kiln_vocab *v, int32_t id, char *buf, size_t size, bool special);

/* Ids back to text: pieces joined, SPM's leading space removed, byte tokens
 * reassembled, llama.cpp's space clean-up for BPE/WPM vocabularies.
 * remove_special drops a leading BOS / trailing EOS as the model adds them;
 * unparse_special renders control tokens as their text. Returns bytes written,
 * -(needed) when size is too small, KILN_ERR_INVALID when an id is out of range. */
int64_t kiln_detokenize(const struct kiln_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t size,
                        bool remove_special, bool unparse_special);

/* ================================================================== model */

struct kiln_model;
struct kiln_context;

/* How a sequence's token embeddings become one vector (llama.cpp's ids, as files store
 * them in <arch>.pooling_type): none keeps every token's; mean averages them; cls takes
 * the first token's, last the last one's; rank takes the first token's through the
 * classifier head (cls, tanh, cls.output): a reranker's scores. */
enum kiln_pooling {
    KILN_POOLING_UNSPECIFIED = -1, /* a context's default: the model's own */
    KILN_POOLING_NONE = 0,
    KILN_POOLING_MEAN = 1,
    KILN_POOLING_CLS = 2,
    KILN_POOLING_LAST = 3,
    KILN_POOLING_RANK = 4,
};
const char *kiln_pooling_name(enum kiln_pooling p); /* "none", "mean", "cls", "last", "rank" */
bool kiln_pooling_from_name(const char *name, enum kiln_pooling *out);

struct kiln_hparams {
    int64_t n_ctx_train;  /* context length the model was trained with */
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;    /* < n_head: grouped-query attention; 1: multi-query */
    int64_t n_embd_head;  /* head dimension */
    int64_t n_ff;
    int64_t n_vocab;
    int64_t n_rot;        /* rotary dimensions per head (<= n_embd_head) */
    float rope_freq_base;
    float rope_freq_scale;
    float norm_rms_eps;
    /* embeddings (any family): the file's <arch>.pooling_type, the classifier's outputs
     * (<arch>.classifier.output_labels, 1 when absent) and BERT's token type embeddings
     * (tokenizer.ggml.token_type_count, 0 when absent) */
    enum kiln_pooling pooling;
    int64_t n_cls_out;
    int64_t n_token_types;
};

/* Called while loading with progress in [0, 1]; return false to cancel. */
typedef bool (*kiln_progress_fn)(float progress, void *data);

struct kiln_model_params {
    kiln_progress_fn progress;
    void *progress_data;
    bool vocab_only;      /* load metadata and vocabulary only */
    bool no_repack;       /* keep matrix weights as stored (no copy in the CPU kernels' layout) */
    int32_t n_gpu_layers; /* layers whose weights go to the GPU (the last ones; past n_layer the output
                             too, so 99 = all); without a GPU the model runs on the CPU and
                             kiln_model_gpu_note says why */
};
struct kiln_model_params kiln_model_default_params(void);

/* Load a GGUF model: architecture from general.architecture, hyper-parameters
 * from <arch>.* keys, every weight bound zero-copy into the file mapping in its
 * stored type. NULL on failure with a message in err (missing tensor, wrong
 * shape, unsupported architecture ... named). */
struct kiln_model *kiln_model_load(const char *path, struct kiln_model_params params, char *err, size_t errlen);
void kiln_model_free(struct kiln_model *model);
/* Where the weights went: "" when no GPU was asked for, else "CUDA0: 22 of 22 layers and the output
 * (n MiB)" or why the GPU was not used. */
const char *kiln_model_gpu_note(const struct kiln_model *model);
/* llama-bench's "backends" field: the backend holding the offloaded weights ("CUDA"), else "CPU". */
const char *kiln_model_backends(const struct kiln_model *model);
/* The architectures kiln runs (general.architecture values): is name one, and all
 * of them as "llama, qwen2, ..." into buf. */
bool kiln_arch_supported(const char *name);
void kiln_arch_list(char *buf, size_t size);
const struct kiln_hparams *kiln_model_hparams(const struct kiln_model *model);
const struct kiln_vocab *kiln_model_vocab(const struct kiln_model *model);
const char *kiln_model_arch(const struct kiln_model *model);
const char *kiln_model_name(const struct kiln_model *model);
int64_t kiln_model_n_params(const struct kiln_model *model);
size_t kiln_model_size(const struct kiln_model *model); /* bytes of weights */
/* Mixtures of experts: experts per layer and how many serve each token (0 and 0 for a dense
 * model; NULL pointers are skipped). */
void kiln_model_experts(const struct kiln_model *model, int64_t *n_expert, int64_t *n_expert_used);
/* What one token's forward pass reads: the parameters and weight bytes of every tensor but
 * the token embedding (one row of it; all of it when the output is tied to it), the expert
 * stacks and their biases counted n_expert_used of n_expert (the bandwidth bound of
 * generation for a mixture of experts). A dense model's active size is its size less the
 * untied embedding. */
int64_t kiln_model_n_params_active(const struct kiln_model *model);
size_t kiln_model_size_active(const struct kiln_model *model);
/* e.g. "llama 4L 256E Q4_0" for bench tables */
void kiln_model_desc(const struct kiln_model *model, char *buf, size_t size);

/* ================================================================== context */

/* What a call on a context came to; the message is kiln_context_error's. New statuses are
 * added at the end; the values are stable. */
enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_ARG = -1,       /* a bad argument: a token id, position or sequence out of range, an
                                empty batch or one larger than n_batch, a thread count */
    KILN_ERR_NO_ROOM = -2,   /* no room in the KV cache for the batch: free sequences, retry */
    KILN_ERR_COMPUTE = -3,   /* the graph could not be built, placed or computed */
    KILN_ERR_ABORTED = -4,   /* the abort callback stopped it */
    KILN_ERR_NO_MEMORY = -5, /* memory or threads ran out */
};
/* "ok", "bad argument", "no room in the KV cache", ... (a fixed string). */
const char *kiln_status_name(enum kiln_status st);

struct kiln_context_params {
    uint32_t n_ctx;       /* KV cache cells; 0: the model's training context */
    uint32_t n_batch;     /* most tokens per kiln_decode call */
    uint32_t n_seq_max;   /* sequences (1..64) */
    int n_threads;
    enum kt_type type_k;  /* KV cache types: F16 (default), F32, Q8_0 */
    enum kt_type type_v;
    bool embeddings;      /* decodes leave embeddings, not logits (kiln_get_embeddings_*) */
    enum kiln_pooling pooling; /* with embeddings: UNSPECIFIED (default) takes the model's */
};
struct kiln_context_params kiln_context_default_params(void);

struct kiln_context *kiln_context_new(const struct kiln_model *model, struct kiln_context_params params, char *err,
                                      size_t errlen);
void kiln_context_free(struct kiln_context *ctx);
uint32_t kiln_n_ctx(const struct kiln_context *ctx);
uint32_t kiln_n_batch(const struct kiln_context *ctx);   /* most tokens per kiln_decode */
uint32_t kiln_n_seq_max(const struct kiln_context *ctx); /* sequences 0 .. n_seq_max-1 */
const char *kiln_context_error(const struct kiln_context *ctx); /* message of the last failure */
/* Threads kiln_decode computes with (1..512): KILN_ERR_ARG for a count out of range,
 * KILN_ERR_NO_MEMORY when the threads cannot be started; the old count stays then. */
enum kiln_status kiln_set_n_threads(struct kiln_context *ctx, int n_threads);
/* Asked between the steps of every kiln_decode from now on, on the calling thread (NULL:
 * never): return true to stop; kiln_decode then returns KILN_ERR_ABORTED with the cache
 * as it was before. A way to give up a long prompt (a client that went away, a deadline). */
typedef bool (*kiln_abort_fn)(void *data);
void kiln_set_abort_callback(struct kiln_context *ctx, kiln_abort_fn fn, void *data);
/* Bytes of the compute buffer and of the KV cache (memory reports). */
size_t kiln_compute_buffer_size(const struct kiln_context *ctx);
size_t kiln_kv_size_bytes(const struct kiln_context *ctx);
/* What the KV cache would take if every layer kept every position of n_ctx (what a
 * sliding-window model's smaller cache compares with; equal for other models). */
size_t kiln_kv_size_bytes_full(const struct kiln_context *ctx);

/* A batch: token i at position pos[i] of sequence seq_id[i]; logits[i] != 0 keeps its logits. */
struct kiln_batch {
    int32_t n_tokens;
    int32_t capacity;
    int32_t *token;
    int32_t *pos;
    int32_t *seq_id;
    int8_t *logits;
};
struct kiln_batch kiln_batch_init(int32_t capacity); /* capacity 0 on allocation failure */
void kiln_batch_free(struct kiln_batch *batch);
void kiln_batch_clear(struct kiln_batch *batch);
bool kiln_batch_add(struct kiln_batch *batch, int32_t token, int32_t pos, int32_t seq_id, bool logits);

/* Evaluate a batch: its tokens' K and V go into the cache, and the logits of the tokens
 * that asked for them (none asked: the last one) into the context. On any error the cache
 * and the sequences are as they were and no logits are kept. */
enum kiln_status kiln_decode(struct kiln_context *ctx, const struct kiln_batch *batch);
/* Logits (n_vocab floats) of batch token i of the last decode (i < 0 counts from the
 * end); NULL if that token's logits were not requested or the decode failed. Valid until
 * the next kiln_decode on ctx or kiln_context_free. */
const float *kiln_get_logits_ith(const struct kiln_context *ctx, int32_t i);

/* ---- embeddings (a context made with params.embeddings)
 *
 * Every decode stands alone: the context's memory is cleared first, so each sequence
 * of the batch is whole in it (positions from 0), and sequences attend only to
 * themselves; many sequences go in one batch. Pooled, each sequence in the batch has
 * one vector of kiln_n_embd_out floats (kiln_get_embeddings_seq); with pooling none
 * each token has one (kiln_get_embeddings_ith). Not normalized (kiln_embd_normalize).
 * Valid until the next kiln_decode. */
enum kiln_pooling kiln_context_pooling(const struct kiln_context *ctx);
int64_t kiln_n_embd_out(const struct kiln_context *ctx); /* n_embd; rank pooling: n_cls_out */
const float *kiln_get_embeddings_seq(const struct kiln_context *ctx, int32_t seq); /* NULL: not in the batch */
const float *kiln_get_embeddings_ith(const struct kiln_context *ctx, int32_t i);   /* pooling none */
/* Whether the model has an output head (text generation); an encoder (BERT) makes
 * embeddings only. */
bool kiln_model_generates(const struct kiln_model *model);
/* llama-server's --embd-normalize: -1 none, 0 max absolute value to 32760 (int16
 * range), 1 taxicab, 2 Euclidean, > 2 p-norm; out may be in. */
void kiln_embd_normalize(const float *in, float *out, int64_t n, int norm);

/* ---- KV cache by sequence */
void kiln_kv_clear(struct kiln_context *ctx);
/* remove positions [p0, p1) of seq (seq < 0: every sequence; p1 < 0: to the end) */
bool kiln_kv_seq_rm(struct kiln_context *ctx, int32_t seq, int32_t p0, int32_t p1);
/* cells of src in [p0, p1) also belong to dst */
bool kiln_kv_seq_cp(struct kiln_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* largest position of seq in the cache, -1 if none */
int32_t kiln_kv_seq_pos_max(const struct kiln_context *ctx, int32_t seq);
/* smallest position from which every part of the cache still holds seq, -1 if none (a
 * sliding-window model's cache lets old positions go) */
int32_t kiln_kv_seq_pos_min(const struct kiln_context *ctx, int32_t seq);
/* The longest prefix of seq's first n positions the cache can continue from: decoding
 * position m next needs what the model attends to before m (every earlier position;
 * for sliding-window layers, the last window), so after kiln_kv_seq_rm(ctx, seq, m, -1)
 * a prefix of m tokens is reused whole only when this returns m. 0 always works. */
int32_t kiln_kv_seq_resumable(const struct kiln_context *ctx, int32_t seq, int32_t n);

/* =========================================================================
 * sampling: one row of logits -> one token, through a chain of stages
 *
 * Each stage works on a candidate list (token id, logit, probability) and
 * either narrows/reshapes it (penalties, logit bias, top-k, typical-p, top-p,
 * min-p, temperature) or selects one candidate (greedy, dist). The semantics
 * are llama.cpp's (llama-sampler.cpp); the order is the order of _add calls.
 *
 *   struct kiln_sampler *s = kiln_sampler_chain_new();
 *   kiln_sampler_chain_add(s, kiln_sampler_init_penalties(64, 1.1f, 0.0f, 0.0f));
 *   kiln_sampler_chain_add(s, kiln_sampler_init_top_k(40));
 *   kiln_sampler_chain_add(s, kiln_sampler_init_temp(0.8f));
 *   kiln_sampler_chain_add(s, kiln_sampler_init_dist(1234));
 *   ... (any call above returned false: kiln_sampler_last_error() says why)
 *   for (;;) {
 *       int32_t tok = kiln_sampler_sample(s, logits, n_vocab);
 *       kiln_sampler_accept(s, tok);        // feeds the penalties' history
 *       ...
 *   }
 *   kiln_sampler_free(s);
 *
 * or, with llama.cpp's default order and defaults:
 *   struct kiln_sampling_params p = kiln_sampling_default_params();
 *   p.temp = 0.7f; p.seed = 42;
 *   struct kiln_sampler *s = kiln_sampler_from_params(&p);
 *
 * Reproducibility: the draw uses kiln's own PRNG (xoshiro256** seeded through
 * splitmix64), a uniform double from the top 53 bits of one 64-bit output per
 * sample, and kiln's own exp/log (no libm calls) with sums in a fixed order, so
 * a seed gives the same tokens for the same logits on any IEEE-754 machine.
 * Ties between equal logits are broken by the lower token id.
 *
 * A sampler is not thread-safe (it keeps history and scratch); use one per
 * sequence. kiln_sampler_sample allocates its scratch (n_vocab entries) on the
 * first call and reuses it afterwards.
 * ========================================================================= */

#define KILN_SEED_RANDOM 0xFFFFFFFFu /* dist seed: pick one from the clock */

struct kiln_sampler;

/* One candidate; data[i].p is filled by the stages that need probabilities. */
struct kiln_token_prob {
    int32_t id;
    float logit;
    float p;
};
struct kiln_candidates {
    struct kiln_token_prob *data;
    int64_t size;
    int64_t selected; /* index into data set by greedy/dist; -1 before */
    bool sorted;      /* data is in descending logit order */
};

struct kiln_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
};

/* Message of the last failed sampler call on this thread ("" if none). */
const char *kiln_sampler_last_error(void);

/* Stages. Each returns NULL (with kiln_sampler_last_error) on an invalid parameter. */
struct kiln_sampler *kiln_sampler_init_greedy(void);            /* highest logit */
struct kiln_sampler *kiln_sampler_init_dist(uint32_t seed);     /* draw from softmax of the candidates */
struct kiln_sampler *kiln_sampler_init_temp(float temp);        /* logit /= temp; 0: keep only the max; < 0 rejected */
struct kiln_sampler *kiln_sampler_init_top_k(int32_t k);        /* the k highest; 0: off; < 0 rejected */
/* smallest prefix (by probability) whose cumulative probability >= p, at least min_keep; p in (0, 1], 1: off */
struct kiln_sampler *kiln_sampler_init_top_p(float p, size_t min_keep);
/* tokens with probability >= p * (max probability), at least min_keep; p in [0, 1], 0: off */
struct kiln_sampler *kiln_sampler_init_min_p(float p, size_t min_keep);
/* locally typical sampling: tokens ordered by |-log p - entropy|, kept until their
 * cumulative probability exceeds p, at least min_keep; p in (0, 1], 1: off */
struct kiln_sampler *kiln_sampler_init_typical(float p, size_t min_keep);
/* Over the last last_n accepted tokens (0: off), for a token seen count > 0 times:
 * logit /= repeat if logit > 0 else logit *= repeat (1: off), then
 * logit -= count * freq + present. last_n <= 2^24, repeat > 0. */
struct kiln_sampler *kiln_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present);
/* Adds bias[i].bias to the logit of bias[i].token (copied; tokens >= n_vocab are ignored when sampling). */
struct kiln_sampler *kiln_sampler_init_logit_bias(size_t n, const struct kiln_logit_bias *bias);

/* An empty chain; stages added run in order. */
struct kiln_sampler *kiln_sampler_chain_new(void);
/* Appends stage to chain and takes ownership of it in every case (freed on
 * failure). stage may be NULL (a failed init): returns false, keeping that
 * init's message, so kiln_sampler_chain_add(c, kiln_sampler_init_...(x)) checks both. */
bool kiln_sampler_chain_add(struct kiln_sampler *chain, struct kiln_sampler *stage);
int kiln_sampler_chain_n(const struct kiln_sampler *chain); /* number of stages (1 for a lone stage) */

/* Sample one token from logits[0 .. n_vocab): NaN logits count as -INFINITY.
 * Does not accept the token (call kiln_sampler_accept). Returns the token, or
 * KILN_TOKEN_NULL (-1) when n_vocab is out of range (1 .. INT32_MAX), memory
 * runs out, or no stage selected a token (the chain must end in greedy or dist). */
int32_t kiln_sampler_sample(struct kiln_sampler *s, const float *logits, int64_t n_vocab);
/* Run the stages on a caller's candidate list (tests, tools printing top tokens);
 * NaN logits become -INFINITY. False (with a message) on bad arguments or when
 * scratch memory cannot be had. */
bool kiln_sampler_apply(struct kiln_sampler *s, struct kiln_candidates *cand);
/* Record a token as generated (or as part of the prompt) for the penalties. */
void kiln_sampler_accept(struct kiln_sampler *s, int32_t token);
/* Forget the history and restart every dist stage from its seed. */
void kiln_sampler_reset(struct kiln_sampler *s);
void kiln_sampler_free(struct kiln_sampler *s);
/* Seed of the first dist stage (the chosen one when it was KILN_SEED_RANDOM);
 * KILN_SEED_RANDOM when there is none. */
uint32_t kiln_sampler_seed(const struct kiln_sampler *s);
/* "penalties(last_n=64 repeat=1.100 freq=0.000 present=0.000) -> top-k(40) -> ...":
 * bytes written (NUL-terminated), or -(needed including the NUL). */
int64_t kiln_sampler_describe(const struct kiln_sampler *s, char *buf, size_t size);

/* Everything kiln run/chat need, with llama.cpp's defaults. */
struct kiln_sampling_params {
    uint32_t seed;          /* KILN_SEED_RANDOM */
    int32_t top_k;          /* 40; 0: off */
    float top_p;            /* 0.95; 1: off */
    float min_p;            /* 0.05; 0: off */
    float typical_p;        /* 1.0 (off) */
    float temp;             /* 0.8; 0: greedy; < 0 rejected */
    size_t min_keep;        /* 0: top-p/min-p/typical keep at least this many */
    int32_t penalty_last_n; /* 64; 0: off (tools map llama.cpp's -1 to n_ctx) */
    float penalty_repeat;   /* 1.0 (off) */
    float penalty_freq;     /* 0.0 (off) */
    float penalty_present;  /* 0.0 (off) */
    const struct kiln_logit_bias *logit_bias; /* copied */
    size_t n_logit_bias;
};
struct kiln_sampling_params kiln_sampling_default_params(void);
/* llama.cpp's default chain: logit bias, penalties, top-k, typical-p, top-p,
 * min-p, temperature, dist; with temp == 0: logit bias, penalties, greedy.
 * Stages that are off are left out. NULL with a message on an invalid parameter
 * (top_k < 0, top_p outside (0, 1], min_p outside [0, 1], typical_p outside
 * (0, 1], temp < 0 or not finite, penalty_last_n < 0, penalty_repeat <= 0, ...). */
struct kiln_sampler *kiln_sampler_from_params(const struct kiln_sampling_params *params);

/* =========================================================================
 * chat templates: a conversation -> the prompt text a chat model expects
 *
 * kiln does not run Jinja. It recognises the family of a model's
 * tokenizer.chat_template by the marker strings llama.cpp uses
 * (llm_chat_detect_template) and renders that family natively, byte for byte
 * as llama.cpp's llm_chat_apply_template does.
 *
 *   enum kiln_chat_template t = kiln_chat_template_detect(jinja_or_NULL);
 *   // KILN_CHAT_UNKNOWN renders as ChatML (the fallback), so warn and go on
 *   struct kiln_chat_msg msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
 *   int64_t n = kiln_chat_apply(t, msgs, 2, true, buf, sizeof buf);
 *   if (n < 0) ... -n bytes (with the NUL) were needed ...
 *
 * The rendered text holds no BOS unless the family writes one inside the
 * history (llama2-sys-bos, monarch, gigachat...). As llama.cpp's chat does:
 * tokenize the first prompt with add_special = true, parse_special = true.
 * For a multi-turn chat that keeps its KV cache, render the history without
 * the new message (add_assistant = false) and with it (add_assistant = true)
 * and decode only the bytes the second adds (add_special = false then).
 * ========================================================================= */

/* Enum values are not stored anywhere; new families go before _COUNT. */
enum kiln_chat_template {
    KILN_CHAT_UNKNOWN = 0, /* not recognised: rendered as ChatML */
    KILN_CHAT_CHATML,
    KILN_CHAT_LLAMA2,           /* [INST] ... [/INST], system as plain first line */
    KILN_CHAT_LLAMA2_SYS,       /* with <<SYS>> */
    KILN_CHAT_LLAMA2_SYS_BOS,   /* <s> before every later [INST] */
    KILN_CHAT_LLAMA2_SYS_STRIP, /* contents trimmed */
    KILN_CHAT_MISTRAL_V1,
    KILN_CHAT_MISTRAL_V3,
    KILN_CHAT_MISTRAL_V3_TEKKEN,
    KILN_CHAT_MISTRAL_V7,
    KILN_CHAT_MISTRAL_V7_TEKKEN,
    KILN_CHAT_PHI3,
    KILN_CHAT_PHI4,
    KILN_CHAT_FALCON3,
    KILN_CHAT_ZEPHYR,
    KILN_CHAT_MONARCH,
    KILN_CHAT_GEMMA,
    KILN_CHAT_ORION,
    KILN_CHAT_OPENCHAT,
    KILN_CHAT_VICUNA,
    KILN_CHAT_VICUNA_ORCA,
    KILN_CHAT_DEEPSEEK,   /* deepseek-coder / deepseek-llm */
    KILN_CHAT_DEEPSEEK2,
    KILN_CHAT_DEEPSEEK3,
    KILN_CHAT_DEEPSEEK_OCR,
    KILN_CHAT_COMMAND_R,
    KILN_CHAT_LLAMA3,
    KILN_CHAT_CHATGLM3,
    KILN_CHAT_CHATGLM4,
    KILN_CHAT_GLMEDGE,
    KILN_CHAT_MINICPM,
    KILN_CHAT_EXAONE3,
    KILN_CHAT_EXAONE4,
    KILN_CHAT_EXAONE_MOE,
    KILN_CHAT_RWKV_WORLD,
    KILN_CHAT_GRANITE3,
    KILN_CHAT_GRANITE4_0,
    KILN_CHAT_GRANITE4_1,
    KILN_CHAT_GIGACHAT,
    KILN_CHAT_MEGREZ,
    KILN_CHAT_YANDEX,
    KILN_CHAT_BAILING,
    KILN_CHAT_BAILING_THINK,
    KILN_CHAT_BAILING2,
    KILN_CHAT_LLAMA4,
    KILN_CHAT_SMOLVLM,
    KILN_CHAT_DOTS1,
    KILN_CHAT_HUNYUAN_MOE,
    KILN_CHAT_GPT_OSS,
    KILN_CHAT_HUNYUAN_DENSE,
    KILN_CHAT_HUNYUAN_VL,
    KILN_CHAT_KIMI_K2,
    KILN_CHAT_SEED_OSS,
    KILN_CHAT_GROK2,
    KILN_CHAT_PANGU_EMBED,
    KILN_CHAT_SOLAR_OPEN,
    KILN_CHAT_COUNT
};

struct kiln_chat_msg {
    const char *role;    /* "system", "user", "assistant", others as the family allows */
    const char *content; /* NUL-terminated UTF-8 */
};

/* A call an assistant's message made to a tool (OpenAI's tool_calls[i].function). */
struct kiln_chat_tool_call {
    const char *name;      /* the function called */
    const char *arguments; /* its arguments: JSON text */
};

/* Family of a Jinja chat template text (or of a family name, as llama.cpp
 * accepts). KILN_CHAT_UNKNOWN for NULL, "" or no known marker. */
enum kiln_chat_template kiln_chat_template_detect(const char *jinja);
/* "chatml", "llama2", "llama3", "mistral-v7", "gemma", ... (llama.cpp's names, for
 * --template NAME); KILN_CHAT_UNKNOWN for NULL or an unknown name. */
enum kiln_chat_template kiln_chat_template_from_name(const char *name);
/* The family of a model's tokenizer.chat_template, ChatML (llama.cpp's fallback)
 * when it has none or kiln does not recognise it; *found (if not NULL) says whether
 * the model's own template was recognised. */
enum kiln_chat_template kiln_model_chat_template(const struct kiln_model *model, bool *found);
/* Name of a family ("unknown" for KILN_CHAT_UNKNOWN or out of range). */
const char *kiln_chat_template_name(enum kiln_chat_template t);
/* Render msgs[0 .. n) in family t, then the assistant's opening when
 * add_assistant (and the family has one). Returns the length written to buf
 * (NUL-terminated), -(needed including the NUL) when size is too small (buf
 * may be NULL then), KILN_ERR_INVALID for t out of range or a NULL role/content. */
int64_t kiln_chat_apply(enum kiln_chat_template t, const struct kiln_chat_msg *msgs, size_t n, bool add_assistant,
                        char *buf, size_t size);
/* The text an assistant message's tool calls take in family t, to follow its
 * content (a newline between, when both are there): <tool_call> blocks of
 * {"name", "arguments"}, or Llama 3's {"name", "parameters"}. Returns the length
 * written (NUL-terminated), -(needed including the NUL) when size is too small,
 * KILN_ERR_INVALID for t out of range or a NULL name/arguments. */
int64_t kiln_chat_tool_calls(enum kiln_chat_template t, const struct kiln_chat_tool_call *calls, size_t n,
                             char *buf, size_t size);

/* =========================================================================
 * Jinja templates: a sandboxed interpreter for the chat templates models ship
 * (tokenizer.chat_template), with the semantics of @huggingface/jinja (the
 * engine transformers.js and llama.cpp's own follow): trim_blocks and
 * lstrip_blocks on, `{{ none }}` prints nothing, booleans print true/false.
 *
 *   char err[256];
 *   struct kiln_jinja *t = kiln_jinja_parse(src, strlen(src), err, sizeof err);
 *   struct kiln_jinja_opts o = kiln_jinja_default_opts();
 *   size_t n;
 *   char *text = kiln_jinja_render(t, "{\"messages\": [...], \"add_generation_prompt\": true}",
 *                                  len, &o, &n, err, sizeof err);
 *   ... free(text); kiln_jinja_free(t);
 *
 * A template comes from an untrusted file, so nothing in it reaches files, the
 * environment or the network, and every render is bounded in steps, memory,
 * output and nesting; past a bound, or on any error (a syntax error, a
 * template's raise_exception, an operation on the wrong types), the call
 * returns NULL with a message that names the template line
 * ("template line 12: ..."). A parsed template is immutable: any number of
 * threads may render one at once.
 * ========================================================================= */

struct kiln_jinja;

struct kiln_jinja_limits {
    uint64_t max_steps; /* expressions, statements and loop iterations evaluated (100M: Gemma 4's template,
                         * quadratic in the messages, renders 6000 in ~60M) */
    size_t max_memory;  /* bytes the render may allocate (256 MiB) */
    size_t max_output;  /* bytes of output (32 MiB) */
    int max_depth;      /* nested evaluation, macro calls included (1000) */
};

struct kiln_jinja_opts {
    struct kiln_jinja_limits limits;
    int64_t now; /* the time strftime_now prints (seconds since the epoch, local time zone); -1: the clock */
};
struct kiln_jinja_opts kiln_jinja_default_opts(void);

/* Parse a template (len bytes, NUL not needed); NULL with a message naming the line. */
struct kiln_jinja *kiln_jinja_parse(const char *src, size_t len, char *err, size_t errlen);
void kiln_jinja_free(struct kiln_jinja *t);

/* Render t with the variables of ctx_json, a JSON object (messages, tools,
 * add_generation_prompt, bos_token, ...; NULL: none). Returns the output,
 * malloc'd and NUL-terminated, its length in *len; NULL with a message. */
char *kiln_jinja_render(const struct kiln_jinja *t, const char *ctx_json, size_t ctx_len,
                        const struct kiln_jinja_opts *opts, size_t *len, char *err, size_t errlen);

/* =========================================================================
 * chat replies: a model's raw output into content, reasoning and tool calls
 *
 * Chat models write tool calls and their thinking in their own markup. The
 * format comes from the model's chat template (kiln_tool_format_detect); the
 * parser turns the generated text into what OpenAI's API returns:
 *
 *   struct kiln_chat_parse_opts o = {.format = kiln_tool_format_detect(template_src),
 *                                    .parse_tools = true, .reasoning = true};
 *   struct kiln_chat_reply r;
 *   if (kiln_chat_parse(text, len, &o, &r) == 0) {
 *       ... r.content, r.reasoning, r.calls[i].name / .arguments (a JSON object as text) ...
 *       kiln_chat_reply_free(&r);
 *   }
 *
 * Text that looks like a call but does not parse stays content. With partial,
 * the text is a generation still running: what could still turn into markup
 * (half a "<tool_call>") is held back, and the last call may be incomplete
 * (its name NULL until known, its arguments a prefix of the final ones), so
 * that successive parses only ever grow: a stream sends their differences.
 * ========================================================================= */

enum kiln_tool_format {
    KILN_TOOLS_CONTENT = 0,  /* no tool-call markup known: plain content */
    KILN_TOOLS_GENERIC,      /* {"tool_call": {"name", "arguments"}} / {"tool_calls": [...]} / {"response": ...} */
    KILN_TOOLS_HERMES,       /* <tool_call>{"name", "arguments"}</tool_call> (Hermes 2/3, Qwen 2.5, Qwen 3, QwQ) */
    KILN_TOOLS_QWEN3_CODER,  /* <tool_call><function=NAME><parameter=P>V</parameter></function></tool_call> */
    KILN_TOOLS_LLAMA3,       /* {"name", "parameters"}, <|python_tag|> and builtin tools (Llama 3.1-3.3) */
    KILN_TOOLS_MISTRAL,      /* [TOOL_CALLS][{...}] or [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} */
    KILN_TOOLS_GPT_OSS,      /* harmony channels: analysis, final, commentary to=functions.NAME */
    KILN_TOOLS_DEEPSEEK_R1,  /* <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json {...}``` */
    KILN_TOOLS_DEEPSEEK_V3,  /* <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...} (DeepSeek V3.1) */
    KILN_TOOLS_COUNT
};

/* The format a chat template's own tool-call markup implies (CONTENT for NULL or none found). */
enum kiln_tool_format kiln_tool_format_detect(const char *template_src);
const char *kiln_tool_format_name(enum kiln_tool_format f);

struct kiln_tool_call {
    char *name;      /* NULL: not known yet (partial) */
    char *arguments; /* a JSON object as text (whitespace between tokens removed); partial: a prefix */
    char *id;        /* the model's own id where its format has one (Mistral), else NULL */
};

struct kiln_chat_reply {
    char *content;   /* never NULL */
    char *reasoning; /* never NULL ("" when there is none) */
    struct kiln_tool_call *calls;
    size_t n_calls;
};

struct kiln_chat_parse_opts {
    enum kiln_tool_format format;
    bool parse_tools;         /* tools were offered (and tool_choice is not "none") */
    bool reasoning;           /* thinking goes to reasoning (llama-server's --reasoning-format deepseek) */
    const char *think_prefix; /* the prompt ended inside a thinking block opened by these bytes ("<think>\n"):
                               * the output starts as reasoning; NULL: it does not */
    bool partial;             /* a generation still running */
    const char *tools_json;   /* the offered tools (a JSON array): typed values of XML-style parameters; may be NULL */
};

/* 0 with *out filled (free it with kiln_chat_reply_free), or -1 when memory runs out. */
int kiln_chat_parse(const char *text, size_t len, const struct kiln_chat_parse_opts *o, struct kiln_chat_reply *out);
void kiln_chat_reply_free(struct kiln_chat_reply *r);

/* =========================================================================
 * grammars: output held to a GBNF grammar or a JSON Schema
 *
 * A grammar (llama.cpp's GBNF, or a JSON Schema converted to it as llama.cpp's
 * json_schema_to_grammar does) is compiled once into byte-level automata; a
 * vocabulary is indexed once (kiln_grammar_vocab: every token's bytes in a
 * trie); a matcher follows one sequence through the grammar and gives, at each
 * step, the mask of the tokens that can come next. Masks are computed from
 * per-state token classes that are cached with the grammar, so after the first
 * tokens a step costs microseconds, not a pass over the vocabulary.
 *
 *   char err[256];
 *   struct kiln_grammar_vocab *gv = kiln_grammar_vocab_new(vocab, err, sizeof err); // once per model
 *   struct kiln_grammar *g = kiln_grammar_from_json_schema(schema, strlen(schema), err, sizeof err);
 *   struct kiln_sampler *s = kiln_sampler_chain_new();
 *   kiln_sampler_chain_add(s, kiln_sampler_init_grammar(g, gv)); // first: the rest sees allowed tokens only
 *   kiln_sampler_chain_add(s, kiln_sampler_from_params(&params));
 *   kiln_grammar_free(g); // the sampler keeps what it needs
 *   ... kiln_sampler_accept_prompt(s, tok) for prompt tokens (penalties only);
 *       kiln_sampler_sample / kiln_sampler_accept as usual; an end-of-generation
 *       token is allowed only where the grammar is complete ...
 *
 * Text tokens are matched by their bytes (kiln_token_to_piece); control tokens
 * never match text, end-of-generation tokens are allowed where the grammar can
 * end. Errors name the line and column of GBNF text, the JSON path of a schema
 * keyword, and the feature kiln does not support (never silently ignored).
 * Grammars, vocab indexes are immutable and thread-safe; a matcher (and a
 * sampler holding one) belongs to one sequence.
 * ========================================================================= */

struct kiln_grammar;
struct kiln_grammar_vocab;
struct kiln_grammar_matcher;

/* Compile GBNF text (len bytes; root: the start rule, NULL for "root"). NULL with a
 * message in err: syntax ("grammar line 3, column 7: ..."), undefined rules, left
 * recursion, a grammar past the size limits (huge repetition counts). */
struct kiln_grammar *kiln_grammar_parse(const char *gbnf, size_t len, const char *root, char *err, size_t errlen);
/* Compile a JSON Schema given as JSON text. NULL with a message naming the schema
 * path and the problem (malformed JSON, an unsupported keyword, a bad pattern ...). */
struct kiln_grammar *kiln_grammar_from_json_schema(const char *schema, size_t len, char *err, size_t errlen);
/* The GBNF a JSON Schema converts to: bytes written (NUL-terminated), -(needed
 * including the NUL) when size is too small (buf may be NULL), KILN_ERR_INVALID with
 * a message in err when the schema is refused. Rules are named after the schema's
 * properties; prefix (may be NULL or ""; letters, digits, '-') is put before every
 * rule name, root's too ("tool-" gives tool-root, tool-space, ...), so that several
 * schemas fit in one grammar (tool calls). */
int64_t kiln_json_schema_to_gbnf(const char *schema, size_t len, const char *prefix, char *buf, size_t size,
                                 char *err, size_t errlen);
/* The GBNF text a grammar was compiled from (for a schema: what it converted to). */
const char *kiln_grammar_text(const struct kiln_grammar *g);
void kiln_grammar_free(struct kiln_grammar *g); /* matchers and samplers made from g keep it alive */

/* Index a vocabulary (a few tens of ms for 150k tokens): build once per model and
 * share; it must outlive the matchers and samplers that use it. It also keeps the
 * token classes grammars have in common (a JSON string's inside, ...), so that a
 * new grammar reuses what an earlier one computed (internally locked: thread-safe). */
struct kiln_grammar_vocab *kiln_grammar_vocab_new(const struct kiln_vocab *v, char *err, size_t errlen);
void kiln_grammar_vocab_free(struct kiln_grammar_vocab *gv);
int32_t kiln_grammar_vocab_n_tokens(const struct kiln_grammar_vocab *gv);

/* One sequence through g, from its start. gv may be NULL for a matcher that only
 * checks text (accept_text, can_end). NULL with a message on failure. */
struct kiln_grammar_matcher *kiln_grammar_matcher_new(const struct kiln_grammar *g,
                                                      const struct kiln_grammar_vocab *gv, char *err,
                                                      size_t errlen);
/* A lazy matcher (tool calls with tool_choice "auto", as llama.cpp's grammar
 * triggers): it allows every token until the generated text contains one of the
 * trigger strings; from there on the grammar holds, starting at the trigger's first
 * byte (so the grammar's text begins with the trigger). */
struct kiln_grammar_matcher *kiln_grammar_matcher_new_lazy(const struct kiln_grammar *g,
                                                           const struct kiln_grammar_vocab *gv,
                                                           const char *const *triggers, size_t n_triggers,
                                                           char *err, size_t errlen);
void kiln_grammar_matcher_free(struct kiln_grammar_matcher *m);
void kiln_grammar_matcher_reset(struct kiln_grammar_matcher *m); /* back to the start (and inactive, if lazy) */
/* Advance by one token: false (state unchanged, reason in kiln_grammar_matcher_error)
 * when the grammar does not allow it. An end-of-generation token is allowed where the
 * grammar can end; nothing is allowed after it. */
bool kiln_grammar_matcher_accept_token(struct kiln_grammar_matcher *m, int32_t token);
/* Advance by text (tests, forced prefixes); false (state unchanged) when not allowed. */
bool kiln_grammar_matcher_accept_text(struct kiln_grammar_matcher *m, const char *text, size_t len);
/* The tokens allowed next, bit t of bits[t / 64] for token t, over n_words words
 * (at least (n_tokens + 63) / 64; tokens past the vocabulary are 0). All bits set
 * while a lazy matcher is inactive. false (message in kiln_grammar_matcher_error) on
 * failure (memory, a grammar too complex to index). */
bool kiln_grammar_matcher_fill_mask(struct kiln_grammar_matcher *m, uint64_t *bits, size_t n_words);
bool kiln_grammar_matcher_can_end(const struct kiln_grammar_matcher *m); /* the text so far is complete */
bool kiln_grammar_matcher_is_done(const struct kiln_grammar_matcher *m); /* complete, and nothing may follow */
bool kiln_grammar_matcher_is_active(const struct kiln_grammar_matcher *m); /* not a lazy one still waiting */
const char *kiln_grammar_matcher_error(const struct kiln_grammar_matcher *m);

/* Sampler stages (see sampling): tokens the grammar does not allow are removed
 * before the stages after it; kiln_sampler_accept advances the grammar, and a token
 * it refuses makes the next kiln_sampler_sample fail with the reason. NULL (with
 * kiln_sampler_last_error) on failure. */
struct kiln_sampler *kiln_sampler_init_grammar(const struct kiln_grammar *g, const struct kiln_grammar_vocab *gv);
struct kiln_sampler *kiln_sampler_init_grammar_lazy(const struct kiln_grammar *g, const struct kiln_grammar_vocab *gv,
                                                    const char *const *triggers, size_t n_triggers);
/* A prompt token: recorded for the penalties; grammar stages do not see it. */
void kiln_sampler_accept_prompt(struct kiln_sampler *s, int32_t token);
/* The matcher of the first grammar stage of s (NULL if none): to ask whether the
 * grammar is done, or to read its state. */
struct kiln_grammar_matcher *kiln_sampler_grammar(struct kiln_sampler *s);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
