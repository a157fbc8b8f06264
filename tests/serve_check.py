# serve_check.py - drives a running `kiln serve` (test_serve.sh starts it) over
# loopback: every route, llama.cpp's greedy tokens, 16 concurrent requests equal
# to their sequential answers, a chat's second turn reusing the cache, client
# disconnects, and a corpus of malformed requests each with its status.
# usage: serve_check.py PORT MODE [KILN MODEL REFDIR]   (MODE: main | auth)
import http.client, json, os, socket, struct, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import request  # noqa: E402

port = int(sys.argv[1])
mode = sys.argv[2]
fails = passes = 0


def check(what, cond, detail=""):
    global fails, passes
    if cond:
        passes += 1
    else:
        fails += 1
        print("FAIL: %s %s" % (what, detail), file=sys.stderr)


def req(method, path, body=None, headers=None, timeout=60):
    return request(port, method, path, body, headers, timeout)


def post(path, body, **kw):
    return req("POST", path, body, {"Content-Type": "application/json"}, **kw)


def sse(path, body):
    """The data: events of a streamed response, parsed (the [DONE] marker as the string)."""
    st, _, _, data = post(path, body)
    events = []
    for block in data.decode().split("\n\n"):
        if block.startswith("data: "):
            p = block[6:]
            events.append(p if p == "[DONE]" else json.loads(p))
    return st, events


def is_error(j, status):
    e = (j or {}).get("error") or {}
    return isinstance(e.get("message"), str) and isinstance(e.get("type"), str) and e.get("code") == status


def wait_idle(seconds, headers=None):
    end = time.time() + seconds
    while time.time() < end:
        st, _, j, _ = req("GET", "/slots", headers=headers)
        if st == 200 and not any(s["is_processing"] for s in j):
            return True
        time.sleep(0.05)
    return False


def metrics(headers=None):
    st, _, _, raw = req("GET", "/metrics", headers=headers)
    out = {}
    for line in raw.decode().splitlines():
        if line.startswith("llamacpp:"):  # llama-server's names; kiln's own series are test_serve_metrics'
            k, v = line.split()
            out[k.split(":", 1)[1]] = float(v)
    return out


def wait_metric(name, value, headers=None, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        if metrics(headers).get(name) == value:
            return True
        time.sleep(0.02)
    return False


# ------------------------------------------------------------------ auth / queue server
if mode == "auth":
    st, _, j, _ = req("GET", "/health")
    check("health needs no key", st == 200, st)
    for hdr in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "secret"}):
        st, _, j, _ = req("GET", "/v1/models", headers=hdr)
        check("401 without the key %s" % hdr, st == 401 and is_error(j, 401), (st, j))
    st, _, j, _ = req("GET", "/v1/models", headers={"Authorization": "Bearer secret"})
    check("200 with the key", st == 200, st)
    # queue full: one slot busy, one request queued, the next is refused with Retry-After
    auth = {"Authorization": "Bearer secret", "Content-Type": "application/json"}
    socks = []
    for i, what in enumerate(("requests_processing", "requests_deferred")):
        s = socket.create_connection(("127.0.0.1", port))
        b = json.dumps({"prompt": "And God said %d" % i, "max_tokens": 4000, "stream": True, "ignore_eos": True})
        s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b)).encode())
        socks.append(s)
        check("the %s request is %s" % ("first" if i == 0 else "second", what),
              wait_metric(what, 1, {"Authorization": "Bearer secret"}))
    st, h, j, _ = req("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check("503 when the queue is full", st == 503 and is_error(j, 503), (st, j))
    check("503 says Retry-After", "Retry-After" in h, h)
    for s in socks:
        s.close()
    check("both cancelled after their clients left", wait_metric("requests_processing", 0, auth) and
          wait_metric("requests_deferred", 0, auth))
    st, _, j, _ = req("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check("answers after the queue drained", st == 200, (st, j))
    # clients that leave: 4000 tokens take seconds; a cancelled request frees its slot within a step.
    # A stream notices at its next write; a whole-body request at the peer's reset (a FIN alone
    # is a half-close, answered: test_serve_hostile), so the client resets (SO_LINGER 0).
    for stream in (True, False):
        s = socket.create_connection(("127.0.0.1", port))
        if not stream:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b = json.dumps({"prompt": "And God said", "max_tokens": 4000, "stream": stream, "ignore_eos": True})
        s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b)).encode())
        got = s.recv(300) if stream else b""
        end = time.time() + 5  # the decode thread takes it up (seconds on a loaded machine)
        while time.time() < end:
            st, _, j, _ = req("GET", "/slots", headers=auth)
            if any(x["is_processing"] for x in j):
                break
            time.sleep(0.02)
        check("a long request (stream=%s) is running" % stream, any(x["is_processing"] for x in j), (j, got))
        s.close()
        t0 = time.time()
        check("a client that leaves (stream=%s) frees its slot" % stream, wait_idle(1, auth), time.time() - t0)
    print("serve_check auth: %d passed, %d failed" % (passes, fails))
    sys.exit(1 if fails else 0)

