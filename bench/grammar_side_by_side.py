#!/usr/bin/env python3
"""Structured output, kiln serve beside llama.cpp's llama-server on the same GGUF file.

usage: bench/grammar_side_by_side.py KILN MODEL SCHEMA [REQUESTS] [N_PREDICT]
  KILN     the kiln binary (build/kiln)
  MODEL    a GGUF file both run (e.g. the 1.1B bench file, or a Qwen-vocabulary synth file)
  SCHEMA   a JSON Schema file (bench/schemas/nested20.json)
llama-server comes from ../shared/peer/server.sh (built there the first time, about
12 minutes). Both servers get one slot, 2 threads, a 4096-token context. Each gets
REQUESTS (default 8) requests to /completion, one after the other, first without the
schema (ignore_eos, N_PREDICT tokens, default 128) and then with it ("json_schema",
until the grammar ends the answer or N_PREDICT), the same seed per request on both.
Prints generation tokens/s (median of the requests, from each server's own timings)
with and without the schema, the ratio, and kiln's constrained tg over llama.cpp's.
"""
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))


def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/completion" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1200) as r:
        return json.loads(r.read())


def wait_healthy(port, proc, seconds=600):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit("the server on port %d exited (%d)" % (port, proc.returncode))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit("the server on port %d did not become healthy" % port)


def run(name, port, schema, n, n_predict):
    rows = {}
    for mode in ("plain", "schema"):
        tps, toks = [], []
        for i in range(n):
            body = {"prompt": "And it came to pass, that", "n_predict": n_predict, "seed": 1000 + i,
                    "temperature": 0.8, "cache_prompt": False}
            if mode == "plain":
                body["ignore_eos"] = True
            else:
                body["json_schema"] = schema
            j = post(port, body)
            tps.append(j["timings"]["predicted_per_second"])
            toks.append(j["timings"]["predicted_n"])
        rows[mode] = (statistics.median(tps), statistics.median(toks))
    return rows


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    kiln, model, schema_path = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    n_predict = int(sys.argv[5]) if len(sys.argv) > 5 else 128
    schema = json.load(open(schema_path))
    server_sh = os.path.join(here, "..", "..", "shared", "peer", "server.sh")
    llama = subprocess.run(["bash", server_sh], check=True, capture_output=True, text=True).stdout.strip().split("\n")[-1]
    servers = [
        ("llama.cpp", 18701, [llama, "-m", model, "-t", "2", "-np", "1", "-c", "4096", "--host", "127.0.0.1",
                              "--port", "18701"]),
        ("kiln", 18702, [kiln, "serve", "-m", model, "-t", "2", "-np", "1", "-c", "4096", "--port", "18702"]),
    ]
    results = {}
    for name, port, cmd in servers:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(port, proc)
            run(name, port, schema, 1, 16)  # warm-up: both compile and cache the schema's grammar
            results[name] = run(name, port, schema, n, n_predict)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    print("| server | tg t/s | tg t/s with the schema | ratio | tokens with the schema |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in ("llama.cpp", "kiln"):
        p, s = results[name]["plain"], results[name]["schema"]
        print("| %s | %.2f | %.2f | %.3f | %d |" % (name, p[0], s[0], s[0] / p[0], s[1]))
    print("\nkiln / llama.cpp, constrained tg: %.2f" % (results["kiln"]["schema"][0] / results["llama.cpp"]["schema"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
