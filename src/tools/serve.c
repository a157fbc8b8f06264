/*
 * serve.c - `kiln serve`: the OpenAI-compatible and llama-server-compatible
 * HTTP server (src/serve) with llama-server's flag names. It listens before the
 * model loads (/health says 503 meanwhile) but says "listening" only once the model
 * is attached, and exits 0 on SIGINT/SIGTERM.
 */
#include "model_args.h"
#include "serve.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int cmd_serve(int argc, char **argv) {
    const char *cmd = "serve";
    struct model_args ma;
    model_args_init(&ma);
    struct kiln_server_params sp = kiln_server_default_params();
    char *template_text = NULL; /* --chat-template-file's text */
    enum kiln_pooling pooling = KILN_POOLING_UNSPECIFIED;
    bool rerank = false;
    struct gen_args ga; /* --temp, --seed, ...: the sampling a request that sets none gets */
    int ubatch = 0;     /* -ub */
    gen_args_init(&ga);
    for (int i = 1; i < argc; i++) {
        int r = model_args_parse(&ma, cmd, argc, argv, &i);
        if (r < 0) return EXIT_USAGE;
        if (r > 0) continue;
        const char *o = argv[i], *v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: kiln serve -m MODEL [--host ADDR] [--port N] [-np N] [-c N] [-t N] [--api-key KEY]\n"
                   "       [--chat-template-file F] [--reasoning-format F] ...\n"
                   "An HTTP server with continuous batching: OpenAI's /v1/completions,\n"
                   "/v1/chat/completions, /v1/models and llama-server's /completion, /health,\n"
                   "/tokenize, /detokenize, /apply-template, /props, /slots, /metrics. The context (-c) is\n"
                   "shared by the slots: each holds -c / -np tokens.\n%s"
                   "  --host ADDR             address to listen on (default 127.0.0.1)\n"
                   "  --port N                port (default 8080; 0: any free port, printed)\n"
                   "  -np, --parallel N       slots: requests decoded together (default 1)\n"
                   "  -n, --n-predict N       default token limit per request (-1: the slot's context)\n"
                   "  --api-key KEY           require 'Authorization: Bearer KEY' (not on /health)\n"
                   "  --api-key-file FILE     more keys, one a line: KEY [TENANT] (a key without a tenant\n"
                   "                          is a tenant of its own)\n"
                   "  --prefix-share MODE     which requests continue from cells others decoded: tenant\n"
                   "                          (default: within one tenant, keys or X-Tenant), global, off\n"
                   "  --trusted-proxy ADDRS   comma-separated addresses whose X-Tenant header names the tenant\n"
                   "  --cors-origins LIST     origins a browser may call from: * (default), localhost, or\n"
                   "                          comma-separated scheme://host[:port]\n"
                   "  --max-connections N     open connections; past it the longest idle is closed, then 503\n"
                   "                          (default: from ulimit -n, at most 8192)\n"
                   "  --threads-http N        threads polling the sockets (default: the cores, 2 to 4)\n"
                   "  --header-timeout S      a request's headers must arrive within S seconds (default 30)\n"
                   "  --body-timeout S        its body within S seconds of its headers (default 60)\n"
                   "  --timeout S             close a connection that neither sends nor reads for S seconds\n"
                   "                          (default 600)\n"
                   "  --queue N               requests waiting for a slot before 503 (default 64)\n"
                   "  --prefill-chunk N       prompt tokens per step while others generate (default 128)\n"
                   "  --request-timeout S     stop a generation still waiting or running after S seconds:\n"
                   "                          504 (default 0: no limit)\n"
                   "  --max-body N            request body limit in bytes, 413 beyond (default 4194304)\n"
                   "  --drain S               on SIGTERM/SIGINT stop accepting and let running requests\n"
                   "                          finish for up to S seconds before cancelling (default 0)\n"
                   "  --embeddings            serve embeddings, not text: /v1/embeddings, /embedding(s)\n"
                   "                          (many inputs to a batch; generation routes answer 400)\n"
                   "  --reranking             serve reranking: /v1/rerank, /rerank (rank pooling, the\n"
                   "                          model's classifier head)\n"
                   "  --pooling P             with --embeddings: none, mean, cls, last (default: the model's)\n"
                   "  --no-prefix-share       --prefix-share off: a prompt reuses only its own slot's cached\n"
                   "                          tokens (as llama-server), not cells another slot decoded\n"
                   "  -cram, --cache-ram N    MiB of KV cells that keep prefixes after their slot moved\n"
                   "                          on, least recently used dropped first (default 8192;\n"
                   "                          -1: no limit; 0: none)\n"
                   "  --jinja / --no-jinja    chats through the model's Jinja chat template (the default),\n"
                   "                          or kiln's native template families\n"
                   "  --chat-template T       a native family's name (chatml, llama3, ...) or a Jinja template\n"
                   "  --chat-template-file F  a Jinja chat template from a file\n"
                   "  --reasoning-format F    deepseek (the default; 'auto' too): thinking goes to\n"
                   "                          reasoning_content; none: it stays in the content\n"
                   "  --reasoning MODE        on, auto (the template's default) or off (--reasoning-budget 0)\n"
                   "  --reasoning-budget N    tokens of thinking before '</think>' is written for the model\n"
                   "                          (-1: no limit, the default; 0: thinking off)\n",
                   model_args_help());
            printf("  --alias A[,B...]        names of the model: the first in byte order is its id in\n"
                   "                          /v1/models and answers, all are listed as its aliases\n"
                   "  --tags T[,U...]         tags /v1/models lists for the model\n"
                   "  --metrics               answer GET /metrics in Prometheus' text format (off: 501)\n"
                   "  --slots / --no-slots    answer GET /slots (the default) or 501\n"
                   "  -cb, --cont-batching    continuous batching (always on)\n"
                   "  -ub, --ubatch-size N    most tokens computed in one pass (with -b, the smaller)\n"
                   "  --offline, --no-ui      accepted: kiln never downloads and has no web UI\n"
                   "Sampling defaults for requests that do not set them (llama-server's flags):\n%s",
                   gen_args_help());
            return EXIT_OK;
        } else if (!strcmp(o, "--host")) {
            if (!(sp.host = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--port")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 0, 65535, &sp.port))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-np") || !strcmp(o, "--parallel")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 64, &sp.n_parallel))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, -1, 1 << 24, &sp.n_predict))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--api-key")) {
            if (!(sp.api_key = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!*sp.api_key) return tool_usage_error(cmd, "--api-key must not be empty");
        } else if (!strcmp(o, "--timeout") || !strcmp(o, "-to")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 86400, &sp.timeout_s))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--queue")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 65536, &sp.queue_max))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--prefill-chunk")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, 1, 1 << 20, &sp.prefill_chunk))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--request-timeout")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, 0, 86400, &sp.request_timeout_s))
                return EXIT_USAGE;
        } else if (!strcmp(o, "-cram") || !strcmp(o, "--cache-ram")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, -1, 1 << 30, &sp.cache_ram_mib))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--embeddings") || !strcmp(o, "--embedding")) {
            sp.embeddings = true;
        } else if (!strcmp(o, "--reranking") || !strcmp(o, "--rerank")) {
            sp.embeddings = true;
            ma.cparams.pooling = KILN_POOLING_RANK;
            rerank = true;
        } else if (!strcmp(o, "--pooling")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!kiln_pooling_from_name(v, &pooling))
                return tool_usage_error(cmd, "unknown --pooling '%s' (none, mean, cls, last, rank)", v);
        } else if (!strcmp(o, "--jinja")) {
            sp.jinja = true;
        } else if (!strcmp(o, "--no-jinja")) {
            sp.jinja = false;
        } else if (!strcmp(o, "--chat-template")) {
            if (!(sp.chat_template = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!*sp.chat_template) return tool_usage_error(cmd, "--chat-template must not be empty");
        } else if (!strcmp(o, "--chat-template-file")) {
            const char *path = tool_arg_path(cmd, argc, argv, &i);
            if (!path) return EXIT_USAGE;
            size_t len;
            free(template_text);
            if (!(template_text = tool_read_file(cmd, path, 4u << 20, &len))) return EXIT_USAGE;
            if (tool_text_has_nul(cmd, path, template_text, len)) {
                free(template_text);
                return EXIT_USAGE;
            }
            sp.chat_template = template_text;
        } else if (!strcmp(o, "--reasoning-format")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (strcmp(v, "none") && strcmp(v, "deepseek") && strcmp(v, "auto"))
                return tool_usage_error(cmd, "--reasoning-format must be none, deepseek or auto, not '%s'", v);
            sp.reasoning = strcmp(v, "none") != 0;
        } else if (!strcmp(o, "--reasoning-budget")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, -1, 1 << 24, &sp.reasoning_budget))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--no-prefix-share")) {
            sp.prefix_share = KILN_PREFIX_SHARE_OFF;
        } else if (!strcmp(o, "--prefix-share")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!strcmp(v, "tenant")) sp.prefix_share = KILN_PREFIX_SHARE_TENANT;
            else if (!strcmp(v, "global")) sp.prefix_share = KILN_PREFIX_SHARE_GLOBAL;
            else if (!strcmp(v, "off")) sp.prefix_share = KILN_PREFIX_SHARE_OFF;
            else return tool_usage_error(cmd, "--prefix-share must be tenant, global or off, not '%s'", v);
        } else if (!strcmp(o, "--api-key-file")) {
            if (!(sp.api_key_file = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--trusted-proxy")) {
            if (!(sp.trusted_proxies = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        } else if (!strcmp(o, "--cors-origins")) {
            if (!(sp.cors_origins = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!*sp.cors_origins) return tool_usage_error(cmd, "--cors-origins must not be empty");
        } else if (!strcmp(o, "--max-connections")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, 16, 1 << 20, &sp.max_connections))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--threads-http")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 256, &sp.threads_http))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--header-timeout")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) ||
                !tool_parse_int(cmd, o, v, 1, 86400, &sp.header_timeout_s))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--body-timeout")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 86400, &sp.body_timeout_s))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--drain")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 0, 3600, &sp.drain_s))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--max-body")) {
            int mb = 0;
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1024, 1 << 30, &mb))
                return EXIT_USAGE;
            sp.max_body = (size_t)mb;
        } else if (!strcmp(o, "--alias") || !strcmp(o, "-a") || !strcmp(o, "--tags")) {
            const char **slot = !strcmp(o, "--tags") ? &sp.tags : &sp.alias;
            if (!(*slot = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!strpbrk(*slot, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
                return tool_usage_error(cmd, "%s needs at least one name, not '%s'", o, *slot);
        } else if (!strcmp(o, "--metrics")) {
            sp.metrics = true;
        } else if (!strcmp(o, "--slots") || !strcmp(o, "--no-slots")) {
            sp.slots = !strcmp(o, "--slots");
        } else if (!strcmp(o, "-cb") || !strcmp(o, "--cont-batching") || !strcmp(o, "--offline") ||
                   !strcmp(o, "--no-ui")) {
            /* what they ask for is what kiln does anyway */
        } else if (!strcmp(o, "-ub") || !strcmp(o, "--ubatch-size")) {
            /* kiln computes a decode's tokens in one pass: the smaller of -b and -ub bounds it */
            if (!(v = tool_arg_value(cmd, argc, argv, &i)) || !tool_parse_int(cmd, o, v, 1, 1 << 24, &ubatch))
                return EXIT_USAGE;
        } else if (!strcmp(o, "--reasoning") || !strcmp(o, "-rea")) {
            if (!(v = tool_arg_value(cmd, argc, argv, &i))) return EXIT_USAGE;
            if (!strcmp(v, "off")) sp.reasoning_budget = 0;
            else if (strcmp(v, "on") && strcmp(v, "auto"))
                return tool_usage_error(cmd, "--reasoning must be on, off or auto, not '%s'", v);
        } else if (!strcmp(o, "-kvu") || !strcmp(o, "--kv-unified")) {
            return tool_usage_error(cmd, "%s: kiln serve gives each slot -c / -np cells; one pool that every slot "
                                         "may fill is not implemented", o);
        } else if (!strcmp(o, "-nocb") || !strcmp(o, "--no-cont-batching")) {
            return tool_usage_error(cmd, "%s: kiln serve always batches continuously", o);
        } else if ((!strcmp(o, "-s") || !strcmp(o, "--seed")) && i + 1 < argc && !strcmp(argv[i + 1], "-1")) {
            ga.sp.seed = KILN_SEED_RANDOM; /* llama-server's -1: a new draw per request */
            i++;
        } else {
            int g = gen_args_parse(&ga, cmd, argc, argv, &i);
            if (g < 0) return EXIT_USAGE;
            if (g == 0) return tool_usage_error(cmd, "unknown option '%s'", o);
        }
    }
    if (!ma.model_path) return tool_usage_error(cmd, "-m MODEL is required");
    if (pooling != KILN_POOLING_UNSPECIFIED && !sp.embeddings)
        return tool_usage_error(cmd, "--pooling needs --embeddings");
    if (rerank && pooling != KILN_POOLING_UNSPECIFIED && pooling != KILN_POOLING_RANK)
        return tool_usage_error(cmd, "--reranking pools by rank, not '%s'", kiln_pooling_name(pooling));
    if (sp.embeddings && !rerank) ma.cparams.pooling = pooling;
    if (sp.embeddings) {
        /* each request's inputs are packed into whole-sequence batches of up to 64 */
        ma.cparams.embeddings = true;
        ma.cparams.n_seq_max = 64;
        ma.cparams.type_k = ma.cparams.type_v = KT_TYPE_F32;
    }
    if (ga.grammar || ga.grammar_file || ga.schema || ga.schema_file)
        return tool_usage_error(cmd, "a grammar or JSON Schema is given per request ('grammar', 'json_schema', "
                                     "'response_format'), not to the server");
    struct kiln_sampler *check = kiln_sampler_from_params(&ga.sp);
    if (!check) return tool_usage_error(cmd, "%s", kiln_sampler_last_error());
    kiln_sampler_free(check);
    sp.sampling = ga.sp;
    if (ubatch > 0 && (ma.cparams.n_batch == 0 ? 512 : (int)ma.cparams.n_batch) > ubatch)
        ma.cparams.n_batch = (uint32_t)ubatch;
    /* spare sequences past the slots hold the prefix cache (up to 16 prefixes) */
    int n_park = sp.cache_ram_mib != 0 && sp.prefix_share != KILN_PREFIX_SHARE_OFF
                     ? (64 - sp.n_parallel < 16 ? 64 - sp.n_parallel : 16)
                     : 0;
    if (!sp.embeddings) ma.cparams.n_seq_max = (uint32_t)(sp.n_parallel + n_park);

    /* SIGINT/SIGTERM are taken by sigwait below: blocked here, before any thread
     * starts, so that every thread inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGINT, SIG_DFL); /* a shell's background job starts with SIGINT ignored */
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    /* every connection is a descriptor: take what the hard limit allows (as servers do) */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }

    char err[512];
    struct kiln_server *srv = kiln_server_start(&sp, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        return EXIT_RUNTIME;
    }
    for (int w = 0; kiln_server_warning(srv, w); w++)
        fprintf(stderr, "kiln %s: warning: %s\n", cmd, kiln_server_warning(srv, w));
    int rc = EXIT_RUNTIME;
    if (!model_args_load(&ma, cmd, 0)) goto done;
    if ((uint32_t)sp.n_parallel > kiln_n_ctx(ma.ctx)) {
        fprintf(stderr, "kiln %s: %d slots do not fit a context of %u tokens\n", cmd, sp.n_parallel,
                kiln_n_ctx(ma.ctx));
        goto done;
    }
    if (!kiln_server_attach(srv, ma.model, ma.ctx, ma.model_path, err, sizeof err)) {
        fprintf(stderr, "kiln %s: %s\n", cmd, err);
        goto done;
    }
    /* only now: a model that fails to load must not have been announced as served */
    fprintf(stderr, "kiln %s: listening on http://%s%s%s:%d\n", cmd, strchr(sp.host, ':') ? "[" : "", sp.host,
            strchr(sp.host, ':') ? "]" : "", kiln_server_port(srv));
    if (sp.embeddings)
        fprintf(stderr, "kiln %s: model loaded: %s pooling, batches of %u tokens and up to %u inputs\n", cmd,
                kiln_pooling_name(kiln_context_pooling(ma.ctx)), kiln_n_ctx(ma.ctx), kiln_n_seq_max(ma.ctx));
    else
        fprintf(stderr, "kiln %s: model loaded: %d slot(s) of %u tokens\n", cmd, sp.n_parallel,
                kiln_n_ctx(ma.ctx) / (uint32_t)sp.n_parallel);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "kiln %s: %s: stopping\n", cmd, sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = EXIT_OK;
done:
    kiln_server_stop(srv);
    model_args_free(&ma);
    free(template_text);
    return rc;
}
