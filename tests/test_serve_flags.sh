#!/usr/bin/env bash
# test_serve_flags.sh - llama-server's flags that kiln serve takes with llama-server's meaning:
# --temp/--seed/... as the sampling of requests that set none (the same seed, the same text; /props
# tells them), --alias/--tags (/v1/models' id, aliases, tags), --metrics (off: 501), --no-slots (501);
# flags it cannot honour refused by name; and llama-server's shapes (context overflow, cached tokens,
# a stream's first chunk, CORS preflight, /metrics' start time).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-flags
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
. "$src/tests/serve_lib.sh"
command -v curl >/dev/null || { echo "SKIP: curl is not installed (scripts/deps.sh test)"; exit 77; }

check "--no-cont-batching: refused by name" exit_is 2 "$kiln" serve -m "$model" --no-cont-batching
check "  names it" err_has "--no-cont-batching"
check "--grammar: per request, not per server" exit_is 2 "$kiln" serve -m "$model" --grammar 'root ::= "a"'
check "  says so" err_has "per request"
check "--temp -1: refused" exit_is 2 "$kiln" serve -m "$model" --temp -1
check "--alias ',': no name" exit_is 2 "$kiln" serve -m "$model" --alias ,
check "an unknown flag: refused by name" exit_is 2 "$kiln" serve -m "$model" --kv-unifed
check "  names it" err_has "--kv-unifed"

get() { curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$port$1" "${@:2}"; }
json() { python3 -c "import json,sys; d=json.load(open('$tmp/body')); sys.exit(0 if ($1) else 1)" || { cat "$tmp/body" >&2; return 1; }; }
gen='{"prompt": "In the beginning", "n_predict": 12}'

# srv_start passes --metrics; this one is started without it (as llama-server's default)
"$kiln" serve -m "$model" --port 0 -np 2 -c 512 --seed 42 --temp 1.5 --top-k 0 --no-slots \
  --alias "kjv,bible, scripture" --tags "small,test" -cb --offline --no-ui 2>"$tmp/a.log" &
pid=$!
for _ in $(seq 300); do grep -q "model loaded" "$tmp/a.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$tmp/a.log")
if check "server with llama-server's flags starts" grep -q "model loaded" "$tmp/a.log"; then
  check "/metrics without --metrics: 501" test "$(get /metrics)" = 501
  check "  not_supported_error" json 'd["error"]["type"] == "not_supported_error"'
  check "/slots with --no-slots: 501" test "$(get /slots)" = 501
  check "/v1/models: id is the first alias in byte order" test "$(get /v1/models)" = 200
  check "  aliases and tags, sorted" json 'd["data"][0]["id"] == "bible" and d["data"][0]["aliases"] == ["bible", "kjv", "scripture"] and d["data"][0]["tags"] == ["small", "test"]'
  check "/props: the server's sampling defaults" test "$(get /props)" = 200
  check "  seed 42, temperature 1.5, top_k 0" json 'd["default_generation_settings"]["params"]["seed"] == 42 and abs(d["default_generation_settings"]["params"]["temperature"] - 1.5) < 1e-6 and d["default_generation_settings"]["params"]["top_k"] == 0 and d["model_alias"] == "bible" and d["endpoint_metrics"] is False'
  # temperature 1.5 without top-k: two requests without a seed draw the same text (the server's seed);
  # one with its own seed draws another
  get /completion -d "$gen" >/dev/null; cp "$tmp/body" "$tmp/one"
  get /completion -d "$gen" >/dev/null; cp "$tmp/body" "$tmp/two"
  get /completion -d '{"prompt": "In the beginning", "n_predict": 12, "seed": 7}' >/dev/null; cp "$tmp/body" "$tmp/other"
  same() { python3 -c "import json,sys; a,b=(json.load(open(f))['content'] for f in sys.argv[1:3]); sys.exit(0 if (a == b) == (sys.argv[3] == 'same') else 1)" "$@"; }
  check "--seed: requests without a seed draw the same text" same "$tmp/one" "$tmp/two" same
  check "a request's seed overrides it" same "$tmp/one" "$tmp/other" differ
  check "answers name the model by its id" json 'd["model"] == "bible"'
  kill -TERM $pid; wait $pid
  check "SIGTERM: exit 0" test $? -eq 0
fi

