# serve_metrics.py - drives a running `kiln serve` (test_serve_metrics.sh starts
# it): /metrics parsed as Prometheus text and its counters checked to move by
# what each request's own response reports; /slots and /props; the limits
# (--request-timeout, --queue, --max-body) on a server started with them.
# and prompts continuing from cells other slots decoded (same tokens as a server
# that reuses nothing; each shared prompt evaluated once).
# usage: serve_metrics.py PORT MODE [REF_PORT]   (MODE: metrics | limits | prefix | park | park2)
import http.client, json, os, re, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import check, finish, request  # noqa: E402

port = int(sys.argv[1])
mode = sys.argv[2]


def req(method, path, body=None, timeout=120):
    return request(port, method, path, body, timeout=timeout)


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="[^"]*"(,[a-zA-Z_]+="[^"]*")*)?\})? (\S+)$')


def metrics():
    """{name or name{labels}: value}; every line must be Prometheus text (0.0.4)."""
    st, h, _, data = req("GET", "/metrics")
    check("/metrics 200", st == 200, st)
    check("/metrics is text/plain", h.get("Content-Type", "").startswith("text/plain"), h.get("Content-Type"))
    out, typed = {}, set()
    for line in data.decode().splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            check("TYPE line", len(parts) == 4 and parts[3] in ("counter", "gauge", "histogram"), line)
            typed.add(parts[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = LINE.match(line)
        check("a Prometheus sample line", m is not None, repr(line))
        if not m:
            continue
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        check("%s has a TYPE" % name, name in typed or base in typed)
        out[name + (m.group(2) or "")] = float(m.group(5))
    return out


def resp_count(mx, route, status):
    return mx.get('kiln_http_responses_total{route="%s",status="%d"}' % (route, status), 0)


def delta(a, b, key):
    return b.get(key, 0) - a.get(key, 0)


if mode == "metrics":
    m0 = metrics()
    for name in ["llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
                 "llamacpp:requests_deferred", "llamacpp:n_decode_total", "llamacpp:prompt_tokens_cached_total",
                 "kiln_kv_cells_used", "kiln_kv_cells_total", "kiln_prefix_cache_hits_total",
                 "kiln_prefix_cache_misses_total", "kiln_prefix_cache_evictions_total",
                 "kiln_time_to_first_token_seconds_count", 'kiln_time_to_first_token_seconds_bucket{le="+Inf"}']:
        check("metric %s present" % name, name in m0)
    check("KV cells total = -c", m0.get("kiln_kv_cells_total") == 4096, m0.get("kiln_kv_cells_total"))
    check("nothing processing at rest", m0.get("llamacpp:requests_processing") == 0)

    # one request: the counters move by what its own response reports
    body = {"prompt": "In the beginning God created the heaven and the earth.", "max_tokens": 12,
            "temperature": 0, "ignore_eos": True}
    st, _, j, _ = req("POST", "/completion", body)
    check("completion 200", st == 200, st)
    first = j or {}
    t = first.get("timings", {})
    m1 = metrics()
    check("prompt_tokens_total moved by timings.prompt_n", delta(m0, m1, "llamacpp:prompt_tokens_total") == t.get("prompt_n"),
          (delta(m0, m1, "llamacpp:prompt_tokens_total"), t))
    check("tokens_predicted_total moved by the 12 tokens", delta(m0, m1, "llamacpp:tokens_predicted_total") == 12,
          delta(m0, m1, "llamacpp:tokens_predicted_total"))
    check("a cold prompt is a miss", delta(m0, m1, "kiln_prefix_cache_misses_total") == 1)
    check("ttft observed once", delta(m0, m1, "kiln_time_to_first_token_seconds_count") == 1)
    check("ttft sum positive", delta(m0, m1, "kiln_time_to_first_token_seconds_sum") > 0)
    check("responses by route", delta(m0, m1, 'kiln_http_responses_total{route="/completion",status="200"}') == 1)
    check("n_decode moved", delta(m0, m1, "llamacpp:n_decode_total") >= 12)
    n_prompt = t.get("prompt_n", 0) + t.get("cache_n", 0)
    check("KV cells used: the prompt and the decoded tokens", m1.get("kiln_kv_cells_used") == n_prompt + 11,
          (m1.get("kiln_kv_cells_used"), n_prompt))

    # the same prompt again: a hit, the cached tokens counted as cached, not evaluated
    st, _, j, _ = req("POST", "/completion", body)
    t2 = (j or {}).get("timings", {})
    m2 = metrics()
    check("second request reuses the cache", t2.get("cache_n", 0) > 0, t2)
    check("a warm prompt is a hit", delta(m1, m2, "kiln_prefix_cache_hits_total") == 1)
    check("prompt_tokens_cached_total moved by timings.cache_n",
          delta(m1, m2, "llamacpp:prompt_tokens_cached_total") == t2.get("cache_n"))
    check("prompt_tokens_total moved by timings.prompt_n", delta(m1, m2, "llamacpp:prompt_tokens_total") == t2.get("prompt_n"))
    check("the same answer warm", (j or {}).get("content") == first.get("content") and first.get("content"),
          ((j or {}).get("content"), first.get("content")))

    # errors counted by route and status; unknown paths fold into one label
    req("POST", "/v1/completions", "{not json")
    req("GET", "/no/such/route/%d" % time.time_ns())
    m3 = metrics()
    check("400 counted", delta(m2, m3, 'kiln_http_responses_total{route="/v1/completions",status="400"}') == 1)
    check("404 counted under route=other", delta(m2, m3, 'kiln_http_responses_total{route="other",status="404"}') == 1)
    check("/metrics counts itself", resp_count(m3, "/metrics", 200) >= 3)

    # while a stream runs: processing 1, /slots shows it generating with its request
    started = threading.Event()
    result = {}

    def streamer():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 2000, "stream": True,
                                                         "ignore_eos": True}))
        r = c.getresponse()
        while not r.readline().startswith(b"data: "):  # a token: the request has its slot
            pass
        started.set()
        result["body"] = r.read().decode()
    th = threading.Thread(target=streamer)
    th.start()
    started.wait(60)
    mid = metrics()
    st, _, slots, _ = req("GET", "/slots")
    th.join(120)
    check("requests_processing 1 while a stream runs", mid.get("llamacpp:requests_processing") == 1,
          mid.get("llamacpp:requests_processing"))
    busy = [s for s in (slots or []) if s.get("is_processing")]
    check("/slots: one busy slot", len(busy) == 1, slots)
    if busy:
        s = busy[0]
        check("/slots: its state", s.get("state") in ("prompt", "generating"), s)
        check("/slots: its request", str(s.get("task", {}).get("id", "")).startswith("cmpl-kiln-"), s)
        check("/slots: its prompt size", s.get("task", {}).get("n_prompt", 0) > 0, s)
    idle = [s for s in (slots or []) if not s.get("is_processing")]
    check("/slots: idle slots say idle", all(s.get("state") == "idle" and "task" not in s for s in idle), slots)
    check("/slots: n_cached on every slot", all(isinstance(s.get("n_cached"), int) for s in (slots or [])), slots)
    check("the stream ended", "[DONE]" in result.get("body", ""))
    m4 = metrics()
    check("2000 more tokens predicted", delta(m3, m4, "llamacpp:tokens_predicted_total") == 2000,
          delta(m3, m4, "llamacpp:tokens_predicted_total"))
    check("stream counted as 200", delta(m3, m4, 'kiln_http_responses_total{route="/v1/completions",status="200"}') == 1)

    st, _, p, _ = req("GET", "/props")
    for k, want in (("total_slots", 2), ("n_ctx", 4096), ("n_ctx_slot", 2048), ("queue_max", 64),
                    ("request_timeout", 0), ("max_body", 4 << 20)):
        check("/props %s" % k, (p or {}).get(k) == want, (p or {}).get(k))
    check("/props kv_cache_bytes", (p or {}).get("kv_cache_bytes", 0) > 0)

