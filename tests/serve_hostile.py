# serve_hostile.py - kiln serve against the clients an attacker would write
# (test_serve_hostile.sh starts the servers): idle and trickling connections by
# the hundred, 600 clients at once, keyless uploads, one tenant probing
# another's prompts through the prefix cache, a 64-prompt request beside a
# single one, and requests framed or encoded to be read two ways. After each
# group the server must still answer /health and a completion.
# usage: serve_hostile.py PORT MODE [PID]
#   MODE: big | small (connections), main (everything else), global (the probe
#   finds the secret on a server that shares the cache between tenants)
import asyncio, http.client, json, os, select, socket, struct, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import check, finish  # noqa: E402
from serve_corpus import CASES, ROUTES  # noqa: E402

port, mode = int(sys.argv[1]), sys.argv[2]
pid = int(sys.argv[3]) if len(sys.argv) > 3 else 0
KEY = {"A": "key-alice-1", "A2": "key-alice-2", "B": "key-bob"}


def hdrs(who=None, extra=None):
    h = {"Content-Type": "application/json"}
    if who:
        h["Authorization"] = "Bearer " + KEY[who]
    h.update(extra or {})
    return h


def req(method, path, body=None, who=None, extra=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    c.request(method, path, body=body, headers=hdrs(who, extra))
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        js = json.loads(data)
    except ValueError:
        js = None
    return r.status, dict(r.getheaders()), js, data


def read_response(s, timeout=30):
    """(status, headers, body) of one response on socket s; status 0 when it closed first."""
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return 0, {}, buf
            buf += d
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            h[k.strip().lower()] = v.strip()
        n = int(h.get("content-length", "-1"))
        while (n < 0 or len(body) < n):
            d = s.recv(65536)
            if not d:
                break
            body += d
        return status, h, body
    except (OSError, ValueError, IndexError):
        return 0, {}, buf


def raw(data, shut=False, timeout=30):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        return read_response(s, timeout)
    finally:
        s.close()


def post_raw(path, body, who=None, extra=b"", version=b"HTTP/1.1"):
    auth = b"Authorization: Bearer %s\r\n" % KEY[who].encode() if who else b""
    return b"POST %s %s\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        path.encode(), version, auth, len(body), extra, body)


def healthy(what, who=None):
    st, _, j, _ = req("GET", "/health")
    st2, _, j2, raw2 = req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 2}, who)
    check("healthy after %s" % what, st == 200 and j == {"status": "ok"} and st2 == 200, (st, st2, raw2[:200]))


def metric(name, who=None):
    _, _, _, raw_m = req("GET", "/metrics", who=who)
    total = 0.0
    for line in raw_m.decode().splitlines():
        if line.startswith(name):
            total += float(line.split()[-1])
    return total


