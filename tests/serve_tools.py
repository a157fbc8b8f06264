# serve_tools.py - tool calls held by the grammar engine through a running `kiln serve`
# (test_serve_tools.sh starts it with a Jinja template that has tool support). The KJV model
# writes scripture and never a call by itself: with tool_choice "required" or a named function
# it must still give calls that parse, name an offered tool (the named one) and whose arguments
# validate against the tool's schema (here, and by ajv when OUT is given: each line
# {"schema", "output"} for tests/grammar_validate.mjs), whole and streamed alike. Mode "all"
# (the main template) also checks parallel_tool_calls false, auto, /apply-template, and the
# 400s: a named function not offered, required without tools, required beside
# response_format, a schema kiln refuses (naming the tool).
# usage: serve_tools.py PORT MODE OUT.jsonl
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_checks import check, finish, request  # noqa: E402

port, mode, out_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = open(out_path, "a")

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "search", "description": "Search the scriptures.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string", "maxLength": 30},
                                         "book": {"type": "string", "enum": ["Genesis", "Exodus"]}},
        "required": ["query", "book"], "additionalProperties": False}}},
]
SCHEMA = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
USER = [{"role": "user", "content": "What is the weather in Jerusalem, and where does Genesis speak of light?"}]


def valid(schema, v):
    """The parts of JSON Schema the tools above use (ajv checks the same values too)."""
    if not isinstance(v, dict) or any(k not in v for k in schema["required"]):
        return False
    for k, x in v.items():
        p = schema["properties"].get(k)
        if p is None:
            return False
        if p.get("type") == "string" and not (isinstance(x, str) and len(x) <= p.get("maxLength", 1 << 30)):
            return False
        if p.get("type") == "integer" and not (isinstance(x, int) and not isinstance(x, bool)
                                               and p["minimum"] <= x <= p["maximum"]):
            return False
        if "enum" in p and x not in p["enum"]:
            return False
    return True


def post(path, body):
    return request(port, "POST", path, body, None, 120)


def calls_ok(label, calls, only=None, at_most=None):
    check("%s: at least one call" % label, isinstance(calls, list) and len(calls) > 0, calls)
    if at_most is not None:
        check("%s: at most %d call(s)" % (label, at_most), len(calls or []) <= at_most, calls)
    for c in calls or []:
        name = c.get("function", {}).get("name")
        check("%s: an id" % label, isinstance(c.get("id"), str) and c["id"], c)
        check("%s: calls an offered tool" % label, name in SCHEMA and (only is None or name == only), c)
        try:
            args = json.loads(c["function"]["arguments"])
        except (ValueError, KeyError, TypeError):
            check("%s: arguments parse as JSON" % label, False, c)
            continue
        if name in SCHEMA:
            check("%s: arguments valid for the schema" % label, valid(SCHEMA[name], args), args)
            out.write(json.dumps({"schema": SCHEMA[name], "output": c["function"]["arguments"]}) + "\n")


def chat(**kw):
    body = {"messages": USER, "tools": TOOLS, "tool_choice": "required", "max_tokens": 400, "seed": 1,
            "temperature": 0.8, "parallel_tool_calls": False}
    body.update(kw)
    return post("/v1/chat/completions", body)


def streamed(body):
    """The deltas of a streamed chat added up: (calls, finish_reason, content)."""
    s, _, _, raw = post("/v1/chat/completions", dict(body, stream=True))
    calls, fin, content = [], None, ""
    if s != 200:
        return None, (s, raw[:300]), ""
    for line in raw.decode().split("\n"):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = (json.loads(line[6:]).get("choices") or [None])[0]
        if not ch:
            continue
        fin = ch.get("finish_reason") or fin
        content += ch["delta"].get("content") or ""
        for d in ch["delta"].get("tool_calls") or []:
            while len(calls) <= d["index"]:
                calls.append({"id": "", "function": {"name": "", "arguments": ""}})
            c = calls[d["index"]]
            c["id"] = d.get("id") or c["id"]
            c["function"]["name"] += d.get("function", {}).get("name") or ""
            c["function"]["arguments"] += d.get("function", {}).get("arguments") or ""
    return calls, fin, content


