# serve_grammar.py - structured output through a running `kiln serve`
# (test_serve_grammar.sh starts it): response_format json_schema / json_object
# on /v1/chat/completions and /v1/completions, grammar and json_schema on
# /completion, streamed and not, several schemas decoded in one batch, a prompt
# reused from the cache under another schema; every answer checked against its
# schema here; and the malformed and hostile ones, each a 400 naming the problem
# within a bound of time.
# usage: serve_grammar.py PORT
import json, os, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import check, finish, request  # noqa: E402

port = int(sys.argv[1])


def post(path, body, timeout=120):
    return request(port, "POST", path, body, None, timeout)


PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3}},
    "required": ["name", "age", "tags"]}


def valid_person(v):
    return (isinstance(v, dict) and set(v) == {"name", "age", "tags"} and isinstance(v["name"], str)
            and len(v["name"]) <= 10 and isinstance(v["age"], int) and 0 <= v["age"] <= 120
            and isinstance(v["tags"], list) and len(v["tags"]) <= 3 and all(t in ("red", "green", "blue") for t in v["tags"]))


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def chat(rf, seed, stream=False, **kw):
    body = {"messages": [{"role": "user", "content": "Tell me of a man."}], "max_tokens": 400, "seed": seed,
            "temperature": 1.0, "response_format": rf, "stream": stream}
    body.update(kw)
    return post("/v1/chat/completions", body)


# ---- chat: json_schema, and json_object
rf_schema = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
for seed in range(3):
    st, _, j, raw = chat(rf_schema, seed)
    check("chat json_schema: 200", st == 200, raw[:300])
    if st == 200:
        c = j["choices"][0]
        v = parsed(c["message"]["content"])
        check("chat json_schema: the content is valid for the schema", valid_person(v), c["message"]["content"])
        check("chat json_schema: it stopped at the end of the JSON", c["finish_reason"] == "stop", c["finish_reason"])
st, _, j, raw = chat({"type": "json_object", "schema": {"type": "array", "items": {"type": "boolean"}, "maxItems": 4}}, 1)
v = parsed(j["choices"][0]["message"]["content"]) if st == 200 else None
check("chat json_object with llama-server's schema", isinstance(v, list) and all(isinstance(x, bool) for x in v), raw[:300])
st, _, j, raw = chat({"type": "json_object"}, 4, max_tokens=60)
check("chat json_object: an object starts the answer", st == 200 and j["choices"][0]["message"]["content"].startswith("{"), raw[:300])
st, _, j, raw = chat({"type": "text"}, 1, max_tokens=8)
check("response_format text: no constraint", st == 200, raw[:200])

# ---- streamed: the pieces join into the valid JSON
st, _, _, raw = chat(rf_schema, 7, stream=True)
text = ""
for block in raw.decode().split("\n\n"):
    if block.startswith("data: ") and block[6:] != "[DONE]":
        e = json.loads(block[6:])
        for ch in e.get("choices", []):
            text += (ch.get("delta") or {}).get("content") or ""
check("streamed json_schema: the joined deltas are valid", st == 200 and valid_person(parsed(text)), text)

# ---- completions and llama-server's /completion
st, _, j, raw = post("/v1/completions", {"prompt": "And the king said", "max_tokens": 300, "seed": 3,
                                         "response_format": rf_schema})
check("/v1/completions json_schema", st == 200 and valid_person(parsed(j["choices"][0]["text"])), raw[:300])
st, _, j, raw = post("/completion", {"prompt": "And the king said", "n_predict": 40, "seed": 3,
                                     "grammar": "root ::= (\"yea\" | \"nay\") \", \" [a-z]{1,8} \".\""})
ok = st == 200 and j["content"][:3] in ("yea", "nay") and j["content"].endswith(".") and j["stop_type"] == "eos"
check("/completion grammar", ok, raw[:300])
st, _, j, raw = post("/completion", {"prompt": "And", "n_predict": 300, "seed": 5, "json_schema": PERSON})
check("/completion json_schema", st == 200 and valid_person(parsed(j["content"])), raw[:300])
st, _, j, raw = post("/completion", {"prompt": "And", "n_predict": 8, "grammar": ""})
check("/completion: an empty grammar is none", st == 200, raw[:200])

