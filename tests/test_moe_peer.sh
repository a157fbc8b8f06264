#!/usr/bin/env bash
# test_moe_peer.sh - mixtures of experts against llama.cpp through ../shared/peer: files made
# by `kiln synth --preset tiny --arch mixtral|qwen3moe|gpt-oss` (4 experts, 2 used per token;
# Mixtral a llama file with experts, Qwen3-MoE with q/k head norms and its own expert width,
# gpt-oss with attention sinks, q/k/v/o biases, a window of 16 on every other layer, YaRN
# RoPE, a biased router with a softmax over the chosen logits and biased experts through the
# clamped SwiGLU, in F16 and in MXFP4) give llama.cpp's prompt tokens, logits (NMSE <= 1e-4;
# leaving out any one of those features gives 1e-3 to 5e-2), top tokens where its lead is
# clear, greedy tokens up to the first margin under 0.02, and perplexity within 0.5% (below).
# Skipped (77) when the peer is not built.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" moe-peer
. "$(dirname "${BASH_SOURCE[0]}")/peer_lib.sh"
peer_require
peer_kjv_inputs

for case in mixtral:F16 qwen3moe:F16 gpt-oss:F16 gpt-oss:MXFP4; do
  arch=${case%%:*} type=${case#*:}
  m=$tmp/$arch-$type.gguf
  check "$arch $type: synth" exit_is 0 "$kiln" synth --preset tiny --arch "$arch" --type "$type" -o "$m" -t 2
  arch=$arch-$type
  check "$arch: llama.cpp's logits" "$peer" logits "$m" "$tmp/prompts.txt" "$tmp/ref-$arch" 24
  prompt=$(sed -n 1p "$tmp/prompts.txt")
  "$kiln" eval -m "$m" -p "$prompt" --logits "$tmp/k-$arch.f32" >"$tmp/k-$arch.json" 2>/dev/null
  check "$arch: tokens and logits" compare "$tmp/ref-$arch-0" "$tmp/k-$arch"
  "$kiln" run -m "$m" -p "$prompt" -n 24 --temp 0 --json >"$tmp/run.json" 2>/dev/null
  check "$arch: greedy tokens" greedy "$tmp/ref-$arch-0.json" "$tmp/run.json"
  # perplexity (each peer run takes seconds): Mixtral at n_ctx 128, gpt-oss also at n_ctx 512
  # in batches of 32, where the windowed layers' cache takes cells back (Qwen3-MoE's is held
  # on the shared KJV file by test_cli)
  case $arch in
    mixtral-F16) sizes=("128 128") ;;
    gpt-oss-F16) sizes=("128 128" "512 32") ;;
    *) sizes=() ;;
  esac
  for c in "${sizes[@]}"; do
    peer_ppl "$arch" "$m" $c
  done
done
tu_finish test_moe_peer
