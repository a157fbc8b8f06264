#!/usr/bin/env python3
"""serve_chat.py - kiln serve's chats through a Jinja chat template (tests/data/jinja/chatml-tools.jinja,
given with --chat-template-file): tools and tool-call history rendered (/apply-template), tool_choice,
chat_template_kwargs reaching the template, thinking into reasoning_content (whole and streamed: the
same text), reasoning_format none, and malformed chat requests each a 400 naming the problem.
usage: serve_chat.py PORT MODE   (MODE: think = the server's defaults, budget = --reasoning-budget 4,
nojinja = --no-jinja)"""
import json
import sys
import urllib.error
import urllib.request

port, mode = sys.argv[1], sys.argv[2]
base = "http://127.0.0.1:%s" % port
fails = passes = 0


def check(what, cond, detail=""):
    global fails, passes
    if cond:
        passes += 1
    else:
        fails += 1
        print("FAIL: %s %s" % (what, str(detail)[:600]), file=sys.stderr)


def post(path, body, stream=False):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read().decode()
            if stream:
                return r.status, [json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: {")]
            return r.status, json.loads(data)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "{}")


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
HISTORY = [{"role": "system", "content": "Be brief."},
           {"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "call00001", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
           {"role": "tool", "tool_call_id": "call00001", "content": "18 C"},
           {"role": "user", "content": "And God said"}]
USER = [{"role": "user", "content": "And God said"}]


def err_has(status, body, want_status, words):
    msg = json.dumps(body)
    return status == want_status and all(w in msg for w in words)


if mode == "nojinja":
    s, b = post("/v1/chat/completions", {"messages": USER, "tools": TOOLS, "max_tokens": 4})
    check("--no-jinja: tools need a Jinja template: 400", err_has(s, b, 400, ["tools", "Jinja"]), (s, b))
    s, b = post("/v1/chat/completions", {"messages": HISTORY[:2] + [{"role": "tool", "content": "x"}], "max_tokens": 4})
    check("--no-jinja: a tool message is rendered by the native family (roles.c), not refused", s == 200, (s, b))
    s, b = post("/apply-template", {"messages": HISTORY[:2] + [{"role": "tool", "content": "TOOL_RESULT_7"}]})
    check("--no-jinja: the tool result is in the prompt", s == 200 and "TOOL_RESULT_7" in b.get("prompt", ""), (s, b))
    s, b = post("/v1/chat/completions", {"messages": USER, "max_tokens": 4, "temperature": 0})
    check("--no-jinja: a plain chat works", s == 200 and b["choices"][0]["message"]["content"], (s, b))
    print("serve_chat (nojinja): %d passed, %d failed" % (passes, fails))
    sys.exit(1 if fails else 0)

# ---- the prompt: tools, the call (arguments as an object for the template), the result, thinking opened
s, b = post("/apply-template", {"messages": HISTORY, "tools": TOOLS})
p = b.get("prompt", "")
check("apply-template: 200", s == 200, (s, b))
check("apply-template: the tool's schema in <tools>", '{"type": "function", "function": {"name": "get_weather", '
      '"description": "Weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": '
      '"string"}}, "required": ["city"]}}}' in p, p)
check("apply-template: the call, arguments as an object", '<tool_call>\n{"name": "get_weather", "arguments": '
      '{"city": "Paris"}}\n</tool_call>' in p, p)
check("apply-template: the tool's result", "<tool_response>\n18 C\n</tool_response>" in p, p)
check("apply-template: thinking opened", p.endswith("<|im_start|>assistant\n<think>\n"), p[-60:])
s, b = post("/apply-template", {"messages": USER, "chat_template_kwargs": {"enable_thinking": False}})
check("chat_template_kwargs: enable_thinking false reaches the template",
      s == 200 and b["prompt"].endswith("<think>\n\n</think>\n\n"), (s, b))
s, b = post("/apply-template", {"messages": USER, "add_generation_prompt": False})
check("add_generation_prompt false", s == 200 and b["prompt"] == "<|im_start|>user\nAnd God said<|im_end|>\n", (s, b))
s, b = post("/apply-template", {"messages": [{"role": "developer", "content": "D"}] + USER})
check("a developer message is a system message", s == 200 and b["prompt"].startswith("<|im_start|>system\nD<|im_end|>"),
      (s, b))

# ---- errors: each a 400 naming the problem (the template's own raise_exception names its line)
bad = [
    ({"messages": USER + [{"role": "system", "content": "late"}]}, ["template line", "Only the first message"]),
    ({"messages": USER, "tools": {"not": "a list"}}, ["tools"]),
    ({"messages": USER, "tools": [{"type": "function", "function": {}}]}, ["tools'[0]"]),
    ({"messages": USER, "tool_choice": "sometimes"}, ["tool_choice"]),
    ({"messages": USER, "chat_template_kwargs": [1]}, ["chat_template_kwargs"]),
    ({"messages": USER, "chat_template_kwargs": {"enable_thinking": "no"}}, ["enable_thinking"]),
    ({"messages": USER, "parallel_tool_calls": "yes"}, ["parallel_tool_calls"]),
    ({"messages": USER, "reasoning_format": "maybe"}, ["reasoning_format"]),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function":
                   {"name": "f", "arguments": "{not json"}}]}]}, ["messages'[0].tool_calls[0]", "arguments"]),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, ["only an assistant"]),
    ({"messages": [{"role": "wizard", "content": "x"}]}, ["wizard"]),
    ({"messages": [{"role": "user"}]}, ["content"]),
    ({"messages": [{"role": "tool", "content": "x", "tool_call_id": 5}]}, ["tool_call_id"]),
    ({"messages": USER, "functions": [{"name": "f"}]}, ["functions"]),
]
for body, words in bad:
    s, b = post("/v1/chat/completions", dict(body, max_tokens=4))
    check("400 for %s" % json.dumps(body)[:120], err_has(s, b, 400, words), (s, b))
