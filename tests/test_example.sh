#!/usr/bin/env bash
# test_example.sh - include/kiln.h's worked example (built from the header's own
# lines as kiln_example) on models/kjv-q4_0.gguf: its greedy continuations must be
# llama.cpp's for the shared prompts (../shared/reference/kjv-q4_0-N.json, the same
# file), and its failures must be clean (usage, a missing model).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" example
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
example=${KILN_EXAMPLE:?KILN_EXAMPLE is not set (the kiln_example target)}
model=$src/models/kjv-q4_0.gguf
same_text() { # same_text GOT WANT: equal bytes, else both shown
  cmp -s "$1" "$2" && return 0
  echo "  got:  $(head -c 200 "$1")" >&2; echo "  want: $(head -c 200 "$2")" >&2; cat "$tmp/err" >&2
  return 1
}

check "usage: exit 2" exit_is 2 "$example" "$model" "hi"
check "a missing model: exit 1" exit_is 1 "$example" "$tmp/none.gguf" "hi" 4
check "a missing model: named" err_has "$tmp/none.gguf"
check "runs: exit 0" exit_is 0 "$example" "$model" "In the beginning God created" 16
check "runs: writes text" test -s "$tmp/out"

ref=$shared/reference
if [ -f "$ref/kjv-q4_0-0.json" ] && command -v python3 >/dev/null; then
  for json in "$ref"/kjv-q4_0-[0-9].json; do
    prompt=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["prompt"], end="")' "$json")
    want=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(len(d["greedy_tokens"]), end="")' "$json")
    python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["greedy_text"] + "\n")' "$json" >"$tmp/want"
    "$example" "$model" "$prompt" "$want" >"$tmp/got" 2>"$tmp/err"
    check "$(basename "$json"): llama.cpp's greedy text" same_text "$tmp/got" "$tmp/want"
  done
else
  skip_part "$ref/kjv-q4_0-*.json or python3 absent: the continuations are not compared with llama.cpp's"
fi
tu_finish test_example
