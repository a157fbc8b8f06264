/*
 * toolcall_impl.h - what the chat-reply parsers share: a growable byte buffer
 * (an allocation failure is remembered, not returned at every call), a JSON
 * scanner that checks a value without building it (and knows when the text
 * stopped inside one), and the per-format call parsers.
 */
#ifndef KILN_TOOLCALL_IMPL_H
#define KILN_TOOLCALL_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln.h"

struct tc_buf {
    char *p;
    size_t n, cap;
    bool oom;
};
void tc_put(struct tc_buf *b, const char *s, size_t n);
void tc_puts(struct tc_buf *b, const char *s);
char *tc_take(struct tc_buf *b); /* the NUL-terminated text ("" when empty); the buffer is reset */

/* ---- JSON (jscan.c) */
/* One JSON value at s[0, n), whitespace before it skipped: the index just past it, or 0 when
 * the text is not JSON there. With partial, a value the text stops inside returns n with
 * *open set (open may be NULL otherwise). */
size_t tc_json_scan(const char *s, size_t n, bool partial, bool *open);
/* s[0, n) with the whitespace between JSON tokens removed. */
void tc_minify(struct tc_buf *b, const char *s, size_t n);
/* The value of member key of the object at s (whitespace before it skipped): its span.
 * With partial, a member whose value the text stops inside is found too (*open set). */
bool tc_json_member(const char *s, size_t n, const char *key, bool partial, const char **v, size_t *vn, bool *open);
/* The text of the JSON string at s (quotes included in s[0, n)) into b. */
bool tc_json_unquote(const char *s, size_t n, struct tc_buf *b);
/* text as a JSON string literal */
void tc_json_quote(struct tc_buf *b, const char *s, size_t n);
size_t tc_skip_ws(const char *s, size_t n, size_t i);
bool tc_is_ws(char c);

/* ---- parsing a reply (chat_parse.c, formats.c, harmony.c) */
struct tc_reply {
    struct tc_buf content, reasoning;
    struct kiln_tool_call *calls;
    size_t n_calls, cap_calls;
    bool oom;
};
/* a call: name and id may be NULL; args (already JSON) is copied as given */
struct kiln_tool_call *tc_add_call(struct tc_reply *r, const char *name, size_t nn, const char *args, size_t an,
                                   const char *id, size_t idn);
void tc_drop_calls(struct tc_reply *r, size_t from);
/* Length of the longest suffix of s[0, n) that is a proper prefix of marker (what a
 * partial parse holds back). */
size_t tc_partial_marker(const char *s, size_t n, const char *marker);
const char *tc_find(const char *s, size_t n, const char *needle); /* NULL when absent */

/* Tool calls in body for one format: the offset where calls start (content is body[0, start)),
 * or n when there are none; false when what looks like calls does not parse (then the whole
 * body is content). */
bool tc_parse_calls(const struct kiln_chat_parse_opts *o, const char *body, size_t n, struct tc_reply *r,
                    size_t *start);
/* Where the format's call markup would begin in s[0, n) (n: nowhere); the earliest marker. */
size_t tc_call_start(enum kiln_tool_format f, const char *s, size_t n);
/* gpt-oss harmony: channels into content, reasoning and calls */
void tc_parse_harmony(const struct kiln_chat_parse_opts *o, const char *text, size_t n, struct tc_reply *r);

#endif
