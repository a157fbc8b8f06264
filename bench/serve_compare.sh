#!/usr/bin/env bash
# Serving side by side: kiln serve and llama.cpp's own llama-server (../shared/peer/server.sh)
# on the same GGUF file with the same flags, one server at a time, each driven by
# ../shared/peer/load.py (concurrent streamed /v1/completions, temperature 0).
#   bench/serve_compare.sh MODEL [CLIENTS "1 8"] [MAX_TOKENS 64] [ROUNDS 1] [-- SERVER FLAGS, default -np 8 -c 4096 -t 2]
# Prints one load.py JSON line per server, client count and round, then a table of
# the medians. Loopback only; everything it starts is stopped on exit. Like
# compare.sh it refuses a busy machine (load average >= 0.5) before it starts.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: bench/serve_compare.sh MODEL [CLIENTS] [MAX_TOKENS] [ROUNDS] [-- FLAGS]}
shift
clients=${1:-1 8}; [ $# -gt 0 ] && shift
ntok=${1:-64}; [ $# -gt 0 ] && shift
rounds=${1:-1}; [ $# -gt 0 ] && shift
flags=(-np 8 -c 4096 -t 2)
if [ $# -gt 0 ] && [ "$1" = -- ]; then shift; flags=("$@"); fi
kiln=${KILN_BIN:-$here/build/kiln}
shared=${KILN_SHARED:-$here/../shared}
load=$shared/peer/load.py
load_avg=$(cut -d' ' -f1 /proc/loadavg)
if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.5 else 1)" "$load_avg"; then
  echo "serve_compare.sh: the machine is busy (load average $load_avg, limit 0.5): refusing to measure" >&2
  exit 3
fi
llama_server=$(bash "$shared/peer/server.sh" | tail -n 1)
tmp=$(mktemp -d); pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

serve() { # NAME: start that server on $port and wait for /health
  case "$1" in
    kiln) "$kiln" serve -m "$model" --port "$port" "${flags[@]}" 2>"$tmp/kiln.log" & ;;
    llama-server) "$llama_server" -m "$model" --host 127.0.0.1 --port "$port" "${flags[@]}" >"$tmp/ls.log" 2>&1 & ;;
  esac
  pid=$!
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 0.2; done
  echo "serve_compare.sh: $1 did not become healthy" >&2; exit 1
}
for r in $(seq "$rounds"); do
  for s in kiln llama-server; do
    serve "$s"
    for c in $clients; do
      python3 "$load" "http://127.0.0.1:$port" "$c" "$ntok" | sed "s/^/$s $c /" | tee -a "$tmp/rows"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  done
done
python3 - "$tmp/rows" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    s, c, js = line.split(" ", 2)
    rows.setdefault((s, int(c)), []).append(json.loads(js))
def med(k, f): return statistics.median(r[f] for r in rows[k])
print("| clients | server | tokens | aggregate t/s | ttft p50 s | ttft p99 s |")
print("| ---: | --- | ---: | ---: | ---: | ---: |")
for c in sorted({k[1] for k in rows}):
    for s in ("kiln", "llama-server"):
        if (s, c) in rows:
            k = (s, c)
            print(f"| {c} | {s} | {med(k, 'tokens'):.0f} | {med(k, 'agg_tps'):.1f} | {med(k, 'ttft_p50'):.3f} | {med(k, 'ttft_p99'):.3f} |")
    if ("kiln", c) in rows and ("llama-server", c) in rows:
        print(f"| {c} | **kiln / llama-server** | | **{med(('kiln', c), 'agg_tps') / med(('llama-server', c), 'agg_tps'):.2f}x** | | |")
PY
