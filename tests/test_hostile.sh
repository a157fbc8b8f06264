#!/usr/bin/env bash
# test_hostile.sh - kiln used carelessly or with hostile input: outputs onto the
# model, interrupts, long names and umasks (no file is ever lost or left half
# written); endless or NUL-bearing text inputs; models that are not files; output
# that cannot be written; flags at and past their limits; messages that must say
# what is wrong; weights that give no prediction. Each case failed before issue 14
# or issue 45 (the block at the end). Needs ../shared's models.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" hostile
if [ ! -d "$shared/models" ]; then echo "SKIP test_hostile: $shared/models is absent (set KILN_SHARED)"; exit 77; fi
M=$shared/models/kjv-q4_0.gguf
T=(timeout "${KILN_HOSTILE_TIMEOUT:-60}") # nothing here may hang: a timeout is a failure (exit 124)
same() { cmp -s "$1" "$2" || { echo "  $1 differs from $2" >&2; return 1; }; }
no_temps() { # no temporary left in a directory
  local left; left=$(find "$1" -name '*.tmp.*')
  [ -z "$left" ] || { echo "  temporaries left: $left" >&2; return 1; }
}

# ---- item 6: an output onto the input is refused and the model survives
cp "$M" "$tmp/m.gguf"
ln -s m.gguf "$tmp/link.gguf"
ln "$tmp/m.gguf" "$tmp/hard.gguf"
for out in "$tmp/m.gguf" "$tmp/link.gguf" "$tmp/hard.gguf"; do
  check "dump onto the model ($out)" exit_is 1 "${T[@]}" "$kiln" info -m "$tmp/m.gguf" --tensor token_embd.weight --dump "$out"
  check "dump onto the model: message" err_has "is the input file"
  check "logits onto the model ($out)" exit_is 1 "${T[@]}" "$kiln" eval -m "$tmp/m.gguf" -p "In the beginning" --logits "$out"
  check "logits onto the model: message" err_has "is the input file"
done
check "the model is intact" same "$tmp/m.gguf" "$M"
check "the symlink is kept" test -L "$tmp/link.gguf"

# an output through a symlink replaces the link's target and keeps the link
echo old >"$tmp/target.f32"
ln -s target.f32 "$tmp/out-link.f32"
check "dump through a symlink" exit_is 0 "$kiln" info -m "$M" --tensor output_norm.weight --dump "$tmp/out-link.f32"
check "link kept" test -L "$tmp/out-link.f32"
check "target written" test "$(stat -c %s "$tmp/target.f32")" -gt 4

# a failing run leaves the previous output as it was (written beside, renamed at the end)
echo previous >"$tmp/keep.f32"
check "dump of a missing tensor" exit_is 1 "$kiln" info -m "$M" --tensor nope --dump "$tmp/keep.f32"
check "previous output kept" grep -qx previous "$tmp/keep.f32"
check "no temporaries after failures" no_temps "$tmp"

# quantize onto its own input is safe and reports the input's real size
cp "$M" "$tmp/q.gguf"
check "quantize in place" exit_is 0 "${T[@]}" "$kiln" quantize --allow-requantize "$tmp/q.gguf" "$tmp/q.gguf" Q8_0
in_mib=$(python3 -c 'import os,sys; print("%.2f MiB" % (os.path.getsize(sys.argv[1]) / 1048576))' "$M")
check "quantize in place: input size before ($in_mib)" grep -qF "q.gguf: $in_mib ->" "$tmp/out"
check "quantized file loads" exit_is 0 "$kiln" info -m "$tmp/q.gguf"

# modes: a new file follows the umask, a replaced file keeps its mode (no forced 0644)
check "synth under umask 077" exit_is 0 bash -c "umask 077; exec \"$kiln\" synth --preset tiny -o \"$tmp/u.gguf\""
check "new file is 0600" test "$(stat -c %a "$tmp/u.gguf")" = 600
echo secret >"$tmp/p.gguf"; chmod 600 "$tmp/p.gguf"
check "synth over a 0600 file" exit_is 0 bash -c "umask 022; exec \"$kiln\" synth --preset tiny -o \"$tmp/p.gguf\""
check "replaced file stays 0600" test "$(stat -c %a "$tmp/p.gguf")" = 600
cp "$tmp/m.gguf" "$tmp/q6.gguf"; chmod 640 "$tmp/q6.gguf"
check "quantize over a 0640 file" exit_is 0 "$kiln" quantize --allow-requantize "$M" "$tmp/q6.gguf" Q8_0
check "quantized file stays 0640" test "$(stat -c %a "$tmp/q6.gguf")" = 640
check "dump under umask 027" exit_is 0 bash -c "umask 027; exec \"$kiln\" info -m \"$M\" --tensor output_norm.weight --dump \"$tmp/d.f32\""
check "dump is 0640" test "$(stat -c %a "$tmp/d.f32")" = 640

