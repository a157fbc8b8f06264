#!/usr/bin/env bash
# test_serve_embed.sh - kiln serve --embeddings / --reranking on a synthetic BERT file with
# BGE's vocabulary: /v1/embeddings (strings, a list, token ids, base64) matches llama.cpp's
# embeddings through the peer once normalized (cosine >= 0.9999), 256 inputs in one request,
# llama-server's /embedding shape, usage counts; /v1/rerank (F16 classifier head) orders
# documents by score as llama.cpp's llama-server --reranking does (same order, scores
# within 0.005, same token count), top_n and return_documents; and the refusals: dimensions, an empty list, 10,000
# inputs, ids out of range, a text past the context, generation on an embedding server and
# embeddings on a reranking one; the server healthy after; the official openai client's
# embeddings.create (one text, a list, base64). Skipped (77) without the peer.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-embed
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
peer=${KILN_PEER:-/tmp/kiln-peer/peer}
[ -x "$peer" ] || { echo "SKIP: llama.cpp's peer is not built ($peer; KILN_PEER names it)"; exit 77; }
vocab=$shared/vocab/ggml-vocab-bert-bge.gguf
[ -f "$vocab" ] || { echo "SKIP: $vocab is absent"; exit 77; }

model=$tmp/bert.gguf rmodel=$tmp/bert-rank.gguf
check "synth" exit_is 0 "$kiln" synth --preset tiny --arch bert --vocab "$vocab" -o "$model" -t 2
check "synth rank" exit_is 0 "$kiln" synth --preset tiny --arch bert --pooling rank --vocab "$vocab" -o "$rmodel" -t 2
printf '%s\n' 'Hello world' 'The quick brown fox jumps over the lazy dog.' 'Paris is the capital of France.' \
  'Berlin is a city in Germany.' 'bananas are yellow' > "$tmp/texts.txt"
"$peer" embed "$model" "$tmp/texts.txt" >"$tmp/ref.jsonl" 2>/dev/null

