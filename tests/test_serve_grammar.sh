#!/usr/bin/env bash
# test_serve_grammar.sh - structured output in `kiln serve` (tests/serve_grammar.py):
# response_format, grammar and json_schema, batched and streamed, answers valid for
# their schemas, malformed and hostile grammars a 400 in time. Model:
# ../shared/models/kjv-q8_0.gguf, else models/kjv-q4_0.gguf.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-grammar
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
if check "server starts" srv_start "$tmp/g.log" -np 4 -c 4096; then
  check "structured output" timeout $((limit * 4)) python3 "$src/tests/serve_grammar.py" "$port"
  check "SIGTERM: exit 0" srv_stop "$tmp/g.log"
fi
tu_finish test_serve_grammar
