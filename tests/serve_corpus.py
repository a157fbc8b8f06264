# serve_corpus.py - request bodies with the answer each must get: the parsing
# cases of tests/serve_hostile.py, and the seeds of the request fuzzer
# (tests/fuzz/serve_seeds.py writes them to tests/data/serve-corpus).
# Each case: (route, body bytes, status, a word the error message holds).
import json

ROUTES = {"cmpl": "/v1/completions", "chat": "/v1/chat/completions", "llama": "/completion",
          "tok": "/tokenize", "detok": "/detokenize", "tmpl": "/apply-template"}
FUZZ_SELECTOR = {"cmpl": 0, "chat": 1, "llama": 2, "tok": 3, "detok": 4, "tmpl": 5}  # fuzz_serve.c's order

U = [{"role": "user", "content": "Who made the light?"}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Ur\"}"}}


def j(o):
    return json.dumps(o).encode()


CASES = [
    # duplicate keys: Python and JavaScript keep the last, cJSON the first; neither is guessed
    ("cmpl", b'{"prompt": "a", "prompt": "b", "max_tokens": 1}', 400, "twice"),
    ("chat", b'{"messages": [{"role": "user", "content": "a", "content": "b"}]}', 400, "twice"),
    ("cmpl", b'{"prompt": "a", "stream_options": {"include_usage": true, "include_usage": false}}', 400, "twice"),
    ("tok", b'{"content": "a", "add_special": true, "add_special": false}', 400, "twice"),
    # NUL and raw control characters in strings (keys too)
    ("cmpl", b'{"prompt": "In the \\u0000beginning", "max_tokens": 1}', 400, "NUL"),
    ("chat", b'{"messages": [{"role": "user", "content": "x\\u0000y"}]}', 400, "NUL"),
    ("tok", b'{"content": "\\u0000"}', 400, "NUL"),
    ("cmpl", b'{"prompt": "x", "stop": ["a\\u0000"]}', 400, "NUL"),
    ("cmpl", b'{"pro\\u0000mpt": "x"}', 400, "NUL"),
    ("cmpl", b'{"prompt": "a\x01b"}', 400, "control character"),
    ("cmpl", b'{"prompt": "a\tb", "max_tokens": 1}', 400, "control character"),
    # an escaped backslash before u0000 is the text \u0000, not NUL
    ("cmpl", b'{"prompt": "a\\\\u0000b", "max_tokens": 1}', 200, ""),
    # string limits
    ("cmpl", j({"prompt": "x", "stop": "s" * 257}), 400, "'stop'"),
    ("cmpl", j({"prompt": "x", "stop": ["s" * 257]}), 400, "'stop'"),
    ("cmpl", j({"prompt": "x", "max_tokens": 1, "stop": "s" * 256}), 200, ""),
    ("cmpl", j({"prompt": "x", "model": "m" * 257}), 400, "'model'"),
    ("chat", j({"messages": [{"role": "tool", "name": "n" * 65, "content": "r"}]}), 400, "name"),
    ("chat", j({"messages": [{"role": "tool", "tool_call_id": "c" * 257, "content": "r"}]}), 400, "tool_call_id"),
    ("chat", j({"messages": [{"role": "user", "content": "x", "name": "bob"}]}), 400, "'name'"),
    ("chat", j({"messages": [{"role": "user", "content": "x", "tool_calls": [CALL]}]}), 400, "'tool_calls'"),
    ("cmpl", j({"prompt": "In the beginning " * 2000}), 400, "context"),
    ("tok", j({"content": "In the beginning " * 2000}), 400, "context"),
    # roles apps send: accepted
    ("chat", j({"messages": [{"role": "developer", "content": "Be brief."}] + U, "max_tokens": 1}), 200, ""),
    ("chat", j({"messages": U + [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                                 {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
                "max_tokens": 1}), 200, ""),
    ("chat", j({"messages": U + [{"role": "assistant", "content": None,
                                  "function_call": {"name": "f", "arguments": "{}"}},
                                 {"role": "function", "name": "f", "content": "42"}], "max_tokens": 1}), 200, ""),
    ("tmpl", j({"messages": U + [{"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, CALL]},
                                 {"role": "tool", "content": [{"type": "text", "text": "sunny"}]}]}), 200, ""),
    # tool calls that are not
    ("chat", j({"messages": U + [{"role": "assistant", "content": None}]}), 400, "content"),
    ("chat", j({"messages": U + [{"role": "assistant", "tool_calls": {"id": "x"}}]}), 400, "tool_calls"),
    ("chat", j({"messages": U + [{"role": "assistant", "tool_calls": [dict(CALL, type="code")]}]}), 400, "type"),
    ("chat", j({"messages": U + [{"role": "assistant", "tool_calls": [
        dict(CALL, function={"name": "get weather", "arguments": "{}"})]}]}), 400, "name"),
    ("chat", j({"messages": U + [{"role": "assistant", "tool_calls": [
        dict(CALL, function={"name": "f", "arguments": "{not json"})]}]}), 400, "arguments"),
    ("chat", j({"messages": U + [{"role": "assistant", "tool_calls": [dict(CALL, extra=1)]}]}), 400, "extra"),
    ("chat", j({"messages": [{"role": "wizard", "content": "x"}]}), 400, "role"),
    ("chat", j({"messages": [{"role": "tool", "content": "r", "tool_calls": [CALL]}]}), 400, "'tool_calls'"),
    # the rest of the shapes the fuzzer should start from
    ("llama", j({"prompt": [1, 2, 3], "n_predict": 1, "n_probs": 2}), 200, ""),
    ("llama", j({"prompt": ["a", [1, 2]], "n_predict": 1}), 200, ""),
    ("cmpl", j({"prompt": "x", "max_tokens": 1, "logit_bias": {"5": -100}, "logprobs": 2, "stop": ["\n"]}), 200, ""),
    ("detok", j({"tokens": [1, 2, 3]}), 200, ""),
    ("detok", j({"tokens": [99999999]}), 400, "tokens"),
    ("tok", j({"content": "In the beginning", "with_pieces": True}), 200, ""),
]
