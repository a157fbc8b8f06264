#!/usr/bin/env bash
# test_synth.sh - `kiln synth` end to end: the same preset and seed give the same
# bytes (any thread count), another seed differs, the weights are the documented
# generator's (an independent Python implementation of it, compared through
# `kiln info --dump`), the files are valid models for kiln info, kiln eval and ggml's
# reader and llama.cpp's loader (../shared/peer, skipped when absent), a quantized
# type is the F32 model quantized by llama.cpp (byte for byte), the synthetic
# vocabulary tokenizes as in llama.cpp, a --vocab file's
# tokenizer is taken over, and bad arguments exit 2.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" synth
peer=${KILN_PEER:-/tmp/kiln-peer/peer}
differ() { ! cmp -s "$1" "$2"; }

# usage errors: 2, naming the culprit
check "no args" exit_is 2 "$kiln" synth
check "no -o" exit_is 2 "$kiln" synth --preset tiny
check "no --preset" exit_is 2 "$kiln" synth -o "$tmp/x.gguf"
check "bad preset" exit_is 2 "$kiln" synth --preset huge -o "$tmp/x.gguf"
check "bad preset named" err_has "unknown preset 'huge'"
check "bad arch" exit_is 2 "$kiln" synth --preset tiny --arch gpt2 -o "$tmp/x.gguf"
check "bad arch named" err_has "unknown --arch 'gpt2' (llama, qwen2, qwen3, phi3, qwen3moe, gemma2, gemma3, gpt-oss, gemma4, bert, nomic-bert, mixtral)"
check "zero layers" exit_is 2 "$kiln" synth --preset tiny --layers 0 -o "$tmp/x.gguf"
check "too many layers" exit_is 2 "$kiln" synth --preset tiny --layers 513 -o "$tmp/x.gguf"
check "layers not a number" exit_is 2 "$kiln" synth --preset tiny --layers 3x -o "$tmp/x.gguf"
check "bad type" exit_is 2 "$kiln" synth --preset tiny --type Q4_K -o "$tmp/x.gguf"
check "bad type named" err_has "'Q4_K'"
check "bad type 2" exit_is 2 "$kiln" synth --preset tiny --type nonsense -o "$tmp/x.gguf"
check "bad seed" exit_is 2 "$kiln" synth --preset tiny --seed -3 -o "$tmp/x.gguf"
check "bad threads" exit_is 2 "$kiln" synth --preset tiny -t 0 -o "$tmp/x.gguf"
check "unknown flag" exit_is 2 "$kiln" synth --preset tiny -o "$tmp/x.gguf" --bogus
check "--help" exit_is 0 "$kiln" synth --help
check "no file after usage errors" test ! -e "$tmp/x.gguf"
# runtime errors: 1, nothing left behind
check "missing dir" exit_is 1 "$kiln" synth --preset tiny -o "$tmp/no/such/dir/x.gguf"
check "missing vocab" exit_is 1 "$kiln" synth --preset tiny --vocab "$tmp/none.gguf" -o "$tmp/x.gguf"
check "missing vocab leaves nothing" test ! -e "$tmp/x.gguf"
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$tmp/empty.gguf"
check "vocab file without tokens" exit_is 1 "$kiln" synth --preset tiny --vocab "$tmp/empty.gguf" -o "$tmp/x.gguf"
check "vocab file without tokens named" err_has "tokenizer.ggml.tokens"

# determinism
# experts: Mixtral is a llama file with expert keys and stacks in place of the dense
# feed-forward; --layers cuts a preset to N layers
check "mixtral" exit_is 0 "$kiln" synth --preset tiny --arch mixtral --layers 3 -o "$tmp/mix.gguf"
check "mixtral info" exit_is 0 "$kiln" info -m "$tmp/mix.gguf" --json --tensors
check "mixtral facts" python3 - "$tmp/out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
kv, names = d["hparams"], {t["name"]: t for t in d["tensors"]}
assert d["architecture"] == "llama", d["architecture"]
assert kv["llama.block_count"] == 3 and kv["llama.expert_count"] == 4 and kv["llama.expert_used_count"] == 2, kv
assert "blk.2.ffn_up.weight" not in names and "blk.3.attn_q.weight" not in names
assert names["blk.2.ffn_down_exps.weight"]["shape"] == [128, 64, 4], names["blk.2.ffn_down_exps.weight"]
assert names["blk.0.ffn_gate_inp.weight"]["shape"] == [64, 4]
PY
check "tiny a" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/a.gguf"
check "tiny b (1 thread)" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/b.gguf" -t 1 --seed 0
check "tiny c (3 threads)" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/c.gguf" -t 3
check "same seed, same bytes" cmp "$tmp/a.gguf" "$tmp/b.gguf"
check "thread count does not matter" cmp "$tmp/a.gguf" "$tmp/c.gguf"
check "seed 1" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/s1.gguf" --seed 1
check "another seed differs" differ "$tmp/a.gguf" "$tmp/s1.gguf"
check "small (3 threads)" exit_is 0 "$kiln" synth --preset small -o "$tmp/small3.gguf" -t 3 --type Q4_0
check "small (1 thread)" exit_is 0 "$kiln" synth --preset small -o "$tmp/small1.gguf" -t 1 --type Q4_0
check "small: thread count does not matter" cmp "$tmp/small1.gguf" "$tmp/small3.gguf"

