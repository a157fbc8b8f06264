/*
 * formats.c - the tool-call markup of each chat format into calls: JSON calls
 * in <tool_call> tags (Hermes, Qwen), XML functions with typed parameters
 * (Qwen3-Coder), Llama 3's bare JSON and <|python_tag|> builtins, Mistral's
 * [TOOL_CALLS], DeepSeek's tool-call tokens, and a generic JSON reply. Each
 * parser reads the calls from where the first one starts; with a partial
 * reply the last call may be cut off (its name known or not, its arguments a
 * prefix of what they will be).
 */
#include <stdlib.h>
#include <string.h>

#include "toolcall_impl.h"

#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

static const char *const *markers(enum kiln_tool_format f) {
    static const char *const hermes[] = {"<tool_call>", NULL}, *const coder[] = {"<tool_call>", "<function=", NULL},
                             *const mistral[] = {"[TOOL_CALLS]", NULL}, *const ds[] = {DS_CALLS, DS_CALL, NULL},
                             *const llama[] = {"<|python_tag|>", NULL}, *const none[] = {NULL};
    switch (f) {
    case KILN_TOOLS_HERMES: return hermes;
    case KILN_TOOLS_QWEN3_CODER: return coder;
    case KILN_TOOLS_MISTRAL: return mistral;
    case KILN_TOOLS_DEEPSEEK_R1:
    case KILN_TOOLS_DEEPSEEK_V3: return ds;
    case KILN_TOOLS_LLAMA3: return llama;
    default: return none;
    }
}

/* formats whose calls are a JSON object written as the whole reply */
static bool json_reply(enum kiln_tool_format f) {
    return f == KILN_TOOLS_LLAMA3 || f == KILN_TOOLS_GENERIC;
}

static size_t call_start(enum kiln_tool_format f, const char *s, size_t n, bool partial) {
    size_t best = n;
    for (const char *const *m = markers(f); *m; m++) {
        const char *p = tc_find(s, n, *m);
        if (p && (size_t)(p - s) < best) best = (size_t)(p - s);
        if (partial) {
            size_t k = tc_partial_marker(s, n, *m);
            if (k && n - k < best) best = n - k;
        }
    }
    if (json_reply(f)) {
        size_t i = tc_skip_ws(s, n, 0);
        if (i < n && s[i] == '{' && i < best) best = i;
    }
    return best;
}

size_t tc_call_start(enum kiln_tool_format f, const char *s, size_t n) {
    return call_start(f, s, n, true);
}

static bool at(const char *s, size_t n, size_t i, const char *m) {
    size_t l = strlen(m);
    return n - i >= l && !memcmp(s + i, m, l);
}

/* ------------------------------------------------------------------ JSON calls */

/* A call object {"name": ..., "arguments" | "parameters": {...} or "..."}; with partial, a cut-off one
 * gives what it has. false when it is not a call. */
static bool json_call(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r, bool partial,
                      const char *id_key) {
    const char *v, *a = NULL;
    size_t vn, an = 0;
    bool open = false, aopen = false;
    struct tc_buf name = {0}, args = {0}, id = {0};
    bool have_name = tc_json_member(s, n, "name", partial, &v, &vn, &open) && !open && tc_json_unquote(v, vn, &name);
    if (!have_name) {
        if (!partial) return false;
        tc_add_call(r, NULL, 0, "", 0, NULL, 0);
        return true;
    }
    if (!tc_json_member(s, n, "arguments", partial, &a, &an, &aopen))
        tc_json_member(s, n, "parameters", partial, &a, &an, &aopen);
    if (a && !aopen && tc_skip_ws(a, an, 0) < an && a[tc_skip_ws(a, an, 0)] == '"') {
        /* arguments written as a JSON string holding the object */
        struct tc_buf inner = {0};
        tc_json_unquote(a, an, &inner);
        if (inner.p && tc_json_scan(inner.p, inner.n, false, NULL) == inner.n) tc_minify(&args, inner.p, inner.n);
        else if (!partial) {
            free(inner.p);
            free(name.p);
            return false;
        }
        free(inner.p);
    } else if (a) {
        tc_minify(&args, a, an);
    } else if (!partial) {
        tc_puts(&args, "{}");
    }
    if (args.n && args.p[0] != '{' && !partial) {
        free(name.p);
        free(args.p);
        return false;
    }
    if (id_key && tc_json_member(s, n, id_key, false, &v, &vn, NULL)) tc_json_unquote(v, vn, &id);
    tc_add_call(r, name.p, name.n, args.p ? args.p : "", args.n, id.p, id.n);
    free(name.p);
    free(args.p);
    free(id.p);
    (void)o;
    return true;
}

