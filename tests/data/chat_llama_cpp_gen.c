/* Makes chat_llama_cpp.tsv (read by tests/test_chat.c): renders five
 * conversations with llama.cpp's own llama_chat_apply_template for every
 * built-in template, with and without the assistant opening. One record per
 * line: family \t conversation \t add_ass \t output (\n \t \\ \xHH escaped).
 * Built against the peer library of ../shared/peer/build.sh:
 *   lib=/tmp/kiln-peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
 *   cc -o gen chat_llama_cpp_gen.c -I /tmp/kiln-peer/src/include -I /tmp/kiln-peer/src/ggml/include \
 *      -L $lib -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,$lib
 *   ./gen > chat_llama_cpp.tsv
 * The conversations must match CONVS in tests/test_chat.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static void esc(const char *s, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20) printf("\\x%02x", c);
        else putchar(c);
    }
}

int main(void) {
    static const llama_chat_message c0[] = {
        {"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "Hi there"},
        {"user", "Who are you"}, {"assistant", "   I am an assistant   "}, {"user", "Another question"}};
    static const llama_chat_message c1[] = {{"user", "Hello"}};
    static const llama_chat_message c3[] = {
        {"system", "  sys one  "}, {"system", "two"}, {"user", " hi\n"}, {"assistant", "ok "},
        {"tool", "res"}, {"user", "again"}, {"assistant_tool_call", "[call]"}, {"function", "fn"},
        {"system", " late sys "}, {"assistant", "\tend\t"}, {"user", ""}};
    static const llama_chat_message c4[] = {{"assistant", "first"}, {"user", "q"}};
    struct { const llama_chat_message *m; int n; } convs[] = {{c0, 6}, {c1, 1}, {NULL, 0}, {c3, 11}, {c4, 2}};
    const char *names[128];
    int nn = llama_chat_builtin_templates(names, 128);
    static char buf[1 << 16];
    for (int t = 0; t <= nn; t++) {
        /* dots1 has no name: its marker string selects it */
        const char *tmpl = t < nn ? names[t] : "<|endofuserprompt|>";
        const char *label = t < nn ? names[t] : "dots1";
        for (int c = 0; c < 5; c++) {
            for (int add = 0; add < 2; add++) {
                int r = llama_chat_apply_template(tmpl, convs[c].m, convs[c].n, add, buf, sizeof buf);
                if (r < 0 || r >= (int)sizeof buf) { fprintf(stderr, "%s conv %d: %d\n", label, c, r); return 1; }
                printf("%s\t%d\t%d\t", label, c, add);
                esc(buf, r);
                putchar('\n');
            }
        }
    }
    return 0;
}
