#!/usr/bin/env bash
# test_serve_responses.sh - the official `openai` npm package's Responses API (scripts/deps.sh test
# installs it into tests/node) against `kiln serve`'s POST /v1/responses through a Jinja chat template
# that knows tools (tests/serve_responses.mjs). SKIPs when node or the package is missing.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-responses
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
. "$src/tests/serve_lib.sh"
npm_modules=$src/tests/node/node_modules
[ -f "$npm_modules/openai/package.json" ] ||
  { echo "SKIP: the openai npm package is not installed (scripts/deps.sh test installs it)"; exit 77; }
npmdir=$tmp/node
mkdir -p "$npmdir"
ln -s "$npm_modules" "$npmdir/node_modules" # node resolves the import beside the script
cp "$src/tests/serve_responses.mjs" "$npmdir/"

if check "server starts" srv_start "$tmp/log" -c 2048 --api-key secret \
  --chat-template-file "$src/tests/data/jinja/chatml-tools.jinja" --reasoning off; then
  check "openai client: responses, streamed and not, function call items, refusals" \
    timeout $limit node "$npmdir/serve_responses.mjs" "http://127.0.0.1:$port/v1"
  check "SIGTERM: exit 0" srv_stop "$tmp/log"
fi
tu_finish test_serve_responses