/* ------------------------------------------------------------------ XML functions */

/* the JSON type the tool's schema gives parameter p of function fn ("" when unknown) */
static void param_type(const char *tools, const char *fn, size_t fnl, const char *p, size_t pl, char *out, size_t cap) {
    out[0] = 0;
    if (!tools) return;
    size_t n = strlen(tools), i = tc_skip_ws(tools, n, 0);
    if (i >= n || tools[i] != '[') return;
    i++;
    for (;;) {
        i = tc_skip_ws(tools, n, i);
        if (i >= n || tools[i] == ']') return;
        size_t e = tc_json_scan(tools + i, n - i, false, NULL);
        if (!e) return;
        const char *f, *nm, *props, *pv, *ty;
        size_t fl, nml, propsl, pvl, tyl;
        struct tc_buf name = {0};
        if (!tc_json_member(tools + i, e, "function", false, &f, &fl, NULL)) f = tools + i, fl = e;
        if (tc_json_member(f, fl, "name", false, &nm, &nml, NULL) && tc_json_unquote(nm, nml, &name) &&
            name.n == fnl && !memcmp(name.p, fn, fnl) &&
            tc_json_member(f, fl, "parameters", false, &props, &propsl, NULL) &&
            tc_json_member(props, propsl, "properties", false, &props, &propsl, NULL)) {
            char key[256];
            if (pl < sizeof key) {
                memcpy(key, p, pl);
                key[pl] = 0;
                struct tc_buf t = {0};
                if (tc_json_member(props, propsl, key, false, &pv, &pvl, NULL) &&
                    tc_json_member(pv, pvl, "type", false, &ty, &tyl, NULL) && tc_json_unquote(ty, tyl, &t) && t.p &&
                    t.n < cap)
                    memcpy(out, t.p, t.n + 1);
                free(t.p);
            }
        }
        free(name.p);
        i = tc_skip_ws(tools, n, i + e);
        if (i < n && tools[i] == ',') i++;
    }
}

/* a parameter's text as a JSON value: a string where the schema says string (or it is no JSON) */
static void param_value(struct tc_buf *b, const char *type, const char *v, size_t vn) {
    if (strcmp(type, "string") != 0) {
        size_t a = tc_skip_ws(v, vn, 0), e = vn;
        while (e > a && tc_is_ws(v[e - 1])) e--;
        if (e > a && tc_json_scan(v + a, e - a, false, NULL) == e - a) {
            tc_minify(b, v + a, e - a);
            return;
        }
    }
    tc_json_quote(b, v, vn);
}

/* <function=NAME> <parameter=P>\nV\n</parameter> ... </function> at s: the index past it (0: no
 * function there); partial: a cut-off one gives its name and the parameters it has finished */
static size_t xml_function(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r,
                           bool partial) {
    if (!at(s, n, 0, "<function=")) return 0;
    const char *gt = memchr(s, '>', n);
    if (!gt) {
        if (partial) tc_add_call(r, NULL, 0, "", 0, NULL, 0);
        return partial ? n : 0;
    }
    const char *name = s + 10;
    size_t nl = (size_t)(gt - name);
    struct tc_buf args = {0};
    tc_put(&args, "{", 1);
    size_t i = (size_t)(gt - s) + 1, np = 0;
    for (;;) {
        i = tc_skip_ws(s, n, i);
        if (at(s, n, i, "</function>")) {
            i += 11;
            break;
        }
        if (!at(s, n, i, "<parameter=")) {
            if (!partial || (i < n && tc_partial_marker(s + i, n - i, "<parameter=") != n - i &&
                             tc_partial_marker(s + i, n - i, "</function>") != n - i)) {
                free(args.p);
                return 0;
            }
            tc_add_call(r, name, nl, args.p, args.n, NULL, 0);
            free(args.p);
            return n;
        }
        const char *pgt = memchr(s + i, '>', n - i);
        const char *end = pgt ? tc_find(pgt, n - (size_t)(pgt - s), "</parameter>") : NULL;
        if (!end) {
            if (!partial) {
                free(args.p);
                return 0;
            }
            tc_add_call(r, name, nl, args.p, args.n, NULL, 0);
            free(args.p);
            return n;
        }
        const char *pn = s + i + 11;
        size_t pnl = (size_t)(pgt - pn);
        const char *v = pgt + 1;
        size_t vn = (size_t)(end - v);
        if (vn && v[0] == '\n') v++, vn--;
        if (vn && v[vn - 1] == '\n') vn--;
        char type[32];
        param_type(o->tools_json, name, nl, pn, pnl, type, sizeof type);
        if (np++) tc_put(&args, ",", 1);
        tc_json_quote(&args, pn, pnl);
        tc_put(&args, ":", 1);
        param_value(&args, type, v, vn);
        i = (size_t)(end - s) + 12;
    }
    tc_put(&args, "}", 1);
    tc_add_call(r, name, nl, args.p, args.n, NULL, 0);
    free(args.p);
    return i;
}