# long names: a legal 250-byte name works; a failure names the reason in full
long=$(printf 'n%.0s' $(seq 246)).gguf
check "synth to a 250-byte name" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/$long"
check "250-byte output exists" test -s "$tmp/$long"
check "dump to a 250-byte name" exit_is 0 "$kiln" info -m "$M" --tensor output_norm.weight --dump "$tmp/${long%.gguf}.f32"
check "failure beside a long name" exit_is 1 "$kiln" synth --preset tiny -o "$tmp/no-such-dir/$long"
check "the reason is not cut" err_has "No such file or directory"
check "logits into a missing dir" exit_is 1 "$kiln" eval -m "$M" -p hi --logits "$tmp/no-such-dir/$long"
check "logits: the reason is not cut" err_has "No such file or directory"
check "dump into a directory" exit_is 1 "$kiln" info -m "$M" --tensor output_norm.weight --dump "$tmp"
check "dump into a directory: message" err_has "directory"
check "dump to /dev/null (a device is written, not replaced)" exit_is 0 "$kiln" info -m "$M" --tensor output_norm.weight --dump /dev/null
check "/dev/null is still a device" test -c /dev/null

# SIGINT/SIGTERM in the middle of a long write: exit by the signal at once, the
# previous file intact, no temporary left
for sig in INT TERM; do
  echo old >"$tmp/big.gguf"
  "$kiln" synth --preset tinyllama-1.1b -t 1 -o "$tmp/big.gguf" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 50); do [ -n "$(find "$tmp" -name '.big.gguf.tmp.*' -size +1M)" ] && break; sleep 0.1; done
  check "synth is writing its temporary ($sig)" test -n "$(find "$tmp" -name '.big.gguf.tmp.*')"
  t0=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  want=$([ "$sig" = INT ] && echo 130 || echo 143)
  check "synth killed by SIG$sig exits $want (got $rc)" test "$rc" -eq "$want"
  check "SIG$sig stops within a second (${ms} ms)" test "$ms" -lt 1000
  check "SIG$sig leaves the old file" grep -qx old "$tmp/big.gguf"
  check "SIG$sig leaves no temporary" no_temps "$tmp"
done

# SIGINT in a long computation (perplexity over 300 KB): exit 130 at once
yes 'In the beginning God created the heaven and the earth.' | head -c 300000 >"$tmp/long.txt"
"$kiln" perplexity -m "$M" -f "$tmp/long.txt" -c 128 >/dev/null 2>&1 &
pid=$!
sleep 2
t0=$(date +%s%N)
kill -INT "$pid"
wait "$pid"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "perplexity interrupted exits 130 (got $rc)" test "$rc" -eq 130
check "perplexity stops within a second (${ms} ms)" test "$ms" -lt 1000

# ---- item 7: a model must be a regular file (no endless read, no blocking FIFO)
mkfifo "$tmp/fifo"
: >"$tmp/empty.gguf"
head -c 100000 "$M" >"$tmp/cut.gguf"
for bad in /dev/zero "$tmp/fifo" "$tmp" "$tmp/empty.gguf" "$tmp/cut.gguf"; do
  for c in "info -m" "tokenize -p hi -m" "detokenize 5 -m" "eval -p hi -m" "run -n 1 -p hi -m" "bench -p 4 -n 0 -r 1 -m" \
           "perplexity -f $tmp/empty.gguf -m" "chat -m"; do
    # shellcheck disable=SC2086
    check "$c $bad" exit_is 1 "${T[@]}" "$kiln" $c "$bad" </dev/null
  done
  check "quantize from $bad" exit_is 1 "${T[@]}" "$kiln" quantize "$bad" "$tmp/qq.gguf" Q8_0
  check "synth --vocab $bad" exit_is 1 "${T[@]}" "$kiln" synth --preset tiny --vocab "$bad" -o "$tmp/sv.gguf"
