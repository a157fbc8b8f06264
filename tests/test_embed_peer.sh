#!/usr/bin/env bash
# test_embed_peer.sh - BERT embeddings and reranking scores against llama.cpp through
# ../shared/peer: files made by `kiln synth --preset tiny --arch bert` with BGE's WordPiece
# vocabulary (F16 with CLS pooling; F32 with a classifier head and rank pooling) give
# llama.cpp's tokens exactly and its pooled embeddings (cosine >= 0.9999 per text; per token
# with pooling none) for every pooling type, kiln batching all the texts into one decode
# where llama.cpp takes each alone; rank scores within 0.005; a nomic-bert file (mean, cls);
# a qwen3 file (a decoder used
# for embeddings) with last and mean pooling. Then what kiln refuses: a BERT
# file asked to generate, rank pooling without a classifier, a line past the context.
# Skipped (77) when the peer is not built.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" embed-peer
. "$(dirname "${BASH_SOURCE[0]}")/peer_lib.sh"
peer_require
vocab=$shared/vocab/ggml-vocab-bert-bge.gguf
[ -f "$vocab" ] || { echo "SKIP: $vocab is absent"; exit 77; }

cat > "$tmp/texts.txt" <<'EOF'
Hello world
The quick brown fox jumps over the lazy dog.
In the beginning God created the heaven and the earth.
embeddings are vectors; rerankers order documents
a
What is the capital of France? Paris is the capital and most populous city of France.
EOF

# same REF.jsonl GOT.jsonl POOLING: tokens equal, embeddings close, per text
same() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, math, sys
ref = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.startswith("{")]
got = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
pool = sys.argv[3]
if len(ref) != len(got) or not ref: sys.exit("%d texts from llama.cpp, %d from kiln" % (len(ref), len(got)))
def cos(a, b):
    if len(a) != len(b): sys.exit("dimensions %d vs %d" % (len(a), len(b)))
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
worst = 1.0
for i, (r, g) in enumerate(zip(ref, got)):
    if r["pooling"] != pool: sys.exit("llama.cpp pooled %s, not %s" % (r["pooling"], pool))
    if r["tokens"] != g["tokens"]: sys.exit("text %d: tokens %s vs %s" % (i, g["tokens"], r["tokens"]))
    if pool == "rank":
        if len(r["embedding"]) != len(g["embedding"]) or any(abs(x - y) > 5e-3 for x, y in zip(r["embedding"], g["embedding"])):
            sys.exit("text %d: scores %s vs %s" % (i, g["embedding"], r["embedding"]))
        continue
    rows = zip(r["embedding"], g["embedding"]) if pool == "none" else [(r["embedding"], g["embedding"])]
    if pool == "none" and len(r["embedding"]) != len(g["embedding"]): sys.exit("text %d: token rows differ" % i)
    for a, b in rows:
        c = cos(a, b)
        worst = min(worst, c)
        if c < 0.9999: sys.exit("text %d: cosine %.6f" % (i, c))
print("  %s: %d texts, worst cosine %.7f" % (pool, len(ref), worst))
PY
}

m=$tmp/bert.gguf r=$tmp/bert-rank.gguf
check "synth bert" exit_is 0 "$kiln" synth --preset tiny --arch bert --vocab "$vocab" -o "$m" -t 2
check "synth bert with a classifier" exit_is 0 "$kiln" synth --preset tiny --arch bert --pooling rank --type F32 \
  --vocab "$vocab" -o "$r" -t 2
for pool in cls mean last none; do
  "$peer" embed "$m" "$tmp/texts.txt" "$pool" >"$tmp/ref-$pool.jsonl" 2>/dev/null
  check "llama.cpp embeds with $pool" test -s "$tmp/ref-$pool.jsonl"
  check "kiln embeds with $pool" exit_is 0 "$kiln" embed -m "$m" -f "$tmp/texts.txt" --pooling "$pool" \
    --embd-normalize -1 -o jsonl
  check "$pool: as llama.cpp" same "$tmp/ref-$pool.jsonl" "$tmp/out" "$pool"
done
# the file's own pooling (cls) when none is asked for
check "kiln embeds with the file's pooling" exit_is 0 "$kiln" embed -m "$m" -f "$tmp/texts.txt" --embd-normalize -1 -o jsonl
check "the file's pooling is cls" same "$tmp/ref-cls.jsonl" "$tmp/out" cls
"$peer" embed "$r" "$tmp/texts.txt" rank >"$tmp/ref-rank.jsonl" 2>/dev/null
check "kiln scores with rank" exit_is 0 "$kiln" embed -m "$r" -f "$tmp/texts.txt" -o jsonl
check "rank: as llama.cpp" same "$tmp/ref-rank.jsonl" "$tmp/out" rank

# nomic-bert: rotary positions, fused q|k|v, SwiGLU; the file's pooling is mean
nb=$tmp/nomic.gguf
check "synth nomic-bert" exit_is 0 "$kiln" synth --preset tiny --arch nomic-bert --vocab "$vocab" -o "$nb" -t 2
for pool in mean cls; do
  "$peer" embed "$nb" "$tmp/texts.txt" "$pool" >"$tmp/ref-n-$pool.jsonl" 2>/dev/null
  check "kiln embeds nomic-bert with $pool" exit_is 0 "$kiln" embed -m "$nb" -f "$tmp/texts.txt" --pooling "$pool" \
    --embd-normalize -1 -o jsonl
  check "nomic-bert $pool: as llama.cpp" same "$tmp/ref-n-$pool.jsonl" "$tmp/out" "$pool"
done

# a decoder used for embeddings (Qwen3-Embedding's shape: causal attention, last-token pooling)
q=$tmp/qwen3.gguf
check "synth qwen3 with last pooling" exit_is 0 "$kiln" synth --preset tiny --arch qwen3 --pooling last -o "$q" -t 2
for pool in last mean; do
  "$peer" embed "$q" "$tmp/texts.txt" "$pool" >"$tmp/ref-q-$pool.jsonl" 2>/dev/null
  check "kiln embeds qwen3 with $pool" exit_is 0 "$kiln" embed -m "$q" -f "$tmp/texts.txt" --pooling "$pool" \
    --embd-normalize -1 -o jsonl
  check "qwen3 $pool: as llama.cpp" same "$tmp/ref-q-$pool.jsonl" "$tmp/out" "$pool"
done

# Euclidean normalization by default (llama-embedding's): unit vectors, in the JSON list
check "default output" exit_is 0 "$kiln" embed -m "$m" -p "Hello world"
check "unit length, OpenAI's list" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["object"] == "list" and d["data"][0]["object"] == "embedding", d
e = d["data"][0]["embedding"]
assert abs(sum(x * x for x in e) - 1) < 1e-5, sum(x * x for x in e)' "$tmp/out"

# refusals
check "bert cannot generate" exit_is 1 "$kiln" run -m "$m" -p "Hello" -n 4
check "it says why" err_has "makes embeddings only"
check "rank without a classifier" exit_is 1 "$kiln" embed -m "$m" -p "Hello" --pooling rank
check "it names the head" err_has "cls.output.weight"
check "a line past the context" exit_is 1 "$kiln" embed -m "$m" -p "one two three four five six seven eight nine" -c 8
check "it says so" err_has "more than the context"
check "an unknown pooling" exit_is 2 "$kiln" embed -m "$m" -p "Hello" --pooling max
tu_finish embed-peer
