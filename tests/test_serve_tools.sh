#!/usr/bin/env bash
# test_serve_tools.sh - tool_choice "required" and named functions held by the grammar engine
# (tests/serve_tools.py) on the KJV model, which never writes a call by itself: with kiln's
# Hermes-style test template, then once per call format with the peer's templates
# ($PEER_DIR/src/models/templates: Qwen3-Coder XML, Llama 3.1 JSON, Mistral [TOOL_CALLS] in
# both forms, gpt-oss harmony, DeepSeek R1 and V3.1, and a template with no call markup:
# generic JSON), skipped visibly when that source is absent. Every call's arguments are then
# validated against its tool's schema by ajv (tests/grammar_validate.mjs) where node has it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-tools
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
peer_tmpl=${PEER_DIR:-/tmp/kiln-peer}/src/models/templates
runs=("all:$src/tests/data/jinja/chatml-tools.jinja")
for t in Qwen3-Coder meta-llama-Llama-3.1-8B-Instruct mistralai-Mistral-Nemo-Instruct-2407 \
         mistralai-Ministral-3-14B-Reasoning-2512 openai-gpt-oss-120b deepseek-ai-DeepSeek-R1-Distill-Qwen-32B \
         deepseek-ai-DeepSeek-V3.1 google-gemma-2-2b-it; do
  if [ -f "$peer_tmpl/$t.jinja" ]; then runs+=("$t:$peer_tmpl/$t.jinja")
  else skip_part "$peer_tmpl/$t.jinja is absent (the peer's source)"; fi
done
for run in "${runs[@]}"; do
  mode=${run%%:*} file=${run#*:}
  if check "server starts ($mode)" srv_start "$tmp/log" -c 2048 --chat-template-file "$file"; then
    check "tool calls held by the grammar ($mode)" timeout $((limit * 2)) python3 "$src/tests/serve_tools.py" "$port" "$mode" "$tmp/calls.jsonl"
    check "SIGTERM ($mode): exit 0" srv_stop "$tmp/log"
  fi
done
# kiln chat --tools --tool-choice: the same grammar, a call printed as a JSON line
python3 - "$tmp/tools.json" <<'PY'
import json, sys
json.dump([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20}}, "required": ["city"], "additionalProperties": False}}},
           {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
    "book": {"type": "string", "enum": ["Genesis", "Exodus"]}}, "required": ["book"], "additionalProperties": False}}}],
          open(sys.argv[1], "w"))
PY
tmpl=$src/tests/data/jinja/chatml-tools.jinja
for choice in required search; do
  check "kiln chat --tool-choice $choice" exit_is 0 sh -c "echo 'What is the weather in Jerusalem?' | '$kiln' chat -m '$model' -n 300 --seed 1 --tools '$tmp/tools.json' --tool-choice $choice --chat-template-file '$tmpl'"
  check "... prints one call as JSON, valid for its tool" python3 -c '
import json, sys
want = sys.argv[2]
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
calls = json.loads(line)["tool_calls"]
assert len(calls) == 1, calls
f = calls[0]["function"]; a = json.loads(f["arguments"])
if f["name"] == "get_weather":
    assert want == "required" and set(a) == {"city"} and isinstance(a["city"], str) and len(a["city"]) <= 20, f
else:
    assert f["name"] == "search" and a in ({"book": "Genesis"}, {"book": "Exodus"}), f
' "$tmp/out" "$choice"
done
check "kiln chat --tool-choice without --tools: exit 2" exit_is 2 sh -c "echo hi | '$kiln' chat -m '$model' --tool-choice required"
check "kiln chat --tool-choice naming no tool: exit 1" exit_is 1 sh -c "echo hi | '$kiln' chat -m '$model' --tools '$tmp/tools.json' --tool-choice fly --chat-template-file '$tmpl'"
check "... naming it" err_has "'fly'"
check "kiln chat --tool-choice required with a grammar: exit 2" exit_is 2 sh -c "echo hi | '$kiln' chat -m '$model' --tools '$tmp/tools.json' --tool-choice required --grammar 'root ::= \"a\"' --chat-template-file '$tmpl'"
mods=$(cd "$src/tests/node" && pwd)/node_modules
if command -v node >/dev/null && [ -f "$mods/ajv/package.json" ]; then
  check "ajv: every call's arguments valid for its tool's schema" node "$src/tests/grammar_validate.mjs" "$tmp/calls.jsonl" "$mods"
else
  skip_part "node or ajv is absent (scripts/deps.sh test): the arguments were checked here only"
fi
tu_finish test_serve_tools
