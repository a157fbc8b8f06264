/*
 * chat.c - chat templates without Jinja: recognise a model's template family
 * by the marker strings llama.cpp uses and render conversations the way
 * llama.cpp's built-in formatter does. One table row per family; the few
 * families with state across messages (Llama 2, Mistral, Gemma, ...) have a
 * render function of their own.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kiln.h"
#include "kiln-offline.h"

/* ------------------------------------------------------------------ output */

struct out {
    char *buf;
    size_t size, len; /* len counts every byte, also those past size */
};

static void put(struct out *o, const char *s, size_t n) {
    if (o->len < o->size) {
        size_t room = o->size - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void puts_(struct out *o, const char *s) {
    put(o, s, strlen(s));
}

/* C-locale isspace, as llama.cpp's trim uses */
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void put_trimmed(struct out *o, const char *s) {
    size_t a = 0, b = strlen(s);
    while (a < b && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    put(o, s + a, b - a);
}

static bool trimmed_empty(const char *s) {
    for (; *s; s++)
        if (!is_space(*s)) return false;
    return true;
}

static bool is(const char *role, const char *name) {
    return strcmp(role, name) == 0;
}

/* Expands a message format: %r role, %R role in ASCII upper case, %T role with
 * its first letter upper-cased, %c content, %t content trimmed. */
static void put_fmt(struct out *o, const char *fmt, const struct kiln_chat_msg *m) {
    for (const char *p = fmt; *p; p++) {
        const char *q = strchr(p, '%');
        if (!q) {
            puts_(o, p);
            return;
        }
        put(o, p, (size_t)(q - p));
        p = q + 1;
        switch (*p) {
        case 'r':
            puts_(o, m->role);
            break;
        case 'c':
            puts_(o, m->content);
            break;
        case 't':
            put_trimmed(o, m->content);
            break;
        case 'R':
        case 'T':
            for (const char *r = m->role; *r; r++) {
                char ch = *r;
                if ((*p == 'R' || r == m->role) && ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
                put(o, &ch, 1);
            }
            break;
        default:
            return; /* formats are ours: cannot happen */
        }
    }
}

/* ------------------------------------------------------------------ families */

struct family;
typedef void (*render_fn)(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                          struct out *o);

enum {
    GEN_AFTER_LAST_USER = 1, /* the opening follows a final user message whatever add_assistant says */
    NO_SYSTEM_IF_EMPTY = 2,  /* no_system also for an empty conversation */
};

struct role_fmt {
    const char *role, *fmt;
};

struct family {
    const char *name;
    const char *start;        /* before everything */
    struct role_fmt roles[5]; /* per-role message formats, searched in order */
    const char *any;          /* other roles; NULL: such messages are left out */
    const char *first_system; /* message 0 when it is a system message */
    const char *no_system;    /* first, when message 0 is not a system message */
    const char *gen;          /* the assistant's opening (add_assistant) */
    unsigned flags;
    render_fn render; /* families that need state across messages */
};

static void render_table(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                         struct out *o) {
    if (f->start) puts_(o, f->start);
    if (f->no_system && (n > 0 ? !is(m[0].role, "system") : (f->flags & NO_SYSTEM_IF_EMPTY) != 0))
        puts_(o, f->no_system);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && f->first_system && is(m[0].role, "system")) {
            put_fmt(o, f->first_system, &m[0]);
            continue;
        }
        const char *fmt = f->any;
        for (size_t r = 0; r < 5 && f->roles[r].role; r++) {
            if (is(m[i].role, f->roles[r].role)) {
                fmt = f->roles[r].fmt;
                break;
            }
        }
        if (fmt) put_fmt(o, fmt, &m[i]);
    }
    if (f->flags & GEN_AFTER_LAST_USER) {
        if (n > 0 && is(m[n - 1].role, "user")) puts_(o, f->gen);
    } else if (add_ass && f->gen) {
        puts_(o, f->gen);
    }
}

/* Llama 2: [INST] opens a turn, an assistant reply closes it with </s>; the
 * system message sits inside the first turn. Variants: system without <<SYS>>
 * (plain llama2), <s> before every later turn, contents trimmed. */
static void render_llama2(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                          struct out *o) {
    bool sys_block = strcmp(f->name, "llama2") != 0;
    bool bos_later = strcmp(f->name, "llama2-sys-bos") == 0;
    bool strip = strcmp(f->name, "llama2-sys-strip") == 0;
    bool in_turn = true; /* the first [INST] is written up front; BOS is the tokenizer's */
    puts_(o, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            puts_(o, bos_later ? "<s>[INST] " : "[INST] ");
            in_turn = true;
        }
        const char *text = strip ? "%t" : "%c";
        if (is(m[i].role, "system")) {
            if (sys_block) puts_(o, "<<SYS>>\n");
            put_fmt(o, text, &m[i]);
            puts_(o, sys_block ? "\n<</SYS>>\n\n" : "\n");
        } else if (is(m[i].role, "user")) {
            put_fmt(o, text, &m[i]);
            puts_(o, " [/INST]");
        } else {
            put_fmt(o, text, &m[i]);
            puts_(o, "</s>");
            in_turn = false;
        }
    }
}

/* Mistral's official v1 / v3 / v3-tekken: system and user share one [INST]
 * block; they differ in the spaces around [INST] and whether replies are trimmed. */
static void render_mistral(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                           struct out *o) {
    bool v1 = strcmp(f->name, "mistral-v1") == 0, v3 = strcmp(f->name, "mistral-v3") == 0;
    const char *lead = v1 ? " " : "", *trail = strcmp(f->name, "mistral-v3-tekken") == 0 ? "" : " ";
    bool in_turn = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            puts_(o, lead);
            puts_(o, "[INST]");
            puts_(o, trail);
            in_turn = true;
        }
        if (is(m[i].role, "system")) {
            put_fmt(o, "%c\n\n", &m[i]);
        } else if (is(m[i].role, "user")) {
            puts_(o, m[i].content);
            puts_(o, lead);
            puts_(o, "[/INST]");
        } else {
            puts_(o, trail);
            put_fmt(o, v3 ? "%t</s>" : "%c</s>", &m[i]);
            in_turn = false;
        }
    }
}

