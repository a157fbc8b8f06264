/*
 * test_vocab_conformance.c - kiln's tokenizers against llama.cpp's own test
 * data: every text of ../shared/vocab/ggml-vocab-*.gguf.inp (separated by
 * "\n__ggml_vocab_test__\n") tokenized with add_special=false,
 * parse_special=false must give exactly the ids of the matching .out line; and
 * the KJV models' vocabularies must give the prompt_tokens llama.cpp recorded in
 * ../shared/reference/kjv-*.json and qwen2-kjv-*.json (add_special=true).
 */
#include "gguf.h"
#include "kiln.h"
#include "testutil.h"

#include <dirent.h>

static const char *SEP = "\n__ggml_vocab_test__\n";

static int check_vocab(const char *dir, const char *name, int *n_texts) {
    char path[1024], inp[1100], outp[1100], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    size_t in_len, out_len;
    char *in = tu_read_file(inp, &in_len), *out = tu_read_file(outp, &out_len);
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    CHECKF(g != NULL, "%s: %s", name, err);
    struct kiln_vocab *v = g ? kiln_vocab_load(g, err, sizeof err) : NULL;
    CHECKF(v != NULL, "%s: %s", name, err);
    int bad = 0;
    if (v && in && out) {
        char *p = in, *o = out;
        int idx = 0;
        for (;;) {
            char *e = strstr(p, SEP);
            if (!e) break;
            char *oe = strchr(o, '\n');
            if (!oe) {
                CHECKF(0, "%s: .out has fewer lines than .inp texts", name);
                break;
            }
            *oe = 0;
            /* the expected ids */
            int32_t want[4096];
            int nw = 0;
            for (char *q = o; *q;) {
                char *end;
                long x = strtol(q, &end, 10);
                if (end == q) break;
                if (nw < 4096) want[nw++] = (int32_t)x;
                q = end;
            }
            int32_t got[4096];
            int64_t n = kiln_tokenize(v, p, (size_t)(e - p), got, 4096, false, false);
            bool same = n == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            if (!same) {
                bad++;
                fprintf(stderr, "%s text %d '%.*s':\n  want:", name, idx, (int)(e - p), p);
                for (int i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n  got: ");
                for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
                fprintf(stderr, "\n");
            }
            CHECK(same);
            idx++;
            (*n_texts)++;
            p = e + strlen(SEP);
            o = oe + 1;
        }
        CHECKF(idx > 0, "%s: no texts", name);
    }
    kiln_vocab_free(v);
    gguf_close(g);
    free(in);
    free(out);
    return bad;
}

/* prompt and prompt_tokens of a reference JSON (only what this test needs) */
static bool json_prompt(const char *js, char *prompt, size_t cap, int32_t *ids, int *n_ids) {
    const char *p = strstr(js, "\"prompt\"");
    if (!p) return false;
    p = strchr(p + 8, '"');
    if (!p) return false;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            char e = *p++;
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            if (e == 'u') { /* \u00XX only (ASCII controls) */
                unsigned x = 0;
                sscanf(p, "%4x", &x);
                p += 4;
                c = (char)x;
            }
        }
        if (n + 1 < cap) prompt[n++] = c;
    }
    prompt[n] = 0;
    const char *t = strstr(js, "\"prompt_tokens\"");
    if (!t || !(t = strchr(t, '['))) return false;
    t++;
    *n_ids = 0;
    while (*t && *t != ']') {
        char *end;
        long x = strtol(t, &end, 10);
        if (end == t) {
            t++;
            continue;
        }
        ids[(*n_ids)++] = (int32_t)x;
        t = end;
    }
    return true;
}

/* Every top-level reference/[qwen2-]kjv-MODEL-K.json against the vocabulary of models/[qwen2-]kjv-MODEL.gguf. */
static void check_kjv(const char *shared) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference", shared);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    int n_ref = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if ((strncmp(nm, "kjv-", 4) && strncmp(nm, "qwen2-kjv-", 10)) || l < 6 || strcmp(nm + l - 5, ".json")) continue;
        const char *dash = strrchr(nm, '-');
        char path[1400], err[256];
        snprintf(path, sizeof path, "%s/models/%.*s.gguf", shared, (int)(dash - nm), nm);
        struct gguf_file *g = gguf_open(path, err, sizeof err);
        CHECKF(g != NULL, "%s: %s", path, err);
        struct kiln_vocab *v = g ? kiln_vocab_load(g, err, sizeof err) : NULL;
        CHECKF(v != NULL, "%s: %s", path, err);
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        char *js = v ? tu_read_file(path, NULL) : NULL;
        static char prompt[1 << 16];
        static int32_t want[8192], got[8192];
        int nw = 0;
        CHECKF(!v || (js && json_prompt(js, prompt, sizeof prompt, want, &nw)), "%s unreadable", path);
        if (js) {
            CHECK(kiln_vocab_type(v) == KILN_VOCAB_SPM && kiln_vocab_n_tokens(v) == 32000);
            int64_t n = kiln_tokenize(v, prompt, strlen(prompt), got, 8192, true, false);
            bool same = n == nw;
            for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
            CHECKF(same, "%s: prompt tokens differ (got %lld, want %d)", nm, (long long)n, nw);
            /* and back: after a BOS, llama.cpp keeps SPM's leading space (it only strips
             * it from a first token); without BOS the prompt comes back exactly */
            static char back[1 << 16];
            int64_t m = kiln_detokenize(v, got, n, back, sizeof back, true, false);
            CHECKF(n > 0 && got[0] == kiln_vocab_bos(v) && m == (int64_t)strlen(prompt) + 1 && back[0] == ' ' &&
                       !memcmp(back + 1, prompt, (size_t)m - 1),
                   "%s: detokenize after BOS differs", nm);
            n = kiln_tokenize(v, prompt, strlen(prompt), got, 8192, false, false);
            m = kiln_detokenize(v, got, n, back, sizeof back, false, false);
            CHECKF(m == (int64_t)strlen(prompt) && !memcmp(back, prompt, (size_t)m), "%s: round trip differs", nm);
            n_ref++;
        }
        free(js);
        kiln_vocab_free(v);
        gguf_close(g);
    }
    if (d) closedir(d);
    CHECKF(n_ref >= 16, "expected the kjv-*.json references in %s, found %d", dir, n_ref);
    printf("%d prompt references\n", n_ref);
}

int main(void) {
    const char *shared = tu_shared_or_skip("test_vocab_conformance");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/vocab", shared);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    int n_vocabs = 0, n_texts = 0, n_bad_vocabs = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "ggml-vocab-", 11) || l < 5 || strcmp(de->d_name + l - 5, ".gguf")) continue;
        char inp[1400];
        snprintf(inp, sizeof inp, "%s/%s.inp", dir, de->d_name);
        struct stat st;
        if (stat(inp, &st) != 0) continue;
        int bad = check_vocab(dir, de->d_name, &n_texts);
        printf("%-40s %s\n", de->d_name, bad ? "FAIL" : "ok");
        n_bad_vocabs += bad != 0;
        n_vocabs++;
    }
    if (d) closedir(d);
    CHECKF(n_vocabs == 12, "expected the 12 vocabularies of ../shared/vocab, found %d", n_vocabs);
    printf("%d vocabularies, %d texts, %d vocabularies with mismatches\n", n_vocabs, n_texts, n_bad_vocabs);
    check_kjv(shared);
    return tu_finish("test_vocab_conformance");
}
