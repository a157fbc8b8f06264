#!/usr/bin/env bash
# test_serve_fields.sh - no request field is silently ignored (tests/serve_fields.py):
# kiln serve against the request fields OpenAI's npm client and llama-server's
# source define. SKIP (77) when those definitions are absent, after the rest passed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-fields
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
openai=$src/tests/node/node_modules/openai
[ -f "$openai/package.json" ] || openai=-
peer_src=${PEER_DIR:-}
[ -z "$peer_src" ] && [ -n "${KILN_PEER:-}" ] && peer_src=$(dirname "$KILN_PEER")
[ -z "$peer_src" ] && peer_src=/tmp/kiln-peer
llama=$peer_src/src/tools/server
[ -f "$llama/server-schema.cpp" ] || llama=-

check "server starts" srv_start "$tmp/log" -np 2 -c 1024 || { tu_finish test_serve_fields; exit 1; }
timeout $limit python3 "$src/tests/serve_fields.py" "$port" "$openai" "$llama"
rc=$?
check "SIGTERM: exit 0" srv_stop "$tmp/log"
if [ $rc -eq 77 ] && [ $fails -eq 0 ]; then exit 77; fi
check "request fields" test $rc -eq 0
tu_finish test_serve_fields