/* AlphaMonarch: <s> inside the history, before every message but the first. */
static void render_monarch(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                           struct out *o) {
    for (size_t i = 0; i < n; i++) put_fmt(o, i ? "<s>%r\n%c</s>\n" : "%r\n%c</s>\n", &m[i]);
    if (add_ass) puts_(o, "<s>assistant\n");
}

/* Gemma has no system role: system texts (trimmed, joined) go at the top of
 * the next non-model turn. "assistant" is called "model". */
static void render_gemma(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                         struct out *o) {
    size_t pending = 0; /* system messages from here on are not written yet */
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "system")) continue;
        const char *role = is(m[i].role, "assistant") ? "model" : m[i].role;
        puts_(o, "<start_of_turn>");
        puts_(o, role);
        puts_(o, "\n");
        if (!is(role, "model")) {
            bool any = false;
            for (size_t j = pending; j < i; j++)
                any = any || (is(m[j].role, "system") && !trimmed_empty(m[j].content));
            if (any) {
                for (size_t j = pending; j < i; j++)
                    if (is(m[j].role, "system")) put_trimmed(o, m[j].content);
                puts_(o, "\n\n");
                pending = i + 1;
            }
        }
        put_fmt(o, "%t<end_of_turn>\n", &m[i]);
    }
    if (add_ass) puts_(o, "<start_of_turn>model\n");
}

/* Orion: no system role either; system texts go after "Human: " of the next user turn. */
static void render_orion(const struct family *f, const struct kiln_chat_msg *m, size_t n, bool add_ass,
                         struct out *o) {
    size_t pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "system")) continue;
        if (is(m[i].role, "user")) {
            puts_(o, "Human: ");
            bool any = false;
            for (size_t j = pending; j < i; j++) any = any || (is(m[j].role, "system") && m[j].content[0]);
            if (any) {
                for (size_t j = pending; j < i; j++)
                    if (is(m[j].role, "system")) puts_(o, m[j].content);
                puts_(o, "\n\n");
                pending = i + 1;
            }
            put_fmt(o, "%c\n\nAssistant: </s>", &m[i]);
        } else {
            put_fmt(o, "%c</s>", &m[i]);
        }
    }
}

