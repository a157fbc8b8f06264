#!/usr/bin/env bash
# test_quantize_cli.sh - `kiln quantize` end to end: usage errors exit 2 naming the
# culprit, runtime errors exit 1 and leave no OUT; kjv-f16.gguf quantized to
# Q8_0, Q4_0 and Q4_K_M is byte for byte the file llama.cpp's quantizer made
# (../shared/models) and runs in kiln with llama.cpp's perplexity (within 1%);
# and where llama.cpp's peer is built (../shared/peer), every
# TYPE, with its mix and --pure, on two synthetic models (rows of 64, GQA 4,
# a feed-forward width that is not whole 256-blocks), and from F32 and BF16
# inputs, and qwen2/qwen3/phi3 synthetic models (fused tensors included), gives
# the same file as llama_model_quantize, and ggml's reader accepts every output.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" quantize
peer=${KILN_PEER:-/tmp/kiln-peer/peer}
absent() { [ ! -e "$1" ] || { echo "  $1 exists" >&2; return 1; }; }

check "synth input" exit_is 0 "$kiln" synth --preset tiny -o "$tmp/tiny.gguf"
in="$tmp/tiny.gguf"

# usage errors: 2
check "no args" exit_is 2 "$kiln" quantize
check "two args" exit_is 2 "$kiln" quantize "$in" "$tmp/o.gguf"
check "unknown TYPE" exit_is 2 "$kiln" quantize "$in" "$tmp/o.gguf" Q4_K_X
check "unknown TYPE named" err_has "unknown TYPE 'Q4_K_X'"
check "unknown option" exit_is 2 "$kiln" quantize --bogus "$in" "$tmp/o.gguf" Q8_0
check "bad -t" exit_is 2 "$kiln" quantize -t 0 "$in" "$tmp/o.gguf" Q8_0
check "-t without value" exit_is 2 "$kiln" quantize "$in" "$tmp/o.gguf" Q8_0 -t
check "extra arg" exit_is 2 "$kiln" quantize "$in" "$tmp/o.gguf" Q8_0 more
check "--help" exit_is 0 "$kiln" quantize --help
check "no OUT after usage errors" absent "$tmp/o.gguf"

# runtime errors: 1, no OUT left behind
check "missing input" exit_is 1 "$kiln" quantize "$tmp/none.gguf" "$tmp/o.gguf" Q8_0
check "missing input message" err_has "cannot open"
check "missing OUT dir" exit_is 1 "$kiln" quantize "$in" "$tmp/no/such/dir/o.gguf" Q8_0
size=$(stat -c %s "$in")
head -c $((size - 1000)) "$in" >"$tmp/cut.gguf"
check "truncated input" exit_is 1 "$kiln" quantize "$tmp/cut.gguf" "$tmp/o.gguf" Q4_0
check "truncated input message" err_has "cut.gguf"
check "no OUT after a damaged input" absent "$tmp/o.gguf"
printf 'GGUF\003\000\000\000\001\000\000\000\000\000\000\000\377\377' >"$tmp/bad.gguf"
check "garbage input" exit_is 1 "$kiln" quantize "$tmp/bad.gguf" "$tmp/o.gguf" Q4_0
check "no OUT after garbage" absent "$tmp/o.gguf"
check "no temporary files left" bash -c "! ls '$tmp' | grep -q tmp"

# a quantized input: refused, or requantized with a warning when allowed
check "Q8_0 input" exit_is 0 "$kiln" quantize "$in" "$tmp/q8.gguf" q8_0
check "requantize refused" exit_is 1 "$kiln" quantize "$tmp/q8.gguf" "$tmp/o.gguf" Q4_0
check "requantize refused message" err_has "already quantized"
check "requantize allowed" exit_is 0 "$kiln" quantize --allow-requantize "$tmp/q8.gguf" "$tmp/o.gguf" Q4_0
check "requantize warning" err_has "warning: blk.0.attn_q.weight is already q8_0: requantizing to q4_0"
check "same type is a copy" exit_is 0 "$kiln" quantize "$tmp/q8.gguf" "$tmp/q8b.gguf" Q8_0
check "same type is a copy: bytes" cmp "$tmp/q8.gguf" "$tmp/q8b.gguf"

# ../shared: llama.cpp's own quantized files, byte for byte
if [ -f "$shared/models/kjv-f16.gguf" ]; then
  for t in q8_0 q4_0 q4_k_m; do
    check "kjv $t" exit_is 0 "$kiln" quantize -t 2 "$shared/models/kjv-f16.gguf" "$tmp/kjv-$t.gguf" "${t^^}"
    check "kjv $t = llama.cpp's file" cmp "$tmp/kjv-$t.gguf" "$shared/models/kjv-$t.gguf"
    # and the file runs in kiln: perplexity within 1% of llama.cpp's on its own quantization
    check "kjv $t perplexity" exit_is 0 "$kiln" perplexity -m "$tmp/kjv-$t.gguf" -f "$shared/text/kjv_test_a.txt" \
      -c 128 --json
    check "kjv $t perplexity within 1%" python3 -c '
import json, sys
got = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["ppl"]
want = json.load(open(sys.argv[2]))["ppl"][sys.argv[3]]
assert abs(got - want) <= 0.01 * want, (got, want)' "$tmp/out" "$shared/reference/perplexity.json" "kjv-$t.gguf"
  done
else
  skip_part "the ../shared part: $shared is absent (set KILN_SHARED)"
fi