def closed(s):
    """The server closed s (EOF or reset is readable at once)."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def rss_kib():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Trickler(threading.Thread):
    """Sends each socket one byte of a never-ending header every interval."""

    def __init__(self, socks, interval):
        super().__init__(daemon=True)
        self.socks, self.interval, self.stop = socks, interval, False

    def run(self):
        n = 0
        while not self.stop:
            for s in self.socks:
                try:
                    s.send(b"X-Slow-%d: y\r\n"[n % 13:n % 13 + 1] if n else b"GET /health HTTP/1.1\r\nHost: x\r\n")
                except OSError:
                    pass
            n += 1
            time.sleep(self.interval)


def open_many(n):
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        out.append(s)
    return out


# ------------------------------------------------------------------ many connections, default limit
if mode == "big":
    t0 = time.time()
    idle = open_many(300)
    slow = open_many(300)
    tr = Trickler(slow, 0.5)
    tr.start()
    time.sleep(0.5)
    st, _, j, raw_b = req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 4}, timeout=30)
    check("300 idle and 300 trickling connections: a client gets its completion", st == 200, (st, raw_b[:200]))
    st, _, j, _ = req("GET", "/health", timeout=10)
    check("... and /health its 200", st == 200 and j == {"status": "ok"}, st)
    held = sum(not closed(s) for s in idle + slow)
    check("... while all 600 are still held (no thread each, none refused)", held == 600 and time.time() - t0 < 8,
          (held, time.time() - t0))
    # the header deadline is a total: a byte every half second does not extend it
    while time.time() - t0 < 14 and not all(closed(s) for s in idle + slow):
        time.sleep(0.2)
    cut = sum(closed(s) for s in idle + slow)
    check("--header-timeout 8 closes idle and trickling connections alike (a total, not inactivity)",
          cut == 600 and time.time() - t0 > 7.5, (cut, time.time() - t0))
    tr.stop = True
    # a body sent a byte at a time is cut at --body-timeout
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    t1 = time.time()
    while time.time() - t1 < 8 and not closed(s):
        try:
            s.send(b" ")
        except OSError:
            break
        time.sleep(0.3)
    check("--body-timeout 3 cuts a body that trickles in", closed(s) and 2.5 < time.time() - t1 < 6, time.time() - t1)
    s.close()
    for x in idle + slow:
        x.close()
    check("the deadlines are counted", metric('kiln_http_connections_closed_total{reason="deadline"}') >= 601)
    # X-Tenant from an address that is not a trusted proxy
    st, _, j, _ = req("POST", "/tokenize", {"content": "x"}, extra={"X-Tenant": "eve"})
    check("X-Tenant without --trusted-proxy -> 400", st == 400 and "trusted-proxy" in j["error"]["message"], j)
    healthy("600 hostile connections")
    finish("serve_hostile big")

# ------------------------------------------------------------------ past --max-connections
if mode == "small":
    idle = open_many(300)
    slow = open_many(300)
    tr = Trickler(slow, 0.5)
    tr.start()
    time.sleep(0.3)
    st, _, _, raw_b = req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 4}, timeout=30)
    check("--max-connections 32 with 600 idle or slow: the longest idle make room, a client is served",
          st == 200, (st, raw_b[:200]))
    st, _, j, _ = req("GET", "/health", timeout=10)
    check("... and /health answers", st == 200, st)
    time.sleep(0.3)
    gone = sum(closed(s) for s in idle + slow)
    check("... by closing the idle ones (at most 32 held)", gone >= 600 - 32, gone)
    tr.stop = True
    for x in idle + slow:
        x.close()
    time.sleep(0.3)
    # bodies in progress cannot be closed for a newcomer: past the limit, 503 and Retry-After
    busy = []
    for _ in range(34):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"content\"")
        busy.append(s)
    time.sleep(0.5)
    st, h, body = raw(post_raw("/v1/completions", b'{"prompt": "x", "max_tokens": 1}'))
    check("past the limit with no idle connection: 503 with Retry-After, not a reset",
          st == 503 and h.get("retry-after") and b"max-connections" in body, (st, h, body[:200]))
    st, h, body = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    check("/health answers 200 past the limit", st == 200, (st, body[:100]))
    for s in busy:
        s.close()
    time.sleep(0.3)  # the server sees the closes before /metrics, which is not answered past the limit
    check("evictions and 503s are counted", metric('kiln_http_connections_closed_total{reason="evicted"}') >= 500 and
          metric('kiln_http_connections_closed_total{reason="overflow"}') >= 1)
    time.sleep(0.3)
    healthy("eviction and overflow")
    finish("serve_hostile small")

# ------------------------------------------------------------------ tenants: the probe
# a word of this run's own first: a server that ran the suite before holds the prober's old probes
SECRET = "Run %d: and it came to pass that the number of the house of Israel was %%d, and they rejoiced greatly." % (
    time.time_ns() % 10**9)


def probe(victim, prober, digit=7):
    """tokens_cached and prompt_n of the prober's prompt for each digit, the victim sending its
    secret again before each guess (as a system prompt comes again and again). From digit 1 on,
    each guess continues from the same run of the prober's own cells (digit 0 from nothing)."""
    out = []
    for d in range(10):
        req("POST", "/completion", {"prompt": SECRET % digit, "n_predict": 1}, *victim)
        st, _, j, _ = req("POST", "/completion", {"prompt": SECRET % d, "n_predict": 1}, *prober)
        out.append((j["tokens_cached"], j["timings"]["prompt_n"]) if st == 200 else (-1, -1))
    return out


