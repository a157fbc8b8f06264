# deploy_check.py - clients of kiln serve replicas behind nginx (test_deploy.sh
# starts them with deploy/kiln-nginx.conf). Which replica answered comes from the
# X-Kiln-Upstream header the config adds (nginx's $upstream_addr).
#   deploy_check.py spread PORT A B
#       X-Session-Id keeps a session on one replica; sessions and session-less
#       concurrent requests reach both
#   deploy_check.py failover PORT VICTIM_PID SIGNAL VICTIM_ADDR SURVIVOR_ADDR
#       concurrent clients (streamed and not); VICTIM_PID gets SIGNAL (KILL or
#       TERM) mid-run. KILL: only requests in flight at that moment may fail.
#       TERM (replica started with --drain): none may fail. Requests started after
#       it all end on the survivor.
#   deploy_check.py reach PORT ADDR SECONDS
#       requests through nginx until one is answered by ADDR (a restarted replica)
import http.client, json, os, signal, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import check, finish  # noqa: E402

mode, port = sys.argv[1], int(sys.argv[2])


def completion(prompt, n, stream=False, session=None, timeout=120):
    """(ok, upstreams, detail): ok when the answer is complete (n tokens, or a stream ending in [DONE])."""
    headers = {"Content-Type": "application/json"}
    if session:
        headers["X-Session-Id"] = session
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True, "stream": stream})
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", "/v1/completions", body, headers)
        r = c.getresponse()
        ups = [u.strip() for u in (r.getheader("X-Kiln-Upstream") or "").split(",") if u.strip()]
        data = r.read().decode(errors="replace")
        c.close()
    except (OSError, http.client.HTTPException) as e:
        return False, [], "connection: %r" % e
    if r.status != 200:
        return False, ups, "status %d %s" % (r.status, data[:200])
    if stream:
        ok = data.endswith("data: [DONE]\n\n") and '"error"' not in data and data.count('"finish_reason":"length"') == 1
        return ok, ups, data[-200:]
    try:
        j = json.loads(data)
        ok = j["usage"]["completion_tokens"] == n and j["choices"][0]["finish_reason"] == "length"
    except (ValueError, KeyError, IndexError, TypeError):
        ok = False
    return ok, ups, data[:200]


if mode == "spread":
    a, b = "127.0.0.1:" + sys.argv[3], "127.0.0.1:" + sys.argv[4]
    by_session = {}
    for i in range(12):
        for turn in range(2):
            ok, ups, d = completion("And God said %d %d" % (i, turn), 4, session="session-%d" % i)
            check("session request answered", ok and len(ups) == 1, (ups, d))
            if ups:
                by_session.setdefault(i, set()).add(ups[-1])
    check("a session stays on one replica", all(len(s) == 1 for s in by_session.values()), by_session)
    used = set().union(*by_session.values()) if by_session else set()
    check("sessions spread over both replicas", used == {a, b}, used)
    # without a session header: least_conn spreads concurrent requests
    got = []

    def one(i):
        got.append(completion("And Moses said %d" % i, 24))
    ths = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    check("8 concurrent requests answered", len(got) == 8 and all(g[0] for g in got), got)
    check("least_conn used both replicas", {g[1][-1] for g in got if g[1]} == {a, b}, [g[1] for g in got])

elif mode == "failover":
    victim_pid, sig = int(sys.argv[3]), sys.argv[4]
    victim, survivor = "127.0.0.1:" + sys.argv[5], "127.0.0.1:" + sys.argv[6]
    n_clients = 6
    records, lock, stop = [], threading.Lock(), threading.Event()

    def client(k):
        i = 0
        while not stop.is_set():
            t0 = time.time()
            stream = (k + i) % 2 == 0
            ok, ups, d = completion("And God said unto client %d request %d" % (k, i), 24 + 8 * (k % 3), stream)
            with lock:
                records.append((t0, time.time(), ok, ups, stream, d))
            i += 1
    ths = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    for t in ths:
        t.start()
    # the signal once both replicas answered a few (a sanitized build is slow), the end
    # once a few requests started after it were answered: each wait bounded
    def wait_for(cond, seconds):
        end = time.time() + seconds
        while time.time() < end and not cond():
            time.sleep(0.1)
    wait_for(lambda: len({r[3][-1] for r in list(records) if r[2] and r[3]}) == 2 and len(records) >= 8, 60)
    t_kill = time.time()
    os.kill(victim_pid, signal.SIGKILL if sig == "KILL" else signal.SIGTERM)
    wait_for(lambda: sum(1 for r in list(records) if r[0] >= t_kill + 0.2) >= 8, 60)
    stop.set()
    for t in ths:
        t.join(120)
    before = [r for r in records if r[1] < t_kill]
    in_flight = [r for r in records if r[0] < t_kill <= r[1]]
    after = [r for r in records if r[0] >= t_kill + 0.2]
    check("requests before the %s" % sig, len(before) >= 4, len(before))
    check("requests after the %s" % sig, len(after) >= 4, len(after))
    check("both replicas served before it", {r[3][-1] for r in before if r[3]} == {victim, survivor},
          [r[3] for r in before])
    check("every request finished before it succeeded", all(r[2] for r in before), [r for r in before if not r[2]])
    lost = [r for r in records if not r[2]]
    if sig == "KILL":
        # a failure must have been running at the kill, on the victim (or unknown: cut before headers)
        bad = [r for r in lost if not (r[0] < t_kill <= r[1] and (not r[3] or r[3][-1] == victim))]
        check("only requests in flight on the killed replica failed", not bad, bad)
    else:
        check("graceful: no request failed", not lost, lost)
    check("every request started after it succeeded", all(r[2] for r in after), [r for r in after if not r[2]])
    check("every request started after it ended on the survivor", all(r[3] and r[3][-1] == survivor for r in after),
          [r[3] for r in after])
    print("failover %s: %d requests, %d in flight at the signal, %d lost, %d retried by nginx" %
          (sig, len(records), len(in_flight), len(lost), sum(1 for r in records if len(r[3]) > 1)))

elif mode == "reach":
    addr, seconds = "127.0.0.1:" + sys.argv[3], float(sys.argv[4])
    end, reached = time.time() + seconds, False
    while time.time() < end and not reached:
        got = []
        ths = [threading.Thread(target=lambda i=i: got.append(completion("And Noah said %d" % i, 8))) for i in range(4)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(60)
        reached = any(g[1] and g[1][-1] == addr for g in got)
        if not reached:
            time.sleep(0.5)
    check("nginx sends to the restarted replica again", reached)

finish("deploy_check " + mode)
