/*
 * kiln-offline.h - work on model files rather than on a running model: write
 * a GGUF model with its weights quantized to another type, write synthetic
 * models for tests and benchmarks, and reach the GGUF file behind a loaded
 * model (its metadata, for tools such as `kiln info`). Errors as in kiln.h: a
 * run returns false and writes its message into the caller's (err, errlen).
 */
#ifndef KILN_OFFLINE_H
#define KILN_OFFLINE_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GGUF file a model was loaded from (gguf.h): its keys and tensors as stored. It
 * lives as long as the model. */
const struct gguf_file *kiln_model_gguf(const struct kiln_model *model);

/* ================================================================== quantize
 *
 * Rewrite a GGUF model with its weights in another type, choosing each tensor's
 * type as llama.cpp's quantizer does for the same file type (so the output has
 * the same tensor types, and for the legacy types the same bytes): the output
 * projection keeps more bits (Q6_K), the _S/_M/_L mixes give some attn_v and
 * ffn_down layers more bits, rows that are not whole blocks fall back to a type
 * that fits, 1-D tensors (norms) stay as they are. Metadata is kept, with
 * general.file_type and general.quantization_version (2) set. Data streams
 * through the writer (bounded memory) and the output appears only when complete.
 */

/* File types: llama.cpp's ids (written as general.file_type). */
enum kiln_ftype {
    KILN_FTYPE_ALL_F32 = 0,
    KILN_FTYPE_MOSTLY_F16 = 1,
    KILN_FTYPE_MOSTLY_Q4_0 = 2,
    KILN_FTYPE_MOSTLY_Q4_1 = 3,
    KILN_FTYPE_MOSTLY_Q8_0 = 7,
    KILN_FTYPE_MOSTLY_Q5_0 = 8,
    KILN_FTYPE_MOSTLY_Q5_1 = 9,
    KILN_FTYPE_MOSTLY_Q2_K = 10,
    KILN_FTYPE_MOSTLY_Q3_K_S = 11,
    KILN_FTYPE_MOSTLY_Q3_K_M = 12,
    KILN_FTYPE_MOSTLY_Q3_K_L = 13,
    KILN_FTYPE_MOSTLY_Q4_K_S = 14,
    KILN_FTYPE_MOSTLY_Q4_K_M = 15,
    KILN_FTYPE_MOSTLY_Q5_K_S = 16,
    KILN_FTYPE_MOSTLY_Q5_K_M = 17,
    KILN_FTYPE_MOSTLY_Q6_K = 18,
    KILN_FTYPE_MOSTLY_IQ4_NL = 25,
    KILN_FTYPE_MOSTLY_IQ4_XS = 30,
    KILN_FTYPE_MOSTLY_BF16 = 32,
    KILN_FTYPE_MOSTLY_MXFP4_MOE = 38, /* expert stacks MXFP4, other matrices Q8_0 */
};

/* "Q4_K_M", "q8_0", "F16" ... (case-insensitive; Q3_K/Q4_K/Q5_K mean the _M mix,
 * as in llama-quantize; MXFP4 means MXFP4_MOE). false if unknown. */
bool kiln_ftype_from_name(const char *name, enum kiln_ftype *out);
const char *kiln_ftype_name(enum kiln_ftype ftype); /* "Q4_K_M"; "?" if unknown */

/* What kiln_quantize_file does with one tensor (for listings and warnings). */
struct kiln_quantize_tensor {
    const char *name;
    int n_dims;
    int64_t ne[KT_MAX_DIMS];
    enum kt_type from, to;
    bool requantized; /* from was already quantized: precision lost twice */
};

struct kiln_quantize_params {
    enum kiln_ftype ftype;
    int n_threads;          /* <= 0: 1; the bytes are the same for any count */
    bool pure;              /* every quantizable tensor gets ftype's type (no mix) */
    bool allow_requantize;  /* accept already-quantized inputs (dequantized first) */
    kiln_progress_fn progress; /* fraction of output bytes written; false cancels */
    void *progress_data;
    /* Called once per tensor, in file order, before anything is written; may be NULL. */
    void (*on_tensor)(const struct kiln_quantize_tensor *t, void *data);
    void *on_tensor_data;
};
struct kiln_quantize_params kiln_quantize_default_params(void); /* Q8_0, 1 thread */

/* Quantize the GGUF file in into out. false with a message in err (unreadable
 * input, a tensor that is already quantized without allow_requantize, a tensor
 * with NaN/Inf values, an unwritable output ...); out is then left untouched. */
bool kiln_quantize_file(const char *in, const char *out, const struct kiln_quantize_params *p, char *err,
                        size_t errlen);

/* ================================================================== synth
 *
 * Deterministic synthetic llama models with random weights, for tests and
 * benchmarks: the same preset, type and seed give the same bytes on any machine.
 * Weights are streamed to the file (a 7B model is never held in memory).
 */
struct kiln_synth_params {
    const char *preset;     /* "tiny", "tinyllama-1.1b", "llama-7b" */
    const char *arch;       /* an architecture kiln runs (its required tensors), "mixtral"; NULL: "llama" */
    enum kt_type type;      /* F32, F16, BF16, Q8_0, Q4_0 (quantized: llama.cpp's mix for that type) */
    const char *vocab_path; /* GGUF file whose tokenizer.* keys to use, or NULL for a synthetic SPM vocab */
    uint64_t seed;
    enum kiln_pooling pooling; /* <arch>.pooling_type written (UNSPECIFIED: none, bert: cls; rank: bert's
                                  classifier head too) */
    int n_threads;          /* <= 0: 1; the bytes are the same for any count */
    kiln_progress_fn progress;
    void *progress_data;
    int64_t n_layers;       /* > 0: this many layers instead of the preset's (a slice of a big model) */
};
struct kiln_synth_params kiln_synth_default_params(void); /* tiny, F16, seed 0 */
/* Names of the presets, NULL-terminated. */
const char *const *kiln_synth_presets(void);
/* Whether synth makes files of arch: a row of the architecture table, or "mixtral" (a
 * llama file whose layers route through experts). */
bool kiln_synth_arch_known(const char *arch);
bool kiln_synth(const struct kiln_synth_params *p, const char *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* KILN_OFFLINE_H */