done
check "/dev/zero: message" exit_is 1 "$kiln" run -m /dev/zero -p hi
check "/dev/zero: not a regular file" err_has "not a regular file"

# ---- item 3: bounded text input (files, pipes, /dev/zero, chat lines)
check "run -f /dev/zero" exit_is 1 "${T[@]}" "$kiln" run -m "$M" -f /dev/zero -n 4
check "run -f /dev/zero: the limit" err_has "larger than the 64 MiB limit"
check "eval -f /dev/zero" exit_is 1 "${T[@]}" "$kiln" eval -m "$M" -f /dev/zero
check "tokenize -f /dev/zero" exit_is 1 "${T[@]}" "$kiln" tokenize -m "$M" -f /dev/zero
check "perplexity -f /dev/zero" exit_is 1 "${T[@]}" "$kiln" perplexity -m "$M" -f /dev/zero
check "a pipe past the limit" exit_is 1 "${T[@]}" bash -c "yes In the beginning | head -c 80000000 | exec \"$kiln\" tokenize -m \"$M\" -f /dev/stdin"
check "a pipe past the limit: message" err_has "64 MiB limit"
check "chat on /dev/zero" exit_is 1 "${T[@]}" "$kiln" chat -m "$M" -n 2 </dev/zero
check "chat on /dev/zero: message" err_has "longer than"
check "a pipe within the limit" exit_is 0 "${T[@]}" bash -c "echo In the beginning | exec \"$kiln\" tokenize -m \"$M\" -f /dev/stdin --json"

# ---- item 10: a NUL byte in a prompt is an error, not a cut prompt
printf 'In the\0 beginning' >"$tmp/nul.txt"
for c in "run -n 1" "eval"; do
  # shellcheck disable=SC2086
  check "$c with a NUL" exit_is 1 "$kiln" $c -m "$M" -f "$tmp/nul.txt"
  check "$c with a NUL: offset" err_has "NUL byte at offset 6"
done
check "perplexity with a NUL" exit_is 1 "$kiln" perplexity -m "$M" -f "$tmp/nul.txt"
check "perplexity with a NUL: message" err_has "NUL byte at offset 6"
check "chat with a NUL" exit_is 1 bash -c "printf 'In the\0 beginning\n' | exec \"$kiln\" chat -m \"$M\" -n 2"
check "chat with a NUL: message" err_has "NUL byte"

# ---- item 8: output that cannot be written is exit 1 with a message, everywhere
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 40) >"$tmp/text.txt"
full() { # full DESC CMD...: stdout to /dev/full must fail with a message
  local what=$1; shift
  "$@" >/dev/full 2>"$tmp/err" </dev/null
  local rc=$?
  [ "$rc" -eq 1 ] && grep -q "cannot write" "$tmp/err" || { echo "  $what: exit $rc" >&2; cat "$tmp/err" >&2; return 1; }
}
check "tokenize > /dev/full" full tokenize "${T[@]}" "$kiln" tokenize -m "$M" -p "In the" --json
check "detokenize > /dev/full" full detokenize "${T[@]}" "$kiln" detokenize -m "$M" 512 513
check "run > /dev/full" full run "${T[@]}" "$kiln" run -m "$M" -p "In the" -n 4
check "run --json > /dev/full" full run "${T[@]}" "$kiln" run -m "$M" -p "In the" -n 4 --json
check "eval > /dev/full" full eval "${T[@]}" "$kiln" eval -m "$M" -p "In the"
check "perplexity > /dev/full" full perplexity "${T[@]}" "$kiln" perplexity -m "$M" -f "$tmp/text.txt" -c 64 --chunks 1
check "bench > /dev/full" full bench "${T[@]}" "$kiln" bench -m "$M" -p 4 -n 2 -r 1
check "info > /dev/full" full info "${T[@]}" "$kiln" info -m "$M"
check "version > /dev/full" full version "$kiln" version
check "chat > /dev/full" full chat "${T[@]}" bash -c "echo hi | exec \"$kiln\" chat -m \"$M\" -n 4"