s, b = post("/v1/chat/completions", {"messages": USER, "tools": TOOLS, "tool_choice": "required", "max_tokens": 4})
check("tool_choice required (no grammar yet): 400 saying so", err_has(s, b, 400, ["tool_choice", "grammar"]), (s, b))

# ---- generation: thinking into reasoning_content, the same whole and streamed
req = {"messages": HISTORY, "tools": TOOLS, "max_tokens": 24, "temperature": 0}
s, b = post("/v1/chat/completions", req)
check("chat with tools: 200", s == 200, (s, b))
msg = b["choices"][0]["message"] if s == 200 else {}
s2, events = post("/v1/chat/completions", dict(req, stream=True), stream=True)
deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
streamed_r = "".join(d.get("reasoning_content") or "" for d in deltas)
streamed_c = "".join(d.get("content") or "" for d in deltas)
finish = [e["choices"][0]["finish_reason"] for e in events if e.get("choices") and e["choices"][0]["finish_reason"]]
check("streamed: one role, first", deltas and deltas[0].get("role") == "assistant" and
      sum(1 for d in deltas if "role" in d) == 1, deltas[:2])
check("streamed reasoning = whole reasoning", streamed_r == (msg.get("reasoning_content") or ""),
      [streamed_r, msg.get("reasoning_content")])
check("streamed content = whole content", streamed_c == (msg.get("content") or ""), [streamed_c, msg.get("content")])
check("streamed finish_reason = whole", finish == [b["choices"][0]["finish_reason"]] if s == 200 else False, finish)
if mode == "think":
    check("thinking: the whole reply is reasoning (the model never closes the block)",
          msg.get("reasoning_content") and msg.get("content") == "", msg)
    s, b = post("/v1/chat/completions", dict(req, reasoning_format="none"))
    m = b["choices"][0]["message"] if s == 200 else {}
    check("reasoning_format none: thinking stays in the content", s == 200 and m["content"].startswith("<think>\n")
          and "reasoning_content" not in m, (s, b))
    s, b = post("/v1/chat/completions", dict(req, chat_template_kwargs={"enable_thinking": False}))
    m = b["choices"][0]["message"] if s == 200 else {}
    check("enable_thinking false: a reply without reasoning", s == 200 and m.get("content") and
          "reasoning_content" not in m, (s, b))
elif mode == "budget":
    r = msg.get("reasoning_content") or ""
    check("--reasoning-budget 4: thinking is cut short and the reply goes on as content",
          r and msg.get("content") and len(r.split()) <= 6, msg)
print("serve_chat (%s): %d passed, %d failed" % (mode, passes, fails))
sys.exit(1 if fails else 0)