if mode == "global":
    got = probe(("A",), ("B",))
    best = max(range(10), key=lambda d: got[d][0])
    check("with --prefix-share global the probe finds the secret digit (the probe works)",
          best == 7 and got[7][0] > max(got[d][0] for d in range(10) if d != 7), got)
    finish("serve_hostile global")

# ------------------------------------------------------------------ main: parsing
def case_label(route, body):
    return "%s %.70s" % (ROUTES[route], body.decode("latin-1"))


for route, body, want, word in CASES:
    st, h, resp = raw(post_raw(ROUTES[route], body, "A") if False else post_raw(ROUTES[route], body, "A"))
    try:
        msg = json.loads(resp).get("error", {}).get("message", "") if want != 200 else ""
    except ValueError:
        msg = ""
    check("-> %d: %s" % (want, case_label(route, body)), st == want and word in msg, (st, resp[:240]))

# framing another reader could take differently
b = b'{"prompt": "x", "max_tokens": 1}'
auth = b"Authorization: Bearer " + KEY["A"].encode() + b"\r\n"
smuggle = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: %d\r\nContent-Length: 0\r\n\r\n"
           % len(b) + b)
st, h, body = raw(smuggle)
check("differing Content-Length headers -> 400, connection closed", st == 400 and h.get("connection") == "close" and
      b"Content-Length" in body, (st, h, body[:200]))
st, h, body = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                  b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(b), len(b)) + b)
check("identical duplicate Content-Length: one length, served", st == 200, (st, body[:200]))
st, h, body = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: %d\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" % len(b) + b)
check("Content-Length with Transfer-Encoding -> 400", st == 400 and b"ambiguous" in body, (st, body[:200]))
st, h, body = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: gzip, chunked\r\n\r\n")
check("Transfer-Encoding other than chunked -> 400", st == 400 and b"Transfer-Encoding" in body, (st, body[:200]))
st, h, body = raw(b"GET /v1/models HTTP/1.1\r\n" + auth + b"\r\n")
check("HTTP/1.1 without Host -> 400", st == 400 and b"Host" in body, (st, body[:200]))
st, h, body = raw(b"GET /v1/models HTTP/1.0\r\n" + auth + b"\r\n")
check("HTTP/1.0 without Host: served", st == 200, (st, body[:200]))
st, h, body = raw(b"GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n" + auth + b"\r\n")
check("two Host headers -> 400", st == 400, (st, body[:200]))
st, h, body = raw(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 5x\r\n" + auth + b"\r\n")
check("a Content-Length that is not a number -> 400", st == 400, (st, body[:200]))

# the key is judged on the headers: an upload without it is refused before its body
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n")
st, h, body = read_response(s)
check("no key: 401 before a byte of the body is sent", st == 401 and h.get("connection") == "close", (st, h))
s.close()

# a client that half-closes after its request still gets the answer (whole and streamed)
for stream in (False, True):
    body = json.dumps({"prompt": "And God said", "max_tokens": 6, "stream": stream}).encode()
    st, h, resp = raw(post_raw("/v1/completions", body, "A", b"Connection: close\r\n"), shut=True)
    ok = st == 200 and (b"[DONE]" in resp if stream else b"choices" in resp)
    check("half-closed client (stream=%s) gets its answer" % stream, ok, (st, resp[:200]))

# roles apps send, as the native template writes them
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Ur\"}"}}
msgs = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
st, _, j, _ = req("POST", "/apply-template", {"messages": msgs}, "A")
want = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Ur\"}}\n"
        "</tool_call><|im_end|>\n<|im_start|>tool\nsunny<|im_end|>\n<|im_start|>assistant\n")
check("developer, an assistant's tool call and a tool result rendered (ChatML)", st == 200 and j["prompt"] == want,
      (st, j))