/* <tool_call> {JSON} or <function=...> </tool_call>, repeated (Qwen3-Coder: the first tag may be missing) */
static bool parse_tagged(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r) {
    size_t i = 0;
    bool partial = o->partial;
    while ((i = tc_skip_ws(s, n, i)) < n) {
        bool tagged = at(s, n, i, "<tool_call>");
        if (!tagged && !at(s, n, i, "<function=")) {
            if (partial && (tc_partial_marker(s + i, n - i, "<tool_call>") == n - i ||
                            tc_partial_marker(s + i, n - i, "<function=") == n - i))
                return true;
            return partial; /* text after the calls: not a reply made of calls */
        }
        if (tagged) i = tc_skip_ws(s, n, i + 11);
        const char *close = tc_find(s + i, n - i, "</tool_call>");
        size_t end = close ? (size_t)(close - s) : n;
        if (at(s, n, i, "<function=")) {
            size_t e = xml_function(o, s + i, end - i, r, partial && !close);
            if (!e) return false;
            i += e;
        } else if (i < end && s[i] == '{') {
            bool open = false;
            size_t e = tc_json_scan(s + i, end - i, partial && !close, &open);
            if (!e || !json_call(o, s + i, e, r, open, NULL)) return partial && !close && i + e >= n;
            i += e;
        } else if (partial && !close && (i >= end || tc_partial_marker(s + i, end - i, "<function=") == end - i)) {
            return true; /* "<tool_call>\n<fu": the body is on its way */
        } else {
            return false;
        }
        if (!close) return partial || tc_skip_ws(s, n, i) == n; /* cut off, or the closing tag never came */
        i = tc_skip_ws(s, n, i);
        if (i != end) return false;
        i = end + 12;
    }
    return true;
}

/* ------------------------------------------------------------------ Mistral */

static bool parse_mistral(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r) {
    size_t i = 0;
    bool partial = o->partial;
    while ((i = tc_skip_ws(s, n, i)) < n) {
        if (!at(s, n, i, "[TOOL_CALLS]")) {
            if (partial && tc_partial_marker(s + i, n - i, "[TOOL_CALLS]") == n - i) return true;
            return partial;
        }
        i = tc_skip_ws(s, n, i + 12);
        if (i < n && s[i] == '[') { /* [{"name", "arguments", "id"}, ...] */
            i = tc_skip_ws(s, n, i + 1);
            while (i < n && s[i] != ']') {
                bool open = false;
                size_t e = tc_json_scan(s + i, n - i, partial, &open);
                if (!e || !json_call(o, s + i, e, r, open, "id")) return false;
                if (open) return true;
                i = tc_skip_ws(s, n, i + e);
                if (i < n && s[i] == ',') i = tc_skip_ws(s, n, i + 1);
            }
            if (i >= n) return partial;
            i++;
            continue;
        }
        /* NAME [CALL_ID]ID [ARGS]{...} */
        if (i >= n) return true; /* which of the two forms is not known yet */
        const char *args_tag = tc_find(s + i, n - i, "[ARGS]");
        if (!args_tag) {
            if (!partial) return false;
            tc_add_call(r, NULL, 0, "", 0, NULL, 0);
            return true;
        }
        const char *name = s + i, *id = NULL;
        size_t nl = (size_t)(args_tag - name), idl = 0;
        const char *cid = tc_find(name, nl, "[CALL_ID]");
        if (cid) {
            id = cid + 9;
            idl = (size_t)(args_tag - id);
            nl = (size_t)(cid - name);
        }
        i = (size_t)(args_tag - s) + 6;
        bool open = false;
        size_t e = tc_json_scan(s + i, n - i, partial, &open);
        if (!e && !open) return false;
        struct tc_buf args = {0};
        tc_minify(&args, s + i, e);
        bool ok = open || (args.n && args.p[0] == '{');
        if (ok) tc_add_call(r, name, nl, args.p ? args.p : "", args.n, id, idl);
        free(args.p);
        if (!ok) return false;
        i += e;
    }
    return true;
}

/* ------------------------------------------------------------------ DeepSeek */

