#!/usr/bin/env bash
# Side-by-side speed against llama.cpp on the same GGUF file, in one invocation:
# alternates `kiln bench` and the peer driver (../shared/peer) ROUNDS times, then
# prints the median pp and tg tokens/s of each and the ratio kiln / llama.cpp.
#   bench/compare.sh MODEL [NPP 128] [NTG 64] [ROUNDS 5] [THREADS 2]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: bench/compare.sh MODEL [NPP] [NTG] [ROUNDS] [THREADS]}
npp=${2:-128}; ntg=${3:-64}; rounds=${4:-5}; threads=${5:-2}
kiln=${KILN_BIN:-$here/build/kiln}
peer=${PEER_BIN:-/tmp/kiln-peer/peer}
[ -x "$peer" ] || peer=$(bash "$here/../shared/peer/build.sh" | tail -n 1)
out=$(mktemp); trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  "$kiln" bench -m "$model" -p "$npp" -n "$ntg" -r 1 -t "$threads" -o json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("kiln", r[0]["avg_ts"], r[1]["avg_ts"])' >> "$out"
  "$peer" bench "$model" "$npp" "$ntg" 1 "$threads" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("llama.cpp", r["pp_ts_median"], r["tg_ts_median"])' >> "$out"
done
python3 - "$out" "$model" "$npp" "$ntg" "$threads" "$rounds" <<'PY'
import statistics, sys, os
rows = [l.split() for l in open(sys.argv[1])]
med = {e: [statistics.median(float(r[i]) for r in rows if r[0] == e) for i in (1, 2)] for e in ("kiln", "llama.cpp")}
m, npp, ntg, th, n = sys.argv[2:7]
print(f"model {os.path.basename(m)}, {th} threads, {n} alternating rounds, medians (tokens/s):")
print(f"| engine | pp{npp} | tg{ntg} |")
print("| --- | ---: | ---: |")
for e in ("kiln", "llama.cpp"):
    print(f"| {e} | {med[e][0]:.1f} | {med[e][1]:.1f} |")
print(f"| kiln / llama.cpp | {med['kiln'][0]/med['llama.cpp'][0]:.2f}x | {med['kiln'][1]/med['llama.cpp'][1]:.2f}x |")
PY
