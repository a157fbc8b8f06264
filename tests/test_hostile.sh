#!/usr/bin/env bash
# test_hostile.sh - kiln used carelessly or with hostile input: outputs onto the
# model, interrupts, long names and umasks (no file is ever lost or left half
# written); endless or NUL-bearing text inputs; models that are not files; output
# that cannot be written; flags at and past their limits; messages that must say
# what is wrong. Each case failed before issue 14. Needs ../shared's models.
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

tu_finish test_hostile