kiln, model, refdir = sys.argv[3], sys.argv[4], sys.argv[5]

# ------------------------------------------------------------------ simple routes
st, _, j, _ = req("GET", "/health")
check("GET /health", st == 200 and j == {"status": "ok"}, (st, j))
st, _, j, _ = req("GET", "/v1/models")
check("GET /v1/models", st == 200 and j["object"] == "list" and j["data"][0]["id"] == os.path.basename(model), j)
st, _, j, _ = req("GET", "/props")
check("GET /props", st == 200 and j["total_slots"] == 8 and j["default_generation_settings"]["n_ctx"] == 512, j)
st, _, j, _ = req("GET", "/slots")
check("GET /slots", st == 200 and len(j) == 8, j)
st, h, _, raw = req("GET", "/metrics")
m0 = metrics()
check("GET /metrics", st == 200 and h["Content-Type"].startswith("text/plain") and
      m0.get("requests_processing") == 0 and m0.get("requests_deferred") == 0, raw)

text = "In the beginning God created the heaven and the earth."
st, _, j, _ = post("/tokenize", {"content": text, "add_special": True})
ref0 = json.load(open(os.path.join(refdir, "kjv-q8_0-0.json"))) if refdir else None
check("/tokenize", st == 200 and isinstance(j["tokens"], list) and j["tokens"][0] == 1, j)
if ref0:
    check("/tokenize gives llama.cpp's ids", j["tokens"] == ref0["prompt_tokens"], j)