# llama.cpp's quantizer, live: every type, mix and --pure, on models that reach the fallbacks.
# Under the sanitizers (KILN_SANITIZED) kiln quantizes every case but llama.cpp's side, an
# unsanitized program whose bytes the release run of this same test compares, is not run again.
same_run=${KILN_SANITIZED:-}
[ -n "$same_run" ] && echo "note: sanitized build: kiln quantizes every case; the byte comparisons with llama.cpp are the release run's"
if [ -x "$peer" ]; then
  check "synth small" exit_is 0 "$kiln" synth --preset small -o "$tmp/small.gguf" --seed 3
  declare -A ftype=([F32]=0 [F16]=1 [BF16]=32 [Q4_0]=2 [Q4_1]=3 [Q5_0]=8 [Q5_1]=9 [Q8_0]=7 [Q2_K]=10
    [Q3_K_S]=11 [Q3_K_M]=12 [Q3_K_L]=13 [Q4_K_S]=14 [Q4_K_M]=15 [Q5_K_S]=16 [Q5_K_M]=17 [Q6_K]=18
    [IQ4_NL]=25 [IQ4_XS]=30 [MXFP4_MOE]=38)
  for m in tiny small; do
    for t in "${!ftype[@]}"; do
      for pure in "" pure; do
        # --pure is covered on tiny; small is here for its mixes (GQA 4, 8 layers, ff 672)
        [ "$m" = small ] && [ -n "$pure" ] && continue
        check "kiln $m $t $pure" exit_is 0 "$kiln" quantize ${pure:+--pure} "$tmp/$m.gguf" "$tmp/k.gguf" "$t"
        [ -n "$same_run" ] && continue
        check "peer $m $t $pure" exit_is 0 "$peer" quantize "$tmp/$m.gguf" "$tmp/p.gguf" "${ftype[$t]}" $pure
        check "$m $t $pure = llama.cpp's file" cmp "$tmp/k.gguf" "$tmp/p.gguf"
        check "peer gguf $m $t $pure" exit_is 0 "$peer" gguf "$tmp/k.gguf"
      done
    done
  done
  # the other architectures' tensors (qwen2's biases, qwen3's q/k norms, phi3's fused
  # attn_qkv and gate|up ffn_up): llama.cpp's rules for them, every type on phi3
  for a in qwen2 qwen3 phi3; do
    check "synth small $a" exit_is 0 "$kiln" synth --preset small --arch "$a" -o "$tmp/$a.gguf" --seed 5
    for t in "${!ftype[@]}"; do
      [ "$a" != phi3 ] && case $t in Q4_0|Q4_K_M|Q2_K|Q3_K_M|IQ4_XS) ;; *) continue ;; esac
      check "kiln $a $t" exit_is 0 "$kiln" quantize "$tmp/$a.gguf" "$tmp/k.gguf" "$t"
      [ -n "$same_run" ] && continue
      check "peer $a $t" exit_is 0 "$peer" quantize "$tmp/$a.gguf" "$tmp/p.gguf" "${ftype[$t]}"
      check "$a $t = llama.cpp's file" cmp "$tmp/k.gguf" "$tmp/p.gguf"
    done
    check "kiln runs a quantized $a file" exit_is 0 "$kiln" run -m "$tmp/k.gguf" -p "hi" -n 2
  done
  # MXFP4 everywhere (--pure) on the trained KJV weights: llama.cpp's file, and kiln runs it
  # with the perplexity llama.cpp measures on that same file (within 0.5%)
  if [ -f "$shared/models/kjv-f16.gguf" ]; then
    check "kjv mxfp4 pure" exit_is 0 "$kiln" quantize --pure -t 2 "$shared/models/kjv-f16.gguf" "$tmp/kjv-mx.gguf" MXFP4
  fi
  if [ -f "$shared/models/kjv-f16.gguf" ] && [ -z "$same_run" ]; then
    check "peer kjv mxfp4 pure" exit_is 0 "$peer" quantize "$shared/models/kjv-f16.gguf" "$tmp/p.gguf" 38 pure
    check "kjv mxfp4 pure = llama.cpp's file" cmp "$tmp/kjv-mx.gguf" "$tmp/p.gguf"
    check "kjv mxfp4 peer ppl" exit_is 0 "$peer" ppl "$tmp/kjv-mx.gguf" "$shared/text/kjv_test_a.txt" 128
    cp "$tmp/out" "$tmp/peer-ppl"
    check "kjv mxfp4 perplexity" exit_is 0 "$kiln" perplexity -m "$tmp/kjv-mx.gguf" -f "$shared/text/kjv_test_a.txt" \
      -c 128 --json
    check "kjv mxfp4 perplexity within 0.5% of llama.cpp's" python3 -c '
import json, sys
last = lambda p: json.loads(open(p).read().strip().splitlines()[-1])["ppl"]
got, want = last(sys.argv[1]), last(sys.argv[2])
assert abs(got - want) <= 0.005 * want, (got, want)' "$tmp/out" "$tmp/peer-ppl"
  fi
  # F32 and BF16 inputs go through their own row converters
  for it in F32 BF16; do
    check "synth small $it" exit_is 0 "$kiln" synth --preset small --type "$it" -o "$tmp/in-$it.gguf"
    for t in Q4_0 Q4_K_M F16; do
      check "kiln $it -> $t" exit_is 0 "$kiln" quantize "$tmp/in-$it.gguf" "$tmp/k.gguf" "$t"
      [ -n "$same_run" ] && continue
      check "peer $it -> $t" exit_is 0 "$peer" quantize "$tmp/in-$it.gguf" "$tmp/p.gguf" "${ftype[$t]}"
      check "$it -> $t = llama.cpp's file" cmp "$tmp/k.gguf" "$tmp/p.gguf"
    done
  done
else
  skip_part "the llama.cpp comparisons: $peer is absent"
fi

tu_finish test_quantize_cli
