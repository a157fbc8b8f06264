#!/usr/bin/env bash
# test_gemma_peer.sh - Gemma 2, 3 and 4 against llama.cpp through ../shared/peer: files
# made by `kiln synth --preset tiny --arch gemma2|gemma3|gemma4` (a window of 16 on
# alternate layers; soft-caps, Gemma 4's per-layer head sizes and KV heads, v = k on global
# layers, proportional RoPE and output scales, each of which moves the logits far past the
# tolerance when left out) give llama.cpp's prompt tokens, logits (NMSE <= 1e-4, F16
# weights), top tokens where its lead is clear, greedy tokens up to the first margin under
# 0.02, and perplexity within 0.5% at n_ctx 128; at n_ctx 512 in batches of 32 the windowed
# layers' cache (256 cells) takes cells back, on the synthetic files and on
# shared/models/families/gemma3-kjv-q4_0.gguf, still within 0.5% of llama.cpp.
# Skipped (77) when the peer is not built.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" gemma-peer
. "$(dirname "${BASH_SOURCE[0]}")/peer_lib.sh"
peer_require
peer_kjv_inputs

for arch in gemma2 gemma3 gemma4; do
  m=$tmp/$arch.gguf
  check "$arch: synth" exit_is 0 "$kiln" synth --preset tiny --arch "$arch" -o "$m" -t 2
  check "$arch: llama.cpp's logits" "$peer" logits "$m" "$tmp/prompts.txt" "$tmp/ref-$arch" 24
  for k in 0; do
    prompt=$(sed -n "$((k + 1))p" "$tmp/prompts.txt")
    "$kiln" eval -m "$m" -p "$prompt" --logits "$tmp/k-$arch-$k.f32" >"$tmp/k-$arch-$k.json" 2>/dev/null
    check "$arch prompt $k: tokens and logits" compare "$tmp/ref-$arch-$k" "$tmp/k-$arch-$k"
    "$kiln" run -m "$m" -p "$prompt" -n 24 --temp 0 --json >"$tmp/run.json" 2>/dev/null
    check "$arch prompt $k: greedy tokens" greedy "$tmp/ref-$arch-$k.json" "$tmp/run.json"
  done
  for c in "128 128" "512 32"; do
    peer_ppl "$arch" "$m" $c
  done
done

# a trained model: the windowed cache taking cells back over 512-token chunks
g3=$shared/models/families/gemma3-kjv-q4_0.gguf
if [ -f "$g3" ]; then
  "$peer" ppl "$g3" "$text" 512 >"$tmp/peer-ppl.json" 2>/dev/null
  "$kiln" perplexity -m "$g3" -f "$text" -c 512 -b 32 --json >"$tmp/ppl.json" 2>/dev/null
  check "gemma3-kjv: perplexity at n_ctx 512, batches of 32" ppl_close "$tmp/peer-ppl.json" "$tmp/ppl.json"
else
  echo "SKIP (part): $g3 is absent"
fi
tu_finish test_gemma_peer