ids = j["tokens"]
st, _, j, _ = post("/tokenize", {"content": text, "with_pieces": True})
check("/tokenize with_pieces", st == 200 and "".join(p["piece"] for p in j["tokens"]).strip() == text, j)
st, _, j, _ = post("/detokenize", {"tokens": ids[1:]})
check("/detokenize", st == 200 and j["content"] == text, j)
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
st, _, j, _ = post("/apply-template", {"messages": msgs})
check("/apply-template (ChatML: the model has no template)", st == 200 and j["prompt"] ==
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", j)

# ------------------------------------------------------------------ generation against references
if ref0:
    for k in range(4):
        ref = json.load(open(os.path.join(refdir, "kjv-q8_0-%d.json" % k)))
        st, _, j, _ = post("/completion", {"prompt": ref["prompt_tokens"], "n_predict": 24, "temperature": 0,
                                           "n_probs": 1})
        got = [p["id"] for p in j["completion_probabilities"]] if st == 200 else []
        ok = st == 200
        for i, (t, m) in enumerate(zip(ref["greedy_tokens"], ref["greedy_margins"])):
            if m < 0.02:
                break
            ok = ok and i < len(got) and got[i] == t
        check("/completion greedy = llama.cpp's greedy tokens (prompt %d)" % k, ok, (got, ref["greedy_tokens"]))

# kiln run (the CLI's own generation loop) against the server's, greedy and seeded
for args, body in ((["--temp", "0"], {"temperature": 0}), (["--temp", "0.8", "-s", "42"], {"temperature": 0.8, "seed": 42})):
    run = json.loads(subprocess.check_output([kiln, "run", "-m", model, "-p", "And God said", "-n", "20", "--json"] + args,
                                             stderr=subprocess.DEVNULL))
    st, _, j, _ = post("/v1/completions", dict(body, prompt="And God said", max_tokens=20))
    if body["temperature"] == 0:
        greedy_text = run["text"]
    check("/v1/completions = kiln run %s" % args, st == 200 and j["choices"][0]["text"] == run["text"],
          (j, run["text"]))
    check("usage counts", st == 200 and j["usage"]["completion_tokens"] == len(run["tokens"]) and
          j["usage"]["prompt_tokens"] == 4 and j["usage"]["total_tokens"] == 4 + len(run["tokens"]), j)

st, _, j, _ = post("/v1/completions", {"prompt": "And God said", "max_tokens": 12, "temperature": 0})
full = j["choices"][0]["text"]
m1 = metrics()
check("/metrics counts tokens", m1["tokens_predicted_total"] > m0["tokens_predicted_total"] and
      m1["prompt_tokens_total"] > m0["prompt_tokens_total"], (m0, m1))
check("finish_reason length", j["choices"][0]["finish_reason"] == "length", j)
stop = full[len(full) // 2:len(full) // 2 + 3]
st, _, j, _ = post("/v1/completions", {"prompt": "And God said", "max_tokens": 12, "temperature": 0, "stop": [stop]})
check("stop string cuts the text", st == 200 and j["choices"][0]["text"] == full[:full.index(stop)] and
      j["choices"][0]["finish_reason"] == "stop", (stop, j))
st, _, j, _ = post("/completion", {"prompt": "And God said", "n_predict": 12, "temperature": 0, "stop": stop})
check("/completion stop_type word", st == 200 and j["stop_type"] == "word" and j["stopping_word"] == stop, j)

# logit_bias: banning the greedy first token makes another come first
st, _, g, _ = post("/completion", {"prompt": "And God said", "n_predict": 1, "temperature": 0, "n_probs": 2})
first, second = g["completion_probabilities"][0]["top_logprobs"][:2]
st, _, j, _ = post("/v1/completions", {"prompt": "And God said", "max_tokens": 1, "temperature": 0,
                                       "logit_bias": {str(first["id"]): -100}, "logprobs": 1})
check("logit_bias -100 bans the greedy token", st == 200 and j["choices"][0]["text"] == second["token"], (j, first, second))
st, _, j, _ = post("/completion", {"prompt": "And God said", "n_predict": 1, "temperature": 0,
                                   "logit_bias": [[second["id"], 100]]})
check("logit_bias pairs (llama-server)", st == 200 and j["content"] == second["token"], (j, second))

# logprobs: sorted alternatives, the greedy token first, probabilities that sum to at most 1
st, _, j, _ = post("/v1/completions", {"prompt": "And God said", "max_tokens": 6, "temperature": 0, "logprobs": 5})
lp = j["choices"][0]["logprobs"]
ok = st == 200 and len(lp["tokens"]) == 6 and "".join(lp["tokens"]) == j["choices"][0]["text"]
for t, l, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
    vals = list(top.values())
    ok = ok and len(vals) >= 1 and vals == sorted(vals, reverse=True) and abs(max(vals) - l) < 1e-5 and \
        sum(2.718281828 ** v for v in vals) <= 1.0001
check("completions logprobs", ok, lp)
st, _, j, _ = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0, "logprobs": True,
                                           "top_logprobs": 3})
