# peer_lib.sh - what the tests that hold kiln to llama.cpp through ../shared/peer share
# (after lib.sh): a prompt's tokens and logits, greedy tokens, perplexity.
# Use: . "$(dirname "${BASH_SOURCE[0]}")/peer_lib.sh"

# peer_require: $peer, llama.cpp's peer driver, and python3, or the test is skipped (77)
peer_require() {
  peer=${KILN_PEER:-/tmp/kiln-peer/peer}
  if [ ! -x "$peer" ]; then
    echo "SKIP: llama.cpp's peer is not built ($peer; ../shared/peer/build.sh builds it and KILN_PEER names it)"
    exit 77
  fi
  command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
}

# peer_kjv_inputs: $text, the KJV test text (or skipped), a prompt in $tmp/prompts.txt and
# the text's first 4 KB in $tmp/text.txt (about 2400 tokens of the synthetic vocabulary)
peer_kjv_inputs() {
  text=$shared/text/kjv_test_a.txt
  [ -f "$text" ] || { echo "SKIP: $text is absent"; exit 77; }
  printf '%s\n' \
    'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep.' \
    > "$tmp/prompts.txt"
  head -c 4096 "$text" > "$tmp/text.txt"
}

# compare REF_PREFIX KILN_PREFIX [NMSE]: one prompt's reference against kiln eval's tokens and
# logits (NMSE at most 1e-4 unless given)
compare() {
  python3 - "$1" "$2" "${3:-1e-4}" <<'PY'
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
    if e > float(sys.argv[3]): sys.exit("position %d: nmse %.3g" % (p, e))
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

# peer_ppl LABEL MODEL N_CTX N_BATCH: kiln's perplexity on $tmp/text.txt within 0.5% of
# llama.cpp's at that context, kiln evaluating in batches of N_BATCH
peer_ppl() {
  "$peer" ppl "$2" "$tmp/text.txt" "$3" >"$tmp/peer-ppl.json" 2>/dev/null
  "$kiln" perplexity -m "$2" -f "$tmp/text.txt" -c "$3" -b "$4" --json >"$tmp/ppl.json" 2>/dev/null
  check "$1: perplexity at n_ctx $3, batches of $4" ppl_close "$tmp/peer-ppl.json" "$tmp/ppl.json"
}
