/*
 * replay.c - runs a libFuzzer harness without libFuzzer (the normal and the
 * sanitizer builds of the test suite): every file of the corpus directories
 * given, then a bounded number of mutations of them (bit flips, bytes cut,
 * repeated or spliced from another input), from a fixed seed so that a failure
 * reproduces. usage: test_fuzz_X [-n MUTATIONS] DIR...
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
    uint8_t *p;
    size_t n;
};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { /* xorshift64* */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static bool load(const char *path, struct input *in) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    in->p = malloc(n > 0 ? (size_t)n : 1);
    in->n = n > 0 && in->p ? fread(in->p, 1, (size_t)n, f) : 0;
    fclose(f);
    return in->p != NULL;
}

int main(int argc, char **argv) {
    long mutations = 2000;
    struct input *ins = NULL;
    size_t n = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-n") && a + 1 < argc) {
            mutations = atol(argv[++a]);
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[a]);
            return 1;
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            struct input *more = realloc(ins, sizeof *ins * (n + 1));
            if (!more) return 1;
            ins = more;
            if (load(path, &ins[n])) n++;
        }
        closedir(d);
    }
    if (n == 0) {
        fprintf(stderr, "replay: no corpus\n");
        return 77;
    }
    for (size_t i = 0; i < n; i++) LLVMFuzzerTestOneInput(ins[i].p, ins[i].n);
    uint8_t *buf = malloc(1 << 16);
    for (long m = 0; buf && m < mutations; m++) {
        const struct input *a = &ins[next() % n], *b = &ins[next() % n];
        size_t len = a->n > (1 << 15) ? 1 << 15 : a->n;
        memcpy(buf, a->p, len);
        for (int edits = 1 + (int)(next() % 4); edits > 0; edits--) {
            size_t at = len ? next() % len : 0;
            switch (next() % 5) {
            case 0: if (len) buf[at] ^= (uint8_t)(1u << (next() % 8)); break; /* flip a bit */
            case 1: if (len) buf[at] = (uint8_t)"{}[]\",:\\0u\x00 "[next() % 13]; break; /* a JSON byte */
            case 2: if (len) { size_t cut = 1 + next() % (len - at); memmove(buf + at, buf + at + cut, len - at - cut); len -= cut; } break;
            case 3: { size_t rep = 1 + next() % 16; if (len + rep < (1 << 15) && at + rep <= len) { memmove(buf + at + rep, buf + at, len - at); len += rep; } } break;
            default: { size_t take = b->n > 1 ? next() % (b->n - 1) : 0, from = 1; /* splice b's body */
                if (len + take < (1 << 15) && take) { memcpy(buf + at + (at < len), b->p + from, take); len = at + (at < len) + take; } } break;
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("replay: %zu inputs, %ld mutations\n", n, mutations);
    free(buf);
    for (size_t i = 0; i < n; i++) free(ins[i].p);
    free(ins);
    return 0;
}