c = j["choices"][0]["logprobs"]["content"] if st == 200 else []
check("chat logprobs", len(c) >= 1 and all(len(e["top_logprobs"]) == 3 and e["logprob"] <= 0 for e in c), j)

# ------------------------------------------------------------------ streaming = non-streamed
for path, body, key in (("/v1/completions", {"prompt": "And Moses", "max_tokens": 16, "temperature": 0}, "text"),
                        ("/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0}, "chat"),
                        ("/completion", {"prompt": "And Moses", "n_predict": 16, "temperature": 0}, "content")):
    st, _, whole, _ = post(path, body)
    st2, ev = sse(path, dict(body, stream=True))
    if key == "text":
        want, got = whole["choices"][0]["text"], "".join(e["choices"][0]["text"] for e in ev[:-1])
        fin = ev[-2]["choices"][0]["finish_reason"]
        check("one event per token (load.py counts them)", len([e for e in ev[:-2] if e["choices"][0]["text"]]) ==
              whole["usage"]["completion_tokens"], ev)
    elif key == "chat":
        want = whole["choices"][0]["message"]["content"]
        got = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev[:-1])
        fin = ev[-2]["choices"][0]["finish_reason"]
        check("chat stream opens with the role", ev[0]["choices"][0]["delta"].get("role") == "assistant", ev[0])
    else:
        want, got = whole["content"], "".join(e["content"] for e in ev)
        fin = "length" if ev[-1]["stop"] and ev[-1]["stop_type"] == "limit" else None
    check("%s stream text = whole text" % path, st == st2 == 200 and got == want, (got, want))
    check("%s stream finish" % path, fin == "length", ev[-2:])
    if key != "content":
        check("%s stream ends with [DONE]" % path, ev[-1] == "[DONE]", ev[-1])
st, ev = sse("/v1/completions", {"prompt": "x", "max_tokens": 2, "stream": True, "stream_options": {"include_usage": True}})
check("stream usage chunk", ev[-2].get("usage", {}).get("completion_tokens") == 2 and ev[-2]["choices"] == [], ev[-2:])

# ------------------------------------------------------------------ 16 concurrent = sequential
prompts = ["And it came to pass %s" % w for w in
           ("that", "in the days", "when the LORD", "after these things", "on the morrow", "that Jesus",
            "as they went", "in those days", "when Pharaoh", "that Abraham", "when Moses", "at midnight",
            "in the morning", "that David said", "that the king", "when the people")]
def body_of(i):
    return {"prompt": prompts[i], "max_tokens": 24 + i, "temperature": 0}
alone = [post("/v1/completions", body_of(i))[2]["choices"][0]["text"] for i in range(16)]
together = [None] * 16
def worker(i):
    if i % 2:
        _, ev = sse("/v1/completions", dict(body_of(i), stream=True))
        together[i] = "".join(e["choices"][0]["text"] for e in ev if e != "[DONE]")
    else:
        together[i] = post("/v1/completions", body_of(i))[2]["choices"][0]["text"]
threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
# Attention takes each request's cells by position wherever they sit in the cache, and
# batches do not change a row's arithmetic: the same bytes, not merely close ones.
for i in range(16):
    check("concurrent request %d = its sequential answer, byte for byte" % i, together[i] == alone[i],
          (together[i], alone[i]))

# ------------------------------------------------------------------ a list of prompts: one choice each
# (OpenAI's shape: choices in prompt order, index i for prompt i, usage summed;
# llama-server's /completion: an array of bodies); each text is that prompt's own answer
def single(k, n):
    return post("/v1/completions", {"prompt": prompts[k], "max_tokens": n, "temperature": 0})[2]
one = {k: single(k, 26) for k in (2, 0, 5)}
st, _, j, _ = post("/v1/completions", {"prompt": [prompts[2], prompts[0], prompts[5]], "max_tokens": 26,
                                       "temperature": 0})