elif mode == "limits":
    # server: -np 1 -c 16384 --queue 1 --request-timeout 2 --max-body 2048
    st, _, p, _ = req("GET", "/props")
    check("/props request_timeout", (p or {}).get("request_timeout") == 2, p)
    check("/props max_body", (p or {}).get("max_body") == 2048, p)
    long_body = {"prompt": "And God said", "max_tokens": 100000, "ignore_eos": True}
    st, _, j, _ = req("POST", "/completion", long_body)
    check("max_tokens beyond the context: 400", st == 400 and "context" in json.dumps(j), (st, j))

    # a generation longer than the timeout: 504 (whole body) and an error event (stream);
    # a request queued behind it also times out, and one past the queue gets 503
    # far more than 2 s of tokens: the test model decodes ~2,000 tokens/s here, so 4,000
    # once finished inside the timeout
    long_body["max_tokens"] = 16000
    results = {}

    def run(name, body, delay):
        time.sleep(delay)
        results[name] = req("POST", "/v1/completions", body)
    ths = [threading.Thread(target=run, args=("running", long_body, 0)),
           threading.Thread(target=run, args=("queued", {"prompt": "And Moses said", "max_tokens": 4}, 0.3)),
           threading.Thread(target=run, args=("rejected", {"prompt": "And Aaron said", "max_tokens": 4}, 0.6))]
    m0 = metrics()
    t0 = time.time()
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    took = time.time() - t0
    st, _, j, _ = results.get("running", (0, {}, None, b""))
    check("running past --request-timeout: 504", st == 504 and "request-timeout" in json.dumps(j), (st, j))
    check("the timeout comes within its bound", took < 30, took)
    st, h, j, _ = results.get("rejected", (0, {}, None, b""))
    check("past the queue: 503", st == 503, (st, j))
    check("503 has Retry-After", h.get("Retry-After") is not None, h)
    st, _, j, _ = results.get("queued", (0, {}, None, b""))
    check("queued behind it: answered (200 or 504)", st in (200, 504), (st, j))
    m1 = metrics()
    check("timeouts counted", delta(m0, m1, "kiln_requests_timed_out_total") >= 1)
    check("rejections counted", delta(m0, m1, "kiln_requests_rejected_total") == 1)
    check("504 counted", delta(m0, m1, 'kiln_http_responses_total{route="/v1/completions",status="504"}') >= 1)

    # streamed: the timeout ends the stream with an error event
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(dict(long_body, stream=True)))
    r = c.getresponse()
    text = r.read().decode()
    check("stream past the timeout ends with an error event", "request-timeout" in text and "[DONE]" in text,
          text[-300:])

    # body limit: over it 413, under it fine
    st, _, j, _ = req("POST", "/v1/completions", json.dumps({"prompt": "x" * 3000, "max_tokens": 1}))
    check("body over --max-body: 413", st == 413, (st, j))
    st, _, j, _ = req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 2})
    check("short request after all that: 200", st == 200, (st, j))
    st, _, j, _ = req("GET", "/health")
    check("healthy after", st == 200)

