/*
 * test_jinja_fuzz.c - a short, deterministic fuzzing run of the Jinja
 * interpreter inside the test suite (the long runs are scripts/fuzz.sh with
 * libFuzzer): the seed templates (llama.cpp's 70 when the peer source is
 * there, kiln's crafted ones always) mutated by byte flips, Jinja-token
 * insertions, deletions, duplications, splices and truncations, each fed to
 * the libFuzzer entry point of tests/fuzz/fuzz_jinja.c, which aborts on
 * anything but text or a clear error. Bounded by a time budget.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz/fuzz_jinja.c"
#include "testutil.h"

static const char *const TOKENS[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "(", ")", "[", "]", "{", "}", "|", ",", ".", ":", "'", "\"",
    "\\", "-", "+", "~", "*", "**", "//", "==", " if ", " else ", " for x in ", "endfor", "endif", "set ", "macro ",
    "endmacro", "call ", "endcall", "filter ", "endfilter", "loop.", "namespace(", "range(", "| tojson", "| join(",
    "messages", "tools", "not ", " and ", " or ", " in ", " is ", "defined", "none", "caller()", "break", "continue",
    "0", "-1", "99999999999", "1.5", "\n", " ", "\xff", "\xc3\xa9", "\xe2\x80\xa8",
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct seed {
    char *p;
    size_t n;
};

static size_t load_dir(const char *dir, struct seed *s, size_t n, size_t cap) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) && n < cap;) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".jinja")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        s[n].p = tu_read_file(path, &s[n].n);
        if (s[n].p) n++;
    }
    if (d) closedir(d);
    return n;
}

int main(void) {
    const char *src = getenv("KILN_SRC") ? getenv("KILN_SRC") : "..";
    const char *peer = getenv("PEER_DIR") ? getenv("PEER_DIR") : "/tmp/kiln-peer";
    char dir[1024];
    struct seed seeds[256];
    size_t ns = 0;
    snprintf(dir, sizeof dir, "%s/src/models/templates", peer);
    ns = load_dir(dir, seeds, ns, 256);
    size_t npeer = ns;
    snprintf(dir, sizeof dir, "%s/tests/data/jinja", src);
    ns = load_dir(dir, seeds, ns, 256);
    CHECKF(ns > npeer, "no crafted seeds in %s", dir);
    if (!npeer) printf("note: no peer templates (PEER_DIR): seeds are kiln's crafted templates only\n");
    if (!ns) return tu_finish("test_jinja_fuzz");

    /* every seed as it is first */
    for (size_t i = 0; i < ns; i++) LLVMFuzzerTestOneInput((const uint8_t *)seeds[i].p, seeds[i].n);

    double budget = getenv("KILN_SANITIZED") ? 20 : 5, t0 = now_s();
    uint64_t rng = 0x6a696e6a61ULL;
    size_t cap = 1 << 16;
    char *buf = malloc(cap * 2 + 64);
    long runs = 0;
    while (now_s() - t0 < budget && runs < 200000) {
        const struct seed *s = &seeds[tu_rand_u64(&rng) % ns];
        size_t n = s->n < cap ? s->n : cap;
        memcpy(buf, s->p, n);
        int edits = 1 + (int)(tu_rand_u64(&rng) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = n ? tu_rand_u64(&rng) % (n + 1) : 0;
            switch (tu_rand_u64(&rng) % 6) {
            case 0: /* flip a byte */
                if (at < n) buf[at] ^= (char)(1u << (tu_rand_u64(&rng) % 8));
                break;
            case 1: { /* insert a token */
                const char *tok = TOKENS[tu_rand_u64(&rng) % (sizeof TOKENS / sizeof TOKENS[0])];
                size_t l = strlen(tok);
                if (n + l > cap) break;
                memmove(buf + at + l, buf + at, n - at);
                memcpy(buf + at, tok, l);
                n += l;
                break;
            }
            case 2: { /* delete a span */
                size_t l = tu_rand_u64(&rng) % 64;
                if (at + l > n) l = n - at;
                memmove(buf + at, buf + at + l, n - at - l);
                n -= l;
                break;
            }
            case 3: { /* duplicate a span */
                size_t l = tu_rand_u64(&rng) % 256;
                if (at + l > n) l = n - at;
                if (n + l > cap) break;
                memmove(buf + at + l, buf + at, n - at);
                n += l;
                break;
            }
            case 4: { /* splice in a piece of another seed */
                const struct seed *o = &seeds[tu_rand_u64(&rng) % ns];
                size_t from = o->n ? tu_rand_u64(&rng) % o->n : 0, l = tu_rand_u64(&rng) % 512;
                if (from + l > o->n) l = o->n - from;
                if (n + l > cap) break;
                memmove(buf + at + l, buf + at, n - at);
                memcpy(buf + at, o->p + from, l);
                n += l;
                break;
            }
            default: /* truncate */
                n = at;
            }
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
        runs++;
    }
    printf("test_jinja_fuzz: %zu seeds, %ld mutated templates in %.1f s, none crashed\n", ns, runs, now_s() - t0);
    CHECK(runs > 0);
    free(buf);
    for (size_t i = 0; i < ns; i++) free(seeds[i].p);
    return tu_finish("test_jinja_fuzz");
}
