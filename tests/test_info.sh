#!/usr/bin/env bash
# test_info.sh - `kiln info` end to end: usage errors exit 2, bad files exit 1
# with the reader's message on stderr, every file in ../shared/models and
# ../shared/vocab is described as JSON that parses, with the facts
# ../shared/README.md documents, and --dump matches ggml's dequantized rows in
# ../shared/reference/dequant bit for bit. It says whether kiln can run the file
# (the runtime's loader decides).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" info

# usage errors: 2
check "no -m" exit_is 2 "$kiln" info
check "unknown flag" exit_is 2 "$kiln" info -m x.gguf --bogus
check "-m without value" exit_is 2 "$kiln" info -m
check "--tensor without --dump" exit_is 2 "$kiln" info -m x.gguf --tensor a
check "--help" exit_is 0 "$kiln" info --help

# bad files: 1, with the reader's message
printf 'GGUX\003\000\000\000' >"$tmp/magic.gguf"
check "bad magic exit" exit_is 1 "$kiln" info -m "$tmp/magic.gguf"
check "bad magic message" err_has "bad magic 'GGUX' (expected 'GGUF') at byte 0"
printf 'GGUF\001\000\000\000' >"$tmp/v1.gguf"
check "v1 exit" exit_is 1 "$kiln" info -m "$tmp/v1.gguf" --json
check "v1 message" err_has "unsupported GGUF version 1"
printf 'GGUF\003\000\000\000\000\000' >"$tmp/short.gguf"
check "truncated exit" exit_is 1 "$kiln" info -m "$tmp/short.gguf"
check "truncated message" err_has "truncated: tensor count needs 8 bytes but only 2 remain at byte 8"
check "missing file exit" exit_is 1 "$kiln" info -m "$tmp/none.gguf"
check "missing file message" err_has "cannot open"
# a valid empty file (no keys, no tensors) is described
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$tmp/empty.gguf"
check "empty file" exit_is 0 "$kiln" info -m "$tmp/empty.gguf" --json --tensors
check "empty file json" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["n_tensors"]==0 and d["architecture"] is None' "$tmp/out"

# string values that are not UTF-8 still give valid JSON (U+FFFD), control bytes are escaped
printf 'GGUF\003\000\000\000''\000\000\000\000\000\000\000\000''\001\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000k\010\000\000\000\005\000\000\000\000\000\000\000a\376\n\033[' >"$tmp/utf8.gguf"
check "non-UTF-8 strings" exit_is 0 "$kiln" info -m "$tmp/utf8.gguf" --json
check "non-UTF-8 json" python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); assert d["metadata"]["k"]["value"] == "a\ufffd\n\x1b[", d["metadata"]' "$tmp/out"
# and as text: no raw invalid byte or escape code reaches the terminal
check "non-UTF-8 text" exit_is 0 "$kiln" info -m "$tmp/utf8.gguf"
check "non-UTF-8 text escaped" grep -qF 'k = "a\xfe\n\x1b["' "$tmp/out"
check "no raw bytes" python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); assert 0x1b not in b and 0xfe not in b' "$tmp/out"
# a KEY that is not UTF-8 (ff fe) is a damaged file, refused at open with the offset
printf 'GGUF\003\000\000\000''\000\000\000\000\000\000\000\000''\001\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000\377\376\004\000\000\000\001\000\000\000' >"$tmp/badkey.gguf"
check "non-UTF-8 key refused" exit_is 1 "$kiln" info -m "$tmp/badkey.gguf"
check "non-UTF-8 key message" err_has "is not valid UTF-8 at byte 32"

if [ ! -d "$shared/models" ]; then
  skip_part "the ../shared part: $shared is absent (set KILN_SHARED)"
  tu_finish test_info
  exit $?
fi