if mode in ("prefix", "park", "park2"):
    # REF_PORT: a one-slot server that reuses nothing (the reference)
    ref_port = int(sys.argv[3])

    def ask(prompt, cache=True, on=None):
        global port
        keep, port = port, on or port
        try:
            st, _, j, _ = req("POST", "/completion", {"prompt": prompt, "n_predict": 16, "temperature": 0,
                                                      "ignore_eos": True, "cache_prompt": cache, "n_probs": 1})
        finally:
            port = keep
        j = j or {}
        return st, [p["id"] for p in j.get("completion_probabilities", [])], j.get("timings", {})

    def ntok(text, on=None):
        global port
        keep, port = port, on or port
        try:
            return req("POST", "/tokenize", {"content": text, "add_special": True})[2]["tokens"]
        finally:
            port = keep

    def common(lists):
        n = 0
        while all(len(x) > n and x[n] == lists[0][n] for x in lists):
            n += 1
        return n

    def system(tag):
        return " ".join("%s: and on the %d day God said, Let there be light: and there was light." % (tag, i)
                        for i in range(20))

    def concurrent(prompts):
        out = [None] * len(prompts)

        def one(i):
            out[i] = ask(prompts[i])
        ths = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        for t in ths:
            t.start()
        for t in ths:
            t.join(120)
        return out