ch = (j or {}).get("choices", [])
check("prompt list: one choice per prompt, in order", st == 200 and [c["index"] for c in ch] == [0, 1, 2], (st, j))
check("prompt list: each choice is its prompt's own answer",
      [c["text"] for c in ch] == [one[k]["choices"][0]["text"] for k in (2, 0, 5)], ch)
check("prompt list: usage summed", st == 200 and all(
    j["usage"][f] == sum(one[k]["usage"][f] for k in one) for f in ("prompt_tokens", "completion_tokens")), j)
st, ev = sse("/v1/completions", {"prompt": [prompts[1], prompts[3]], "max_tokens": 25, "temperature": 0, "stream": True})
texts = {0: "", 1: ""}
finishes = []
for e in ev:
    if e != "[DONE]":
        for c in e["choices"]:
            texts[c["index"]] += c["text"]
            if c.get("finish_reason"):
                finishes.append(c["index"])
check("prompt list streamed: each index's text is its prompt's answer, one [DONE] at the end",
      st == 200 and texts == {0: single(1, 25)["choices"][0]["text"], 1: single(3, 25)["choices"][0]["text"]}
      and sorted(finishes) == [0, 1] and ev.count("[DONE]") == 1 and ev[-1] == "[DONE]", (texts, finishes))
st, _, j, _ = post("/completion", {"prompt": [prompts[2], [1, 2, 3]], "n_predict": 26, "temperature": 0})
check("/completion with a prompt list: an array of bodies", st == 200 and isinstance(j, list) and len(j) == 2 and
      j[0]["content"] == one[2]["choices"][0]["text"] and j[1]["tokens_evaluated"] == 3, (st, j))

# ------------------------------------------------------------------ a chat's second turn reuses the cache
conv = [{"role": "user", "content": "Who created the heaven and the earth?"}]
st, _, j1, _ = post("/v1/chat/completions", {"messages": conv, "max_tokens": 10, "temperature": 0})
reply = j1["choices"][0]["message"]["content"]
conv2 = conv + [{"role": "assistant", "content": reply}, {"role": "user", "content": "And what did he say?"}]
st, _, j2, _ = post("/v1/chat/completions", {"messages": conv2, "max_tokens": 10, "temperature": 0})
t2 = j2["timings"]
p1 = post("/apply-template", {"messages": conv})[2]["prompt"]
p2 = post("/apply-template", {"messages": conv2})[2]["prompt"]
new = post("/tokenize", {"content": p2[len(p1) + len(reply):]})[2]["tokens"]
check("second turn: cache_n + prompt_n = prompt tokens", t2["cache_n"] + t2["prompt_n"] == j2["usage"]["prompt_tokens"], t2)
check("second turn evaluates only the new tokens", t2["prompt_n"] <= len(new) + 1 and
      t2["cache_n"] >= j1["usage"]["prompt_tokens"], (t2, len(new), j1["usage"]))
# exact with ids: the cache holds prompt 1 and every generated token but the last
a = post("/tokenize", {"content": p1, "add_special": True})[2]["tokens"]
st, _, g, _ = post("/completion", {"prompt": a, "n_predict": 8, "temperature": 0, "n_probs": 1})
gen = [p["id"] for p in g["completion_probabilities"]]
b = a + gen + post("/tokenize", {"content": " And he said"})[2]["tokens"]
st, _, g2, _ = post("/completion", {"prompt": b, "n_predict": 2, "temperature": 0})
held = a + gen[:-1]
lcp = next((i for i in range(min(len(held), len(b))) if held[i] != b[i]), min(len(held), len(b)))
# at least that: the shared prefix cache (issue 18) may hold a longer run than the slot
check("cache_prompt: tokens_cached >= common prefix with the slot's cache", g2["tokens_cached"] >= lcp and
      g2["timings"]["prompt_n"] == len(b) - g2["tokens_cached"], (g2["timings"], lcp, len(b)))