# ---- item 9: detokenize of a token with no text (UB before: fwrite(NULL))
check "detokenize BOS alone" exit_is 0 "$kiln" detokenize -m "$M" 1
check "detokenize BOS alone: an empty line" test "$(od -An -c "$tmp/out" | tr -d ' ')" = '\n'

# ---- item 10: -b below the prompt decodes in chunks; bench and perplexity honour -b
check "run -b 1" exit_is 0 "$kiln" run -m "$M" -p "In the beginning God" -n 6 --temp 0 -b 1
cp "$tmp/out" "$tmp/b1.txt"
check "run -b 512" exit_is 0 "$kiln" run -m "$M" -p "In the beginning God" -n 6 --temp 0
check "run -b 1 gives the same text" same "$tmp/b1.txt" "$tmp/out"
check "chat -b 2" exit_is 0 bash -c "echo 'In the beginning' | exec \"$kiln\" chat -m \"$M\" -n 4 --temp 0 -b 2"
check "bench -b 2" exit_is 0 "$kiln" bench -m "$M" -p 8 -n 0 -r 1 -b 2 -o json
check "bench reports n_batch 2" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))[0]["n_batch"] == 2' "$tmp/out"
check "perplexity -b 16" exit_is 0 "$kiln" perplexity -m "$M" -f "$tmp/text.txt" -c 64 -b 16 --json
cp "$tmp/out" "$tmp/p16.json"
check "perplexity whole chunks" exit_is 0 "$kiln" perplexity -m "$M" -f "$tmp/text.txt" -c 64 --json
check "perplexity -b 16: n_batch and the same PPL" python3 - "$tmp/p16.json" "$tmp/out" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["n_batch"] == 16 and b["n_batch"] == 64, (a, b)
assert abs(a["ppl"] - b["ppl"]) <= 1e-3 * b["ppl"], (a["ppl"], b["ppl"])
PY

# run --json is valid JSON (UTF-8) even when the generated bytes are not: a random
# synthetic model with a byte-fallback vocabulary emits stray bytes
check "synth tiny" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/tiny.gguf"
check "run --json on random bytes" exit_is 0 "$kiln" run -m "$tmp/tiny.gguf" -p "a" -n 200 --temp 1.5 --seed 3 --json
check "run --json is strict JSON" python3 -c 'import json,sys; d=json.loads(open(sys.argv[1],"rb").read().decode("utf-8")); assert len(d["tokens"]) > 0' "$tmp/out"
check "raw run emits invalid UTF-8 here (the case is exercised)" bash -c "\"$kiln\" run -m \"$tmp/tiny.gguf\" -p a -n 200 --temp 1.5 --seed 3 | python3 -c 'import sys; sys.stdin.buffer.read().decode(\"utf-8\")' 2>/dev/null; [ \$? -ne 0 ]"

# --temp 1e-45 is near-greedy (it was a uniform draw: logits / 1e-45 are infinite)
check "run --temp 0" exit_is 0 "$kiln" run -m "$M" -p "And God said" -n 12 --temp 0
cp "$tmp/out" "$tmp/greedy.txt"
check "run --temp 1e-45" exit_is 0 "$kiln" run -m "$M" -p "And God said" -n 12 --temp 1e-45 --seed 5
check "--temp 1e-45 is greedy" same "$tmp/greedy.txt" "$tmp/out"

# escape codes in token texts reach a terminal escaped, a pipe unchanged (<0x1B> is id 30)
check "detokenize ESC to a pipe" exit_is 0 "$kiln" detokenize -m "$M" 30
check "pipe gets the raw byte" test "$(od -An -tx1 "$tmp/out" | tr -d ' ')" = 1b0a
check "detokenize ESC to a terminal" exit_is 0 script -qec "\"$kiln\" detokenize -m \"$M\" 30 31 32" /dev/null
check "terminal gets \\x1b" grep -qF '\x1b\x1c\x1d' "$tmp/out"
check "terminal gets no raw ESC" python3 -c 'import sys; assert 0x1b not in open(sys.argv[1],"rb").read()' "$tmp/out"
# and in run's stream: the random tiny model emits ESC bytes with seed 6
check "run to a pipe" exit_is 0 "$kiln" run -m "$tmp/tiny.gguf" -p a -n 200 --temp 1.5 --seed 6
check "the pipe gets raw ESC (the case is exercised)" python3 -c 'import sys; assert 0x1b in open(sys.argv[1],"rb").read()' "$tmp/out"
check "run to a terminal" exit_is 0 script -qec "\"$kiln\" run -m \"$tmp/tiny.gguf\" -p a -n 200 --temp 1.5 --seed 6" /dev/null
check "the terminal gets \\x1b, no raw ESC" python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); assert 0x1b not in b and b"\\x1b" in b' "$tmp/out"