if check "server with --metrics starts" srv_start "$tmp/b.log" -c 512; then
  check "/metrics with --metrics: 200" test "$(get /metrics)" = 200
  check "/slots by default: 200" test "$(get /slots)" = 200
  check "/v1/models without --alias: the file name, no aliases" test "$(get /v1/models)" = 200
  check "  id, aliases, tags" json "d['data'][0]['id'] == '$(basename "$model")' and d['data'][0]['aliases'] == [] and d['data'][0]['tags'] == []"
  # llama-server's shapes
  check "/metrics: Process-Start-Time-Unix" sh -c "curl -s -D - -o /dev/null http://127.0.0.1:$port/metrics | grep -qi '^Process-Start-Time-Unix: [0-9]'"
  long=$(python3 -c "print('In the beginning God created the heaven and the earth. ' * 60)")
  check "a prompt over the slot's context: 400" test "$(get /v1/chat/completions -d "{\"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}")" = 400
  check "  exceed_context_size_error, n_prompt_tokens, n_ctx" json 'd["error"]["type"] == "exceed_context_size_error" and d["error"]["n_prompt_tokens"] > 512 and d["error"]["n_ctx"] == 512'
  chat='{"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 4}'
  get /v1/chat/completions -d "$chat" >/dev/null
  check "a repeated chat: cached_tokens" test "$(get /v1/chat/completions -d "$chat")" = 200
  check "  usage.prompt_tokens_details.cached_tokens" json 'd["usage"]["prompt_tokens_details"]["cached_tokens"] > 0 and d["usage"]["prompt_tokens_details"]["cached_tokens"] < d["usage"]["prompt_tokens"]'
  curl -sN "http://127.0.0.1:$port/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": true}' >"$tmp/sse"
  check "a chat stream opens with the role alone, content null" python3 -c "
import json, sys
ev = [json.loads(l[6:]) for l in open('$tmp/sse') if l.startswith('data: {')]
d0 = ev[0]['choices'][0]['delta']
sys.exit(0 if d0 == {'role': 'assistant', 'content': None} and all('role' not in e['choices'][0]['delta'] for e in ev[1:]) and any(e['choices'][0]['delta'].get('content') for e in ev[1:]) else 1)"
  check "CORS preflight: 200, credentials, llama-server's methods" sh -c "curl -s -D - -o /dev/null -X OPTIONS -H 'Origin: http://a.example' -H 'Access-Control-Request-Method: POST' http://127.0.0.1:$port/completions | tr -d '\r' >'$tmp/pre' && grep -q '^HTTP/1.1 200' '$tmp/pre' && grep -q '^Access-Control-Allow-Credentials: true' '$tmp/pre' && grep -q '^Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS' '$tmp/pre' && grep -q '^Access-Control-Allow-Origin: http://a.example' '$tmp/pre'"
  check "/v1/messages with thinking on a native template (no thinking switch): 200" test "$(get /v1/messages -d '{"model": "m", "max_tokens": 4, "thinking": {"type": "enabled", "budget_tokens": 8}, "messages": [{"role": "user", "content": "Hi"}]}')" = 200
  native='{"prompt": "In the beginning", "n_predict": 3, "ignore_eos": true, "return_tokens": true}'
  check "POST /completions answers in /completion's native form" test "$(get /completions -d "$native")" = 200
  check "  content, index, tokens, prompt, has_new_line, generation_settings" json 'isinstance(d["content"], str) and d["index"] == 0 and len(d["tokens"]) == 3 and all(isinstance(x, int) for x in d["tokens"]) and d["prompt"].endswith("In the beginning") and isinstance(d["has_new_line"], bool) and d["generation_settings"]["n_predict"] == 3 and d["generation_settings"]["ignore_eos"] is True and len(d["generation_settings"]["logit_bias"]) >= 1 and all(b["bias"] is None for b in d["generation_settings"]["logit_bias"])'
  get /completion -d '{"prompt": "In the beginning", "n_predict": 2}' >/dev/null
  check "without return_tokens: tokens empty, no bans" json 'd["tokens"] == [] and d["generation_settings"]["logit_bias"] == []'
  curl -sN "http://127.0.0.1:$port/completion" -d '{"prompt": "In the beginning", "n_predict": 3, "stream": true}' >"$tmp/nsse"
  check "a /completion stream: each chunk's token ids" python3 -c "
import json, sys
ev = [json.loads(l[6:]) for l in open('$tmp/nsse') if l.startswith('data: {')]
part = [e for e in ev if not e['stop']]
sys.exit(0 if len(part) == 3 and all(len(e['tokens']) == 1 for e in part) and ev[-1]['stop'] and 'generation_settings' in ev[-1] else 1)"
  check "SIGTERM: exit 0" srv_stop "$tmp/b.log"
fi
tu_finish test_serve_flags
