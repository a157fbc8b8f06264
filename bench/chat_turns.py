#!/usr/bin/env python3
"""Time to first token of a chat's first and second turn against a running kiln serve (or llama-server).

usage: chat_turns.py PORT
Turn 1: a ~2000-token system prompt and a question; turn 2: the same history, the reply and a new
question. Prints both times, the prompt tokens each evaluated (timings) and their ratio. Loopback only."""
import json, sys, time, urllib.request
port = sys.argv[1]
def ttft(messages):
    body = json.dumps({"messages": messages, "max_tokens": 16, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % port, body, {"Content-Type": "application/json"})
    t0 = time.time(); first = None; text = ""; timings = None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]": continue
            j = json.loads(line[6:])
            if j.get("timings"): timings = j["timings"]
            c = (j.get("choices") or [{}])[0].get("delta", {}).get("content")
            if c:
                first = first or time.time() - t0
                text += c
    return first, text, timings
hist = " ".join("And on the %d day the LORD spake unto Moses, saying, Speak unto the children of Israel." % i for i in range(50))
m = [{"role": "system", "content": hist}, {"role": "user", "content": "What did the LORD say?"}]
t1, reply, tm1 = ttft(m)
m += [{"role": "assistant", "content": reply}, {"role": "user", "content": "And what did Moses answer?"}]
t2, _, tm2 = ttft(m)
print(json.dumps({"turn1_ttft_s": round(t1, 3), "turn1_prompt_n": tm1.get("prompt_n"), "turn2_ttft_s": round(t2, 3),
                  "turn2_prompt_n": tm2.get("prompt_n"), "turn2_cache_n": tm2.get("cache_n"), "ratio": round(t2 / t1, 3)}))
