#!/usr/bin/env bash
# test_serve_openai.sh - the official `openai` npm package (scripts/deps.sh test
# installs it into tests/node) against `kiln serve`: completion and chat,
# streamed and not (tests/serve_openai.mjs), and tool calls (required, named, auto,
# none) through a Jinja chat template (tests/serve_openai_tools.mjs).
# SKIPs when node or the package is missing.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-openai
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "SKIP: node/npm are not installed (scripts/deps.sh test)"; exit 77; }
model=$shared/models/kjv-q8_0.gguf
[ -f "$model" ] || model=$src/models/kjv-q4_0.gguf
[ -f "$model" ] || { echo "SKIP: neither ../shared/models/kjv-q8_0.gguf nor models/kjv-q4_0.gguf"; exit 77; }
# the package comes from scripts/deps.sh test (tests/node/node_modules); the script runs
# beside a link to it so that node resolves the import
npm_modules=$src/tests/node/node_modules
[ -f "$npm_modules/openai/package.json" ] ||
  { echo "SKIP: the openai npm package is not installed (scripts/deps.sh test installs it)"; exit 77; }
npmdir=$tmp/node
mkdir -p "$npmdir"
ln -s "$npm_modules" "$npmdir/node_modules"
cp "$src/tests/serve_openai.mjs" "$npmdir/"
limit=60; [ -n "${KILN_SANITIZED:-}" ] && limit=300

"$kiln" serve -m "$model" --port 0 -np 4 -c 2048 --api-key secret 2>"$tmp/log" &
pid=$! port=
for _ in $(seq 300); do
  grep -q "model loaded" "$tmp/log" && break # after "listening on": the port is in the log by now
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$tmp/log")
if check "server starts" grep -q "model loaded" "$tmp/log"; then
  check "openai client: completion and chat, streamed and not" \
    timeout $limit node "$npmdir/serve_openai.mjs" "http://127.0.0.1:$port/v1" "$(basename "$model")"
fi
kill -TERM $pid
wait $pid
check "SIGTERM: exit 0" test $? -eq 0

# tool calls with tool_choice "required" (two tools, streamed and not), through a Jinja chat template
cp "$src/tests/serve_openai_tools.mjs" "$npmdir/"
"$kiln" serve -m "$model" --port 0 -c 2048 --api-key secret --chat-template-file "$src/tests/data/jinja/chatml-tools.jinja" \
  2>"$tmp/log2" &
pid=$! port=
for _ in $(seq 300); do
  port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$tmp/log2")
  grep -q "model loaded" "$tmp/log2" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if check "server with a chat template starts" grep -q "model loaded" "$tmp/log2"; then
  check "openai client: tool calls (required, named, auto, none), streamed and not" \
    timeout $limit node "$npmdir/serve_openai_tools.mjs" "http://127.0.0.1:$port/v1" "$(basename "$model")"
fi
kill -TERM $pid
wait $pid
check "SIGTERM: exit 0" test $? -eq 0
tu_finish test_serve_openai