# ---- item 11: messages that say what is wrong
check "eval on a vocabulary-only file" exit_is 1 "$kiln" eval -m "$shared/vocab/ggml-vocab-llama-spm.gguf" -p hi
check "vocabulary-only: says no weights and names the file" err_has "ggml-vocab-llama-spm.gguf has no weights"
check "bench -c 4 -p 8" exit_is 2 "$kiln" bench -m "$M" -c 4 -p 8 -n 0
check "bench -c 4 -p 8: blames -c" err_has "-c 4 is smaller than the test"
check "--repeat-penalty 0.001 (the printed bound)" exit_is 0 "$kiln" run -m "$M" -p hi -n 1 --repeat-penalty 0.001
check "--repeat-penalty 0.0009" exit_is 2 "$kiln" run -m "$M" -p hi -n 1 --repeat-penalty 0.0009
yes 'In the beginning God created the heaven and the earth.' | head -c 1000000 >"$tmp/mb.txt"
check "eval of a 1 MB prompt" exit_is 1 "${T[@]}" "$kiln" eval -m "$M" -f "$tmp/mb.txt"
check "1 MB prompt: says why" err_has "more than the model's context length"
check "detokenize IDS -m M" exit_is 0 "$kiln" detokenize 512 513 -m "$M"
check "detokenize IDS -m M: text" test -s "$tmp/out"

# ---- hostile flags: empty, huge, negative, NaN, non-numeric values are usage errors
for f in "-n ''" "-n 1e3" "-n 99999999999" "-t 0" "-t -1" "-c -1" "-b 0" "--temp nan" "--temp inf" "--temp -1" \
         "--top-p nan" "--min-p ''" "--seed -1" "--repeat-last-n x" "-ctk ''" "-ngl -1" "-ngl x" "-ngl ''"; do
  check "run $f" exit_is 2 bash -c "exec \"$kiln\" run -m \"$M\" -p hi $f"
  check "run $f: names the value" err_has "invalid value"
done
check "bench -r 0" exit_is 2 "$kiln" bench -m "$M" -r 0
# -ngl where no GPU can be used: says why, runs on the CPU, same text as without it
check "run -ngl 99 without a GPU" exit_is 0 "$kiln" run -m "$M" -p "In the beginning" -n 8 --temp 0 -ngl 99
check "run -ngl 99 without a GPU: says why" err_has "GPU not used ("
cp "$tmp/out" "$tmp/ngl.out"
check "run without -ngl" exit_is 0 "$kiln" run -m "$M" -p "In the beginning" -n 8 --temp 0
check "run -ngl 99 without a GPU: same text" cmp -s "$tmp/out" "$tmp/ngl.out"
check "perplexity --chunks -1" exit_is 2 "$kiln" perplexity -m "$M" -f "$tmp/text.txt" --chunks -1
check "quantize -t nan" exit_is 2 "$kiln" quantize -t nan "$M" "$tmp/x.gguf" Q8_0
check "synth --seed ''" exit_is 2 "$kiln" synth --preset tiny --seed '' -o "$tmp/x.gguf"
check "detokenize -5" exit_is 2 "$kiln" detokenize -m "$M" -5
for c in "info -m ''" "run -p hi -m ''" "eval -m $M -p hi --logits ''" "run -m $M -f ''" "tokenize -m $M -f ''" \
         "perplexity -m $M -f ''" "synth --preset tiny -o ''" "quantize $M '' Q8_0" "info -m $M --tensor x --dump ''"; do
  check "$c" exit_is 2 bash -c "exec \"$kiln\" $c"
  check "$c: names the empty name" err_has "empty string"