# one python run checks every file's JSON (python starts slowly on a loaded machine)
n=0
for f in "$shared"/models/*.gguf "$shared"/vocab/*.gguf; do
  n=$((n + 1))
  check "$f --json" exit_is 0 "$kiln" info -m "$f" --json --tensors
  cp "$tmp/out" "$tmp/$n.json" && echo "$tmp/$n.json $f" >>"$tmp/list"
  check "$f text" exit_is 0 "$kiln" info -m "$f"
  check "$f text content" grep -q "^architecture: " "$tmp/out"
  check "$f says whether it runs" grep -q "^kiln runs it: \(yes\|no: .\)" "$tmp/out"
done
check "json facts" python3 - "$tmp/list" <<'PY'
import json, os, sys
bad = 0
for line in open(sys.argv[1]):
    jpath, path = line.split(" ", 1)
    name = os.path.basename(path.strip())
    try:
        d = json.load(open(jpath))
        arch = d["architecture"]
        assert arch, "no architecture"
        assert d["n_tensors"] == len(d["tensors"])
        assert d["tokenizer"]["vocab_size"] > 1000 and d["tokenizer"]["model"]
        assert sum(t["count"] for t in d["tensor_types"].values()) == d["n_tensors"]
        assert sum(t["size"] for t in d["tensors"]) == d["tensor_bytes"]
        assert d["metadata"]["general.architecture"]["value"] == arch
        tok = d["metadata"]["tokenizer.ggml.tokens"]["value"]
        assert tok == {"type": "arr", "elem_type": "str", "n": d["tokenizer"]["vocab_size"]}, tok
        if name.startswith(("kjv", "qwen2-kjv", "llama3-kjv", "qwen3-kjv", "phi3-kjv")):
            # ../shared/README.md: 4 layers, 256 wide, 8 heads, 4 KV heads, ff 768, context 512, 32000 tokens
            family = name.split("-")[0]
            want_arch = {"kjv": "llama", "llama3": "llama"}.get(family, family)
            assert arch == want_arch, (arch, want_arch)
            assert d["runnable"] is True and d["not_runnable_because"] is None, d["not_runnable_because"]
            shapes = {t["name"]: t["shape"] for t in d["tensors"]}
            # each family's own tensors, as README describes them
            if family == "llama3":
                assert shapes["rope_freqs.weight"] == [16], shapes.get("rope_freqs.weight")
            if family == "qwen3":
                for l in range(4):
                    assert shapes["blk.%d.attn_q_norm.weight" % l] == [32] and shapes["blk.%d.attn_k_norm.weight" % l] == [32]
            if family == "phi3":
                assert shapes["blk.0.attn_qkv.weight"] == [256, 256 + 2 * 128] and "blk.0.attn_q.weight" not in shapes
                assert shapes["blk.0.ffn_up.weight"] == [256, 2 * 768] and "blk.0.ffn_gate.weight" not in shapes
            h = d["hparams"]
            want = {"block_count": 4, "embedding_length": 256, "attention.head_count": 8,
                    "attention.head_count_kv": 4, "feed_forward_length": 768, "context_length": 512}
            for k, v in want.items():
                assert h[arch + "." + k] == v, (k, h.get(arch + "." + k))
            assert d["tokenizer"]["vocab_size"] == 32000
            emb = [t for t in d["tensors"] if t["name"] == "token_embd.weight"][0]
            assert emb["shape"] == [256, 32000], emb
            assert d["data_offset"] % d["alignment"] == 0
        else:
            assert d["n_tensors"] == 0 and d["tensor_bytes"] == 0
            # a vocabulary without weights: kiln says it cannot run it, and why
            why = d["not_runnable_because"]
            assert d["runnable"] is False and ("missing" in why or "is not supported" in why), why
    except Exception as e:
        print("  %s: %r" % (name, e), file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY

# --dump against ggml's dequantized rows (../shared/reference/dequant)
idx="$shared/reference/dequant/index.json"
if [ -f "$idx" ]; then
  while IFS=$'\t' read -r model tensor file nbytes; do
    check "dump $model $tensor" exit_is 0 "$kiln" info -m "$shared/models/$model" --tensor "$tensor" --dump "$tmp/t.f32"
    check "dump $model $tensor = ggml" cmp -n "$nbytes" "$tmp/t.f32" "$shared/reference/dequant/$file"
  done < <(python3 -c 'import json,sys
for e in json.load(open(sys.argv[1]))["entries"]:
    print(e["model"], e["tensor"], e["file"], e["ne0"] * e["rows"] * 4, sep="\t")' "$idx")
  check "dump unknown tensor" exit_is 1 "$kiln" info -m "$shared/models/kjv-q4_0.gguf" --tensor nope --dump "$tmp/t.f32"
  check "dump unknown tensor message" err_has "no tensor named 'nope'"
fi

# experts: their counts, and what one token reads, from the file's own tensor list (the
# token embedding one row, the expert stacks 2 of 8; everything else whole)
q3m=$shared/models/families/qwen3moe-kjv-q4_0.gguf
if [ -f "$q3m" ]; then
  check "qwen3moe info" exit_is 0 "$kiln" info -m "$q3m"
  check "qwen3moe experts line" grep -q "^experts: 8 per layer, 2 used per token; parameters 26.62 M, active per token" "$tmp/out"
  check "qwen3moe info json" exit_is 0 "$kiln" info -m "$q3m" --json --tensors
  check "qwen3moe active size" python3 - "$tmp/out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["n_expert"] == 8 and d["n_expert_used"] == 2, d
size = params = 0.0
for t in d["tensors"]:
    n = 1
    for x in t["shape"]: n *= x
    share = 1 / t["shape"][1] if t["name"] == "token_embd.weight" else 2 / 8 if "_exps." in t["name"] else 1
    size += share * t["size"]; params += share * n
assert abs(d["size_active"] - size) <= 1 and abs(d["n_params_active"] - params) <= 1, (d["size_active"], size)
assert d["n_params"] == sum(eval("*".join(map(str, t["shape"]))) for t in d["tensors"])
PY
else
  skip_part "$q3m is absent"
fi

tu_finish test_info
