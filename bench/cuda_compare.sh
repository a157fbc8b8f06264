#!/usr/bin/env bash
# kiln's CUDA backend beside llama.cpp's CUDA build on the same GPU, same files, one run.
#   bench/cuda_compare.sh PEER_DIR [MODELS...]
# PEER_DIR holds what `../shared/peer/cuda.sh pack PEER_DIR` wrote (llama.cpp's source and its
# build script); MODELS are kiln synth presets (default: tinyllama-1.1b:Q4_0
# tinyllama-1.1b:Q8_0 llama-7b:Q4_0 llama-7b:Q8_0). Builds both (llama.cpp in the background,
# ~4 min on 16 cores), runs test_cuda, then, once both builds are done, pp512/tg128 with
# -ngl 99 (llama.cpp with -fa 1) and tg128 after 4096 cached tokens on the Q4_0 files.
# Needs nvcc, CMake, ninja and kiln's build deps.
set -uo pipefail
peer=${1:?usage: bench/cuda_compare.sh PEER_DIR [preset:TYPE ...]}; shift
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q8_0 llama-7b:Q4_0 llama-7b:Q8_0)
src=$(cd "$(dirname "$0")/.." && pwd)
b=${KILN_CUDA_BUILD:-/tmp/kiln-cuda} m=${KILN_CUDA_MODELS:-/tmp/kiln-cuda-models}
(bash "$peer/cuda.sh" build /tmp/llama-cuda >/tmp/llama-cuda.log 2>&1; echo "llama.cpp build rc=$?" >>/tmp/llama-cuda.log) &
mkdir -p "$b" "$m"
cmake -S "$src" -B "$b" -G Ninja -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$b.cmake.log" 2>&1 &&
  cmake --build "$b" --target test_cuda kiln >"$b.build.log" 2>&1 || { tail -30 "$b.cmake.log" "$b.build.log"; exit 1; }
(cd "$b" && ./test_cuda | tail -2)
files=()
for spec in "${models[@]}"; do
  f=$m/${spec%%:*}-${spec##*:}.gguf
  [ -f "$f" ] || "$b/kiln" synth --preset "${spec%%:*}" --type "${spec##*:}" -o "$f" | tail -1
  files+=("$f")
done
# every benchmark waits for llama.cpp's build: it loads all of the host's cores, and kiln's
# decoding (graph building, launches) runs on the host
wait
tail -1 /tmp/llama-cuda.log
for f in "${files[@]}"; do
  echo "== kiln $(basename "$f")"
  timeout 150 "$b/kiln" bench -m "$f" -ngl 99 -p 512 -n 128 -r 3 2>&1 | grep -E '^\| llama|GPU'
done
for f in "${files[@]}"; do
  case $f in *Q4_0*) ;; *) continue ;; esac
  echo "== kiln depth $(basename "$f")"
  timeout 200 "$b/kiln" bench -m "$f" -ngl 99 -p 0 -n 128 -d 0,4096 -c 4608 -r 2 2>&1 | grep -E '^\| llama'
done
lb=/tmp/llama-cuda/src/build/bin/llama-bench
for f in "${files[@]}"; do
  echo "== llama.cpp $(basename "$f")"
  timeout 150 "$lb" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E '^\| llama'
done
for f in "${files[@]}"; do
  case $f in *Q4_0*) ;; *) continue ;; esac
  echo "== llama.cpp depth $(basename "$f")"
  timeout 150 "$lb" -m "$f" -ngl 99 -fa 1 -p 0 -n 128 -d 0,4096 -r 2 2>&1 | grep -E '^\| llama'
done
