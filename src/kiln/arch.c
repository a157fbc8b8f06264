/*
 * arch.c - the architectures kiln runs: one row each (name, RoPE layout,
 * biases, graph builder). A new architecture is a builder in arch/ plus a row.
 */
#include "runtime.h"

#include <string.h>

static const struct kiln_arch arches[] = {
    {.name = "llama", .rope_mode = KT_ROPE_NORMAL, .qkv_bias = false, .build = kiln_build_llama},
    {.name = "qwen2", .rope_mode = KT_ROPE_NEOX, .qkv_bias = true, .build = kiln_build_llama},
};

const struct kiln_arch *kiln_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
        if (!strcmp(arches[i].name, name)) return &arches[i];
    return NULL;
}