# ---- batching: several schemas decoded side by side, each answer valid for its own
schemas = [
    ({"type": "integer", "minimum": 10, "maximum": 99}, lambda v: isinstance(v, int) and 10 <= v <= 99),
    ({"type": "string", "pattern": "^[A-Z][a-z]{2,5}$"}, lambda v: isinstance(v, str) and v[:1].isupper() and 3 <= len(v) <= 6),
    ({"enum": ["alpha", "beta", 3]}, lambda v: v in ("alpha", "beta", 3)),
    (PERSON, valid_person),
    ({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 2},
     lambda v: isinstance(v, list) and len(v) == 2 and all(isinstance(x, bool) for x in v)),
    ({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]},
     lambda v: isinstance(v, dict) and len(v.get("d", "")) == 10),
]
results = [None] * (2 * len(schemas))


def one(i):
    s, _ = schemas[i % len(schemas)]
    results[i] = post("/completion", {"prompt": "And it came to pass", "n_predict": 300, "seed": i, "temperature": 1.0,
                                      "json_schema": s})


threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i, r in enumerate(results):
    st, _, j, raw = r
    ok = schemas[i % len(schemas)][1]
    check("batched request %d: valid for its schema" % i, st == 200 and ok(parsed(j["content"])), raw[:300])
    check("batched request %d: ended by the grammar" % i, st == 200 and j["stop_type"] == "eos", raw[:200])

# ---- the same prompt again (its cells cached) under another schema
st, _, j, raw = post("/completion", {"prompt": "And it came to pass", "n_predict": 50, "seed": 9,
                                     "json_schema": {"type": "boolean"}})
check("cached prompt, new schema: valid", st == 200 and isinstance(parsed(j["content"]), bool), raw[:300])
check("cached prompt, new schema: the cache was used", st == 200 and j["tokens_cached"] > 0, raw[:300])

# ---- malformed and hostile: 400 naming the problem, within a bound of time
bad = [
    ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "type must be text, json_object or json_schema"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema"}}, "needs a 'json_schema' object"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "array", "uniqueItems": True}}}}, "uniqueItems"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "str"}}}}, "unknown type 'str'"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "bogus": 1}}}, "json_schema.bogus is not supported"),
    ("/v1/chat/completions", {"response_format": "json"}, "must be an object"),
    ("/v1/completions", {"response_format": {"type": "json_object"}, "grammar": "root ::= \"a\""}, "only one of"),
    ("/completion", {"response_format": {"type": "json_object"}}, "use 'grammar' or 'json_schema'"),
    ("/completion", {"grammar": "root ::= \"a\" |\n  missing"}, "line 2, column 3"),
    ("/completion", {"grammar": 5}, "'grammar' must be a string"),
    ("/completion", {"grammar": "root ::= root \"x\" | \"y\""}, "left-recursive"),
    ("/completion", {"grammar": "root ::= ((((\"a\"{0,99}){0,99}){0,99}){0,99})"}, "too large"),
    ("/completion", {"grammar": "root ::= " + "(" * 2000 + "\"a\"" + ")" * 2000}, "nested deeper"),
    ("/completion", {"json_schema": json.loads("[" * 300 + "]" * 300)}, "must be a JSON Schema"),
    ("/completion", {"json_schema": {"type": "string", "pattern": "^(?=x)$"}}, "lookaround"),
    ("/completion", {"json_schema": {"type": "string", "maxLength": 100000000}}, "limit"),
    ("/completion", {"json_schema": {"$ref": "#/$defs/none"}}, "does not resolve"),
]
for path, body, want in bad:
    body = dict(body)
    body.setdefault("prompt", "x")
    if path == "/v1/chat/completions":
        body.pop("prompt")
        body["messages"] = [{"role": "user", "content": "x"}]
    t0 = time.time()
    st, _, j, raw = post(path, body, timeout=60)
    msg = ((j or {}).get("error") or {}).get("message", "")
    check("%s %s: 400" % (path, want), st == 400 and want in msg, "%d %s" % (st, raw[:300]))
    check("%s %s: answered within 10 s" % (path, want), time.time() - t0 < 10, "%.1f s" % (time.time() - t0))

# a deeply nested schema inside a valid body: refused, not a crash
deep = {"type": "array"}
cur = deep
for _ in range(400):
    cur["items"] = {"type": "array"}
    cur = cur["items"]
st, _, j, raw = post("/completion", {"prompt": "x", "json_schema": deep})
check("a schema nested 400 deep: 400", st == 400 and "nested deeper" in raw.decode(), raw[:300])
st, _, j, _ = request(port, "GET", "/health")
check("the server is still up", st == 200)
finish("serve_grammar")
