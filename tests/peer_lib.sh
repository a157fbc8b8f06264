# peer_lib.sh - what the tests that hold kiln to llama.cpp through ../shared/peer share
# (after lib.sh): a prompt's tokens and logits, greedy tokens, perplexity.
# Use: . "$(dirname "${BASH_SOURCE[0]}")/peer_lib.sh"

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
