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
mods=$(cd "$src/tests/node" && pwd)/node_modules
if command -v node >/dev/null && [ -f "$mods/ajv/package.json" ]; then
  check "ajv: every call's arguments valid for its tool's schema" node "$src/tests/grammar_validate.mjs" "$tmp/calls.jsonl" "$mods"
else
  skip_part "node or ajv is absent (scripts/deps.sh test): the arguments were checked here only"
fi
tu_finish test_serve_tools
