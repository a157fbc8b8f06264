#!/usr/bin/env bash
# test_serve_openai.sh - the official `openai` npm package (installed into the
# build directory on first use) against `kiln serve`: completion and chat,
# streamed and not (tests/serve_openai.mjs). SKIPs when node/npm are missing or
# npm cannot fetch the package.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-openai
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "SKIP: node/npm are not installed (scripts/deps.sh test)"; exit 77; }
model=$shared/models/kjv-q8_0.gguf
[ -f "$model" ] || model=$src/models/kjv-q4_0.gguf
[ -f "$model" ] || { echo "SKIP: neither ../shared/models/kjv-q8_0.gguf nor models/kjv-q4_0.gguf"; exit 77; }
# the package lives in the build directory (ctest's working directory), fetched once
npmdir=$PWD/openai-npm
if [ ! -f "$npmdir/node_modules/openai/package.json" ]; then
  mkdir -p "$npmdir"
  if ! (cd "$npmdir" && timeout 300 npm install --no-audit --no-fund --silent openai@4 >"$tmp/npm.log" 2>&1); then
    echo "SKIP: npm could not install the openai package:"; tail -5 "$tmp/npm.log"; exit 77
  fi
fi
cp "$src/tests/serve_openai.mjs" "$npmdir/"
limit=60; [ -n "${KILN_SANITIZED:-}" ] && limit=300

"$kiln" serve -m "$model" --port 0 -np 4 -c 2048 --api-key secret 2>"$tmp/log" &
pid=$! port=
for _ in $(seq 300); do
  port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$tmp/log")
  grep -q "model loaded" "$tmp/log" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if check "server starts" grep -q "model loaded" "$tmp/log"; then
  check "openai client: completion and chat, streamed and not" \
    timeout $limit node "$npmdir/serve_openai.mjs" "http://127.0.0.1:$port/v1" "$(basename "$model")"
fi
kill -TERM $pid
wait $pid
check "SIGTERM: exit 0" test $? -eq 0
tu_finish test_serve_openai
