/*
 * test_jinja_conformance.c - kiln's Jinja interpreter against @huggingface/jinja
 * (npm) on the chat templates llama.cpp ships (the .jinja files of models/templates in the
 * peer source): tests/jinja_ref.mjs renders every template with every
 * conversation of tests/data/jinja_conversations.json through the npm engine,
 * and kiln must give the same bytes. Where the reference itself fails (a
 * filter it lacks, the template's own raise_exception), kiln's rendering is
 * compared with Python's Jinja (tests/jinja_ref.py, the engine transformers
 * uses) when python3 has jinja2, and the template's own exceptions must be
 * kiln's too. Skips (77) without node, the npm package or the peer source.
 *   env: PEER_DIR (default /tmp/kiln-peer; templates in $PEER_DIR/src/models/templates),
 *        KILN_NPM_DIR (a folder with node_modules/@huggingface/jinja; default tests/node, where
 *        scripts/deps.sh test installs it)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kiln.h"
#include "testutil.h"

/* (template, case) pairs kiln does not render as the references do yet, with the reason. */
static const struct {
    const char *tmpl, *cas, *why;
} KNOWN[] = {
    {NULL, NULL, NULL},
};

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* the first difference of two byte strings, shown with a little context */
static void show_diff(const char *what, const char *got, size_t gn, const char *want, size_t wn) {
    size_t i = 0;
    while (i < gn && i < wn && got[i] == want[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "%s: differs at byte %zu (kiln %zu bytes, reference %zu)\n  kiln: ", what, i, gn, wn);
    for (size_t k = from; k < gn && k < i + 60; k++) fputc(got[k] == '\n' ? '|' : got[k], stderr);
    fprintf(stderr, "\n  ref:  ");
    for (size_t k = from; k < wn && k < i + 60; k++) fputc(want[k] == '\n' ? '|' : want[k], stderr);
    fputc('\n', stderr);
}

static const char *known(const char *tmpl, const char *cas) {
    for (size_t i = 0; KNOWN[i].tmpl; i++)
        if (!strcmp(KNOWN[i].tmpl, tmpl) && (!KNOWN[i].cas || !strcmp(KNOWN[i].cas, cas))) return KNOWN[i].why;
    return NULL;
}

int main(void) {
    const char *src = getenv("KILN_SRC") ? getenv("KILN_SRC") : "..";
    const char *peer = getenv("PEER_DIR") ? getenv("PEER_DIR") : "/tmp/kiln-peer";
    char tdir[1024], npm[1024], pkg[1200], conv[1024], script[1024], pyscript[1024];
    snprintf(tdir, sizeof tdir, "%s/src/models/templates", peer);
    if (getenv("KILN_NPM_DIR"))
        snprintf(npm, sizeof npm, "%s", getenv("KILN_NPM_DIR"));
    else
        snprintf(npm, sizeof npm, "%s/tests/node", src);
    snprintf(pkg, sizeof pkg, "%s/node_modules/@huggingface/jinja/package.json", npm);
    snprintf(conv, sizeof conv, "%s/tests/data/jinja_conversations.json", src);
    snprintf(script, sizeof script, "%s/tests/jinja_ref.mjs", src);
    snprintf(pyscript, sizeof pyscript, "%s/tests/jinja_ref.py", src);
    if (system("node --version >/dev/null 2>&1") != 0) {
        printf("SKIP test_jinja_conformance: node is not installed (scripts/deps.sh test)\n");
        return 77;
    }
    if (!exists(pkg)) {
        printf("SKIP test_jinja_conformance: %s is absent (scripts/deps.sh test installs @huggingface/jinja)\n", pkg);
        return 77;
    }
    if (!exists(tdir)) {
        printf("SKIP test_jinja_conformance: no templates in %s (set PEER_DIR)\n", tdir);
        return 77;
    }
    char tmp[] = "/tmp/kiln-jinja-XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    char cmd[8192];
    char crafted[1024];
    snprintf(crafted, sizeof crafted, "%s/tests/data/jinja", src);
    snprintf(cmd, sizeof cmd, "node '%s' '%s' '%s' '%s/ref' '%s'/*.jinja '%s'/*.jinja", script, npm, conv, tmp, tdir,
             crafted);
    if (system(cmd) != 0) {
        fprintf(stderr, "the reference renderer failed: %s\n", cmd);
        return 1;
    }
    bool python = system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
    if (python) {
        snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s/py' '%s'/*.jinja '%s'/*.jinja", pyscript, conv, tmp, tdir,
                 crafted);
        if (system(cmd) != 0) {
            fprintf(stderr, "the Python reference renderer failed: %s\n", cmd);
            return 1;
        }
    } else {
        printf("note: python3 has no jinja2: pairs @huggingface/jinja cannot render are not compared\n");
    }

    /* the templates, sorted: the peer's, then kiln's crafted ones (tests/data/jinja) */
    char *names[256];
    const char *dirs[256];
    size_t nt = 0, npeer = 0;
    const char *const both[2] = {tdir, crafted};
    for (int di = 0; di < 2; di++) {
        size_t first = nt;
        DIR *d = opendir(both[di]);
        for (struct dirent *e; d && (e = readdir(d)) && nt < 256;) {
            size_t l = strlen(e->d_name);
            if (l > 6 && !strcmp(e->d_name + l - 6, ".jinja")) {
                dirs[nt] = both[di];
                names[nt++] = strndup(e->d_name, l - 6);
            }
        }
        if (d) closedir(d);
        qsort(names + first, nt - first, sizeof *names, cmp_str);
        if (di == 0) npeer = nt;
    }
    CHECKF(npeer >= 70, "found %zu templates in %s", npeer, tdir);
    CHECKF(nt > npeer, "found no crafted templates in %s", crafted);

    char path[2048];
    snprintf(path, sizeof path, "%s/ref/now", tmp);
    char *now_s = tu_read_file(path, NULL);
    setenv("TZ", "UTC", 1);
    tzset();
    struct kiln_jinja_opts opts = kiln_jinja_default_opts();
    opts.now = now_s ? atoll(now_s) : 0;
    free(now_s);

    /* the case names, from the context files the reference wrote */
    char *cases[64];
    size_t nc = 0;
    snprintf(path, sizeof path, "%s/ref", tmp);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d)) && nc < 64;) {
        size_t l = strlen(e->d_name);
        if (l > 13 && !strcmp(e->d_name + l - 13, ".context.json")) cases[nc++] = strndup(e->d_name, l - 13);
    }
    if (d) closedir(d);
    qsort(cases, nc, sizeof *cases, cmp_str);
    CHECKF(nc >= 8, "found %zu conversations", nc);

    int same = 0, ref_fail = 0, py_same = 0, both_raise = 0, all_fail = 0, skipped = 0;
    for (size_t ti = 0; ti < nt; ti++) {
        snprintf(path, sizeof path, "%s/%s.jinja", dirs[ti], names[ti]);
        size_t tl;
        char *text = tu_read_file(path, &tl);
        char err[400];
        struct kiln_jinja *t = text ? kiln_jinja_parse(text, tl, err, sizeof err) : NULL;
        for (size_t ci = 0; ci < nc; ci++) {
            char label[512];
            snprintf(label, sizeof label, "%s / %s", names[ti], cases[ci]);
            const char *why = known(names[ti], cases[ci]);
            snprintf(path, sizeof path, "%s/ref/%s.context.json", tmp, cases[ci]);
            size_t cl = 0;
            char *ctx = tu_read_file(path, &cl);
            size_t n = 0;
            char rerr[512] = "";
            char *got = t ? kiln_jinja_render(t, ctx, cl, &opts, &n, rerr, sizeof rerr) : NULL;
            if (!t) snprintf(rerr, sizeof rerr, "parse: %s", err);
            snprintf(path, sizeof path, "%s/ref/%s.%s.out", tmp, names[ti], cases[ci]);
            size_t wn;
            char *want = tu_read_file(path, &wn);
            if (want) {
                bool ok = got && n == wn && memcmp(got, want, n) == 0;
                if (!ok && why) {
                    printf("known: %s: %s\n", label, why);
                    skipped++;
                } else {
                    CHECKF(got, "%s: the reference renders it, kiln fails: %s", label, rerr);
                    if (got && !ok) show_diff(label, got, n, want, wn);
                    CHECKF(!got || ok, "%s: kiln's bytes differ from @huggingface/jinja's", label);
                    if (ok) same++;
                }
            } else {
                /* the reference failed: its message says why */
                snprintf(path, sizeof path, "%s/ref/%s.%s.err", tmp, names[ti], cases[ci]);
                char *rmsg = tu_read_file(path, NULL);
                ref_fail++;
                snprintf(path, sizeof path, "%s/py/%s.%s.out", tmp, names[ti], cases[ci]);
                size_t pn;
                char *py = python ? tu_read_file(path, &pn) : NULL;
                snprintf(path, sizeof path, "%s/py/%s.%s.err", tmp, names[ti], cases[ci]);
                char *pyerr = python ? tu_read_file(path, NULL) : NULL;
                if (pyerr && !strncmp(pyerr, "raise_exception: ", 17)) {
                    /* the template refuses the conversation: kiln must refuse it with the same words */
                    const char *msg = pyerr + 17;
                    CHECKF(!got && strstr(rerr, msg), "%s: the template raises '%s'; kiln: %s", label, msg,
                           got ? "renders it" : rerr);
                    if (!got && strstr(rerr, msg)) both_raise++;
                } else if (py) {
                    bool ok = got && n == pn && memcmp(got, py, n) == 0;
                    if (!ok && why) {
                        printf("known: %s: %s\n", label, why);
                        skipped++;
                    } else {
                        CHECKF(got, "%s: @huggingface/jinja fails (%s), Python renders it, kiln fails: %s", label,
                               rmsg ? rmsg : "?", rerr);
                        if (got && !ok) show_diff(label, got, n, py, pn);
                        CHECKF(!got || ok, "%s: kiln's bytes differ from Python Jinja's", label);
                        if (ok) py_same++;
                    }
                } else if (pyerr) {
                    /* both references fail otherwise: kiln must fail with a clear message too, or say why not */
                    if (got && why)
                        printf("known: %s: %s\n", label, why);
                    else
                        CHECKF(!got, "%s: both references fail (%s / %s) but kiln renders it", label,
                               rmsg ? rmsg : "?", pyerr);
                    if (!got) {
                        printf("all fail: %s\n  @huggingface/jinja: %s\n  Python: %s\n  kiln: %s\n", label,
                               rmsg ? rmsg : "?", pyerr, rerr);
                        all_fail++;
                    }
                } else if (rmsg && text && strstr(text, rmsg)) {
                    /* no Python: the reference's message is the template's own words, so kiln must say them too */
                    CHECKF(!got && strstr(rerr, rmsg), "%s: the template raises '%s'; kiln: %s", label, rmsg,
                           got ? "renders it" : rerr);
                    if (!got && strstr(rerr, rmsg)) both_raise++;
                } else {
                    printf("not compared: %s (@huggingface/jinja: %s; no Python Jinja)\n", label, rmsg ? rmsg : "?");
                }
                free(rmsg);
                free(py);
                free(pyerr);
            }
            if (!got) CHECKF(strstr(rerr, "template") != NULL, "%s: kiln's error names no template line: %s", label, rerr);
            free(want);
            free(got);
            free(ctx);
        }
        kiln_jinja_free(t);
        free(text);
    }
    printf("%d pairs byte-identical with @huggingface/jinja; %d it cannot render: %d identical with Python Jinja, "
           "%d refused by the template's own raise_exception in all; %d failing in all three; %d known\n",
           same, ref_fail, py_same, both_raise, all_fail, skipped);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    for (size_t i = 0; i < nt; i++) free(names[i]);
    for (size_t i = 0; i < nc; i++) free(cases[i]);
    return tu_finish("test_jinja_conformance");
}
