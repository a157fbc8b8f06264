#!/usr/bin/env bash
# test_serve_anthropic.sh - the official `@anthropic-ai/sdk` npm package (scripts/deps.sh test
# installs it into tests/node) against `kiln serve`'s Messages API (/v1/messages and
# /v1/messages/count_tokens) through a Jinja chat template that knows tools and thinking
# (tests/serve_anthropic.mjs). SKIPs when node or the package is missing.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-anthropic
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
. "$src/tests/serve_lib.sh"
npm_modules=$src/tests/node/node_modules
[ -f "$npm_modules/@anthropic-ai/sdk/package.json" ] ||
  { echo "SKIP: the @anthropic-ai/sdk npm package is not installed (scripts/deps.sh test installs it)"; exit 77; }
npmdir=$tmp/node
mkdir -p "$npmdir"
ln -s "$npm_modules" "$npmdir/node_modules" # node resolves the import beside the script
cp "$src/tests/serve_anthropic.mjs" "$npmdir/"

if check "server starts" srv_start "$tmp/log" -c 2048 --api-key secret \
  --chat-template-file "$src/tests/data/jinja/chatml-tools.jinja"; then
  check "anthropic client: messages, stream, stop sequences, thinking, count_tokens, tool results" \
    timeout $limit node "$npmdir/serve_anthropic.mjs" "http://127.0.0.1:$port"
  check "SIGTERM: exit 0" srv_stop "$tmp/log"
fi
tu_finish test_serve_anthropic
