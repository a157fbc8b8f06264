#!/usr/bin/env bash
# bench.sh - aggregate throughput of N kiln serve replicas behind nginx
# (deploy/kiln-nginx.conf through deploy/nginx-local.sh), driven by
# ../shared/peer/load.py with concurrent streamed clients. Prints load.py's JSON
# line. (Requests lost when a replica dies: tests/test_deploy.sh prints them.)
# usage: deploy/bench.sh MODEL REPLICAS CLIENTS MAX_TOKENS [-- SERVE_ARGS...]
#   e.g. deploy/bench.sh models/kjv-q4_0.gguf 2 16 64 -- -np 8 -c 4096 -t 2
# Loopback only; all it starts is stopped on exit. Take figures on a quiet machine.
set -euo pipefail
usage() { sed -n 6,7p "$0" >&2; exit 2; }
[ $# -ge 4 ] || usage
model=$1 n=$2 clients=$3 max_tokens=$4
shift 4
if [ $# -gt 0 ]; then
  [ "$1" = -- ] || usage
  shift
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${KILN_BIN:-$root/build/kiln}
load=${KILN_SHARED:-$root/../shared}/peer/load.py
[ -x "$kiln" ] || { echo "bench.sh: no kiln binary at $kiln (build first, or set KILN_BIN)" >&2; exit 1; }
[ -f "$load" ] || { echo "bench.sh: no load driver at $load" >&2; exit 1; }
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: REPLICAS must be a positive number" >&2; exit 2; }
tmp=$(mktemp -d /tmp/kiln-bench-XXXXXX)
chmod 711 "$tmp"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ports=()
for i in $(seq "$n"); do
  p=$(free_port)
  "$kiln" serve -m "$model" --port "$p" --drain 30 "$@" 2>"$tmp/replica$i.log" &
  pids+=($!)
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 0.1; done
done
np=$(free_port)
"$root/deploy/nginx-local.sh" "$tmp/nginx" "$np" "${ports[@]}" 2>"$tmp/nginx.err" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$np/health" >/dev/null && break; sleep 0.1; done
python3 "$load" "http://127.0.0.1:$np" "$clients" "$max_tokens"
