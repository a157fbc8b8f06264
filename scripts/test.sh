#!/usr/bin/env bash
# The whole test suite, as README.md gives it and .ci/run calls it: installs what
# is missing (scripts/deps.sh), builds llama.cpp's peer driver when ../shared is
# beside the checkout, then a warnings-as-errors release build and an ASan+UBSan
# build, each running ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
jobs=$(nproc 2>/dev/null || echo 2)
shared=${KILN_SHARED:-../shared}
if [ -z "${KILN_PEER:-}" ] && [ -x "$shared/peer/build.sh" ]; then
  # The peer tests compare kiln with llama.cpp's own libraries (npm package).
  if peer=$(bash "$shared/peer/build.sh" 2>/tmp/kiln-peer-build.log | tail -n 1) && [ -x "$peer" ]; then
    export KILN_PEER=$peer
  else
    echo "test.sh: llama.cpp's peer did not build (the peer tests will SKIP):" >&2
    tail -n 5 /tmp/kiln-peer-build.log >&2 || true
  fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_WERROR=ON >/dev/null
cmake --build build-san -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 KILN_SANITIZED=1 \
  ctest --test-dir build-san --output-on-failure -j"$jobs"