# every type is a file kiln info describes with the preset's shape
for t in F32 F16 BF16 Q8_0 Q4_0; do
  check "tiny $t" exit_is 0 "$kiln" synth --preset tiny --type "$t" --seed 7 -o "$tmp/tiny-$t.gguf"
  check "tiny $t info" exit_is 0 "$kiln" info -m "$tmp/tiny-$t.gguf" --json --tensors
  cp "$tmp/out" "$tmp/tiny-$t.json"
done
check "info facts" python3 - "$tmp" <<'PY'
import json, sys
ftype = {"F32": 0, "F16": 1, "BF16": 32, "Q8_0": 7, "Q4_0": 2}
for t, ft in ftype.items():
    d = json.load(open("%s/tiny-%s.json" % (sys.argv[1], t)))
    h = d["hparams"]
    assert d["architecture"] == "llama"
    want = {"block_count": 2, "embedding_length": 64, "attention.head_count": 4, "attention.head_count_kv": 2,
            "feed_forward_length": 128, "rope.dimension_count": 16}
    for k, v in want.items():
        assert h["llama." + k] == v, (t, k, h.get("llama." + k))
    assert d["metadata"]["general.file_type"]["value"] == ft, t
    assert d["tokenizer"]["model"] == "llama" and d["tokenizer"]["vocab_size"] == 512
    assert d["n_tensors"] == 3 + 9 * 2
    names = [x["name"] for x in d["tensors"]]
    # llama.cpp's loader order, as llama.cpp's quantizer writes it
    assert names[:3] == ["output.weight", "output_norm.weight", "token_embd.weight"], names[:3]
    types = {x["name"]: x["type"] for x in d["tensors"]}
    assert types["blk.0.attn_norm.weight"] == "f32"
    if t in ("F32", "F16", "BF16"):
        assert types["blk.1.ffn_up.weight"] == t.lower()
    else:
        # llama.cpp's mix: the output gets Q6_K, which falls back to Q8_0 for rows of 64
        assert types["output.weight"] == "q8_0" and types["blk.1.ffn_up.weight"] == t.lower(), types
PY

