#!/usr/bin/env bash
# test_tokenize.sh - `kiln tokenize` / `kiln detokenize` end to end: usage
# errors exit 2, bad files exit 1, vocabulary-only files work, and the ids
# printed for texts of llama.cpp's vocab test data are the ids in its .out
# files (one line per token, "id 'piece'"; --json {"tokens": [...]}).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" tokenize
[ -d "$shared/vocab" ] || { echo "SKIP test_tokenize: $shared is absent"; exit 77; }
out_is() { # out_is EXPECTED: stdout equals EXPECTED exactly
  [ "$(cat "$tmp/out")" == "$1" ] || { echo "  stdout:" >&2; cat "$tmp/out" >&2; echo "  want: $1" >&2; return 1; }
}
spm=$shared/vocab/ggml-vocab-llama-spm.gguf
bpe=$shared/vocab/ggml-vocab-llama-bpe.gguf

# usage errors: 2
check "no -m" exit_is 2 "$kiln" tokenize -p hi
check "no text" exit_is 2 "$kiln" tokenize -m "$spm"
check "-p and -f" exit_is 2 "$kiln" tokenize -m "$spm" -p hi -f x
check "unknown flag" exit_is 2 "$kiln" tokenize -m "$spm" -p hi --bogus
check "-p without value" exit_is 2 "$kiln" tokenize -m "$spm" -p
check "detokenize no ids" exit_is 2 "$kiln" detokenize -m "$spm"
check "detokenize bad id" exit_is 2 "$kiln" detokenize -m "$spm" 12x
check "detokenize id out of range" exit_is 2 "$kiln" detokenize -m "$spm" 32000
check "detokenize negative id" exit_is 2 "$kiln" detokenize -m "$spm" -- -1
check "--help" exit_is 0 "$kiln" tokenize --help
# bad files: 1
check "missing file" exit_is 1 "$kiln" tokenize -m "$tmp/none.gguf" -p hi
printf 'not a gguf file at all' >"$tmp/junk.gguf"
check "junk file" exit_is 1 "$kiln" tokenize -m "$tmp/junk.gguf" -p hi
check "missing text file" exit_is 1 "$kiln" tokenize -m "$spm" -f "$tmp/none.txt"
check "detokenize junk file" exit_is 1 "$kiln" detokenize -m "$tmp/junk.gguf" 1

# llama.cpp's data: "Hello world" is text 11 (from 0) of the .inp files: line 12 of .out
want=$(sed -n 12p "$spm.out" | xargs)
check "spm ids" exit_is 0 "$kiln" tokenize -m "$spm" -p "Hello world" --no-bos
check "spm ids match .out" [ "$(cut -d' ' -f1 "$tmp/out" | xargs)" == "$want" ]
check "spm line format" grep -qx "15043 ' Hello'" "$tmp/out"
check "spm json with bos" exit_is 0 "$kiln" tokenize -m "$spm" -p "Hello world" --json
check "spm json" out_is "{\"tokens\": [1, $(echo "$want" | sed 's/ /, /g')]}"
want=$(sed -n 12p "$bpe.out" | xargs)
printf 'Hello world' >"$tmp/text.txt"
check "bpe from file" exit_is 0 "$kiln" tokenize -m "$bpe" -f "$tmp/text.txt" --no-bos --json
check "bpe ids match .out" out_is "{\"tokens\": [$(echo "$want" | sed 's/ /, /g')]}"
check "bpe special parsed" exit_is 0 "$kiln" tokenize -m "$bpe" -p "<|begin_of_text|>x" --no-bos --special --json
check "bpe special id" grep -q '^{"tokens": \[128000, ' "$tmp/out"
check "detokenize" exit_is 0 "$kiln" detokenize -m "$bpe" $want
check "detokenize text" out_is "Hello world"
check "detokenize special" exit_is 0 "$kiln" detokenize -m "$bpe" --special 128000 $want
check "detokenize special text" out_is "<|begin_of_text|>Hello world"
check "kjv model file" exit_is 0 "$kiln" tokenize -m "$shared/models/kjv-q4_0.gguf" -p "In the beginning God created the heaven and the earth." --json
check "kjv ids" out_is '{"tokens": [1, 512, 278, 6763, 4177, 2825, 278, 18356, 322, 278, 8437, 29889]}'

tu_finish test_tokenize