done
check "no output was written by the usage errors" test ! -e "$tmp/x.gguf"
# devices and FIFOs given as outputs are written, not replaced or resolved
check "--logits /dev/stdout" exit_is 0 "$kiln" eval -m "$M" -p hi --logits /dev/stdout
check "--logits /dev/stdout: the logits on stdout" test "$(stat -c %s "$tmp/out")" -gt 256000


# ==== issue 45: the last lost files, silences and plausible wrong numbers
# ---- item 1: every file a command reads is an input no output may replace
cp "$M" "$tmp/v.gguf"
check "synth --vocab X -o X" exit_is 1 "${T[@]}" "$kiln" synth --preset tiny --vocab "$tmp/v.gguf" -o "$tmp/v.gguf"
check "synth --vocab X -o X: message" err_has "is the input file"
ln -s v.gguf "$tmp/v-link.gguf"
check "synth --vocab X -o LINK-TO-X" exit_is 1 "$kiln" synth --preset tiny --vocab "$tmp/v.gguf" -o "$tmp/v-link.gguf"
check "the vocabulary is intact" same "$tmp/v.gguf" "$M"
echo "In the beginning God created" >"$tmp/prompt.txt"
cp "$tmp/prompt.txt" "$tmp/prompt.orig"
ln -s prompt.txt "$tmp/prompt-link.txt"
ln "$tmp/prompt.txt" "$tmp/prompt-hard.txt"
for f in prompt.txt prompt-link.txt; do
  for out in prompt.txt prompt-link.txt prompt-hard.txt; do
    check "eval -f $f --logits $out" exit_is 1 "$kiln" eval -m "$M" -f "$tmp/$f" --logits "$tmp/$out"
    check "eval -f $f --logits $out: message" err_has "is the input file"
  done
done
check "the prompt file is intact" same "$tmp/prompt.txt" "$tmp/prompt.orig"
check "the prompt's symlink is kept" test -L "$tmp/prompt-link.txt"
check "eval -f P --logits another file still works" exit_is 0 "$kiln" eval -m "$M" -f "$tmp/prompt.txt" --logits "$tmp/l.f32"

# ---- item 2: a dangling symlink as the output gets its target written and stays a
# link; a looping one is refused and left as it was
D=(info -m "$M" --tensor output_norm.weight --dump)
ln -s dangling-target.f32 "$tmp/dangling.f32"
check "dump to a dangling symlink" exit_is 0 "$kiln" "${D[@]}" "$tmp/dangling.f32"
check "the dangling symlink is kept" test -L "$tmp/dangling.f32"
check "its target is written" test "$(stat -c %s "$tmp/dangling-target.f32")" -eq 1024
mkdir "$tmp/sub"
ln -s ../sub/chain-end.gguf "$tmp/sub/chain2.gguf" # a chain of relative links, each read from its own directory
ln -s sub/chain2.gguf "$tmp/chain1.gguf"
check "synth to a dangling chain of links" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/chain1.gguf"
check "the chain is kept" test -L "$tmp/chain1.gguf" -a -L "$tmp/sub/chain2.gguf"
check "the chain's end is written" exit_is 0 "$kiln" info -m "$tmp/sub/chain-end.gguf"
ln -s no-such-dir/x.f32 "$tmp/dangling-dir.f32"
check "dump to a link into a missing directory" exit_is 1 "$kiln" "${D[@]}" "$tmp/dangling-dir.f32"
check "link into a missing directory: says where it leads" err_has "no-such-dir/x.f32 (where the link"
check "that link is kept" test -L "$tmp/dangling-dir.f32"
ln -s loop-b "$tmp/loop-a"
ln -s loop-a "$tmp/loop-b"
check "dump to a looping symlink" exit_is 1 "$kiln" "${D[@]}" "$tmp/loop-a"
check "looping symlink: message" err_has "Too many levels of symbolic links"
check "synth to a looping symlink" exit_is 1 "$kiln" synth --preset tiny -o "$tmp/loop-a"
check "logits to a looping symlink" exit_is 1 "$kiln" eval -m "$M" -p hi --logits "$tmp/loop-a"
check "the looping links are kept" test -L "$tmp/loop-a" -a -L "$tmp/loop-b"
check "no temporaries after the links" no_temps "$tmp"