# the weights are the documented generator's: SplitMix64 streams per (seed, tensor, row),
# each 64-bit draw split in four 16-bit uniforms summed (Irwin-Hall), scaled to std 0.02
check "dump attn_q" exit_is 0 "$kiln" info -m "$tmp/tiny-F32.gguf" --tensor blk.1.attn_q.weight --dump "$tmp/q.f32"
check "dump norm" exit_is 0 "$kiln" info -m "$tmp/tiny-F32.gguf" --tensor blk.0.ffn_norm.weight --dump "$tmp/n.f32"
check "generator" python3 - "$tmp" <<'PY'
import struct, sys
M = (1 << 64) - 1
def mix(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
    return z ^ (z >> 31)
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
scale = f32(f32(0.02) / f32(37837.23))
def row(seed, tensor, r, n):
    s = mix(seed ^ mix(((tensor << 40) ^ r ^ 0x9e3779b97f4a7c15) & M))
    out = []
    for _ in range(n):
        s = (s + 0x9e3779b97f4a7c15) & M
        x = mix(s)
        total = sum((x >> k) & 0xffff for k in (0, 16, 32, 48))
        out.append(f32((total - 131070) * scale))
    return out
# blk.1.attn_q.weight is tensor 3 + 9 + 3 = 15 in file order; [64, 64]
got = open(sys.argv[1] + "/q.f32", "rb").read()
vals = struct.unpack("<%df" % (len(got) // 4), got)
assert len(vals) == 64 * 64, len(vals)
want = [v for r in range(64) for v in row(7, 15, r, 64)]
bad = [i for i in range(len(want)) if want[i] != vals[i]]
assert not bad, "first mismatch at %d: %r vs %r" % (bad[0], vals[bad[0]], want[bad[0]])
mean = sum(vals) / len(vals)
std = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
assert abs(mean) < 0.002 and 0.018 < std < 0.022, (mean, std)
norm = struct.unpack("<64f", open(sys.argv[1] + "/n.f32", "rb").read())
assert all(v == 1.0 for v in norm)
PY

# a quantized synth file is the F32 one quantized: by kiln, and by llama.cpp below
check "small F32" exit_is 0 "$kiln" synth --preset small --type F32 --seed 5 -o "$tmp/s32.gguf"
for t in F16 BF16 Q8_0 Q4_0; do
  check "small $t" exit_is 0 "$kiln" synth --preset small --type "$t" --seed 5 -o "$tmp/s-$t.gguf"
  check "kiln quantize small F32 -> $t" exit_is 0 "$kiln" quantize "$tmp/s32.gguf" "$tmp/kq-$t.gguf" "$t"
  check "small $t = F32 quantized by kiln" cmp "$tmp/s-$t.gguf" "$tmp/kq-$t.gguf"
done

# the model runs in kiln (tokens of the synthetic vocabulary checked against llama.cpp below)
prompt="In the beginning God created the heaven and the earth; Zebra 42!"
check "kiln eval tiny" exit_is 0 "$kiln" eval -m "$tmp/tiny-F16.gguf" -p "$prompt"
cp "$tmp/out" "$tmp/eval.json"

# a tokenizer from a vocab file
vocab="$shared/vocab/ggml-vocab-llama-spm.gguf"
if [ -f "$vocab" ]; then
  check "--vocab" exit_is 0 "$kiln" synth --preset tiny --vocab "$vocab" -o "$tmp/v.gguf"
  check "--vocab info" exit_is 0 "$kiln" info -m "$tmp/v.gguf" --json --tensors
  check "--vocab facts" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
n = d["tokenizer"]["vocab_size"]
assert n == 32000 and d["tokenizer"]["model"] == "llama", d["tokenizer"]
assert d["hparams"]["llama.vocab_size"] == n
emb = [t for t in d["tensors"] if t["name"] == "token_embd.weight"][0]
assert emb["shape"] == [64, n], emb' "$tmp/out"
else
  skip_part "--vocab: $vocab is absent"
fi

# llama.cpp accepts the files: ggml's reader, and its loader (quantize loads the model)
if [ -x "$peer" ]; then
  for t in F32 F16 BF16 Q8_0 Q4_0; do
    check "peer gguf tiny $t" exit_is 0 "$peer" gguf "$tmp/tiny-$t.gguf"
  done
  check "peer gguf small" exit_is 0 "$peer" gguf "$tmp/small1.gguf"
  check "peer loads tiny" exit_is 0 "$peer" quantize "$tmp/tiny-F16.gguf" "$tmp/peer-q8.gguf" 7
  for tf in F16:1 BF16:32 Q8_0:7 Q4_0:2; do
    t=${tf%%:*}
    check "peer quantize small F32 -> $t" exit_is 0 "$peer" quantize "$tmp/s32.gguf" "$tmp/pq.gguf" "${tf##*:}"
    check "small $t = F32 quantized by llama.cpp" cmp "$tmp/s-$t.gguf" "$tmp/pq.gguf"
  done
  [ -f "$vocab" ] && check "peer gguf --vocab" exit_is 0 "$peer" gguf "$tmp/v.gguf"
  printf '%s\n' "$prompt" >"$tmp/prompt.txt"
  check "peer logits tiny" exit_is 0 "$peer" logits "$tmp/tiny-F16.gguf" "$tmp/prompt.txt" "$tmp/pl" 0
  check "synthetic vocab: kiln's tokens = llama.cpp's" python3 -c '
import json, sys
got = json.load(open(sys.argv[1]))["tokens"]
want = json.load(open(sys.argv[2]))["prompt_tokens"]
assert got == want and len(got) > 20, (got, want)' "$tmp/eval.json" "$tmp/pl-0.json"
else
  skip_part "llama.cpp checks: $peer is absent"
fi

tu_finish test_synth
