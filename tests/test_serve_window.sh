#!/usr/bin/env bash
# test_serve_window.sh - kiln serve on a sliding-window model (shared/models/families/
# gemma3-kjv-q4_0.gguf: window 8 on five of six layers, batches of 64, so its windowed
# cache is 256 cells and a 330-token conversation takes cells back): a prompt sharing a
# prefix whose window's cells were taken is recomputed, not reused (same tokens as a
# server that reuses nothing; /metrics counts the recomputed tokens); one sharing a
# prefix whose window is still held reuses it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-window
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
model=$shared/models/families/gemma3-kjv-q4_0.gguf
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }

if check "reference server starts" srv_start "$tmp/ref.log" -np 1 -c 512 --no-prefix-share --cache-ram 0; then
  ref_pid=$pid ref_port=$port
  if check "server starts" srv_start "$tmp/win.log" -np 1 -c 512 -b 64; then
    check "window-dropped prefixes recomputed, held ones reused" timeout $limit python3 - "$port" "$ref_port" \
      "$shared/text/kjv_test_a.txt" <<'PY'
import os, re, sys
sys.path.insert(0, os.environ.get("KILN_SRC", ".") + "/tests")
from serve_checks import check, finish, request
port, ref_port, text = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3]).read()

def complete(p, ids, n=16, cache=True):
    st, _, j, raw = request(p, "POST", "/v1/completions",
                            {"prompt": ids, "max_tokens": n, "temperature": 0, "cache_prompt": cache})
    check("completion 200", st == 200, raw[:200])
    return j or {"choices": [{"text": ""}], "timings": {}}

def window_metric():
    _, _, _, raw = request(port, "GET", "/metrics")
    m = re.search(rb"^kiln_prefix_cache_window_recomputed_tokens_total (\S+)$", raw, re.M)
    check("the window metric is exported", m is not None)
    return float(m.group(1)) if m else -1

ids = []  # /tokenize takes at most a context's worth of text: ask in pieces (ids only need to be real text)
for k in range(0, 8000, 1000):
    _, _, tok, raw = request(port, "POST", "/tokenize", {"content": text[k:k + 1000]})
    check("tokenize 200", tok is not None and "tokens" in tok, raw[:200])
    ids += (tok or {}).get("tokens", [])
check("text long enough", len(ids) >= 400, len(ids))
first = [1] + ids[:300]
complete(port, first, n=30)  # positions 0..329: the windowed cache (256 cells) takes cells back
w0 = window_metric()

# shares 60 tokens with the slot's cache, but positions 53..59 were taken: recomputed whole
second = [1] + ids[:59] + ids[200:240]
got = complete(port, second)
want = complete(ref_port, second, cache=False)
check("dropped window: the reference's tokens", got["choices"][0]["text"] == want["choices"][0]["text"],
      (got["choices"][0]["text"], want["choices"][0]["text"]))
check("dropped window: nothing reused", got["timings"].get("cache_n") == 0, got["timings"])
check("dropped window: 60 tokens counted as recomputed", window_metric() - w0 == 60, window_metric() - w0)

# continues the last conversation (its window held): reused
third = second + ids[240:260]
got = complete(port, third)
want = complete(ref_port, third, cache=False)
check("held window: the reference's tokens", got["choices"][0]["text"] == want["choices"][0]["text"])
check("held window: the prefix reused", got["timings"].get("cache_n", 0) >= len(second), got["timings"])
check("held window: nothing more recomputed", window_metric() - w0 == 60)
finish("serve window")
PY
    check "SIGTERM: exit 0" srv_stop "$tmp/win.log"
  fi
  check "reference SIGTERM: exit 0" srv_stop "$tmp/ref.log" TERM "$ref_pid"
fi
tu_finish test_serve_window