st, _, g3, _ = post("/completion", {"prompt": b, "n_predict": 2, "temperature": 0, "cache_prompt": False})
check("cache_prompt false evaluates everything", g3["timings"]["prompt_n"] == len(b) and g3["content"] == g2["content"],
      g3["timings"])

# ------------------------------------------------------------------ malformed requests
long_prompt = "And the LORD spake unto Moses, saying, " * 60
bad = [
    ("POST", "/v1/completions", "{", 400, "JSON"),
    ("POST", "/v1/completions", "", 400, "JSON"),
    ("POST", "/v1/completions", "[1, 2", 400, "JSON"),
    ("POST", "/v1/completions", '{"prompt": "x",}', 400, "JSON"),
    ("POST", "/v1/completions", '{"prompt": "x"} trailing', 400, "JSON"),
    ("POST", "/v1/completions", "[]", 400, "object"),
    ("POST", "/v1/completions", '"text"', 400, "object"),
    ("POST", "/v1/completions", {}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": 42}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": {"a": 1}}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": ["a", 5]}, 400, "prompt[1]"),
    ("POST", "/v1/completions", {"prompt": ["a", [["b"]]]}, 400, "prompt[1]"),
    ("POST", "/v1/completions", {"prompt": ["a", [1, 99999999]]}, 400, "prompt[1]"),
    ("POST", "/v1/completions", {"prompt": ["a"] * 65}, 400, "at most 64"),
    ("POST", "/v1/completions", {"prompt": []}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": [1, 99999999]}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": [1, -1]}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": [1, 2.5]}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": [1, "a"]}, 400, "prompt"),
    ("POST", "/v1/completions", {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("POST", "/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("POST", "/v1/completions", {"prompt": "x", "top_p": 0}, 400, "top_p"),
    ("POST", "/v1/completions", {"prompt": "x", "top_p": 1.5}, 400, "top_p"),
    ("POST", "/v1/completions", {"prompt": "x", "top_k": -1}, 400, "top_k"),
    ("POST", "/v1/completions", {"prompt": "x", "min_p": 2}, 400, "min_p"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1.5}, 400, "max_tokens"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": 100000}, 400, "max_tokens"),
    ("POST", "/v1/completions", {"prompt": "x", "n": 2}, 400, "'n'"),
    ("POST", "/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream"),
    ("POST", "/v1/completions", {"prompt": "x", "stop": 5}, 400, "stop"),
    ("POST", "/v1/completions", {"prompt": "x", "stop": ["a", 1]}, 400, "stop"),
    ("POST", "/v1/completions", {"prompt": "x", "seed": "x"}, 400, "seed"),
    ("POST", "/v1/completions", {"prompt": "x", "logprobs": 50}, 400, "logprobs"),
    ("POST", "/v1/completions", {"prompt": "x", "presence_penalty": 5}, 400, "presence_penalty"),
    ("POST", "/v1/completions", {"prompt": "x", "frequency_penalty": -3}, 400, "frequency_penalty"),
    ("POST", "/v1/completions", {"prompt": "x", "model": 5}, 400, "model"),
    ("POST", "/v1/completions", {"prompt": long_prompt}, 400, "context"),
    ("POST", "/completion", {"prompt": "x", "n_predict": -2}, 400, "n_predict"),
    ("POST", "/completion", {"prompt": "x", "n_probs": 100}, 400, "n_probs"),
    ("POST", "/completion", {"prompt": "x", "cache_prompt": 1}, 400, "cache_prompt"),
    ("POST", "/completion", {"prompt": "x", "ignore_eos": "no"}, 400, "ignore_eos"),
    ("POST", "/v1/completions", {"prompt": "x", "logit_bias": {"abc": 1}}, 400, "logit_bias"),
    ("POST", "/v1/completions", {"prompt": "x", "logit_bias": {"99999999": 1}}, 400, "logit_bias"),
    ("POST", "/v1/completions", {"prompt": "x", "logit_bias": {"5": 500}}, 400, "logit_bias"),
    ("POST", "/v1/completions", {"prompt": "x", "logit_bias": [[5]]}, 400, "logit_bias"),
    ("POST", "/v1/chat/completions", {}, 400, "messages"),
    ("POST", "/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("POST", "/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
    ("POST", "/v1/chat/completions", {"messages": [{"content": "x"}]}, 400, "role"),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "content"),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user"}]}, 400, "content"),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "content"),
    ("POST", "/v1/chat/completions", {"messages": msgs, "top_logprobs": 2}, 400, "logprobs"),
    ("POST", "/v1/chat/completions", {"messages": msgs, "logprobs": 3}, 400, "logprobs"),
    ("POST", "/tokenize", {}, 400, "content"),
    ("POST", "/tokenize", {"content": "x", "add_special": "yes"}, 400, "add_special"),
    ("POST", "/detokenize", {"tokens": [99999999]}, 400, "tokens"),
    ("POST", "/detokenize", {"tokens": "x"}, 400, "tokens"),
    ("POST", "/apply-template", {"messages": [{"role": "robot", "content": "x"}]}, 400, "role"),
    ("GET", "/nope", None, 404, "nope"),
    ("POST", "/v1/nothing", {}, 404, "nothing"),
    ("GET", "/v1/completions", None, 405, "POST"),
    ("POST", "/health", {}, 405, "GET"),
    ("DELETE", "/v1/models", None, 405, "GET"),
    ("POST", "/v1/completions", "oversized", 413, "limit"),
]
def oversized():
    """Content-Length over the limit: answered before the body is sent."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (5 << 20))
    r = http.client.HTTPResponse(s)
    r.begin()
    data = r.read()
    s.close()
    return r.status, dict(r.getheaders()), json.loads(data), data
for method, path, body, want, word in bad:
    if body == "oversized":
        st, h, j, raw = oversized()
    else:
        st, h, j, raw = req(method, path, body, {"Content-Type": "application/json"} if body is not None else {})
    label = "%s %s %.60s" % (method, path, body if isinstance(body, str) else json.dumps(body))
    check("malformed -> %d: %s" % (want, label), st == want and is_error(j, want) and word in j["error"]["message"],
          (st, raw[:200]))
    if want == 405:
        check("405 names Allow", "Allow" in h, h)
check("at least 30 malformed requests", len(bad) >= 30)
st, h, _, raw = req("OPTIONS", "/v1/chat/completions", headers={"Origin": "http://x", "Access-Control-Request-Method": "POST"})
check("CORS preflight (the origin echoed, as llama-server)", st == 200 and h.get("Access-Control-Allow-Methods") ==
      "GET, POST, DELETE, OPTIONS" and h.get("Access-Control-Allow-Credentials") == "true" and h.get("Access-Control-Allow-Origin") == "http://x" and
      "Authorization" in h.get("Access-Control-Allow-Headers", ""), (st, h))
st, h, _, _ = req("GET", "/health")
check("responses allow any origin", h.get("Access-Control-Allow-Origin") == "*", h)
# a chunked upload over the limit (no Content-Length to refuse it early)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"a" * 65536
try:
    for _ in range(80):
        s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    s.sendall(b"0\r\n\r\n")
except OSError:
    pass
resp = s.recv(200)
s.close()
check("chunked body over the limit -> 413", b" 413 " in resp, resp[:100])
st, _, j, _ = req("GET", "/health")
check("healthy after the malformed corpus", st == 200 and j == {"status": "ok"}, (st, j))
st, _, j, _ = post("/v1/completions", {"prompt": "And God said", "max_tokens": 20, "temperature": 0})
check("still answers the same after the corpus", st == 200 and j["choices"][0]["text"] == greedy_text, (st, j))

print("serve_check: %d passed, %d failed" % (passes, fails))
sys.exit(1 if fails else 0)