# ---- item 3: weights that give no prediction stop perplexity, run and eval (exit 1,
# the position and the damaged weight's layer; no JSON with nan). One tensor of a copy
# overwritten with 0xff bytes (NaN as f16 and f32): through f16 weights the logits
# become NaN; through Q4_0 weights (int8 activations) NaN becomes all-equal logits.
damage() { # damage MODEL TENSOR OUT
  cp "$1" "$3" && python3 - "$3" "$2" "$kiln" <<'PY'
import json, subprocess, sys
path, name, kiln = sys.argv[1:]
d = json.loads(subprocess.check_output([kiln, "info", "-m", path, "--json", "--tensors"]))
t = next(t for t in d["tensors"] if t["name"] == name)
with open(path, "r+b") as f:
    f.seek(d["data_offset"] + t["offset"])
    f.write(b"\xff" * t["size"])
PY
}
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 20) >"$tmp/ppl.txt"
for src in kjv-f16 kjv-q4_0; do
  check "damage $src" damage "$shared/models/$src.gguf" blk.1.ffn_down.weight "$tmp/nan-$src.gguf"
  N=$tmp/nan-$src.gguf
  check "$src damaged: perplexity" exit_is 1 "$kiln" perplexity -m "$N" -f "$tmp/ppl.txt" -c 64
  check "$src damaged: perplexity prints no PPL" test ! -s "$tmp/out"
  check "$src damaged: perplexity names the position" err_has "the logits at position 32 of chunk 1"
  [ "$src" = kjv-f16 ] && check "f16 damaged: the logits are NaN" err_has "not finite (token 0's is NaN)"
  [ "$src" = kjv-q4_0 ] && check "q4_0 damaged: the logits are all equal" err_has "are all equal (0)"
  check "$src damaged: perplexity names the layer" err_has "blk.1.ffn_down.weight (layer 1) holds non-finite values"
  check "$src damaged: perplexity --json" exit_is 1 "$kiln" perplexity -m "$N" -f "$tmp/ppl.txt" -c 64 --json
  check "$src damaged: no JSON with nan" test ! -s "$tmp/out"
  check "$src damaged: run" exit_is 1 "$kiln" run -m "$N" -p "In the beginning" -n 8 --temp 0
  check "$src damaged: run emits no token" test "$(cat "$tmp/out")" = ""
  check "$src damaged: run names the position and layer" err_has "position 3 are "
  check "$src damaged: run names the layer" err_has "(layer 1)"
  check "$src damaged: run --json" exit_is 1 "$kiln" run -m "$N" -p "In the beginning" -n 8 --json
  check "$src damaged: eval" exit_is 1 "$kiln" eval -m "$N" -p "In the beginning"
  check "$src damaged: eval names the layer" err_has "(layer 1)"
  echo previous >"$tmp/nan.f32"
  check "$src damaged: eval --logits" exit_is 1 "$kiln" eval -m "$N" -p "In the beginning" --logits "$tmp/nan.f32"
  check "$src damaged: eval --logits names the first position" err_has "the logits at position 0 are"
  check "$src damaged: the previous logits file is kept" grep -qx previous "$tmp/nan.f32"
done
check "perplexity --json on the sound model is still JSON" exit_is 0 "$kiln" perplexity -m "$M" -f "$tmp/ppl.txt" -c 64 --json
check "perplexity --json: finite numbers" python3 -c 'import json,math,sys; d=json.load(open(sys.argv[1])); assert all(math.isfinite(d[k]) for k in ("ppl","ppl_uncertainty")), d' "$tmp/out"