seeds = range(2) if mode == "all" else range(1)
for seed in seeds:
    s, _, j, raw = chat(seed=seed)
    check("[%s] required, seed %d: 200" % (mode, seed), s == 200, raw[:300])
    if s != 200:
        continue
    c = j["choices"][0]
    check("[%s] required: finish_reason tool_calls" % mode, c["finish_reason"] == "tool_calls", c)
    calls_ok("[%s] required, seed %d" % (mode, seed), c["message"].get("tool_calls"), at_most=1)
    if seed == 0 and mode == "all":  # the same request streamed: the same call
        sc, sf, _ = streamed({"messages": USER, "tools": TOOLS, "tool_choice": "required", "max_tokens": 400,
                              "seed": 0, "temperature": 0.8, "parallel_tool_calls": False})
        check("[%s] streamed: finish_reason tool_calls" % mode, sf == "tool_calls", sf)
        calls_ok("[%s] streamed" % mode, sc, at_most=1)
        whole = [(x["function"]["name"], x["function"]["arguments"]) for x in c["message"].get("tool_calls") or []]
        check("[%s] streamed: the calls of the whole reply" % mode,
              whole == [(x["function"]["name"], x["function"]["arguments"]) for x in sc or []], (whole, sc))
for name in ("search", "get_weather") if mode == "all" else ("search",):
    s, _, j, raw = chat(tool_choice={"type": "function", "function": {"name": name}}, seed=5)
    check("[%s] named %s: 200" % (mode, name), s == 200, raw[:300])
    if s == 200:
        calls_ok("[%s] named %s" % (mode, name), j["choices"][0]["message"].get("tool_calls"), only=name, at_most=1)

if mode == "all":
    # parallel calls allowed: each one still whole and valid (the model may stop or run to max_tokens)
    s, _, j, raw = chat(parallel_tool_calls=True, max_tokens=250, seed=2)
    check("parallel: 200", s == 200, raw[:300])
    if s == 200 and j["choices"][0]["finish_reason"] == "tool_calls":
        calls_ok("parallel", j["choices"][0]["message"]["tool_calls"])
    # auto: the model may write text (the KJV model does); the reply is whatever it wrote, not an error
    s, _, j, raw = chat(tool_choice="auto", max_tokens=16)
    check("auto: 200", s == 200, raw[:300])
    # /apply-template renders a forced choice without generating
    s, _, j, raw = post("/apply-template", {"messages": USER, "tools": TOOLS, "tool_choice": "required"})
    check("/apply-template with tool_choice required: 200", s == 200 and "get_weather" in j.get("prompt", ""), raw[:300])

    def err_has(s, j, words):
        msg = (j or {}).get("error", {}).get("message", "")
        return s == 400 and all(w in msg for w in words)

    bad_tool = {"type": "function", "function": {"name": "uniq", "parameters": {
        "type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}}}
    for body, words in [
        ({"tool_choice": {"type": "function", "function": {"name": "fly"}}}, ["fly", "tools"]),
        ({"tool_choice": {"type": "function", "function": {"name": "search", "strict": True}}}, ["tool_choice"]),
        ({"tool_choice": {"type": "tool", "function": {"name": "search"}}}, ["tool_choice"]),
        ({"tools": None}, ["tool_choice", "tools"]),
        ({"tools": []}, ["tool_choice", "tools"]),
        ({"response_format": {"type": "json_object"}}, ["tool_choice", "response_format"]),
        ({"grammar": "root ::= \"x\""}, ["tool_choice", "grammar"]),
        ({"tools": TOOLS + [bad_tool]}, ["'tools'[2]", "uniqueItems"]),
    ]:
        s, _, j, raw = chat(**body)
        check("400 for %s" % json.dumps(body)[:100], err_has(s, j, words), (s, raw[:300]))
    # auto with a schema kiln refuses: the calls are parsed, not held (no error for the client)
    s, _, j, raw = chat(tools=TOOLS + [bad_tool], tool_choice="auto", max_tokens=4)
    check("auto with a schema kiln refuses: 200", s == 200, raw[:300])
    # auto beside response_format: the response's own grammar holds the reply
    s, _, j, raw = chat(tool_choice="auto", max_tokens=60, response_format={"type": "json_object"},
                        messages=[{"role": "user", "content": "Answer in JSON."}])
    check("auto with response_format: 200", s == 200, raw[:300])
out.close()
finish("serve_tools[%s]" % mode)
