#!/usr/bin/env bash
# test_convert.sh - `kiln convert` end to end and legacy files given to run/eval/info:
# usage errors exit 2 naming the culprit; damaged or unconvertible inputs exit 1 with
# their message and leave no OUT; with ../shared, the legacy KJV model converts with
# --gqa 2 --eps 1e-5 -c 512 into a GGUF whose metadata says so, that ggml's reader
# accepts (where llama.cpp's peer is built) and that tokenizes every reference prompt
# as llama.cpp did; run, eval and info take the legacy file directly with a note on
# stderr, and its tokens and greedy text equal the converted file's.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" convert
peer=${KILN_PEER:-/tmp/kiln-peer/peer}
absent() { [ ! -e "$1" ] || { echo "  $1 exists" >&2; return 1; }; }
out_has() { grep -qF -- "$1" "$tmp/out" || { echo "  stdout lacks '$1':" >&2; cat "$tmp/out" >&2; return 1; }; }

# usage errors: 2
check "no args" exit_is 2 "$kiln" convert
check "one arg" exit_is 2 "$kiln" convert "$tmp/in.bin"
check "extra arg" exit_is 2 "$kiln" convert a b c
check "unknown option" exit_is 2 "$kiln" convert --bogus a b
check "--gqa 0" exit_is 2 "$kiln" convert --gqa 0 a b
check "--gqa 0 named" err_has "--gqa"
check "--eps text" exit_is 2 "$kiln" convert --eps abc a b
check "--eps 0" exit_is 2 "$kiln" convert --eps 0 a b
check "-c -1" exit_is 2 "$kiln" convert -c -1 a b
check "--name without value" exit_is 2 "$kiln" convert a b --name
check "--help" exit_is 0 "$kiln" convert --help
check "--help lists --gqa" out_has "--gqa N"

# runtime errors: 1, no OUT
check "missing input" exit_is 1 "$kiln" convert "$tmp/none.bin" "$tmp/o.gguf"
check "missing input message" err_has "cannot open"
printf 'tjgg\011\000\000\000' >"$tmp/v9.bin"
check "GGJT v9" exit_is 1 "$kiln" convert "$tmp/v9.bin" "$tmp/o.gguf"
check "GGJT v9 message" err_has "unsupported GGJT version 9 (versions 1 to 3 are read) at byte 4"
printf 'tjgg\003\000\000\000\377\377\377\377' >"$tmp/cut.bin"
check "truncated header" exit_is 1 "$kiln" convert "$tmp/cut.bin" "$tmp/o.gguf"
check "truncated header message" err_has "truncated: n_embd needs 4 bytes but only 0 remain at byte 12"
printf 'GGML\001\000\000\000' >"$tmp/x.bin"
check "not legacy" exit_is 1 "$kiln" convert "$tmp/x.bin" "$tmp/o.gguf"
check "not legacy message" err_has "not a legacy GGML/GGMF/GGJT file"
check "synth a GGUF" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/tiny.gguf"
check "GGUF input" exit_is 1 "$kiln" convert "$tmp/tiny.gguf" "$tmp/o.gguf"
check "GGUF input message" err_has "is already a GGUF file"
check "no OUT after errors" absent "$tmp/o.gguf"
check "run on a damaged legacy file" exit_is 1 "$kiln" run -m "$tmp/v9.bin" -p x -n 1
check "run names the problem" err_has "unsupported GGJT version 9"

legacy="$shared/models/legacy/kjv-q4_0.ggjt.bin"
if [ ! -r "$legacy" ]; then
  skip_part "$legacy absent (conversion of a real legacy file)"
  tu_finish test_convert
  exit $?
fi
check "OUT = IN refused" exit_is 2 "$kiln" convert "$legacy" "$legacy"
check "--gqa 3 does not divide" exit_is 1 "$kiln" convert --gqa 3 "$legacy" "$tmp/o.gguf"
check "--gqa 3 message" err_has "GQA factor 3 does not divide the 8 heads"
check "--gqa 1 against the shapes" exit_is 1 "$kiln" convert --gqa 1 "$legacy" "$tmp/o.gguf"
check "--gqa 1 message" err_has "GQA factor 1 means 8 KV heads, but layers.0.attention.wk.weight has 128 rows"
check "no OUT after option errors" absent "$tmp/o.gguf"
check "missing OUT dir" exit_is 1 "$kiln" convert "$legacy" "$tmp/no/dir/o.gguf"

conv="$tmp/kjv.gguf"
check "convert" exit_is 0 "$kiln" convert "$legacy" "$conv" --gqa 2 --eps 1e-5 -c 512 --name kjv-legacy
check "summary" out_has "(GGJT v3) -> $conv: 39 tensors, 4 layers, 8 heads / 4 KV heads, feed-forward 768, RMS eps 1e-05, context 512"
check "info on the GGUF" exit_is 0 "$kiln" info -m "$conv"
check "info: head_count_kv" out_has "llama.attention.head_count_kv = 4"
check "info: context" out_has "llama.context_length = 512"
check "info: eps" out_has "llama.attention.layer_norm_rms_epsilon = 9.99999975e-06"
check "info: name" out_has 'general.name = "kjv-legacy"'
check "info: no note for a GGUF" exit_is 0 bash -c "! grep -q note: '$tmp/err'"
if [ -x "$peer" ]; then
  check "ggml's reader accepts the GGUF" "$peer" gguf "$conv"
else
  skip_part "$peer absent (ggml's reader on the converted file)"
fi

# every reference prompt tokenizes as llama.cpp did, in the converted and the legacy file
for j in "$shared"/reference/legacy/*.json; do
  prompt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt"], end="")' "$j")
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_tokens"])' "$j")
  check "eval $(basename "$j")" exit_is 0 "$kiln" eval -m "$conv" -p "$prompt"
  check "tokens $(basename "$j")" out_has "\"tokens\": $want"
  check "eval legacy $(basename "$j")" exit_is 0 "$kiln" eval -m "$legacy" -p "$prompt"
  check "legacy tokens $(basename "$j")" out_has "\"tokens\": $want"
  check "eval notes the legacy file" err_has "note: $legacy is a legacy GGJT v3 file, converted in memory"
done

# run and info directly on the legacy file: same greedy text as the converted file
check "run converted" exit_is 0 "$kiln" run -m "$conv" -p "In the beginning" -n 12 --temp 0
cp "$tmp/out" "$tmp/run_conv"
check "run legacy" exit_is 0 "$kiln" run -m "$legacy" -p "In the beginning" -n 12 --temp 0
check "run notes it" err_has "kiln convert $legacy OUT.gguf"
check "same greedy text" cmp -s "$tmp/out" "$tmp/run_conv"
check "info legacy" exit_is 0 "$kiln" info -m "$legacy"
check "info notes it" err_has "is a legacy GGJT v3 file"
check "info says legacy" out_has "legacy GGJT v3 file, read as GGUF in memory"
check "info: KV heads from the shapes" out_has "llama.attention.head_count_kv = 4"
check "info: description" out_has "converted from legacy GGJT v3 (ftype MOSTLY_Q4_0)"
check "info --json legacy" exit_is 0 "$kiln" info -m "$legacy" --json
check "info --json names the format" out_has '"legacy": "GGJT v3"'
tu_finish test_convert
