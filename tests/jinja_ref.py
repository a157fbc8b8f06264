#!/usr/bin/env python3
"""jinja_ref.py - the second reference of test_jinja_conformance: Python's Jinja set up as
transformers sets it up for chat templates (trim_blocks, lstrip_blocks, loop controls,
tojson without HTML escaping, raise_exception, strftime_now on a fixed clock), except
that lists may be changed (append/pop), as llama.cpp and kiln allow. For the pairs
@huggingface/jinja cannot render. Writes OUT/<template>.<case>.out or .err (an error;
"raise_exception: MESSAGE" when the template raised it).
usage: python3 jinja_ref.py CONVERSATIONS.json OUT_DIR TEMPLATE.jinja..."""
import datetime
import json
import os
import re
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import SandboxedEnvironment

conv_path, out_dir, templates = sys.argv[1], sys.argv[2], sys.argv[3:]
conv = json.load(open(conv_path, encoding="utf-8"))
now = datetime.datetime.strptime(conv["now"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
# DeepSeek V3.2's templates parse string arguments with from_json (its own encoder registers it);
# kiln has the filter too
env.filters["from_json"] = json.loads
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
# transformers' {% generation %} tags mark the assistant's text and print nothing
generation = re.compile(r"(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)", re.S)

os.makedirs(out_dir, exist_ok=True)
for path in templates:
    name = os.path.basename(path)[: -len(".jinja")]
    src = open(path, encoding="utf-8").read()
    src = generation.sub(lambda m: ("" if m[2] else m[1]) + ("" if m[3] else m[4]), src)
    try:
        tmpl, perr = env.from_string(src), None
    except Exception as e:
        tmpl, perr = None, "parse: %s" % e
    for c in conv["cases"]:
        ctx = dict(conv["common"], **c["context"])
        if c.get("tools"):
            ctx["tools"] = conv["tools"]
        base = os.path.join(out_dir, "%s.%s" % (name, c["name"]))
        if perr:
            open(base + ".err", "w").write(perr)
            continue
        try:
            text = tmpl.render(**json.loads(json.dumps(ctx)))
            open(base + ".out", "w", encoding="utf-8", newline="").write(text)
        except Raised as e:
            open(base + ".err", "w").write("raise_exception: %s" % e)
        except (TemplateError, Exception) as e:
            open(base + ".err", "w").write("%s: %s" % (type(e).__name__, e))
