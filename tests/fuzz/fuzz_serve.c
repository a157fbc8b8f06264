/*
 * fuzz_serve.c - libFuzzer harness for the server's request parsing and
 * validation: the first byte picks a route, the rest is its JSON body, taken
 * as the route takes it (strict JSON, the field table, every field into its
 * parameters, prompts tokenized, messages rendered, tasks built but not run).
 * Any input must give an answer of its own: 200/nothing for what is valid, a 4xx
 * whose body names the problem for what is not; never a 5xx, a crash or a leak.
 * The model's vocabulary: KILN_FUZZ_MODEL, else models/kjv-q4_0.gguf under KILN_SRC or ".".
 * Build: cmake -DCMAKE_C_COMPILER=clang -DKILN_FUZZ=ON -DKILN_SANITIZE=ON; run: scripts/fuzz.sh serve.
 * Without libFuzzer, replay.c runs it over a corpus (test_fuzz_serve).
 */
#include "serve_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct kiln_server srv;
static struct kiln_model *model;

static const struct {
    const char *path;
    enum MHD_Result (*fn)(struct srv_req *r);
} routes[] = {
    {"/v1/completions", srv_route_completions}, {"/v1/chat/completions", srv_route_chat},
    {"/completion", srv_route_completion},      {"/tokenize", srv_route_tokenize},
    {"/detokenize", srv_route_detokenize},      {"/apply-template", srv_route_apply_template},
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[4096];
    const char *env = getenv("KILN_FUZZ_MODEL"), *src = getenv("KILN_SRC");
    snprintf(path, sizeof path, "%s", env ? env : "models/kjv-q4_0.gguf");
    if (!env && src) snprintf(path, sizeof path, "%s/models/kjv-q4_0.gguf", src);
    struct kiln_model_params mp = kiln_model_default_params();
    mp.vocab_only = true;
    char err[512];
    model = kiln_model_load(path, mp, err, sizeof err);
    if (!model) {
        fprintf(stderr, "fuzz_serve: %s: %s (set KILN_FUZZ_MODEL or KILN_SRC)\n", path, err);
        exit(77);
    }
    srv.p = kiln_server_default_params();
    srv.p.n_parallel = 2;
    srv.model = model;
    srv.vocab = kiln_model_vocab(model);
    srv.tmpl = kiln_model_chat_template(model, NULL);
    srv.n_ctx_slot = 256;
    srv.max_piece = srv_longest_piece(srv.vocab);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t k = data[0] % (sizeof routes / sizeof routes[0]);
    /* an exact-size copy, so reading one byte past the body is caught */
    char *body = malloc(size - 1 ? size - 1 : 1);
    if (!body) return 0;
    memcpy(body, data + 1, size - 1);
    struct srv_req r = {.srv = &srv, .method = "POST", .url = routes[k].path, .route = routes[k].path,
                        .body = body, .body_len = size - 1};
    routes[k].fn(&r);
    if (r.reply.status >= 500 || (r.reply.status && !r.reply.body)) {
        fprintf(stderr, "fuzz_serve: %s answered %u: %s\n", routes[k].path, r.reply.status,
                r.reply.body ? r.reply.body : "(no body)");
        abort(); /* a request may be refused, never break the server */
    }
    if (r.reply.status >= 400) { /* the error names what is wrong */
        cJSON *j = cJSON_Parse(r.reply.body);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        if (!cJSON_IsString(m) || !*m->valuestring) abort();
        cJSON_Delete(j);
    }
    srv_reply_clear(&r.reply);
    free(body);
    return 0;
}
