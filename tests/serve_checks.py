# serve_checks.py - what the kiln serve test clients share (serve_metrics.py,
# deploy_check.py): counted checks with a final summary, and one HTTP request
# with its body parsed as JSON when it is JSON.
import http.client, json, sys

counts = {"passes": 0, "fails": 0}


def check(what, cond, detail=""):
    if cond:
        counts["passes"] += 1
    else:
        counts["fails"] += 1
        print("FAIL: %s %s" % (what, detail), file=sys.stderr)


def finish(name):
    """Print the summary and exit 1 when a check failed."""
    print("%s: %d passed, %d failed" % (name, counts["passes"], counts["fails"]))
    sys.exit(1 if counts["fails"] else 0)


def request(port, method, path, body=None, headers=None, timeout=120):
    """(status, headers, JSON or None, raw body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    hdrs = dict(headers or {})
    if body is not None:
        hdrs.setdefault("Content-Type", "application/json")
    c.request(method, path, body=body, headers=hdrs)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        j = json.loads(data)
    except ValueError:
        j = None
    return r.status, dict(r.getheaders()), j, data
