#!/usr/bin/env bash
# test_serve.sh - `kiln serve` over loopback on a free port: flag errors, every
# route and the malformed-request corpus (tests/serve_check.py), the API key and
# a full queue on a second server, and SIGTERM during a stream (exit 0, and no
# leak under ASan). Model: ../shared/models/kjv-q8_0.gguf, else models/kjv-q4_0.gguf.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
refdir=$shared/reference
[ "$model" = "$shared/models/kjv-q8_0.gguf" ] || refdir=""

# flags
check "--help" exit_is 0 "$kiln" serve --help
check "--help names the routes" grep -q "/v1/chat/completions" "$tmp/out"
check "no -m is a usage error" exit_is 2 "$kiln" serve
check "port out of range" exit_is 2 "$kiln" serve -m "$model" --port 70000
check "-np 0" exit_is 2 "$kiln" serve -m "$model" -np 0
check "unknown flag" exit_is 2 "$kiln" serve -m "$model" --bogus
check "a batch smaller than the slots" exit_is 1 "$kiln" serve -m "$model" --port 0 -np 4 -b 2
check "a batch smaller than the slots named" err_has "raise -b"
check "bad host" exit_is 1 "$kiln" serve -m "$model" --host nowhere.invalid --port 0
check "bad host named" err_has "nowhere.invalid"

# the main server: 8 slots of 512 tokens; prompts join the batch 3 tokens a step
# while others generate (chunked prefill inside the concurrency check)
if check "server starts" srv_start "$tmp/main.log" -np 8 -c 4096 --prefill-chunk 3; then
  check "port in use" exit_is 1 "$kiln" serve -m "$model" --port "$port"
  check "every route, concurrency, cache reuse, malformed corpus" \
    timeout $limit python3 "$src/tests/serve_check.py" "$port" main "$kiln" "$model" "$refdir"
  check "SIGTERM: exit 0" srv_stop "$tmp/main.log"
fi

# API key and a full queue: one slot, one waiting request
if check "server with --api-key starts" srv_start "$tmp/auth.log" -np 1 --queue 1 -c 4096 --api-key secret; then
  check "API key and queue" timeout $limit python3 "$src/tests/serve_check.py" "$port" auth
  check "SIGINT: exit 0" srv_stop "$tmp/auth.log" INT
fi

# SIGTERM while a stream runs: the client gets an end, the server exits 0
if check "server starts" srv_start "$tmp/term.log" -np 2 -c 1024; then
  python3 - "$port" "$tmp/started" >"$tmp/stream.out" 2>&1 <<'PY' &
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
c.request("POST", "/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 500, "stream": True,
                                                 "ignore_eos": True}))
r = c.getresponse()
first = r.readline()
open(sys.argv[2], "w").write("streaming\n")
print((first + r.read()).decode()[-300:])
PY
  client=$!
  for _ in $(seq 300); do [ -s "$tmp/started" ] && break; sleep 0.1; done
  check "the stream started" test -s "$tmp/started"
  check "SIGTERM during a stream: exit 0" srv_stop "$tmp/term.log"
  check "the streaming client got its end" wait $client
  check "the stream ends with an error event and [DONE]" grep -q "shutting down" "$tmp/stream.out"
fi
tu_finish test_serve
