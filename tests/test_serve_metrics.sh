#!/usr/bin/env bash
# test_serve_metrics.sh - kiln serve's observability and limits over loopback:
# GET /metrics (Prometheus text, counters checked against each response's own
# timings), /slots, /props (tests/serve_metrics.py); --request-timeout, --queue,
# --max-body; the new flags' errors; SIGTERM with --drain lets a running stream
# finish (no error event), refuses new connections, and exits 0; prompts continuing
# from cells other slots decoded give the reference's tokens, each prefix evaluated once;
# --cache-ram parks a slot's prompt when the slot moves on, and evicts least recently used.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-metrics
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"

check "--request-timeout -1" exit_is 2 "$kiln" serve -m "$model" --request-timeout -1
check "--request-timeout named" err_has "--request-timeout"
check "--max-body below 1024" exit_is 2 "$kiln" serve -m "$model" --max-body 10
check "--cache-ram below -1" exit_is 2 "$kiln" serve -m "$model" --cache-ram -2
check "--drain not a number" exit_is 2 "$kiln" serve -m "$model" --drain soon
check "--help names /metrics" exit_is 0 "$kiln" serve --help
check "--help names --drain" grep -q -- "--drain" "$tmp/out"

if check "server starts" srv_start "$tmp/metrics.log" -np 2 -c 4096; then
  check "metrics, slots, props" timeout $limit python3 "$src/tests/serve_metrics.py" "$port" metrics
  check "SIGTERM: exit 0" srv_stop "$tmp/metrics.log"
fi

if check "server with limits starts" srv_start "$tmp/limits.log" -np 1 -c 16384 --queue 1 --request-timeout 2 --max-body 2048; then
  check "request timeout, queue, body limit" timeout $limit python3 "$src/tests/serve_metrics.py" "$port" limits
  check "SIGTERM: exit 0" srv_stop "$tmp/limits.log"
fi

# shared prefixes: 4 slots against a one-slot server that reuses nothing (the reference)
if check "reference server starts" srv_start "$tmp/ref.log" -np 1 -c 2048 --no-prefix-share --cache-ram 0; then
  ref_pid=$pid ref_port=$port
  if check "server with 4 slots starts" srv_start "$tmp/prefix.log" -np 4 -c 4096; then
    check "shared prefixes: same tokens, evaluated once" timeout $limit python3 "$src/tests/serve_metrics.py" \
      "$port" prefix "$ref_port"
    check "SIGTERM: exit 0" srv_stop "$tmp/prefix.log"
  fi
  # one slot and a 512-cell budget: prompts parked, reused, evicted
  if check "server with --cache-ram 1 starts" srv_start "$tmp/park.log" -np 1 -c 1024 --cache-ram 1; then
    check "parked prefixes: same tokens, reused, evicted LRU" timeout $limit python3 "$src/tests/serve_metrics.py" \
      "$port" park "$ref_port"
    check "SIGTERM: exit 0" srv_stop "$tmp/park.log"
  fi
  # two slots: a parked prefix evicted while a request continuing from it runs
  if check "server with 2 slots and --cache-ram 1 starts" srv_start "$tmp/park2.log" -np 2 -c 4096 --cache-ram 1; then
    check "eviction under a running request keeps its tokens" timeout $limit python3 \
      "$src/tests/serve_metrics.py" "$port" park2 "$ref_port"
    check "SIGTERM: exit 0" srv_stop "$tmp/park2.log"
  fi
  check "reference SIGTERM: exit 0" srv_stop "$tmp/ref.log" TERM "$ref_pid"
fi

# --drain: SIGTERM while a stream runs; the stream gets all its tokens and a normal end
if check "server with --drain starts" srv_start "$tmp/drain.log" -np 2 -c 1024 --drain 60; then
  python3 - "$port" "$tmp/started" >"$tmp/stream.out" 2>&1 <<'PY' &
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=120)
c.request("POST", "/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 300, "stream": True,
                                                 "ignore_eos": True}))
r = c.getresponse()
first = r.readline()
open(sys.argv[2], "w").write("streaming\n")
events = [l for l in (first + r.read()).decode().split("\n\n") if l.strip()]
fin = [e for e in events if '"finish_reason":"length"' in e]
print("events %d, finish length %d, last %s" % (len(events), len(fin), events[-1][-40:]))
sys.exit(0 if fin and events[-1].strip() == "data: [DONE]" and "error" not in "".join(events) else 1)
PY
  client=$!
  for _ in $(seq 300); do [ -s "$tmp/started" ] && break; sleep 0.1; done
  check "the stream started" test -s "$tmp/started"
  kill -TERM $pid
  sleep 0.3
  check "draining: new connections refused" python3 -c '
import http.client, sys
try:
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5); c.request("GET", "/health")
    sys.exit("answered %d" % c.getresponse().status)
except ConnectionRefusedError:
    sys.exit(0)' "$port"
  check "the stream finished normally during the drain" wait $client
  cat "$tmp/stream.out"
  check "drained server: exit 0" srv_stop "$tmp/drain.log" 0
fi
tu_finish test_serve_metrics
