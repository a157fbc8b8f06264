#!/usr/bin/env bash
# The whole test suite, as README.md gives it and .ci/run calls it: installs what
# is missing (scripts/deps.sh), builds llama.cpp's peer driver when ../shared is
# beside the checkout, then a warnings-as-errors release build (every AVX2 and
# AVX-512 file is compiled whatever this CPU runs) and an ASan+UBSan build, each
# running ctest, the fuzz harness (clang), and a compile of the CUDA backend with
# -Werror (nvcc; no GPU needed). A green run means every part was built and every check ran: a peer that
# does not build, or no nvcc, fails the run; a test that could not run a part is
# reported by ctest as skipped, not passed.
#   KILN_NO_CUDA=1   leave the CUDA compile out (said at the end: the run is not whole)
#   KILN_CUDA_ARCH   the one architecture the CUDA compile targets (default 80)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
jobs=$(nproc 2>/dev/null || echo 2)
shared=${KILN_SHARED:-../shared}
t0=$SECONDS
stamp() { echo "test.sh: $1 ($((SECONDS - t0)) s since the start)"; }

# What the kernels can run here: the tests check every path this CPU has, and the
# scalar reference path everywhere (the *_isa_ref tests).
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
if has avx512f && has avx512bw && has avx512vl && has avx512vnni; then
  echo "test.sh: this CPU runs the AVX-512 VNNI kernels; the tests check them, AVX2 where it applies, and the scalar path"
else
  avx2=no; has avx2 && has fma && has f16c && avx2=yes
  echo "test.sh: this CPU has no AVX-512 VNNI: the AVX-512 files are compiled but not run; the tests check the AVX2 kernels (AVX2: $avx2) and the scalar path against the same expectations"
fi

if [ -z "${KILN_PEER:-}" ] && [ -x "$shared/peer/build.sh" ]; then
  # The peer tests compare kiln with llama.cpp's own libraries (npm package): with
  # ../shared here they must run, so a peer that does not build fails the run.
  log=$(mktemp /tmp/kiln-peer-build-XXXXXX.log)
  if peer=$(bash "$shared/peer/build.sh" 2>"$log" | tail -n 1) && [ -x "$peer" ]; then
    export KILN_PEER=$peer
    rm -f "$log"
  else
    echo "test.sh: llama.cpp's peer driver did not build ($shared/peer/build.sh; log $log):" >&2
    tail -n 20 "$log" >&2 || true
    exit 1
  fi
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
# the libFuzzer harness (scripts/fuzz.sh fuzzes with it): compiled by clang against the
# release libraries and run once over the inputs that once crashed the reader
clang -std=c11 -Wall -Wextra -Wpedantic -Werror -fsanitize=fuzzer -Iinclude tests/fuzz/fuzz_gguf.c \
  build/libgguf.a build/libkt.a -lm -lpthread -o build/fuzz_gguf_check
build/fuzz_gguf_check tests/data/gguf-crashes/* 2>build/fuzz_gguf_check.log ||
  { tail -n 20 build/fuzz_gguf_check.log >&2; exit 1; }
stamp "release build and tests done"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_WERROR=ON >/dev/null
cmake --build build-san -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 KILN_SANITIZED=1 \
  ctest --test-dir build-san --output-on-failure -j"$jobs"
stamp "sanitizer build and tests done"

# The CUDA backend, compiled with warnings as errors for one architecture (its tests
# need a GPU: they run on the lent GPU machines, and say so and skip elsewhere).
if [ -n "${KILN_NO_CUDA:-}" ]; then
  echo "test.sh: KILN_NO_CUDA is set: the CUDA backend was NOT compiled; this run does not cover it" >&2
  exit 0
fi
nvcc=${CUDA_HOME:+$CUDA_HOME/bin/nvcc}
[ -n "$nvcc" ] && [ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "test.sh: no nvcc (\$CUDA_HOME/bin, PATH, /usr/local/cuda): the CUDA backend cannot be compiled;" \
    "install the CUDA toolkit or set KILN_NO_CUDA=1 to run without it" >&2
  exit 1
fi
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON -DKILN_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${KILN_CUDA_ARCH:-80}" >/dev/null
cmake --build build-cuda -j"$jobs" --target kiln test_cuda test_runtime
stamp "CUDA backend compiled ($("$nvcc" --version | tail -n 1), sm_${KILN_CUDA_ARCH:-80})"
