/*
 * chat_api.h - chats with a model's own Jinja template, for the server and for
 * `kiln chat`: load the templates once (probed for what they accept), render a
 * chat body (messages, tools, tool_choice, chat_template_kwargs, ...) into the
 * prompt, and know how the output is to be read back (kiln_chat_parse).
 */
#ifndef KILN_CHAT_API_H
#define KILN_CHAT_API_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "kiln.h"

/* How a chat's output is read back: content, reasoning and tool calls parsed from the text, and
 * the forced end of a thinking block past its budget (the server's engine). */
struct srv_chat_out {
    bool parse;                    /* false: the text is the content, as it is */
    struct kiln_chat_parse_opts o; /* its think_prefix and tools_json are owned here */
    bool parallel;                 /* parallel_tool_calls: false keeps the first call */
    int32_t think_budget;          /* tokens of thinking before </think> is forced; -1: no limit */
    bool in_think;                 /* the output starts inside a thinking block */
    int32_t *think_end;            /* the tokens of "</think>" (forced past the budget) */
    int32_t n_think_end;
    /* the engine's view of the thinking block as tokens arrive */
    int32_t think_used, force_at;
    bool forcing, think_closed;
    /* tool calls held by a grammar (tool_choice "required" or a named function; with "auto", lazily from
     * the format's call opener): the GBNF text (NULL: none) and, when lazy, its triggers */
    char *tool_gbnf;
    const char *const *tool_triggers;
    size_t n_tool_triggers;
};
void srv_chat_out_free(struct srv_chat_out *o);

struct srv_chat_tmpl;

/* The model's templates (tokenizer.chat_template and .tool_use), or override: a native family's name
 * (then NULL: render natively) or a Jinja template's text. NULL with err[0] == 0 when there is no
 * Jinja template to use; NULL with a message naming the template line when one does not parse. */
struct srv_chat_tmpl *srv_chat_tmpl_load(const struct kiln_model *m, const char *override, char *err,
                                         size_t errlen);
void srv_chat_tmpl_free(struct srv_chat_tmpl *c);
const char *srv_chat_tmpl_src(const struct srv_chat_tmpl *c);

struct srv_chat_cfg {
    const struct kiln_vocab *vocab;
    enum kiln_chat_template native; /* the family when c is NULL */
    bool reasoning;                 /* thinking to reasoning_content unless the body says reasoning_format none */
    int reasoning_budget;           /* -1: no limit; 0: thinking off */
    bool generating;                /* a generation follows (tool_choice "required" needs a grammar then) */
};
/* body's messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs, add_generation_prompt and
 * reasoning_format into the prompt (malloc'd), and how the output is read back (out may be NULL); NULL
 * with an HTTP status and a message naming the field or the template line. */
char *srv_chat_tmpl_render(const struct srv_chat_tmpl *c, const struct srv_chat_cfg *cfg, const cJSON *body,
                           struct srv_chat_out *out, int *status, char *err, size_t errlen);

/* ---- tool calls held by a grammar (tool_grammar.c) */
struct srv_tool_grammar_opts {
    enum kiln_tool_format format; /* CONTENT: the generic JSON calls */
    const cJSON *tools;           /* the checked tools (tools_for): each has function.name and .parameters */
    const char *only;             /* a named function: only it; NULL: any tool */
    bool parallel;                /* one or more calls; else exactly one */
    const char *before;           /* text the output must begin with (closing a thinking block); may be NULL */
    const char *template_src;     /* a variant within the format (Mistral's NAME[ARGS]{...}); may be NULL */
};
/* GBNF whose root is the format's call markup, each tool's arguments held to its parameters schema
 * (malloc'd); NULL with a message naming the tool whose schema kiln refuses. */
char *srv_tool_grammar(const struct srv_tool_grammar_opts *o, char *err, size_t errlen);
/* The format the grammar and the parser use (a template with no call markup: generic JSON). */
enum kiln_tool_format srv_tool_grammar_format(enum kiln_tool_format f);
/* The text that opens a call in format f (lazy triggers for tool_choice "auto"); NULL (*n 0) for formats whose
 * calls are the whole reply or open with control tokens. */
const char *const *srv_tool_triggers(enum kiln_tool_format f, size_t *n);

#endif