st, _, j, _ = req("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 2}, "A")
check("... and answered", st == 200 and j["choices"][0]["message"]["role"] == "assistant", (st, j))

# CORS: --cors-origins names two origins; the allowed one is echoed, another gets none
for origin, allowed in (("http://a.example", True), ("http://b.example", True), ("http://evil.example", False)):
    st, h, _, _ = req("OPTIONS", "/v1/chat/completions", extra={"Origin": origin,
                                                                "Access-Control-Request-Method": "POST"})
    got = h.get("Access-Control-Allow-Origin")
    check("CORS preflight from %s" % origin, st == 200 and got == (origin if allowed else None) and
          (not allowed or h.get("Access-Control-Allow-Methods") == "GET, POST, DELETE, OPTIONS"), (st, h))
    st, h, _, _ = req("GET", "/v1/models", who="A", extra={"Origin": origin})
    check("CORS on an answer to %s" % origin, st == 200 and h.get("Access-Control-Allow-Origin") ==
          (origin if allowed else None) and h.get("Vary") == "Origin", h)
healthy("the parsing cases", "A")

# ------------------------------------------------------------------ main: uploads without a key
req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 2}, "A")  # warm
time.sleep(0.3)
idle_rss = rss_kib()


def upload(chunked, out, i):
    """Sends 4 MiB while another thread reads, as a client that wants its answer does."""
    s = socket.create_connection(("127.0.0.1", port))
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
    s.sendall(head + (b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"Content-Length: %d\r\n\r\n" % (4 << 20)))
    rd = threading.Thread(target=lambda: out.__setitem__(i, read_response(s, 20)[0]))
    rd.start()
    chunk = b"a" * 65536
    try:
        for _ in range(64):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
    except OSError:
        pass
    rd.join()
    s.close()


def uploads(chunked):
    out = [None] * 50
    ts = [threading.Thread(target=upload, args=(chunked, out, i)) for i in range(50)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


for chunked in (False, True):
    got = uploads(chunked)
    check("50 keyless 4 MiB uploads (%s): refused on the headers" % ("chunked" if chunked else "Content-Length"),
          got.count(401) >= 45, got)
time.sleep(0.3)
check("RSS within 10%% of idle after 100 keyless 4 MiB uploads (%d -> %d KiB)" % (idle_rss, rss_kib()),
      rss_kib() < idle_rss * 1.10, (idle_rss, rss_kib()))

# with the key: a chunked body past --max-body is refused at the first chunk over it
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n")
sent, chunk = 0, b"a" * 65536
try:
    for _ in range(1600):  # 100 MiB offered
        s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        sent += len(chunk)
except OSError:
    pass
st, h, body = read_response(s, 5)
s.close()
check("a chunked body over --max-body: the server stops reading past the limit (sent %d MiB of 100)" % (sent >> 20),
      sent < (4 << 20) + (16 << 20), sent)
check("... answering 413 when the client reads", st in (413, 0), (st, body[:100]))
healthy("uploads", "A")

# ------------------------------------------------------------------ main: tenants
got = probe(("A",), ("B",))
check("tenant B's probe learns nothing of A's prompt: tokens_cached and prompt_n alike for every digit",
      len(set(got[1:])) == 1 and got[1][0] >= 0, got)
st, _, j, _ = req("POST", "/completion", {"prompt": SECRET % 7, "n_predict": 1}, "A2")
check("another key of tenant A continues from A's cells", st == 200 and j["tokens_cached"] > got[7][0],
      (j.get("tokens_cached"), got[7]))
_, _, slots, _ = req("GET", "/slots", who="B")
check("/slots shows B nothing of A's slots", all("task" not in x or x.get("n_cached") is not None for x in slots) and
      any("n_cached" not in x for x in slots), slots)
# X-Tenant from a trusted proxy (127.0.0.1): two tenants behind one key
got = probe(("B", {"X-Tenant": "acme"}), ("B", {"X-Tenant": "globex"}), 3)
check("X-Tenant globex learns nothing of acme's prompt", len(set(got[1:])) == 1, got)
st, _, j, _ = req("POST", "/completion", {"prompt": SECRET % 3, "n_predict": 1}, "B", {"X-Tenant": "acme"})
check("X-Tenant acme continues from its own cells", st == 200 and j["tokens_cached"] > got[3][0], j)
st, _, j, _ = req("POST", "/tokenize", {"content": "x"}, "B", {"X-Tenant": "a b"})
check("an X-Tenant with a space -> 400", st == 400 and "X-Tenant" in j["error"]["message"], j)
st, _, j, _ = req("POST", "/tokenize", {"content": "x"}, "B", {"X-Tenant": "t" * 129})
check("an X-Tenant over 128 bytes -> 400", st == 400, j)
healthy("the tenant probes", "A")

# ------------------------------------------------------------------ main: 600 clients at once, --queue 1000
async def client(i):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"prompt": "In the beginning %d" % (i % 7), "max_tokens": 1}).encode()
        w.write(post_raw("/v1/completions", body, "A", b"Connection: close\r\n"))
        await w.drain()
        line = await asyncio.wait_for(r.readline(), 120)
        await r.read()
        w.close()
        return int(line.split()[1])
    except Exception as e:  # noqa: BLE001 - a reset or broken pipe is what must not happen
        return repr(e)


