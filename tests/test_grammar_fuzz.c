/*
 * test_grammar_fuzz.c - the grammar fuzz harness (tests/fuzz/fuzz_grammar.c) in
 * every build, without libFuzzer: each seed of tests/data/grammar-fuzz/ (and
 * crashes saved there), then seeded random mutations of them (byte flips,
 * insertions, deletions, grammar and schema words spliced in) for a bounded
 * time. The harness aborts on a broken invariant (a mask that differs from the
 * reference, a refused allowed token, a failure without a message); the
 * sanitizer build turns memory errors into failures too. The long runs are
 * scripts/fuzz.sh's.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz/fuzz_grammar.c"
#include "testutil.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return n ? (uint32_t)(rs % n) : 0;
}

static const char *const words[] = {"::=", "|", "*", "+", "?", "{2,3}", "{0,}", "(", ")", "[", "]", "[^", "\"",
                                    "\\", "\\u00e9", "\\x41", "#", "\n", "root", "a", "-", ".", "{", "}", ":", ",",
                                    "\"type\"", "\"object\"", "\"string\"", "\"properties\"", "\"required\"", "\"items\"",
                                    "\"anyOf\"", "\"$ref\"", "\"#/$defs/x\"", "\"pattern\"", "\"^a+$\"", "\"enum\"",
                                    "\"minimum\"", "-9223372036854775808", "1e400", "\"maxLength\"", "99999", "true"};

int main(void) {
    const char *src = getenv("KILN_SRC");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/grammar-fuzz", src ? src : "..");
    DIR *d = opendir(dir);
    if (!d) {
        printf("SKIP: %s is missing\n", dir);
        return 77;
    }
    static uint8_t seeds[64][8192];
    size_t seed_len[64];
    int n_seeds = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_seeds < 64) {
        if (e->d_name[0] == '.') continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        seed_len[n_seeds] = fread(seeds[n_seeds], 1, sizeof seeds[0], f);
        fclose(f);
        LLVMFuzzerTestOneInput(seeds[n_seeds], seed_len[n_seeds]); /* aborts on a broken invariant */
        n_seeds++;
    }
    closedir(d);
    CHECK(n_seeds >= 8);
    /* mutations, for a bounded time (less under the sanitizers' slower clock) */
    const double budget = getenv("KILN_SANITIZED") ? 20.0 : 8.0, t0 = now();
    static uint8_t buf[16384];
    int runs = 0;
    while (n_seeds && now() - t0 < budget) {
        int s = (int)rnd((uint32_t)n_seeds);
        size_t n = seed_len[s];
        memcpy(buf, seeds[s], n);
        for (int k = 1 + (int)rnd(6); k > 0; k--) {
            size_t at = 1 + rnd((uint32_t)(n > 1 ? n - 1 : 1));
            switch (rnd(5)) {
            case 0: buf[at] ^= (uint8_t)(1u << rnd(8)); break;
            case 1:
                if (n > 2) memmove(buf + at, buf + at + 1, n - at - 1), n--;
                break;
            case 2:
                if (n + 1 < sizeof buf) memmove(buf + at + 1, buf + at, n - at), buf[at] = (uint8_t)rnd(256), n++;
                break;
            default: {
                const char *w = words[rnd(sizeof words / sizeof words[0])];
                size_t wl = strlen(w);
                if (n + wl < sizeof buf) memmove(buf + at + wl, buf + at, n - at), memcpy(buf + at, w, wl), n += wl;
            }
            }
        }
        if (rnd(8) == 0) buf[0] ^= 1; /* the same text read the other way */
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    printf("%d seeds, %d mutated inputs in %.1f s\n", n_seeds, runs, now() - t0);
    CHECK(runs > 100);
    return tu_finish("test_grammar_fuzz");
}