srv_start "$tmp/log" --embeddings -c 256 || { tu_finish serve-embed; exit 1; }
check "embeddings" python3 - "$port" "$tmp/ref.jsonl" <<'PY'
import base64, json, math, struct, sys, urllib.request as u, urllib.error
port, ref = sys.argv[1], [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
def post(path, body):
    req = u.Request("http://127.0.0.1:%s%s" % (port, path), json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with u.urlopen(req, timeout=120) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)
def unit(v):
    n = math.sqrt(sum(x * x for x in v)); return [x / n for x in v]
def close(a, b, what):
    c = sum(x * y for x, y in zip(unit(a), b)) / math.sqrt(sum(y * y for y in b))
    assert len(a) == len(b) and c >= 0.9999, (what, c)
texts = [r["text"] for r in ref]
st, d = post("/v1/embeddings", {"input": texts, "model": "m"})
assert st == 200 and d["object"] == "list" and d["model"] == "m", d
assert [e["index"] for e in d["data"]] == list(range(len(texts)))
assert d["usage"]["prompt_tokens"] == sum(len(r["tokens"]) for r in ref), d["usage"]
for r, e in zip(ref, d["data"]):
    assert abs(sum(x * x for x in e["embedding"]) - 1) < 1e-4
    close(r["embedding"], e["embedding"], r["text"])
st, one = post("/v1/embeddings", {"input": texts[1]})
close(ref[1]["embedding"], one["data"][0]["embedding"], "one string")
st, ids = post("/v1/embeddings", {"input": [ref[2]["tokens"], texts[0]]})
close(ref[2]["embedding"], ids["data"][0]["embedding"], "token ids")
st, b = post("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
raw = base64.b64decode(b["data"][0]["embedding"])
close(ref[0]["embedding"], list(struct.unpack("<%df" % (len(raw) // 4), raw)), "base64")
st, ll = post("/embedding", {"content": texts[0], "embd_normalize": -1})
assert st == 200 and isinstance(ll, list) and len(ll[0]["embedding"]) == 1, ll
assert max(abs(x - y) for x, y in zip(ll[0]["embedding"][0], ref[0]["embedding"])) < 5e-3
many = ["text number %d of many" % i for i in range(256)]
st, m = post("/v1/embeddings", {"input": many})
assert st == 200 and len(m["data"]) == 256, st
st, m1 = post("/v1/embeddings", {"input": many[200]})
assert max(abs(x - y) for x, y in zip(m["data"][200]["embedding"], m1["data"][0]["embedding"])) < 1e-5
for body, want in [({"input": "x", "dimensions": 8}, "dimensions"), ({"input": []}, "empty"),
                   ({"input": ["x"] * 10000}, "at most 2048"), ({"input": [[1, 2, 99999]]}, "token id"),
                   ({"input": "word " * 400}, "more than the context"), ({"input": "x", "encoding_format": "int8"}, "base64"),
                   ({"inputs": "x"}, "did you mean 'input'")]:
    st, e = post("/v1/embeddings", body)
    assert st == 400 and want in e["error"]["message"], (body if len(str(body)) < 80 else want, st, e)
st, e = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
assert st == 400 and "does not generate" in e["error"]["message"], e
st, e = post("/v1/rerank", {"query": "x", "documents": ["a"]})
assert st == 400 and "--reranking" in e["error"]["message"], e
assert u.urlopen("http://127.0.0.1:%s/health" % port).status == 200
PY
# the official openai npm client (scripts/deps.sh test installs it into tests/node)
npm_modules=$src/tests/node/node_modules
if command -v node >/dev/null && [ -f "$npm_modules/openai/package.json" ]; then
  mkdir -p "$tmp/node" && ln -s "$npm_modules" "$tmp/node/node_modules" && cp "$src/tests/serve_openai_embed.mjs" "$tmp/node/"
  check "openai client: embeddings.create" timeout $limit node "$tmp/node/serve_openai_embed.mjs" "http://127.0.0.1:$port/v1" bert.gguf
else
  skip_part "node or the openai npm package is absent (scripts/deps.sh test)"
fi
check "stops cleanly" srv_stop "$tmp/log"

model=$rmodel
srv_start "$tmp/log" --reranking -c 256 || { tu_finish serve-embed; exit 1; }
check "rerank" python3 - "$port" "$tmp/texts.txt" <<'PY'
import json, sys, urllib.request as u, urllib.error
port, docs = sys.argv[1], open(sys.argv[2]).read().split("\n")[:-1]
def post(path, body):
    req = u.Request("http://127.0.0.1:%s%s" % (port, path), json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with u.urlopen(req, timeout=120) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)
q = "what is the capital of France?"
st, d = post("/v1/rerank", {"query": q, "documents": docs, "return_documents": True})
assert st == 200 and d["object"] == "list", d
scores = [r["relevance_score"] for r in d["results"]]
assert scores == sorted(scores, reverse=True) and len(scores) == len(docs), scores
assert all(r["document"]["text"] == docs[r["index"]] for r in d["results"])
st, t = post("/rerank", {"query": q, "documents": docs, "top_n": 2})
assert [r["index"] for r in t["results"]] == [r["index"] for r in d["results"]][:2], t
st, e = post("/v1/embeddings", {"input": "x"})
assert st == 400 and "/v1/rerank" in e["error"]["message"], e
for body, want in [({"query": q}, "documents"), ({"query": 3, "documents": ["a"]}, "query"),
                   ({"query": q, "documents": ["a"], "texts": ["b"]}, "texts")]:
    st, e = post("/v1/rerank", body)
    assert st == 400 and want in e["error"]["message"], (body, e)
print("  scores", ["%d:%.4f" % (r["index"], r["relevance_score"]) for r in d["results"]])
json.dump(d, open(sys.argv[2] + ".kiln.json", "w"))
PY
check "stops cleanly" srv_stop "$tmp/log"

# llama.cpp's own llama-server --reranking on the same file and request (built by
# ../shared/peer/server.sh; skipped where it is not built): the same order and scores
llama_server=${PEER_DIR:-/tmp/kiln-peer}/server/build/bin/llama-server
if [ -x "$llama_server" ]; then
  lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$llama_server" -m "$rmodel" --reranking -c 256 -t 2 --host 127.0.0.1 --port "$lport" >"$tmp/llama.log" 2>&1 &
  lpid=$!
  check "llama-server's rerank agrees" python3 - "$lport" "$tmp/texts.txt" <<'PY'
import json, sys, time, urllib.request as u
port, docs = sys.argv[1], open(sys.argv[2]).read().split("\n")[:-1]
for _ in range(600):
    try:
        if u.urlopen("http://127.0.0.1:%s/health" % port, timeout=2).status == 200: break
    except Exception: pass
    time.sleep(0.2)
body = {"query": "what is the capital of France?", "documents": docs}
req = u.Request("http://127.0.0.1:%s/v1/rerank" % port, json.dumps(body).encode(), {"Content-Type": "application/json"})
ref = json.load(u.urlopen(req, timeout=120))
got = json.load(open(sys.argv[2] + ".kiln.json"))
r = {x["index"]: x["relevance_score"] for x in ref["results"]}
g = {x["index"]: x["relevance_score"] for x in got["results"]}
assert sorted(r) == sorted(g), (r, g)
assert all(abs(r[i] - g[i]) < 5e-3 for i in r), (r, g)
assert [x["index"] for x in ref["results"]] == [x["index"] for x in got["results"]], (ref["results"], got["results"])
assert ref["usage"]["prompt_tokens"] == got["usage"]["prompt_tokens"], (ref["usage"], got["usage"])
print("  llama-server", ["%d:%.4f" % (x["index"], x["relevance_score"]) for x in ref["results"]])
PY
  kill "$lpid"; wait "$lpid" 2>/dev/null
else
  skip_part "llama.cpp's llama-server is not built ($llama_server; ../shared/peer/server.sh builds it)"
fi
tu_finish serve-embed