static bool parse_deepseek(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r) {
    size_t i = tc_skip_ws(s, n, 0);
    bool partial = o->partial;
    if (at(s, n, i, DS_CALLS)) i += strlen(DS_CALLS);
    while ((i = tc_skip_ws(s, n, i)) < n) {
        if (at(s, n, i, DS_CALLS_END)) {
            i += strlen(DS_CALLS_END);
            return tc_skip_ws(s, n, i) == n || partial;
        }
        if (!at(s, n, i, DS_CALL)) {
            if (partial && (tc_partial_marker(s + i, n - i, DS_CALL) == n - i ||
                            tc_partial_marker(s + i, n - i, DS_CALLS_END) == n - i))
                return true;
            return false;
        }
        i += strlen(DS_CALL);
        const char *sep = tc_find(s + i, n - i, DS_SEP);
        if (!sep) {
            if (!partial) return false;
            tc_add_call(r, NULL, 0, "", 0, NULL, 0);
            return true;
        }
        const char *name = s + i;
        size_t nl = (size_t)(sep - name);
        i = (size_t)(sep - s) + strlen(DS_SEP);
        bool fenced = nl == 8 && !memcmp(name, "function", 8);
        if (fenced) { /* R1: function<sep>NAME\n```json\n{...}\n``` */
            const char *eol = memchr(s + i, '\n', n - i);
            if (!eol) {
                if (!partial) return false;
                tc_add_call(r, NULL, 0, "", 0, NULL, 0);
                return true;
            }
            name = s + i;
            nl = (size_t)(eol - name);
            i = tc_skip_ws(s, n, (size_t)(eol - s));
            if (at(s, n, i, "```json")) i += 7;
            else if (!(partial && tc_partial_marker(s + i, n - i, "```json") == n - i)) return false;
            else {
                tc_add_call(r, name, nl, "", 0, NULL, 0);
                return true;
            }
        }
        bool open = false;
        size_t e = tc_json_scan(s + i, n - i, partial, &open);
        if (!e && !open) return false;
        struct tc_buf args = {0};
        tc_minify(&args, s + i, e);
        tc_add_call(r, name, nl, args.p ? args.p : "", args.n, NULL, 0);
        bool obj = args.n && args.p[0] == '{';
        free(args.p);
        if (open) return true;
        if (!obj) return false;
        i = tc_skip_ws(s, n, i + e);
        if (fenced) {
            if (at(s, n, i, "```")) i = tc_skip_ws(s, n, i + 3);
            else if (partial && tc_partial_marker(s + i, n - i, "```") == n - i) return true;
            else if (!partial) return false;
        }
        if (at(s, n, i, DS_CALL_END)) i += strlen(DS_CALL_END);
        else if (partial && (i >= n || tc_partial_marker(s + i, n - i, DS_CALL_END) == n - i)) return true;
        else return false;
    }
    return true;
}

/* ------------------------------------------------------------------ Llama 3 and generic JSON */

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* NAME.call(key="value", n=1): Llama 3's builtin tools */
static bool builtin_call(const char *s, size_t n, struct tc_reply *r, bool partial) {
    size_t i = 0;
    while (i < n && ident_char(s[i])) i++;
    size_t nl = i;
    if (partial && (i == n || tc_partial_marker(s + i, n - i, ".call(") == n - i)) { /* NAME.ca... on its way */
        tc_add_call(r, NULL, 0, "", 0, NULL, 0);
        return true;
    }
    if (!nl || !at(s, n, i, ".call(")) return false;
    i += 6;
    struct tc_buf args = {0};
    tc_put(&args, "{", 1);
    size_t np = 0;
    for (;;) {
        i = tc_skip_ws(s, n, i);
        if (i < n && s[i] == ')') {
            i++;
            break;
        }
        size_t k = i;
        while (i < n && ident_char(s[i])) i++;
        size_t kl = i - k;
        i = tc_skip_ws(s, n, i);
        if (!kl || i >= n || s[i] != '=') {
            bool ok = partial && i >= n;
            if (ok) tc_add_call(r, s, nl, args.p, args.n, NULL, 0);
            free(args.p);
            return ok;
        }
        i = tc_skip_ws(s, n, i + 1);
        bool open = false;
        size_t e = tc_json_scan(s + i, n - i, partial, &open);
        if (!e || open) {
            if (open) tc_add_call(r, s, nl, args.p, args.n, NULL, 0);
            free(args.p);
            return open;
        }
        (void)0;
        if (np++) tc_put(&args, ",", 1);
        tc_json_quote(&args, s + k, kl);
        tc_put(&args, ":", 1);
        tc_minify(&args, s + i, e);
        i = tc_skip_ws(s, n, i + e);
        if (i < n && s[i] == ',') i++;
    }
    tc_put(&args, "}", 1);
    bool ok = tc_skip_ws(s, n, i) == n;
    if (ok) tc_add_call(r, s, nl, args.p, args.n, NULL, 0);
    free(args.p);
    return ok;
}