# ---- item 4: no silent ends
check "chat < a directory" exit_is 1 "${T[@]}" "$kiln" chat -m "$M" -n 2 <"$tmp"
check "chat < a directory: message" err_has "stdin: it is a directory"
check "chat with stdin closed" exit_is 1 "${T[@]}" "$kiln" chat -m "$M" -n 2 <&-
check "chat with stdin closed: message" err_has "stdin: it is closed"
check "run -n 200 -c 32" exit_is 0 "$kiln" run -m "$M" -p "In the beginning" -n 200 -c 32 --temp 0
check "run -n 200 -c 32: says the context is full" err_has "the context is full (32 tokens): generated 29 of the 200 tokens"
check "run -n 20: no note when the context has room" exit_is 0 "$kiln" run -m "$M" -p "In the beginning" -n 20 -c 32 --temp 0
check "run -n 20: nothing on stderr" test ! -s "$tmp/err"
head -c 100000 "$M" >"$tmp/cut-model.gguf"
check "serve on a damaged model" exit_is 1 "${T[@]}" "$kiln" serve -m "$tmp/cut-model.gguf" --port 0
check "serve on a damaged model: never says listening" bash -c "! grep -q listening \"$tmp/err\""
check "serve on a damaged model: names the file" err_has "cut-model.gguf: "
check "dump to /dev/full" exit_is 1 "$kiln" info -m "$M" --tensor token_embd.weight --dump /dev/full
check "dump to /dev/full: the reason" err_has "cannot write /dev/full: No space left on device"
check "logits to /dev/full" exit_is 1 "$kiln" eval -m "$M" -p "In the beginning" --logits /dev/full
check "logits to /dev/full: the path and reason" err_has "/dev/full: No space left on device"
# (under ASan a refused allocation is kiln's to report, not the sanitizer's to abort on)
check "bench -p 1048576" exit_is 1 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
  "${T[@]}" "$kiln" bench -m "$M" -p 1048576 -n 0 -r 1
check "bench -p 1048576: the size asked for" err_has "a context of 1048592 tokens, batches of 1048576"
cp "$M" "$tmp/hdr.gguf"
printf '\xff\xff\xff\x7f' | dd of="$tmp/hdr.gguf" bs=1 seek=8 conv=notrunc 2>/dev/null # tensor count 2^31-1
for c in "run -p hi" "eval -p hi" "chat" "perplexity -f $tmp/ppl.txt" "bench -p 4 -n 0 -r 1"; do
  for bad in hdr.gguf cut-model.gguf; do
    # shellcheck disable=SC2086
    check "$c -m $bad" exit_is 1 "${T[@]}" "$kiln" $c -m "$tmp/$bad" </dev/null
    check "$c -m $bad: names the file" err_has "$tmp/$bad: "
  done
done

# ---- item 5: SIGQUIT (Ctrl-\, default action as on a terminal) in synth and quantize
# dies of it at once, the previous file intact, no temporary left
# the command with SIGQUIT at its default, as a terminal's foreground job has it (a
# background job of this shell starts with it ignored); exec'd, so $! is kiln's pid
dfl=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGQUIT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])')
ulimit -c 0
echo old >"$tmp/quit.gguf"
"${dfl[@]}" "$kiln" synth --preset tinyllama-1.1b -t 1 -o "$tmp/quit.gguf" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do [ -n "$(find "$tmp" -name '.quit.gguf.tmp.*' -size +1M)" ] && break; sleep 0.1; done
check "synth is writing its temporary (QUIT)" test -n "$(find "$tmp" -name '.quit.gguf.tmp.*')"
kill -QUIT "$pid"
wait "$pid"
rc=$?
check "synth killed by SIGQUIT exits 131 (got $rc)" test "$rc" -eq 131
check "SIGQUIT leaves synth's old file" grep -qx old "$tmp/quit.gguf"
check "SIGQUIT leaves no temporary of synth" no_temps "$tmp"
echo old >"$tmp/quitq.gguf"
"${dfl[@]}" "$kiln" quantize -t 1 "$shared/models/kjv-f16.gguf" "$tmp/quitq.gguf" IQ4_XS >/dev/null 2>&1 & # ~5 s
pid=$!
for _ in $(seq 50); do [ -n "$(find "$tmp" -name '.quitq.gguf.tmp.*')" ] && break; sleep 0.1; done
check "quantize is writing its temporary (QUIT)" test -n "$(find "$tmp" -name '.quitq.gguf.tmp.*')"
sleep 0.3
kill -QUIT "$pid"
wait "$pid"
rc=$?
check "quantize killed by SIGQUIT exits 131 (got $rc)" test "$rc" -eq 131
check "SIGQUIT leaves quantize's old file" grep -qx old "$tmp/quitq.gguf"
check "SIGQUIT leaves no temporary of quantize" no_temps "$tmp"

tu_finish test_hostile