if mode == "prefix":
    # PORT: a server with 4 slots sharing prefixes
    suffixes = [" Question %d: who spoke?" % i for i in range(4)]
    ref = {}
    for tag in ("warm", "cold"):
        for sfx in suffixes:
            st, toks, _ = ask(system(tag) + sfx, cache=False, on=ref_port)
            check("reference answered", st == 200 and len(toks) == 16, st)
            ref[tag + sfx] = toks

    # the case: one request computed the system prompt; 4 concurrent requests
    # sharing it each evaluate only their own suffix
    ask(system("warm") + " Amen.")
    prompts = [system("warm") + x for x in suffixes]
    toks = [ntok(p) for p in prompts]
    warm_toks = toks
    # L: what the cache holds ("... Amen."); L4: what the 4 share (" Question " too): the
    # first to run evaluates from L, the others wait for it and evaluate from L4
    L, L4 = common([toks[0], ntok(system("warm") + " Amen.")]), common(toks)
    check("the system prompt is long", L > 200, L)
    m0 = metrics()
    res = concurrent(prompts)
    m1 = metrics()
    for i, (st, got, t) in enumerate(res):
        check("warm shared: same tokens as the reference", st == 200 and got == ref["warm" + suffixes[i]], (got, i))
        check("warm shared: only its own suffix evaluated", t.get("prompt_n") in (len(toks[i]) - L, len(toks[i]) - L4),
              (t, len(toks[i]), L))
    want = (L4 - L) + sum(len(x) - L4 for x in toks)
    check("warm shared: prompt_tokens_total moved by the suffixes only",
          delta(m0, m1, "llamacpp:prompt_tokens_total") == want, (delta(m0, m1, "llamacpp:prompt_tokens_total"), want))

    # cold: 4 concurrent requests with a system prompt nobody computed: it is evaluated once
    prompts = [system("cold") + x for x in suffixes]
    toks = [ntok(p) for p in prompts]
    L = common(toks)
    m0 = metrics()
    res = concurrent(prompts)
    m1 = metrics()
    for i, (st, got, t) in enumerate(res):
        check("cold shared: same tokens as the reference", st == 200 and got == ref["cold" + suffixes[i]], (got, i))
    held = max(common([toks[0], w]) for w in warm_toks)  # the BOS token the warm prompts began with
    want = (L - held) + sum(len(x) - L for x in toks)
    check("cold shared: the system prompt evaluated once", delta(m0, m1, "llamacpp:prompt_tokens_total") == want,
          (delta(m0, m1, "llamacpp:prompt_tokens_total"), want))
    check("cold shared: counted as shared", delta(m0, m1, "kiln_prefix_cache_shared_total") >= 3)

    # warm again (each finds its own slot) and with the cache off: the same tokens
    for sfx in suffixes:
        st, got, t = ask(system("cold") + sfx)
        check("warm again: same tokens", got == ref["cold" + sfx], sfx)
        check("warm again: almost nothing evaluated", t.get("prompt_n", 99) <= 1 + len(sfx), t)
        st, got, t = ask(system("cold") + sfx, cache=False)
        check("cache off: same tokens", got == ref["cold" + sfx], sfx)
        check("cache off: the whole prompt evaluated", t.get("cache_n") == 0, t)

