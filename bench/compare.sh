#!/usr/bin/env bash
# Side-by-side speed against llama.cpp on the same GGUF file, in one invocation:
# alternates `kiln bench` and the peer driver (../shared/peer) ROUNDS times, then
# prints the machine, the CPU variant of llama.cpp's library that ran, the median
# pp and tg tokens/s of each, the ratio kiln / llama.cpp, and kiln's tg against
# the bandwidth bound `kiln bench` measures.
#   bench/compare.sh MODEL [NPP 128] [NTG 64] [ROUNDS 5] [THREADS 2]
# Refuses to run, or to report, on a busy machine: before the first round the
# 1-minute load average must be under 0.5, and before every round and after the
# last the CPUs must be at least 90% idle over a one-second look (the load average
# cannot gate later rounds: the benchmark's own threads raise it for minutes).
# A figure taken under load is not a figure.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: bench/compare.sh MODEL [NPP] [NTG] [ROUNDS] [THREADS]}
npp=${2:-128}; ntg=${3:-64}; rounds=${4:-5}; threads=${5:-2}
kiln=${KILN_BIN:-$here/build/kiln}
peer=${PEER_BIN:-/tmp/kiln-peer/peer}

# quiet: load average < 0.5 and >= 90% idle over 1 s (from /proc/stat: idle + iowait of all CPUs)
busy() { # [noload]: skip the load-average test (after our own rounds)
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  [ "${1:-}" = noload ] && load=0
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local total=0 i
  for i in $(seq 1 $((${#a[@]} - 1))); do total=$((total + ${b[$i]} - ${a[$i]})); done
  local idle=$(( (${b[4]} - ${a[4]}) + (${b[5]} - ${a[5]}) ))
  python3 -c "import sys; l=float(sys.argv[1]); t=int(sys.argv[2]); i=int(sys.argv[3]); f=i/t if t else 1.0
if l >= 0.5 or f < 0.9: print(f'load average {l:.2f} (limit 0.5), {100*f:.0f}% idle over 1 s (limit 90%)'); sys.exit(0)
sys.exit(1)" "$load" "$total" "$idle"
}
if why=$(busy); then
  echo "bench/compare.sh: the machine is busy ($why): refusing to measure; run it on a quiet machine" >&2
  exit 3
fi

[ -x "$peer" ] || peer=$(bash "$here/../shared/peer/build.sh" | tail -n 1)
out=$(mktemp); trap 'rm -f "$out"' EXIT
# The machine and the CPU variant llama.cpp's library chose: ggml loads every
# libggml-cpu-*.so to score it, then loads the best one again, so the last one the
# dynamic loader opens is the one that runs.
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
variant=$(LD_DEBUG=files "$peer" bench "$model" 8 1 1 1 2>&1 >/dev/null |
  sed -n 's/.*file=[^ ]*\(libggml-cpu-[A-Za-z0-9_]*\)\.so .*dynamically loaded.*/\1/p' | tail -n 1)
echo "machine: ${cpu:-?} ($(nproc) CPUs; $(grep -o -m1 -w 'avx512vnni' /proc/cpuinfo || echo no avx512vnni));" \
  "llama.cpp's CPU library: ${variant:-not found}; $(date -u +%Y-%m-%d)"
for r in $(seq "$rounds"); do
  if why=$(busy noload); then
    echo "bench/compare.sh: the machine became busy before round $r ($why): no figures reported" >&2
    exit 3
  fi
  "$kiln" bench -m "$model" -p "$npp" -n "$ntg" -r 1 -t "$threads" -o json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("kiln", r[0]["avg_ts"], r[1]["avg_ts"], r[1]["mem_read_gbs"], r[1].get("model_size_active") or r[1]["model_size"])' >> "$out"
  "$peer" bench "$model" "$npp" "$ntg" 1 "$threads" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("llama.cpp", r["pp_ts_median"], r["tg_ts_median"], 0, 0)' >> "$out"
done
if why=$(busy noload); then
  echo "bench/compare.sh: the machine became busy during the runs ($why): no figures reported" >&2
  exit 3
fi
python3 - "$out" "$model" "$npp" "$ntg" "$threads" "$rounds" <<'PY'
import statistics, sys, os
rows = [l.split() for l in open(sys.argv[1])]
med = {e: [statistics.median(float(r[i]) for r in rows if r[0] == e) for i in (1, 2, 3, 4)] for e in ("kiln", "llama.cpp")}
m, npp, ntg, th, n = sys.argv[2:7]
bw, size = med["kiln"][2], med["kiln"][3]
print(f"model {os.path.basename(m)}, {th} threads, {n} alternating rounds, medians (tokens/s):")
print(f"| engine | pp{npp} | tg{ntg} |")
print("| --- | ---: | ---: |")
for e in ("kiln", "llama.cpp"):
    print(f"| {e} | {med[e][0]:.1f} | {med[e][1]:.1f} |")
print(f"| kiln / llama.cpp | {med['kiln'][0]/med['llama.cpp'][0]:.2f}x | {med['kiln'][1]/med['llama.cpp'][1]:.2f}x |")
bound = bw * 1e9 / size
# a mixture of experts reads its active bytes per token (attention, router, the experts used, output)
print(f"memory read bandwidth {bw:.1f} GB/s ({th} threads, kiln bench); tg bound {bound:.1f} t/s "
      f"(on {size / 1048576:.0f} MiB a token): "
      f"kiln {100*med['kiln'][1]/bound:.0f}%, llama.cpp {100*med['llama.cpp'][1]/bound:.0f}% of it")
PY
