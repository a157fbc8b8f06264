# serve_seeds.py - the request fuzzer's seed corpus from the hostile suite's cases
# (tests/serve_corpus.py): one file per case, its first byte the route as
# fuzz_serve.c numbers them, then the body. usage: serve_seeds.py OUTDIR
import hashlib, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from serve_corpus import CASES, FUZZ_SELECTOR  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for route, body, status, _ in CASES:
    data = bytes([FUZZ_SELECTOR[route]]) + body
    name = "%s-%d-%s" % (route, status, hashlib.sha1(data).hexdigest()[:12])
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("%d seeds in %s" % (len(CASES), out))