async def crowd():
    return await asyncio.gather(*(client(i) for i in range(600)))


t0 = time.time()
got = asyncio.run(crowd())
bad = [g for g in got if g not in (200, 503)]
check("600 concurrent clients with --queue 1000: each an answer or a 503, no reset (%d answered, %.1f s)"
      % (got.count(200), time.time() - t0), not bad, bad[:5])
healthy("600 concurrent clients", "A")

# ------------------------------------------------------------------ main: a 64-prompt request beside one prompt
def slots_busy():
    _, _, sl, _ = req("GET", "/slots", who="A")
    return sum(x["is_processing"] for x in sl)


big = {"prompt": ["And it came to pass in the days of %d kings" % i for i in range(64)], "max_tokens": 150,
       "ignore_eos": True, "temperature": 0}
res = {}
bs = socket.create_connection(("127.0.0.1", port))
bs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
bs.sendall(post_raw("/v1/completions", json.dumps(big).encode(), "A"))
end = time.time() + 30
while time.time() < end and slots_busy() < 4:
    time.sleep(0.05)
time.sleep(0.3)
st, _, j, raw_s = req("POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 4, "temperature": 0}, "B")
steps = j["timings"]["queue_steps"] if st == 200 else -1
check("a one-prompt request behind a 64-prompt one waits at most 2 decode steps (waited %d)" % steps,
      st == 200 and 0 <= steps <= 2, (st, raw_s[:300]))
bs.close()  # reset: the 64 prompts are cancelled
end = time.time() + 10
while time.time() < end and slots_busy():
    time.sleep(0.05)

# preempted prompts continue where they were: the list's answers equal each prompt's own
p6 = ["And Moses said unto %s" % w for w in ("the people", "Aaron", "the LORD", "Pharaoh", "Joshua", "them")]
alone = [req("POST", "/v1/completions", {"prompt": p, "max_tokens": 100, "temperature": 0}, "A")[2]["choices"][0]["text"]
         for p in p6]
pre0 = metric("kiln_requests_preempted_total", "A")
out = {}
th = threading.Thread(target=lambda: out.update(r=req("POST", "/v1/completions", {"prompt": p6, "max_tokens": 100,
                                                                                  "temperature": 0}, "A")))
th.start()
end = time.time() + 30
while time.time() < end and slots_busy() < 4:
    time.sleep(0.02)
st, _, j, _ = req("POST", "/v1/completions", {"prompt": "And Aaron said", "max_tokens": 8, "temperature": 0}, "B")
th.join()
st6, _, j6, raw6 = out["r"]
texts = [c["text"] for c in sorted(j6["choices"], key=lambda c: c["index"])] if st6 == 200 else []
check("a request that took a slot from a list preempted one of its prompts",
      metric("kiln_requests_preempted_total", "A") > pre0)
check("the list's answers, preempted and continued, equal each prompt's own byte for byte", texts == alone,
      (texts, alone))
healthy("fairness", "A")
finish("serve_hostile main")
