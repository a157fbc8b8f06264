/*
 * test_model_bad.c - kiln_model_load on models crafted broken from a real one
 * (llama, qwen3, phi3, gemma3, and gemma2/gemma4 files from kiln_synth): each defect
 * is refused with a message that names it, tensors the architecture does not use
 * included, and so are the Gemma 4 variants kiln does not run; nothing crashes; and
 * the progress callback reports loading and can cancel it.
 */
#include "gguf.h"
#include "kiln.h"
#include "kiln-offline.h"
#include "testutil.h"

#include <unistd.h>

static const char *src_path, *shared;
static char tmp_path[256];

struct edit {
    const char *model;          /* models/<model> as the source instead of kjv-q8_0.gguf */
    const char *path;           /* or this file */
    const char *drop_tensor;    /* leave this tensor out */
    const char *add_tensor;     /* add a tensor of this name ... */
    const char *add_like;       /* ... with the data and shape of this one */
    const char *swap_tensor;    /* give this tensor the data/shape of ... */
    const char *swap_with;      /* ... this one */
    const char *set_key;        /* set this key ... */
    const char *str_value;      /* ... to this string, or */
    int64_t u32_value;          /* ... to this u32 (when str_value is NULL) */
    const char *drop_key;
};

/* Copy the source model with one edit applied into tmp_path. */
static bool write_edited(const struct edit *e) {
    char err[256], other[1024];
    snprintf(other, sizeof other, "%s/models/%s", shared, e->model ? e->model : "");
    struct gguf_file *g = gguf_open(e->path ? e->path : e->model ? other : src_path, err, sizeof err);
    if (!g) return false;
    struct gguf_writer *w = gguf_writer_new();
    bool ok = w && gguf_writer_copy_kv(w, g);
    if (ok && e->set_key)
        ok = e->str_value ? gguf_writer_set_str(w, e->set_key, e->str_value)
                          : gguf_writer_set_u32(w, e->set_key, (uint32_t)e->u32_value);
    if (ok && e->drop_key) ok = gguf_writer_remove_key(w, e->drop_key);
    for (int64_t i = 0; ok && i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (e->drop_tensor && !strcmp(name, e->drop_tensor)) continue;
        if (e->swap_tensor && !strcmp(name, e->swap_tensor)) {
            t = gguf_tensor(g, gguf_find_tensor(g, e->swap_with));
        }
        ok = gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
    }
    if (ok && e->add_tensor) {
        int64_t ti = gguf_find_tensor(g, e->add_like);
        const struct gguf_tensor_info *t = ti >= 0 ? gguf_tensor(g, ti) : NULL;
        ok = t && gguf_writer_add_tensor(w, e->add_tensor, t->type, t->n_dims, t->ne, t->data);
    }
    ok = ok && gguf_writer_write(w, tmp_path);
    if (!ok) fprintf(stderr, "writer: %s\n", w ? gguf_writer_error(w) : "?");
    gguf_writer_free(w);
    gguf_close(g);
    return ok;
}

