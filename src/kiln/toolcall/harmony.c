/*
 * harmony.c - gpt-oss's harmony replies: a run of messages, each a header
 * (its channel, maybe a recipient " to=functions.NAME") then <|message|> and
 * a body up to <|end|>, <|call|> or <|return|>. The analysis channel is
 * reasoning, final and commentary are content, a message to functions.NAME
 * is a tool call whose body is the JSON arguments; messages to other
 * recipients (the model's own builtins) are left out.
 */
#include <stdlib.h>
#include <string.h>

#include "toolcall_impl.h"

static const char *const ENDS[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

/* the value after key in header (up to a space or '<'), or NULL; the last one when repeated */
static const char *header_value(const char *h, size_t n, const char *key, size_t *len) {
    const char *found = NULL;
    size_t kl = strlen(key);
    for (const char *p = h; (p = tc_find(p, n - (size_t)(p - h), key)); p += kl) {
        const char *v = p + kl, *e = v;
        while (e < h + n && *e != ' ' && *e != '<') e++;
        found = v;
        *len = (size_t)(e - v);
    }
    return found;
}

void tc_parse_harmony(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 9 && !memcmp(s + i, "<|start|>", 9)) i += 9;
        const char *m = tc_find(s + i, n - i, "<|message|>");
        if (!m) {
            if (!o->partial && tc_skip_ws(s, n, i) < n && !tc_find(s + i, n - i, "<|channel|>"))
                tc_put(&r->content, s + i, n - i); /* text with no header at all */
            return;
        }
        const char *h = s + i;
        size_t hn = (size_t)(m - h), cl = 0, tl = 0;
        const char *channel = header_value(h, hn, "<|channel|>", &cl);
        const char *to = header_value(h, hn, "to=", &tl);
        if (to && ((tl == 9 && !memcmp(to, "assistant", 9)) || (tl == 4 && !memcmp(to, "user", 4)))) to = NULL;
        size_t bs = (size_t)(m - s) + 11, be = n, next = n;
        for (size_t k = 0; k < sizeof ENDS / sizeof ENDS[0]; k++) {
            const char *e = tc_find(s + bs, n - bs, ENDS[k]);
            if (e && (size_t)(e - s) < be) {
                be = (size_t)(e - s);
                next = be + (k == 3 ? 0 : strlen(ENDS[k]));
            }
        }
        if (be == n && o->partial) {
            size_t hold = 0;
            for (size_t k = 0; k < sizeof ENDS / sizeof ENDS[0]; k++) {
                size_t hk = tc_partial_marker(s + bs, n - bs, ENDS[k]);
                if (hk > hold) hold = hk;
            }
            be = n - hold;
        }
        const char *body = s + bs;
        size_t bn = be - bs;
        if (to && tl > 10 && !memcmp(to, "functions.", 10)) {
            if (o->parse_tools) {
                bool open = false;
                size_t e = tc_json_scan(body, bn, o->partial && be + 16 >= n, &open);
                if (open || (e && tc_skip_ws(body, bn, e) == bn)) {
                    struct tc_buf args = {0};
                    tc_minify(&args, body, e);
                    tc_add_call(r, to + 10, tl - 10, args.p ? args.p : "", args.n, NULL, 0);
                    free(args.p);
                }
            }
        } else if (!to) {
            bool analysis = channel && cl == 8 && !memcmp(channel, "analysis", 8);
            if (analysis && o->reasoning) {
                tc_put(&r->reasoning, body, bn);
            } else if (analysis) {
                tc_puts(&r->content, "<|channel|>analysis<|message|>");
                tc_put(&r->content, body, bn);
                if (be < n) tc_puts(&r->content, "<|end|>");
            } else {
                tc_put(&r->content, body, bn);
            }
        }
        i = next;
    }
}
