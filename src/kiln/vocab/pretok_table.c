/*
 * pretok_table.c - every BPE pre-tokenizer kind llama.cpp knows, as one table:
 * the tokenizer.ggml.pre names that select it, its split regexes (applied in
 * order, each to the pieces the previous one left) and its flags. The regexes
 * are the ones in the models' tokenizer.json, in the ECMAScript-compatible form
 * llama.cpp uses ((?i:..) spelled out as classes); pretok_split.c runs them.
 */
#include "pretok_custom.h"

#include <string.h>

#define RX_JAIS2                                                                                   \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                 "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|" \
                 "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"
#define RX_DEEPSEEK3_MAIN                                                                    \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| " \
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define RX_SPARK_MAIN                                                                        \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| " \
    "?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+"
#define RX_PORO " ?[^(\\s|.,!?\342\200\246\343\200\202\357\274\214\343\200\201\340\245\244\333\224\330\214)]+"
#define RX_TEKKEN                                                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])(" \
    "[^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_GPT4O                                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" CONTRACTIONS                   \
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" CONTRACTIONS                 \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_GRANITE_MULTI                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+" CONTRACTIONS       \
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*" CONTRACTIONS     \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CASED_WORDS                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS \
    "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS

/* flags: byte_encode, ignore_merges, clean_spaces, add_bos, escape_ws, no_bos, add_sep */
#define BE true
static const struct kv_pretok table[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, BE, false, true, false, false,
     false, false},
    {"minicpm5",
     {"\\p{N}{1,3}", CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                  "\\s+(?!\\S)|\\s+"},
     BE, true, true, false, false, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", {RX_LLAMA3}, BE, true, true,
     true, false, false, false},
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-z\302\265\303\200-\303\226\303\230-\303\266\303\270-\306\272\306\274-\306\277\307\204-\312\223\312\225-\312\257\315\260-\315\263\315\266\315\267\315\273-\315\275\315\277\316\206\316\210-\316\212\316\214\316\216-\316\241\316\243-\317\265\317\267-\322\201\322\212-\324\257\324\261-\325\226\341\202\240-\341\203\205\341\216\240-\341\217\265\341\217\270-\341\217\275\341\262\220-\341\262\272\341\262\275-\341\262\277\341\264\200-\341\264\253\341\265\253-\341\265\267\341\265\271-\341\266\232\341\270\200-\341\274\225\341\274\230-\341\274\235\341\274\240-\341\275\205\341\275\210-\341\275\215\341\275\220-\341\275\227\341\275\231\341\275\233\341\275\235\341\275\237-\341\275\275\341\276\200-\341\276\264\341\276\266-\341\276\274\341\276\276\341\277\202-\341\277\204\341\277\206-\341\277\214\341\277\220-\341\277\223\341\277\226-\341\277\233\341\277\240-\341\277\254\341\277\262-\341\277\264\341\277\266-\341\277\274\342\204\202\342\204\207\342\204\212-\342\204\223\342\204\225\342\204\231-\342\204\235\342\204\244\342\204\246\342\204\250\342\204\252-\342\204\255\342\204\257-\342\204\264\342\204\271\342\204\274-\342\204\277\342\205\205-\342\205\211\342\205\216\342\206\203\342\206\204\342\260\200-\342\261\273\342\261\276-\342\263\244\342\263\253-\342\263\256\342\263\262\342\263\263\352\231\200-\352\231\255\352\232\200-\352\232\233\352\234\242-\352\235\257\352\235\261-\352\236\207\352\236\213-\352\236\216\352\255\260-\352\256\277\357\254\200-\357\254\206\357\254\223-\357\254\227\357\274\241-\357\274\272\357\275\201-\357\275\232\360\220\220\200-\360\220\221\217\360\220\222\260-\360\220\223\223\360\220\223\230-\360\220\223\273\360\220\262\200-\360\220\262\262\360\220\263\200-\360\220\263\262\360\221\242\240-\360\221\243\237\360\236\244\200-\360\236\245\203]+",
      "\\s?[!-/:-~\357\274\201-\357\274\217\357\274\232-\357\275\236\342\200\230-\342\200\237\343\200\200-\343\200\202]+", "\\s+$", "[\344\270\200-\351\276\245\340\240\200-\344\270\200\352\260\200-\355\237\277]+", "\\p{N}+"},
     BE, false, false, false, false, false, false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\344\270\200-\351\276\245\340\240\200-\344\270\200\352\260\200-\355\237\277]+", "\\p{N}"}, BE, false, false, false,
     false, false, false},
    {"deepseek-v3|hunyuan-dense|hy_v4|joyai-llm", {"\\p{N}{1,3}", "[\344\270\200-\351\276\245\343\201\200-\343\202\237\343\202\240-\343\203\277]+", RX_DEEPSEEK3_MAIN}, BE, false,
     false, false, false, false, false},
    {"spark2_5", {"\\p{N}{1,3}", "[\344\270\200-\351\276\245\343\201\200-\343\202\237\343\202\240-\343\203\277]+", RX_SPARK_MAIN, "\\p{N}"}, BE, false, false, false, false, false,
     false},
    {"youtu",
     {"[\352\260\200-\355\236\243\343\204\261-\343\206\216]+|[\357\274\201\342\200\246\342\200\234\342\200\235\342\200\230\342\200\231\342\200\224\357\274\232\357\274\233\357\274\214\343\200\201-\343\200\277\357\270\260-\357\271\217]+|[\343\204\205-\343\204\257]+|[\344\270\200-\351\276\245\343\201\200-\343\202\237\343\202\240-\343\203\277]+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS
      "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS
      "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     BE, true, false, false, false, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}, BE, false, true, false, false, false, false},
    {"starcoder|refact|codeshell|exaone|minerva-7b|mellum2", {"\\p{N}", RX_GPT2}, BE, false, true, false, false, false,
     false},
    {"command-r|smollm", {"\\p{N}", RX_GPT2}, BE, false, false, false, false, false, false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|exaone4|mpt|olmo|jais",
     {RX_GPT2}, BE, false, true, false, false, false, false},
    {"trillion|granite-docling", {RX_GPT2}, BE, false, false, false, false, false, false},
    {"jina-v1-en|jina-v2-code|roberta-bpe", {RX_GPT2}, BE, false, true, false, false, false, true},
    {"jais-2", {RX_JAIS2}, BE, false, true, false, false, false, false},
    {"gemma4|granite-embed-multi-311m", {RX_NEWLINES}, false, false, true, true, true, false, false},
    {"sarvam-moe", {RX_NEWLINES}, false, false, false, false, true, false, false},
    {"whitespace", {"\\S+"}, false, false, true, false, false, false, false},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|grok-2|solar-open", {RX_QWEN2}, BE, false, false, false, false,
     false, false},
    {"stablelm2|megrez", {RX_QWEN2}, BE, false, true, false, false, false, false},
    {"qwen35", {RX_QWEN35}, BE, false, false, false, false, false, false},
    {"dbrx|smaug-bpe", {RX_LLAMA3}, BE, false, true, false, false, false, false},
    {"glm4|chatglm-bpe", {RX_LLAMA3}, BE, false, true, false, false, true, false},
    {"poro-chat", {RX_PORO}, BE, false, false, false, false, false, false},
    {"bloom|gpt3-finnish", {RX_PORO}, BE, false, true, false, false, false, false},
    {"viking", {RX_PORO, "\\p{N}"}, BE, false, false, false, false, false, false},
    {"tekken", {RX_TEKKEN}, BE, true, false, true, false, false, false},
    {"exaone-moe",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
                   "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     BE, false, true, false, false, false, false},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2},
     BE, false, false, true, false, false, false},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", {RX_GPT4O}, BE, false, false, false, false, false, false},
    {"granite-embed-multi-97m", {RX_GRANITE_MULTI}, BE, true, false, false, false, false, false},
    {"tiny_aya|cohere2moe",
     {"\\d{1,3}(?=(?:\\d{3})*\\b)",
      RX_CASED_WORDS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     BE, false, false, false, false, false, false},
    {"superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}, BE, false, false, false, false, false, false},
    {"bailingmoe|bailingmoe2|llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     BE, false, false, false, false, false, false},
    {"seed-coder",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     BE, false, false, false, false, false, false},
    {"kimi-k2", {"\\p{Han}+"}, BE, false, false, false, false, false, false},
    {"ufakzeka",
     {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, BE, false,
     false, false, false, false, false},
    {"afmoe",
     {"\\p{AFMoE_digits}", "[\344\270\200-\351\277\277\343\220\200-\344\266\277\350\261\210-\357\253\277\343\201\200-\343\202\237\343\202\240-\343\203\277\357\275\245-\357\276\237\342\274\200-\342\277\237\340\271\200-\340\271\277\340\272\200-\340\273\277\341\236\200-\341\237\277\341\200\200-\341\202\237\352\251\240-\352\251\277\352\247\240-\352\247\277\352\260\200-\355\236\257\341\204\200-\341\207\277]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     BE, false, false, false, false, false, false},
    {"laguna", {RX_NEWLINES, RX_QWEN2}, BE, false, false, false, false, false, false},
};

const struct kv_pretok *kv_pretok_default(void) { return &table[0]; }

const struct kv_pretok *kv_pretok_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const char *p = table[i].names;
        for (;;) {
            const char *bar = strchr(p, '|');
            size_t n = bar ? (size_t)(bar - p) : strlen(p);
            if (n == len && !memcmp(p, name, len)) return &table[i];
            if (!bar) break;
            p = bar + 1;
        }
    }
    return NULL;
}