static void expect_refused(const char *label, const struct edit *e, const char *want) {
    CHECKF(write_edited(e), "%s: cannot write the edited model", label);
    char err[512] = "";
    struct kiln_model *m = kiln_model_load(tmp_path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m == NULL, "%s: loaded", label);
    CHECKF(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", label, err, want);
    kiln_model_free(m);
}

struct progress_log {
    int calls;
    float last;
    int cancel_at;
};

static bool on_progress(float p, void *data) {
    struct progress_log *log = data;
    log->calls++;
    CHECK(p >= log->last && p <= 1.0f);
    log->last = p;
    return log->cancel_at == 0 || log->calls < log->cancel_at;
}

int main(void) {
    shared = tu_shared_or_skip("test_model_bad");
    static char src[1024];
    snprintf(src, sizeof src, "%s/models/kjv-q8_0.gguf", shared);
    src_path = src;
    snprintf(tmp_path, sizeof tmp_path, "/tmp/kiln-test-model-%d.gguf", (int)getpid());

    expect_refused("missing tensor", &(struct edit){.drop_tensor = "blk.1.ffn_up.weight"},
                   "missing tensor 'blk.1.ffn_up.weight'");
    expect_refused("wrong shape",
                   &(struct edit){.swap_tensor = "blk.0.attn_q.weight", .swap_with = "blk.0.attn_k.weight"},
                   "tensor 'blk.0.attn_q.weight' has shape [256, 128");
    expect_refused("1-D weight of another type",
                   &(struct edit){.swap_tensor = "output_norm.weight", .swap_with = "blk.0.attn_q.weight"},
                   "output_norm.weight");
    expect_refused("unknown architecture", &(struct edit){.set_key = "general.architecture", .str_value = "gpt9"},
                   "architecture 'gpt9' is not supported");
    expect_refused("KV heads do not divide heads",
                   &(struct edit){.set_key = "llama.attention.head_count_kv", .u32_value = 3}, "cannot be grouped");
    expect_refused("zero layers", &(struct edit){.set_key = "llama.block_count", .u32_value = 0},
                   "llama.block_count = 0 is out of range");
    expect_refused("missing block count", &(struct edit){.drop_key = "llama.block_count"},
                   "missing hyper-parameter llama.block_count");
    expect_refused("hyper-parameter of the wrong type",
                   &(struct edit){.set_key = "llama.embedding_length", .str_value = "256"}, "llama.embedding_length");
    expect_refused("vocab size disagrees", &(struct edit){.set_key = "llama.vocab_size", .u32_value = 31999},
                   "vocab_size 31999 differs");
    expect_refused("odd rope dimensions", &(struct edit){.set_key = "llama.rope.dimension_count", .u32_value = 31},
                   "odd");

    /* no tensor is ignored: one the architecture does not use is refused by name */
    expect_refused("unknown tensor",
                   &(struct edit){.add_tensor = "blk.0.attn_gate.weight", .add_like = "blk.0.attn_q.weight"},
                   "tensor 'blk.0.attn_gate.weight' is not used by architecture 'llama'");
    expect_refused("a layer past block_count",
                   &(struct edit){.add_tensor = "blk.4.ffn_norm.weight", .add_like = "blk.3.ffn_norm.weight"},
                   "tensor 'blk.4.ffn_norm.weight' is not used");
    expect_refused("qwen2's bias in a llama file",
                   &(struct edit){.add_tensor = "blk.2.attn_q.bias", .add_like = "output_norm.weight"},
                   "tensor 'blk.2.attn_q.bias' is not used by architecture 'llama'");
    expect_refused("qwen3 without a k norm",
                   &(struct edit){.model = "qwen3-kjv-q4_0.gguf", .drop_tensor = "blk.2.attn_k_norm.weight"},
                   "missing tensor 'blk.2.attn_k_norm.weight'");
    expect_refused("qwen3 q norm of the wrong size",
                   &(struct edit){.model = "qwen3-kjv-q4_0.gguf", .swap_tensor = "blk.0.attn_q_norm.weight",
                                  .swap_with = "blk.0.attn_norm.weight"},
                   "tensor 'blk.0.attn_q_norm.weight' has shape [256");
    expect_refused("phi3 with Phi-3-128k's rope factors (not implemented)",
                   &(struct edit){.model = "phi3-kjv-q4_0.gguf", .add_tensor = "rope_factors_long.weight",
                                  .add_like = "blk.0.attn_norm.weight"},
                   "tensor 'rope_factors_long.weight' is not used by architecture 'phi3'");
    expect_refused("phi3 fused up of the wrong size",
                   &(struct edit){.model = "phi3-kjv-q4_0.gguf", .swap_tensor = "blk.1.ffn_up.weight",
                                  .swap_with = "blk.1.attn_qkv.weight"},
                   "tensor 'blk.1.ffn_up.weight' has shape [256, 512");
    expect_refused("phi3 with separate q as well",
                   &(struct edit){.model = "phi3-kjv-q4_0.gguf", .add_tensor = "blk.3.attn_q.weight",
                                  .add_like = "blk.3.attn_output.weight"},
                   "tensor 'blk.3.attn_q.weight' is not used by architecture 'phi3'");
    expect_refused("llama3 rope factors of the wrong size",
                   &(struct edit){.model = "llama3-kjv-q4_0.gguf", .swap_tensor = "rope_freqs.weight",
                                  .swap_with = "output_norm.weight"},
                   "tensor 'rope_freqs.weight' has shape [256");

    /* Gemma: a tensor the row does not declare, a missing post-norm, Gemma 2 with its own
     * output projection (llama.cpp loads none), Gemma 4 variants kiln does not run */
    expect_refused("gemma3 with per-layer embeddings",
                   &(struct edit){.model = "families/gemma3-kjv-q4_0.gguf", .add_tensor = "per_layer_token_embd.weight",
                                  .add_like = "token_embd.weight"},
                   "tensor 'per_layer_token_embd.weight' is not used by architecture 'gemma3'");
    expect_refused("gemma3 without a post-attention norm",
                   &(struct edit){.model = "families/gemma3-kjv-q4_0.gguf",
                                  .drop_tensor = "blk.3.post_attention_norm.weight"},
                   "missing tensor 'blk.3.post_attention_norm.weight'");
    expect_refused("gemma3 window out of range",
                   &(struct edit){.model = "families/gemma3-kjv-q4_0.gguf", .set_key = "gemma3.attention.sliding_window",
                                  .str_value = "8"},
                   "gemma3.attention.sliding_window");
    /* qwen3moe: every layer routed; a dense feed-forward beside the experts, a missing
     * expert count, more experts used than exist, an expert stack of the wrong width */
    const char *q3m = "families/qwen3moe-kjv-q4_0.gguf";
    expect_refused("qwen3moe with a dense ffn_up as well",
                   &(struct edit){.model = q3m, .add_tensor = "blk.2.ffn_up.weight", .add_like = "blk.2.attn_q.weight"},
                   "tensor 'blk.2.ffn_up.weight' is not used by architecture 'qwen3moe'");
    expect_refused("qwen3moe without expert_count", &(struct edit){.model = q3m, .drop_key = "qwen3moe.expert_count"},
                   "missing hyper-parameter qwen3moe.expert_count");
    expect_refused("qwen3moe with more experts used than exist",
                   &(struct edit){.model = q3m, .set_key = "qwen3moe.expert_used_count", .u32_value = 9},
                   "qwen3moe.expert_used_count = 9 is out of range [1, 8]");
    expect_refused("qwen3moe with a zero expert count",
                   &(struct edit){.model = q3m, .set_key = "qwen3moe.expert_count", .u32_value = 0},
                   "qwen3moe.expert_count = 0 is out of range");
    expect_refused("qwen3moe experts of another width",
                   &(struct edit){.model = q3m, .set_key = "qwen3moe.expert_feed_forward_length", .u32_value = 768},
                   "tensor 'blk.0.ffn_gate_exps.weight' has shape [256, 384, 8, 1], expected [256, 768, 8]");
    expect_refused("qwen3moe without a router",
                   &(struct edit){.model = q3m, .drop_tensor = "blk.1.ffn_gate_inp.weight"},
                   "missing tensor 'blk.1.ffn_gate_inp.weight'");
    /* a llama file with experts in its keys but a dense feed-forward, and the reverse */
    expect_refused("llama with expert_count but dense layers",
                   &(struct edit){.model = "kjv-q4_0.gguf", .set_key = "llama.expert_count", .u32_value = 4},
                   "missing hyper-parameter llama.expert_used_count");
    expect_refused("llama with a router in a dense file",
                   &(struct edit){.model = "kjv-q4_0.gguf", .add_tensor = "blk.0.ffn_gate_inp.weight",
                                  .add_like = "blk.0.attn_norm.weight"},
                   "tensor 'blk.0.ffn_gate_inp.weight' is not used by architecture 'llama'");

    char synth_path[256], serr[512];
    snprintf(synth_path, sizeof synth_path, "/tmp/kiln-test-model-synth-%d.gguf", (int)getpid());
    struct kiln_synth_params sp = kiln_synth_default_params();
    sp.arch = "gemma2";
    CHECKF(kiln_synth(&sp, synth_path, serr, sizeof serr), "synth gemma2: %s", serr);
    expect_refused("gemma2 with an output projection",
                   &(struct edit){.path = synth_path, .add_tensor = "output.weight", .add_like = "token_embd.weight"},
                   "tensor 'output.weight' is not used by architecture 'gemma2'");
    sp.arch = "gemma4";
    CHECKF(kiln_synth(&sp, synth_path, serr, sizeof serr), "synth gemma4: %s", serr);
    expect_refused("gemma4 E2B/E4B (per-layer embeddings)",
                   &(struct edit){.path = synth_path, .set_key = "gemma4.embedding_length_per_layer_input",
                                  .u32_value = 256},
                   "gemma4 with per-layer embeddings");
    expect_refused("gemma4 26B-A4B (experts)",
                   &(struct edit){.path = synth_path, .set_key = "gemma4.expert_count", .u32_value = 128},
                   "gemma4 with experts");
    expect_refused("gemma4 with shared KV layers",
                   &(struct edit){.path = synth_path, .set_key = "gemma4.attention.shared_kv_layers", .u32_value = 1},
                   "shared_kv_layers");
    expect_refused("gemma4 without its pattern",
                   &(struct edit){.path = synth_path, .drop_key = "gemma4.attention.sliding_window_pattern"},
                   "missing hyper-parameter gemma4.attention.sliding_window_pattern");
    expect_refused("gemma4 global layer's k norm of the windowed size",
                   &(struct edit){.path = synth_path, .swap_tensor = "blk.1.attn_k_norm.weight",
                                  .swap_with = "blk.0.attn_k_norm.weight"},
                   "tensor 'blk.1.attn_k_norm.weight' has shape [16");
    expect_refused("gemma4 with a fused qkv",
                   &(struct edit){.path = synth_path, .add_tensor = "blk.0.attn_qkv.weight",
                                  .add_like = "blk.0.attn_q.weight"},
                   "tensor 'blk.0.attn_qkv.weight' is not used by architecture 'gemma4'");
    /* gpt-oss: its window and expert width are required keys, its sinks a required tensor;
     * YaRN is refused where the row does not take it */
    sp.arch = "gpt-oss";
    CHECKF(kiln_synth(&sp, synth_path, serr, sizeof serr), "synth gpt-oss: %s", serr);
    expect_refused("gpt-oss without its window",
                   &(struct edit){.path = synth_path, .drop_key = "gpt-oss.attention.sliding_window"},
                   "missing hyper-parameter gpt-oss.attention.sliding_window");
    expect_refused("gpt-oss without its expert width",
                   &(struct edit){.path = synth_path, .drop_key = "gpt-oss.expert_feed_forward_length"},
                   "missing hyper-parameter gpt-oss.expert_feed_forward_length");
    expect_refused("gpt-oss without sinks",
                   &(struct edit){.path = synth_path, .drop_tensor = "blk.1.attn_sinks.weight"},
                   "missing tensor 'blk.1.attn_sinks.weight'");
    expect_refused("gpt-oss expert biases of the wrong width",
                   &(struct edit){.path = synth_path, .swap_tensor = "blk.0.ffn_up_exps.bias",
                                  .swap_with = "blk.0.ffn_gate_inp.bias"},
                   "tensor 'blk.0.ffn_up_exps.bias' has shape [4, 1, 1, 1], expected [64, 4]");
    expect_refused("llama with YaRN",
                   &(struct edit){.model = "kjv-q4_0.gguf", .set_key = "llama.rope.scaling.type", .str_value = "yarn"},
                   "rope scaling type 'yarn' is not supported");
    unlink(synth_path);

    /* a missing output.weight is not an error: the embedding is tied */
    CHECK(write_edited(&(struct edit){.drop_tensor = "output.weight"}));
    char err[512];
    struct kiln_model *m = kiln_model_load(tmp_path, kiln_model_default_params(), err, sizeof err);
    CHECKF(m != NULL, "tied: %s", err);
    kiln_model_free(m);

    /* progress: called per step, ends at 1; returning false cancels */
    struct progress_log log = {0};
    struct kiln_model_params mp = kiln_model_default_params();
    mp.progress = on_progress;
    mp.progress_data = &log;
    m = kiln_model_load(src_path, mp, err, sizeof err);
    CHECK(m != NULL && log.calls >= 4 && log.last == 1.0f);
    kiln_model_free(m);
    log = (struct progress_log){.cancel_at = 2};
    m = kiln_model_load(src_path, mp, err, sizeof err);
    CHECK(m == NULL && strstr(err, "cancelled"));

    /* a context is refused for impossible parameters, with a message */
    m = kiln_model_load(src_path, kiln_model_default_params(), err, sizeof err);
    struct kiln_context_params cp = kiln_context_default_params();
    cp.n_seq_max = 65;
    CHECK(m && !kiln_context_new(m, cp, err, sizeof err) && strstr(err, "n_seq_max"));
    cp = kiln_context_default_params();
    cp.type_k = KT_TYPE_Q4_1;
    CHECK(m && !kiln_context_new(m, cp, err, sizeof err) && strstr(err, "KV cache types"));
    kiln_model_free(m);

    unlink(tmp_path);
    return tu_finish("test_model_bad");
}
