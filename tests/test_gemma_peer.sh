#!/usr/bin/env bash
# test_gemma_peer.sh - Gemma 2, 3 and 4 against llama.cpp through ../shared/peer: files
# made by `kiln synth --preset tiny --arch gemma2|gemma3|gemma4` (a window of 16 on
# alternate layers; soft-caps, Gemma 4's per-layer head sizes and KV heads, v = k on global
# layers, proportional RoPE and output scales, each of which moves the logits far past the
# tolerance when left out) give llama.cpp's prompt tokens, logits (NMSE <= 1e-4, F16
# weights), top tokens where its lead is clear, greedy tokens up to the first margin under
# 0.02, and perplexity within 0.5% at n_ctx 128; at n_ctx 512 in batches of 32 the windowed
# layers' cache (256 cells) takes cells back, on the synthetic files and on
# shared/models/families/gemma3-kjv-q4_0.gguf, still within 0.5% of llama.cpp.
# Skipped (77) when the peer is not built.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" gemma-peer
peer=${KILN_PEER:-/tmp/kiln-peer/peer}
if [ ! -x "$peer" ]; then
  echo "SKIP: llama.cpp's peer is not built ($peer; ../shared/peer/build.sh builds it and KILN_PEER names it)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
text=$shared/text/kjv_test_a.txt
[ -f "$text" ] || { echo "SKIP: $text is absent"; exit 77; }

printf '%s\n' \
  'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep.' \
  > "$tmp/prompts.txt"
# the synthetic vocabulary spells the text out in short pieces: 4 KB make about 2400 tokens
head -c 4096 "$text" > "$tmp/text.txt"

# compare REF_PREFIX KILN_PREFIX: one prompt's reference against kiln eval's tokens and logits
compare() {
  python3 - "$1" "$2" <<'PY'
import array, json, sys
ld = lambda f: json.loads(open(f, "rb").read().decode("utf-8", "replace"))
ref, got = ld(sys.argv[1] + ".json"), ld(sys.argv[2] + ".json")
V, toks = ref["n_vocab"], ref["prompt_tokens"]
if got["tokens"] != toks: sys.exit("prompt tokens differ: %s vs %s" % (got["tokens"][:8], toks[:8]))
r, k = array.array("f"), array.array("f")
r.frombytes(open(sys.argv[1] + ".logits", "rb").read()); k.frombytes(open(sys.argv[2] + ".f32", "rb").read())
if len(r) != len(k) or len(r) != V * len(toks): sys.exit("logits sizes %d, %d" % (len(r), len(k)))
for p in range(len(toks)):
    x, y = r[p * V:(p + 1) * V], k[p * V:(p + 1) * V]
    e = sum((a - b) ** 2 for a, b in zip(x, y)) / sum(a * a for a in x)
    if e > 1e-4: sys.exit("position %d: nmse %.3g" % (p, e))
    s = sorted(x, reverse=True)
    if s[0] - s[1] > 0.05 and max(range(V), key=y.__getitem__) != max(range(V), key=x.__getitem__):
        sys.exit("position %d: top token differs" % p)
PY
}

greedy() { # REF.json RUN.json: kiln's greedy tokens up to the reference's first margin under 0.02
  python3 - "$1" "$2" <<'PY'
import json, sys
ld = lambda f: json.loads(open(f, "rb").read().decode("utf-8", "replace"))
ref, got = ld(sys.argv[1]), ld(sys.argv[2])["tokens"]
for i, (t, m) in enumerate(zip(ref["greedy_tokens"], ref["greedy_margins"])):
    if m < 0.02: break
    if i >= len(got) or got[i] != t: sys.exit("step %d: %s vs %d" % (i, got[i:i + 1], t))
PY
}

ppl_close() { # PEER.json KILN.json: within 0.5%, the same tokens scored
  python3 - "$1" "$2" <<'PY'
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if abs(got["ppl"] / want["ppl"] - 1) > 0.005 or got["scored"] != want["scored"]:
    sys.exit("ppl %s vs llama.cpp's %s" % (got, want))
print("  ppl %.4f, llama.cpp %.4f" % (got["ppl"], want["ppl"]))
PY
}

for arch in gemma2 gemma3 gemma4; do
  m=$tmp/$arch.gguf
  check "$arch: synth" exit_is 0 "$kiln" synth --preset tiny --arch "$arch" -o "$m" -t 2
  check "$arch: llama.cpp's logits" "$peer" logits "$m" "$tmp/prompts.txt" "$tmp/ref-$arch" 24
  for k in 0; do
    prompt=$(sed -n "$((k + 1))p" "$tmp/prompts.txt")
    "$kiln" eval -m "$m" -p "$prompt" --logits "$tmp/k-$arch-$k.f32" >"$tmp/k-$arch-$k.json" 2>/dev/null
    check "$arch prompt $k: tokens and logits" compare "$tmp/ref-$arch-$k" "$tmp/k-$arch-$k"
    "$kiln" run -m "$m" -p "$prompt" -n 24 --temp 0 --json >"$tmp/run.json" 2>/dev/null
    check "$arch prompt $k: greedy tokens" greedy "$tmp/ref-$arch-$k.json" "$tmp/run.json"
  done
  for c in "128 128" "512 32"; do
    set -- $c
    "$peer" ppl "$m" "$tmp/text.txt" "$1" >"$tmp/peer-ppl.json" 2>/dev/null
    "$kiln" perplexity -m "$m" -f "$tmp/text.txt" -c "$1" -b "$2" --json >"$tmp/ppl.json" 2>/dev/null
    check "$arch: perplexity at n_ctx $1, batches of $2" ppl_close "$tmp/peer-ppl.json" "$tmp/ppl.json"
  done
done

# a trained model: the windowed cache taking cells back over 512-token chunks
g3=$shared/models/families/gemma3-kjv-q4_0.gguf
if [ -f "$g3" ]; then
  "$peer" ppl "$g3" "$text" 512 >"$tmp/peer-ppl.json" 2>/dev/null
  "$kiln" perplexity -m "$g3" -f "$text" -c 512 -b 32 --json >"$tmp/ppl.json" 2>/dev/null
  check "gemma3-kjv: perplexity at n_ctx 512, batches of 32" ppl_close "$tmp/peer-ppl.json" "$tmp/ppl.json"
else
  echo "SKIP (part): $g3 is absent"
fi
tu_finish test_gemma_peer