elif mode == "park":
    # PORT: one slot, -c 1024, --cache-ram 1 (512 cells of this model): a slot's prompt
    # moved aside for another request is parked, reused, and evicted least recently used
    qs = [" Question %d: who spoke?" % i for i in range(2)]
    ref = {}
    for tag in ("A", "B"):
        for q in qs:
            ref[tag + q] = ask(system(tag) + q, cache=False, on=ref_port)[1]
    A = [ntok(system("A") + q) for q in qs]
    L = common(A)
    m0 = metrics()
    st, got, t = ask(system("A") + qs[0])
    check("A0 answered as the reference", got == ref["A" + qs[0]], got)
    st, got, t = ask("And Noah said")  # takes the only slot: A0 is parked
    m1 = metrics()
    check("the slot's prompt parked", m1.get("kiln_prefix_cache_parked_tokens", 0) >= len(A[0]),
          m1.get("kiln_prefix_cache_parked_tokens"))
    check("parking is no eviction", delta(m0, m1, "kiln_prefix_cache_evictions_total") == 0)
    st, got, t = ask(system("A") + qs[1])
    check("A1 answered as the reference", got == ref["A" + qs[1]], got)
    check("A1 continued from the parked A0", t.get("prompt_n") == len(A[1]) - L, (t, len(A[1]), L))
    m2 = metrics()
    check("counted as shared", delta(m1, m2, "kiln_prefix_cache_shared_total") == 1)
    st, got, t = ask(system("B") + qs[0])  # parks A1: past the budget, the least recently used go
    check("B0 answered as the reference", got == ref["B" + qs[0]], got)
    m3 = metrics()
    check("evicted under --cache-ram", delta(m2, m3, "kiln_prefix_cache_evictions_total") >= 1)
    check("within --cache-ram", m3.get("kiln_prefix_cache_parked_tokens", 1e9) <= 512,
          m3.get("kiln_prefix_cache_parked_tokens"))
    # A0 again: parking B0 would evict A1, which A0 continues from: B0 gives way
    st, got, t = ask(system("A") + qs[0])
    check("A0 again as the reference", got == ref["A" + qs[0]], got)
    check("A0 continued from the parked A1", t.get("prompt_n") == len(A[0]) - L, (t, len(A[0]), L))
    # a request needing the parked cells gets them: B1 + 540 tokens leave no room for a parked run
    m4 = metrics()
    n = 1020 - len(ntok(system("B") + qs[1]))
    st, _, j, _ = req("POST", "/completion", {"prompt": system("B") + qs[1], "n_predict": n, "temperature": 0,
                                              "ignore_eos": True})
    check("a long request takes the parked cells", st == 200 and (j or {}).get("tokens_predicted") == n,
          (st, str(j)[:300]))
    m5 = metrics()
    check("parked runs evicted for it", delta(m4, m5, "kiln_prefix_cache_evictions_total") >= 1 and
          m5.get("kiln_prefix_cache_parked_tokens") == 0, m5.get("kiln_prefix_cache_parked_tokens"))

elif mode == "park2":
    # PORT: two slots, -c 4096, --cache-ram 1: a running request continues from a parked
    # prefix; that entry is evicted while it runs; the request's tokens do not change
    def long_ids(prompt, on=None):
        global port
        keep, port = port, on or port
        try:
            st, _, j, _ = req("POST", "/completion", {"prompt": prompt, "n_predict": 1500, "temperature": 0,
                                                      "ignore_eos": True, "n_probs": 1})
        finally:
            port = keep
        return st, [p["id"] for p in (j or {}).get("completion_probabilities", [])], (j or {}).get("timings", {})

    q = " Question 1: who spoke?"
    ref_long = long_ids(system("A") + q, on=ref_port)[1]
    check("reference answered", len(ref_long) == 1500, len(ref_long))
    ask(system("A") + " Question 0: who spoke?")  # slot 0
    ask("And Noah said")                             # slot 1
    ask(system("B") + q)                             # slot 0 again: A0 parked
    m0 = metrics()
    check("A0 parked", m0.get("kiln_prefix_cache_parked_tokens", 0) > 400, m0.get("kiln_prefix_cache_parked_tokens"))
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", long_ids(system("A") + q)))
    th.start()
    running = False
    for _ in range(600):  # until it generates, continuing from the parked A0
        st, _, slots, _ = req("GET", "/slots")
        running = any(x.get("state") == "generating" and x.get("task", {}).get("n_decoded", 0) > 0
                      for x in (slots or []))
        if running or not th.is_alive():
            break
        time.sleep(0.01)
    check("the long request runs", running)
    ask(system("C") + q)  # parks B0: past the budget, A0 (which the running request shares) goes
    m1 = metrics()
    st, _, slots, _ = req("GET", "/slots")
    check("the long request still ran after that", any(x.get("state") == "generating" for x in (slots or [])), slots)
    th.join(120)
    st, got, t = out.get("r", (0, [], {}))
    check("it continued from the parked prefix", t.get("cache_n", 0) > 400, t)
    check("A0 evicted while it ran", delta(m0, m1, "kiln_prefix_cache_evictions_total") >= 1 and
          m1.get("kiln_prefix_cache_parked_tokens", 0) < m0.get("kiln_prefix_cache_parked_tokens", 0) + 400, (m0, m1))
    check("its 1500 tokens equal the reference's", got == ref_long, (len(got), got[:10], ref_long[:10]))

finish("serve_metrics " + mode)