static bool parse_llama3(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r) {
    size_t i = tc_skip_ws(s, n, 0);
    bool partial = o->partial;
    if (at(s, n, i, "<|python_tag|>")) {
        i = tc_skip_ws(s, n, i + 14);
        if (i < n && s[i] != '{') {
            if (builtin_call(s + i, n - i, r, partial)) return true;
            tc_drop_calls(r, r->n_calls);
            /* plain code after the tag: a call to the python tool */
            struct tc_buf args = {0};
            tc_puts(&args, "{\"code\":");
            tc_json_quote(&args, s + i, n - i);
            if (!partial) tc_puts(&args, "}");
            else args.n--; /* the closing quote waits for more code */
            tc_add_call(r, "python", 6, args.p, args.n, NULL, 0);
            free(args.p);
            return true;
        }
    }
    while (i < n) {
        bool open = false;
        size_t e = tc_json_scan(s + i, n - i, partial, &open);
        if (!e || !json_call(o, s + i, e, r, open, NULL)) return false;
        if (open) return true;
        i = tc_skip_ws(s, n, i + e);
        if (i < n && s[i] == ';') i = tc_skip_ws(s, n, i + 1);
        if (i < n && s[i] != '{') return false;
    }
    return true;
}

static bool parse_generic(const struct kiln_chat_parse_opts *o, const char *s, size_t n, struct tc_reply *r,
                          size_t *start) {
    size_t i = tc_skip_ws(s, n, 0);
    if (o->partial) { /* the object decides only when complete */
        *start = i;
        bool open = false;
        size_t e = tc_json_scan(s + i, n - i, true, &open);
        if (e && open) return true;
        if (!e) return false;
    }
    size_t e = tc_json_scan(s + i, n - i, false, NULL);
    if (!e || tc_skip_ws(s, n, i + e) != n) return false;
    const char *v;
    size_t vn;
    struct kiln_chat_parse_opts whole = *o;
    whole.partial = false;
    if (tc_json_member(s + i, e, "tool_calls", false, &v, &vn, NULL)) {
        size_t k = tc_skip_ws(v, vn, 0);
        if (k >= vn || v[k] != '[') return false;
        k++;
        while ((k = tc_skip_ws(v, vn, k)) < vn && v[k] != ']') {
            size_t ce = tc_json_scan(v + k, vn - k, false, NULL);
            if (!ce || !json_call(&whole, v + k, ce, r, false, "id")) return false;
            k = tc_skip_ws(v, vn, k + ce);
            if (k < vn && v[k] == ',') k++;
        }
    } else if (tc_json_member(s + i, e, "tool_call", false, &v, &vn, NULL)) {
        if (!json_call(&whole, v, vn, r, false, "id")) return false;
    } else if (tc_json_member(s + i, e, "response", false, &v, &vn, NULL)) {
        struct tc_buf text = {0};
        if (!tc_json_unquote(v, vn, &text)) tc_put(&text, v, vn);
        tc_put(&r->content, text.p ? text.p : "", text.n);
        free(text.p);
        *start = 0; /* the reply is this text: nothing of the JSON around it */
        return true;
    } else if (!json_call(&whole, s + i, e, r, false, NULL)) {
        return false;
    }
    *start = i;
    return true;
}

bool tc_parse_calls(const struct kiln_chat_parse_opts *o, const char *body, size_t n, struct tc_reply *r,
                    size_t *start) {
    size_t s = call_start(o->format, body, n, false);
    *start = s;
    if (s >= n) return true;
    const char *b = body + s;
    size_t bn = n - s;
    switch (o->format) {
    case KILN_TOOLS_HERMES:
    case KILN_TOOLS_QWEN3_CODER: return parse_tagged(o, b, bn, r);
    case KILN_TOOLS_MISTRAL: return parse_mistral(o, b, bn, r);
    case KILN_TOOLS_DEEPSEEK_R1:
    case KILN_TOOLS_DEEPSEEK_V3: return parse_deepseek(o, b, bn, r);
    case KILN_TOOLS_LLAMA3: return parse_llama3(o, b, bn, r);
    case KILN_TOOLS_GENERIC: {
        size_t st = 0;
        bool ok = parse_generic(o, b, bn, r, &st);
        *start = s + st;
        return ok;
    }
    default: *start = n; return true;
    }
}