#define R(role, fmt)                                                                                         \
    { role, fmt }

static const struct family FAMILIES[KILN_CHAT_COUNT] = {
    [KILN_CHAT_UNKNOWN] = {"unknown", .any = "<|im_start|>%r\n%c<|im_end|>\n",
                           .gen = "<|im_start|>assistant\n"},
    [KILN_CHAT_CHATML] = {"chatml", .any = "<|im_start|>%r\n%c<|im_end|>\n",
                          .gen = "<|im_start|>assistant\n"},
    [KILN_CHAT_LLAMA2] = {"llama2", .render = render_llama2},
    [KILN_CHAT_LLAMA2_SYS] = {"llama2-sys", .render = render_llama2},
    [KILN_CHAT_LLAMA2_SYS_BOS] = {"llama2-sys-bos", .render = render_llama2},
    [KILN_CHAT_LLAMA2_SYS_STRIP] = {"llama2-sys-strip", .render = render_llama2},
    [KILN_CHAT_MISTRAL_V1] = {"mistral-v1", .render = render_mistral},
    [KILN_CHAT_MISTRAL_V3] = {"mistral-v3", .render = render_mistral},
    [KILN_CHAT_MISTRAL_V3_TEKKEN] = {"mistral-v3-tekken", .render = render_mistral},
    [KILN_CHAT_MISTRAL_V7] = {"mistral-v7",
                              .roles = {R("system", "[SYSTEM_PROMPT] %c[/SYSTEM_PROMPT]"),
                                        R("user", "[INST] %c[/INST]")},
                              .any = " %c</s>"},
    [KILN_CHAT_MISTRAL_V7_TEKKEN] = {"mistral-v7-tekken",
                                     .roles = {R("system", "[SYSTEM_PROMPT]%c[/SYSTEM_PROMPT]"),
                                               R("user", "[INST]%c[/INST]")},
                                     .any = "%c</s>"},
    [KILN_CHAT_PHI3] = {"phi3", .any = "<|%r|>\n%c<|end|>\n", .gen = "<|assistant|>\n"},
    [KILN_CHAT_PHI4] = {"phi4", .any = "<|im_start|>%r<|im_sep|>%c<|im_end|>",
                        .gen = "<|im_start|>assistant<|im_sep|>"},
    [KILN_CHAT_FALCON3] = {"falcon3", .any = "<|%r|>\n%c\n", .gen = "<|assistant|>\n"},
    [KILN_CHAT_ZEPHYR] = {"zephyr", .any = "<|%r|>\n%c<|endoftext|>\n", .gen = "<|assistant|>\n"},
    [KILN_CHAT_MONARCH] = {"monarch", .render = render_monarch},
    [KILN_CHAT_GEMMA] = {"gemma", .render = render_gemma},
    [KILN_CHAT_ORION] = {"orion", .render = render_orion},
    [KILN_CHAT_OPENCHAT] = {"openchat", .roles = {R("system", "%c<|end_of_turn|>")},
                            .any = "GPT4 Correct %T: %c<|end_of_turn|>", .gen = "GPT4 Correct Assistant:"},
    [KILN_CHAT_VICUNA] = {"vicuna",
                          .roles = {R("system", "%c\n\n"), R("user", "USER: %c\n"),
                                    R("assistant", "ASSISTANT: %c</s>\n")},
                          .gen = "ASSISTANT:"},
    [KILN_CHAT_VICUNA_ORCA] = {"vicuna-orca",
                               .roles = {R("system", "SYSTEM: %c\n"), R("user", "USER: %c\n"),
                                         R("assistant", "ASSISTANT: %c</s>\n")},
                               .gen = "ASSISTANT:"},
    [KILN_CHAT_DEEPSEEK] = {"deepseek",
                            .roles = {R("system", "%c"), R("user", "### Instruction:\n%c\n"),
                                      R("assistant", "### Response:\n%c\n<|EOT|>\n")},
                            .gen = "### Response:\n"},
    [KILN_CHAT_DEEPSEEK2] = {"deepseek2",
                             .roles = {R("system", "%c\n\n"), R("user", "User: %c\n\n"),
                                       R("assistant", "Assistant: %c<｜end▁of▁sentence｜>")},
                             .gen = "Assistant:"},
    [KILN_CHAT_DEEPSEEK3] = {"deepseek3",
                             .roles = {R("system", "%c\n\n"), R("user", "<｜User｜>%c"),
                                       R("assistant", "<｜Assistant｜>%c<｜end▁of▁sentence｜>")},
                             .gen = "<｜Assistant｜>"},
    [KILN_CHAT_DEEPSEEK_OCR] = {"deepseek-ocr", .any = "%c"},
    [KILN_CHAT_COMMAND_R] =
        {"command-r",
         .roles = {R("system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>%t<|END_OF_TURN_TOKEN|>"),
                   R("user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>%t<|END_OF_TURN_TOKEN|>"),
                   R("assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>%t<|END_OF_TURN_TOKEN|>")},
         .gen = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    [KILN_CHAT_LLAMA3] = {"llama3", .any = "<|start_header_id|>%r<|end_header_id|>\n\n%t<|eot_id|>",
                          .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    [KILN_CHAT_CHATGLM3] = {"chatglm3", .start = "[gMASK]sop", .any = "<|%r|>\n %c", .gen = "<|assistant|>"},
    [KILN_CHAT_CHATGLM4] = {"chatglm4", .start = "[gMASK]<sop>", .any = "<|%r|>\n%c",
                            .gen = "<|assistant|>\n"},
    [KILN_CHAT_GLMEDGE] = {"glmedge", .any = "<|%r|>\n%c", .gen = "<|assistant|>"},
    [KILN_CHAT_MINICPM] = {"minicpm", .roles = {R("user", "<用户>%t<AI>")}, .any = "%t"},
    [KILN_CHAT_EXAONE3] = {"exaone3",
                           .roles = {R("system", "[|system|]%t[|endofturn|]\n"), R("user", "[|user|]%t\n"),
                                     R("assistant", "[|assistant|]%t[|endofturn|]\n")},
                           .gen = "[|assistant|]"},
    [KILN_CHAT_EXAONE4] = {"exaone4",
                           .roles = {R("system", "[|system|]%t[|endofturn|]\n"), R("user", "[|user|]%t\n"),
                                     R("assistant", "[|assistant|]%t[|endofturn|]\n"),
                                     R("tool", "[|tool|]%t[|endofturn|]\n")},
                           .gen = "[|assistant|]"},
    [KILN_CHAT_EXAONE_MOE] = {"exaone-moe",
                              .roles = {R("system", "<|system|>\n%t<|endofturn|>\n"),
                                        R("user", "<|user|>\n%t<|endofturn|>\n"),
                                        R("assistant", "<|assistant|>\n%t<|endofturn|>\n"),
                                        R("tool", "<|tool|>\n%t<|endofturn|>\n")},
                              .gen = "<|assistant|>\n"},
    [KILN_CHAT_RWKV_WORLD] = {"rwkv-world",
                              .roles = {R("system", "System: %t\n\n"), R("user", "User: %t\n\n"),
                                        R("assistant", "Assistant: %t\n\n")},
                              .gen = "Assistant:", .flags = GEN_AFTER_LAST_USER},
    [KILN_CHAT_GRANITE3] = {"granite",
                            .roles = {R(
                                "assistant_tool_call",
                                "<|start_of_role|>%r<|end_of_role|><|tool_call|>%c<|end_of_text|>\n")},
                            .any = "<|start_of_role|>%r<|end_of_role|>%c<|end_of_text|>\n",
                            .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    [KILN_CHAT_GRANITE4_0] =
        {"granite-4.0",
         .roles = {R("assistant_tool_call",
                     "<|start_of_role|>assistant<|end_of_role|><|tool_call|>%c<|end_of_text|>\n")},
         .any = "<|start_of_role|>%r<|end_of_role|>%c<|end_of_text|>\n",
         .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    [KILN_CHAT_GRANITE4_1] =
        {"granite-4.1",
         .roles = {R("assistant_tool_call",
                     "<|start_of_role|>assistant<|end_of_role|><|tool_call|>%c<|end_of_text|>\n")},
         .any = "<|start_of_role|>%r<|end_of_role|>%c<|end_of_text|>\n",
         .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    [KILN_CHAT_GIGACHAT] =
        {"gigachat", .start = "<s>", .first_system = "%c<|message_sep|>",
         .roles = {R("user",
                     "user<|role_sep|>%c<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"),
                   R("assistant", "assistant<|role_sep|>%c<|message_sep|>")},
         .gen = "assistant<|role_sep|>"},
    [KILN_CHAT_MEGREZ] = {"megrez", .any = "<|role_start|>%r<|role_end|>%c<|turn_end|>",
                          .gen = "<|role_start|>assistant<|role_end|>"},
    [KILN_CHAT_YANDEX] = {"yandex",
                          .roles = {R("user", " Пользователь: %c\n\n"), R("assistant", " Ассистент: %c\n\n")},
                          .gen = " Ассистент:[SEP]"},
    [KILN_CHAT_BAILING] = {"bailing", .roles = {R("user", "<role>HUMAN</role>%c")},
                           .any = "<role>%R</role>%c", .gen = "<role>ASSISTANT</role>"},
    [KILN_CHAT_BAILING_THINK] = {"bailing-think", .roles = {R("user", "<role>HUMAN</role>%c")},
                                 .any = "<role>%R</role>%c", .gen = "<role>ASSISTANT</role><think>"},
    [KILN_CHAT_BAILING2] = {"bailing2", .no_system = "<role>SYSTEM</role>detailed thinking off<|role_end|>",
                            .roles = {R("user", "<role>HUMAN</role>%c<|role_end|>")},
                            .any = "<role>%R</role>%c<|role_end|>", .gen = "<role>ASSISTANT</role>",
                            .flags = NO_SYSTEM_IF_EMPTY},
    [KILN_CHAT_LLAMA4] = {"llama4", .any = "<|header_start|>%r<|header_end|>\n\n%t<|eot|>",
                          .gen = "<|header_start|>assistant<|header_end|>\n\n"},
    [KILN_CHAT_SMOLVLM] = {"smolvlm", .start = "<|im_start|>",
                           .roles = {R("system", "%c\n\n"), R("user", "User: %c<end_of_utterance>\n")},
                           .any = "Assistant: %c<end_of_utterance>\n", .gen = "Assistant:"},
    [KILN_CHAT_DOTS1] = {"dots1",
                         .roles = {R("system", "<|system|>%c<|endofsystem|>"),
                                   R("user", "<|userprompt|>%c<|endofuserprompt|>")},
                         .any = "<|response|>%c<|endofresponse|>", .gen = "<|response|>"},
    [KILN_CHAT_HUNYUAN_MOE] = {"hunyuan-moe",
                               .roles = {R("system", "<|startoftext|>%c<|extra_4|>"),
                                         R("assistant", "%c<|eos|>")},
                               .any = "<|startoftext|>%c<|extra_0|>"},
    [KILN_CHAT_GPT_OSS] = {"gpt-oss", .roles = {R("assistant", "<|start|>%r<|message|>%c<|return|>")},
                           .any = "<|start|>%r<|message|>%c<|end|>", .gen = "<|start|>assistant"},
    [KILN_CHAT_HUNYUAN_DENSE] = {"hunyuan-dense", .first_system = "%c<｜hy_place▁holder▁no▁3｜>",
                                 .roles = {R("assistant", "<｜hy_Assistant｜>%c<｜hy_place▁holder▁no▁2｜>"),
                                           R("user", "<｜hy_User｜>%c<｜hy_Assistant｜>")}},
    [KILN_CHAT_HUNYUAN_VL] = {"hunyuan-vl", .start = "<｜hy_begin▁of▁sentence｜>",
                              .first_system = "%c<｜hy_place▁holder▁no▁3｜>",
                              .roles = {R("user", "%c<｜hy_User｜>"),
                                        R("assistant", "%c<｜hy_Assistant｜>")}},
    [KILN_CHAT_KIMI_K2] = {"kimi-k2",
                           .roles = {R("system", "<|im_system|>system<|im_middle|>%c<|im_end|>"),
                                     R("user", "<|im_user|>user<|im_middle|>%c<|im_end|>"),
                                     R("assistant", "<|im_assistant|>assistant<|im_middle|>%c<|im_end|>"),
                                     R("tool", "<|im_system|>tool<|im_middle|>%c<|im_end|>")},
                           .any = "%c<|im_end|>", .gen = "<|im_assistant|>assistant<|im_middle|>"},
    [KILN_CHAT_SEED_OSS] = {"seed_oss", .roles = {R("assistant", "<seed:bos>%r\n%t<seed:eos>")},
                            .any = "<seed:bos>%r\n%c<seed:eos>", .gen = "<seed:bos>assistant\n"},
    [KILN_CHAT_GROK2] = {"grok-2",
                         .roles = {R("system", "System: %t<|separator|>\n\n"),
                                   R("user", "Human: %t<|separator|>\n\n"),
                                   R("assistant", "Assistant: %c<|separator|>\n\n")},
                         .gen = "Assistant:"},
    [KILN_CHAT_PANGU_EMBED] = {"pangu-embedded", .no_system = "[unused9]系统：[unused10]",
                               .roles = {R("system", "[unused9]系统：%c[unused10]"),
                                         R("user", "[unused9]用户：%c[unused10]"),
                                         R("assistant", "[unused9]助手：%c[unused10]"),
                                         R("tool", "[unused9]工具：%c[unused10]"),
                                         R("function", "[unused9]方法：%c[unused10]")},
                               .gen = "[unused9]助手："},
    [KILN_CHAT_SOLAR_OPEN] = {"solar-open", .any = "<|begin|>%r<|content|>%c<|end|>",
                              .gen = "<|begin|>assistant"},
};

#undef R

const char *kiln_chat_template_name(enum kiln_chat_template t) {
    if ((int)t < 0 || t >= KILN_CHAT_COUNT || !FAMILIES[t].name) return "unknown";
    return FAMILIES[t].name;
}

enum kiln_chat_template kiln_chat_template_from_name(const char *name) {
    if (!name) return KILN_CHAT_UNKNOWN;
    for (int t = KILN_CHAT_UNKNOWN + 1; t < KILN_CHAT_COUNT; t++)
        if (FAMILIES[t].name && strcmp(FAMILIES[t].name, name) == 0) return (enum kiln_chat_template)t;
    return KILN_CHAT_UNKNOWN;
}

/* ------------------------------------------------------------------ tool calls */

/* Until Jinja templates render them (a model's own template knows its tool
 * syntax), an assistant's tool calls are text after its content: <tool_call>
 * blocks of {"name", "arguments"} (the Hermes form Qwen and many others use), or
 * Llama 3's bare {"name", "parameters"}. */
int64_t kiln_chat_tool_calls(enum kiln_chat_template t, const struct kiln_chat_tool_call *calls, size_t n,
                             char *buf, size_t size) {
    if ((int)t < 0 || t >= KILN_CHAT_COUNT || (n > 0 && !calls)) return KILN_ERR_INVALID;
    struct out o = {buf, buf ? size : 0, 0};
    const bool llama3 = t == KILN_CHAT_LLAMA3;
    for (size_t k = 0; k < n; k++) {
        if (!calls[k].name || !calls[k].arguments) return KILN_ERR_INVALID;
        if (k) puts_(&o, "\n");
        puts_(&o, llama3 ? "{\"name\": \"" : "<tool_call>\n{\"name\": \"");
        puts_(&o, calls[k].name);
        puts_(&o, llama3 ? "\", \"parameters\": " : "\", \"arguments\": ");
        puts_(&o, calls[k].arguments);
        puts_(&o, llama3 ? "}" : "}\n</tool_call>");
    }
    if (o.len >= o.size) return -(int64_t)(o.len + 1);
    buf[o.len] = '\0';
    return (int64_t)o.len;
}

int64_t kiln_chat_apply(enum kiln_chat_template t, const struct kiln_chat_msg *msgs, size_t n,
                        bool add_assistant, char *buf, size_t size) {
    if ((int)t < 0 || t >= KILN_CHAT_COUNT || (n > 0 && !msgs)) return KILN_ERR_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return KILN_ERR_INVALID;
    const struct family *f = &FAMILIES[t];
    struct out o = {buf, buf ? size : 0, 0};
    if (f->render)
        f->render(f, msgs, n, add_assistant, &o);
    else
        render_table(f, msgs, n, add_assistant, &o);
    if (o.len >= o.size) {
        if (o.len >= (size_t)INT64_MAX) return KILN_ERR_INVALID;
        return -(int64_t)(o.len + 1);
    }
    buf[o.len] = '\0';
    return (int64_t)o.len;
}

/* ------------------------------------------------------------------ detection */

/* llama.cpp's decision list (llm_chat_detect_template): the first rule whose
 * marker strings occur in the template wins, so the order matters. */
enum kiln_chat_template kiln_chat_template_detect(const char *tmpl) {
    if (!tmpl || !*tmpl) return KILN_CHAT_UNKNOWN;
    enum kiln_chat_template by_name = kiln_chat_template_from_name(tmpl);
    if (by_name != KILN_CHAT_UNKNOWN) return by_name;
#define HAS(s) (strstr(tmpl, (s)) != NULL)
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) return KILN_CHAT_PHI4;
        if (HAS("<end_of_utterance>")) return KILN_CHAT_SMOLVLM; /* <|im_start|> as BOS, not ChatML */
        return KILN_CHAT_CHATML;
    }
    if (strncmp(tmpl, "mistral", 7) == 0 || HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) return KILN_CHAT_MISTRAL_V7;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) { /* Mistral's official v1/v3 */
            if (HAS(" [INST]")) return KILN_CHAT_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return KILN_CHAT_MISTRAL_V3_TEKKEN;
            return KILN_CHAT_MISTRAL_V3;
        }
        if (HAS("content.strip()")) return KILN_CHAT_LLAMA2_SYS_STRIP;
        if (HAS("bos_token + '[INST]")) return KILN_CHAT_LLAMA2_SYS_BOS;
        if (HAS("<<SYS>>")) return KILN_CHAT_LLAMA2_SYS;
        return KILN_CHAT_LLAMA2;
    }
    if (HAS("<|assistant|>") && HAS("<|end|>")) return KILN_CHAT_PHI3;
    if (HAS("[gMASK]<sop>")) return KILN_CHAT_CHATGLM4;
    if (HAS("<|assistant|>") && HAS("<|user|>")) {
        if (HAS("<|tool_declare|>")) return KILN_CHAT_EXAONE_MOE;
        return HAS("</s>") ? KILN_CHAT_FALCON3 : KILN_CHAT_GLMEDGE;
    }
    if (HAS("<|{{ item['role'] }}|>") && HAS("<|begin_of_image|>")) return KILN_CHAT_GLMEDGE;
    if (HAS("<|user|>") && HAS("<|endoftext|>")) return KILN_CHAT_ZEPHYR;
    if (HAS("bos_token + message['role']")) return KILN_CHAT_MONARCH;
    if (HAS("<start_of_turn>")) return KILN_CHAT_GEMMA;
    if (HAS("'\\n\\nAssistant: ' + eos_token")) return KILN_CHAT_ORION;
    if (HAS("GPT4 Correct ")) return KILN_CHAT_OPENCHAT;
    if (HAS("USER: ") && HAS("ASSISTANT: "))
        return HAS("SYSTEM: ") ? KILN_CHAT_VICUNA_ORCA : KILN_CHAT_VICUNA;
    if (HAS("### Instruction:") && HAS("<|EOT|>")) return KILN_CHAT_DEEPSEEK;
    if (HAS("<|START_OF_TURN_TOKEN|>") && HAS("<|USER_TOKEN|>")) return KILN_CHAT_COMMAND_R;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return KILN_CHAT_LLAMA3;
    if (HAS("[gMASK]sop")) return KILN_CHAT_CHATGLM3;
    if (HAS("<用户>")) return KILN_CHAT_MINICPM;
    if (HAS("'Assistant: ' + message['content'] + eos_token")) return KILN_CHAT_DEEPSEEK2;
    if (HAS("<｜Assistant｜>") && HAS("<｜User｜>") && HAS("<｜end▁of▁sentence｜>"))
        return KILN_CHAT_DEEPSEEK3;
    if (HAS("[|system|]") && HAS("[|assistant|]") && HAS("[|endofturn|]"))
        return HAS("[|tool|]") ? KILN_CHAT_EXAONE4 : KILN_CHAT_EXAONE3;
    if (HAS("rwkv-world") || HAS("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return KILN_CHAT_RWKV_WORLD;
    if (HAS("<|start_of_role|>")) {
        if (HAS("<tool_call>") || HAS("<tools>"))
            return HAS("g4_default_system_message") ? KILN_CHAT_GRANITE4_0 : KILN_CHAT_GRANITE4_1;
        return KILN_CHAT_GRANITE3;
    }
    if (HAS("message['role'] + additional_special_tokens[0] + message['content'] + "
            "additional_special_tokens[1]"))
        return KILN_CHAT_GIGACHAT;
    if (HAS("<|role_start|>")) return KILN_CHAT_MEGREZ;
    if (HAS(" Ассистент:")) return KILN_CHAT_YANDEX;
    if (HAS("<role>ASSISTANT</role>") && HAS("'HUMAN'")) return KILN_CHAT_BAILING;
    if (HAS("<role>ASSISTANT</role>") && HAS("\"HUMAN\"") && HAS("<think>")) return KILN_CHAT_BAILING_THINK;
    if (HAS("<role>ASSISTANT</role>") && HAS("<role>HUMAN</role>") && HAS("<|role_end|>"))
        return KILN_CHAT_BAILING2;
    if (HAS("<|header_start|>") && HAS("<|header_end|>")) return KILN_CHAT_LLAMA4;
    if (HAS("<|endofuserprompt|>")) return KILN_CHAT_DOTS1;
    if (HAS("<|extra_0|>") && HAS("<|extra_4|>")) return KILN_CHAT_HUNYUAN_MOE;
    if (HAS("<|start|>") && HAS("<|channel|>")) return KILN_CHAT_GPT_OSS;
    if (HAS("<｜hy_Assistant｜>") && HAS("<｜hy_begin▁of▁sentence｜>")) return KILN_CHAT_HUNYUAN_VL;
    if (HAS("<｜hy_Assistant｜>") && HAS("<｜hy_place▁holder▁no▁3｜>")) return KILN_CHAT_HUNYUAN_DENSE;
    if (HAS("<|im_assistant|>assistant<|im_middle|>")) return KILN_CHAT_KIMI_K2;
    if (HAS("<seed:bos>")) return KILN_CHAT_SEED_OSS;
    if (HAS("'Assistant: '  + message['content'] + '<|separator|>")) return KILN_CHAT_GROK2;
    if (HAS("[unused9]系统：[unused10]")) return KILN_CHAT_PANGU_EMBED;
    if (HAS("<|begin|>") && HAS("<|end|>") && HAS("<|content|>")) return KILN_CHAT_SOLAR_OPEN;
#undef HAS
    return KILN_CHAT_UNKNOWN;
}

enum kiln_chat_template kiln_model_chat_template(const struct kiln_model *model, bool *found) {
    if (found) *found = false;
    const struct gguf_file *g = model ? kiln_model_gguf(model) : NULL;
    struct gguf_str s;
    if (!g || gguf_find_key(g, "tokenizer.chat_template") < 0 || !gguf_get_str(g, "tokenizer.chat_template", &s))
        return KILN_CHAT_CHATML;
    char *text = malloc(s.len + 1);
    if (!text) return KILN_CHAT_CHATML;
    memcpy(text, s.ptr, s.len);
    text[s.len] = 0;
    enum kiln_chat_template t = kiln_chat_template_detect(text);
    free(text);
    if (t == KILN_CHAT_UNKNOWN) return KILN_CHAT_CHATML;
    if (found) *found = true;
    return t;
}
