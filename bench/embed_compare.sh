#!/usr/bin/env bash
# Embedding throughput side by side: kiln serve --embeddings and llama.cpp's own llama-server
# --embedding (../shared/peer/server.sh) on the same GGUF file, one server at a time, each
# sent the same N texts of 20 to 200 tokens (deterministic, from ../shared/text) as
# /v1/embeddings requests of BATCH inputs, one request at a time; texts per second.
#   bench/embed_compare.sh MODEL [N 1000] [BATCH 64] [ROUNDS 3] [THREADS 2]
# e.g. kiln synth --preset bge-small --arch bert --vocab ../shared/vocab/ggml-vocab-bert-bge.gguf -o bge-small-f16.gguf
# Rounds alternate kiln and llama.cpp; the table gives the medians and their ratio. Like
# compare.sh it refuses a busy machine (load average >= 0.5) unless FORCE=1.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: bench/embed_compare.sh MODEL [N] [BATCH] [ROUNDS] [THREADS]}
n=${2:-1000} batch=${3:-64} rounds=${4:-3} threads=${5:-2}
kiln=${KILN_BIN:-$here/build/kiln}
shared=${KILN_SHARED:-$here/../shared}
load_avg=$(cut -d' ' -f1 /proc/loadavg)
if [ -z "${FORCE:-}" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.5 else 1)" "$load_avg"; then
  echo "embed_compare.sh: the machine is busy (load average $load_avg, limit 0.5): refusing to measure" >&2
  exit 3
fi
llama_server=$(bash "$shared/peer/server.sh" | tail -n 1)
tmp=$(mktemp -d); pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# N texts of 15 to 150 words (about 20 to 200 WordPiece tokens), cut from the KJV test text
python3 - "$shared/text/kjv_test_a.txt" "$n" > "$tmp/texts.json" <<'PY'
import json, random, sys
words = open(sys.argv[1], encoding="utf-8").read().split()
rng = random.Random(0)
out = []
for _ in range(int(sys.argv[2])):
    k = rng.randint(15, 150); at = rng.randrange(0, len(words) - k)
    out.append(" ".join(words[at:at + k]))
json.dump(out, sys.stdout)
PY
wait_up() {
  for _ in $(seq 600); do
    python3 -c 'import sys, urllib.request as u; sys.exit(u.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).status != 200)' "$port" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
drive() { # texts per second over every text, requests of $batch inputs one after another
  python3 - "$port" "$tmp/texts.json" "$batch" <<'PY'
import json, sys, time, urllib.request as u
port, texts, b = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
def post(chunk):
    req = u.Request("http://127.0.0.1:%s/v1/embeddings" % port, json.dumps({"input": chunk}).encode(),
                    {"Content-Type": "application/json"})
    with u.urlopen(req, timeout=3600) as r:
        d = json.load(r)
    assert len(d["data"]) == len(chunk), d
post(texts[:2])  # warm-up
t = time.time()
for i in range(0, len(texts), b): post(texts[i:i + b])
print("%.2f" % (len(texts) / (time.time() - t)))
PY
}
declare -a K L
for r in $(seq "$rounds"); do
  "$kiln" serve -m "$model" --embeddings -c 2048 -t "$threads" --port "$port" 2>"$tmp/kiln.log" & pid=$!
  wait_up || { cat "$tmp/kiln.log" >&2; exit 1; }
  K+=("$(drive)"); kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  "$llama_server" -m "$model" --embedding -c 2048 -b 2048 -ub 2048 -t "$threads" --host 127.0.0.1 --port "$port" \
    >"$tmp/llama.log" 2>&1 & pid=$!
  wait_up || { tail -20 "$tmp/llama.log" >&2; exit 1; }
  L+=("$(drive)"); kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  echo "round $r: kiln ${K[-1]} texts/s, llama.cpp ${L[-1]} texts/s" >&2
done
python3 - "$model" "$n" "$batch" "${K[*]}" "${L[*]}" <<'PY'
import statistics, sys
model, n, b, k, l = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
km, lm = statistics.median(map(float, k)), statistics.median(map(float, l))
print("| file | texts | inputs/request | kiln texts/s | llama.cpp texts/s | ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
print("| %s | %s | %s | %.1f | %.1f | **%.2fx** |" % (model.split("/")[-1], n, b, km, lm, km / lm))
PY
