#!/usr/bin/env bash
# llama_server_suite.sh - llama.cpp's own server test suite (pytest, tools/server/tests in the
# peer source) run against llama-server and against `kiln serve`, one server at a time, on the
# same model; prints, by test file, the tests that pass on llama-server and fail on kiln.
# A measurement, not part of the default ctest (test_llama_server_suite.sh runs a bounded part).
#
#   tests/llama_server_suite.sh [options] [FILE.py|NODEID ...]   (default: every unit/test_*.py)
#     --kiln-only       run kiln alone: exit 1 when any selected test fails on it
#     --reuse-peer      take llama-server's results from the last run in --out (same selection)
#     --table           run nothing: the table from llama.xml and kiln.xml in --out
#     --out DIR         where results and logs go (default /tmp/kiln-llama-suite)
#     -k EXPR           passed to pytest
# Environment: KILN_BIN (default build/kiln), LLAMA_SERVER (default
# /tmp/kiln-peer/server/build/bin/llama-server, ../shared/peer/server.sh builds it), PEER_SRC
# (default /tmp/kiln-peer/src), KILN_SUITE_MODEL (default ../shared/models/kjv-q4_0.gguf),
# SUITE_TIMEOUT (seconds for one server's run, default 3600), PYTHON (one with the packages).
#
# Every server the suite starts gets `-m MODEL` in place of its --hf-repo/--hf-file/--model-url/
# --model arguments (nothing is downloaded; the tests that expect stories15M's text fail on both,
# and count for neither). The files that import the `openai` Python package (not in Debian) run
# with that import removed and the tests that call it deselected. Needs Debian's python3-pytest,
# -requests, -numpy, -prometheus-client, -wget, -aiohttp, -filelock: scripts/deps.sh suite.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN_BIN:-$root/build/kiln}
llama=${LLAMA_SERVER:-/tmp/kiln-peer/server/build/bin/llama-server}
peer_src=${PEER_SRC:-/tmp/kiln-peer/src}
model=${KILN_SUITE_MODEL:-$root/../shared/models/kjv-q4_0.gguf}
out=/tmp/kiln-llama-suite
kiln_only=0 reuse=0 table=0 kexpr="" sel=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kiln-only) kiln_only=1 ;;
    --reuse-peer) reuse=1 ;;
    --table) table=1 ;;
    --out) out=$2; shift ;;
    -k) kexpr=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "llama_server_suite.sh: unknown option '$1'" >&2; exit 2 ;;
    *) sel+=("$1") ;;
  esac
  shift
done

skip() { echo "SKIP: $*"; exit 77; }
tests_src=$peer_src/tools/server/tests
[ -d "$tests_src/unit" ] || skip "llama.cpp's server tests are not at $tests_src (../shared/peer/build.sh)"
# Debian's python3 holds the packages deps.sh installs; a python3 earlier on PATH (pyenv) may not
py=
for c in ${PYTHON:-} python3 /usr/bin/python3; do
  "$c" -c 'import pytest, requests, numpy, prometheus_client, wget, aiohttp, filelock' 2>/dev/null && { py=$c; break; }
done
[ -n "$py" ] ||
  skip "pytest and the suite's Python packages are not installed (scripts/deps.sh suite)"
[ -x "$kiln" ] || skip "no kiln binary at $kiln (build first, or set KILN_BIN)"
[ -f "$model" ] || skip "no model at $model"
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
if [ $kiln_only = 0 ] && [ $reuse = 0 ] && [ ! -x "$llama" ]; then
  skip "no llama-server at $llama (../shared/peer/server.sh builds it; or --kiln-only)"
fi

mkdir -p "$out"
top=$(mktemp -d /tmp/kiln-suite-XXXXXX)
trap 'rm -rf "$top"' EXIT
# the tests name the source's chat templates as ../../../models/templates/...
work=$top/tools/server/tests
mkdir -p "$work"
ln -s "$peer_src/models" "$top/models"
cp -r "$tests_src/." "$work/"
cd "$work" || exit 1

# The models are local: the session fixture that starts every preset once to download its
# model would only start servers.
sed -i 's/^\( *\)ServerPreset.load_all()$/\1pass/' conftest.py
# Without the openai package: drop its import, deselect the tests that use it (by name).
deselect=$("$py" - <<'EOF'
import ast, pathlib
out = []
for f in sorted(pathlib.Path("unit").glob("test_*.py")):
    src = f.read_text()
    if "from openai import" not in src:
        continue
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            if any(isinstance(n, ast.Name) and n.id == "OpenAI" for n in ast.walk(node)):
                out.append(f"{f}::{node.name}")
    f.write_text("\n".join("" if l.startswith("from openai import") else l for l in src.split("\n")))
print("\n".join(out))
EOF
)

# wrapper SERVER [SUBCOMMAND]: a server binary that takes the suite's arguments with the model
# arguments replaced by -m MODEL
wrapper() {
  cat >"$1" <<EOF
#!/usr/bin/env bash
args=()
while [ \$# -gt 0 ]; do
  case "\$1" in
    --hf-repo | -hf | -hfr | --hf-file | -hff | --model-url | -mu | -m | --model) shift 2 ;;
    --offline) shift ;;
    *) args+=("\$1"); shift ;;
  esac
done
exec $2 -m "$model" "\${args[@]}"
EOF
  chmod +x "$1"
}
wrapper "$work/kiln-server" "\"$kiln\" serve"
wrapper "$work/llama-server" "\"$llama\""

files=()
if [ ${#sel[@]} -eq 0 ]; then
  for f in unit/test_*.py; do files+=("$f"); done
else
  for s in "${sel[@]}"; do case "$s" in unit/*) files+=("$s") ;; *) files+=("unit/$s") ;; esac; done
fi
pyargs=(-m "not slow" -p no:cacheprovider -q -rN)
[ -n "$kexpr" ] && pyargs+=(-k "$kexpr")
while read -r d; do [ -n "$d" ] && pyargs+=(--deselect "$d"); done <<<"$deselect"

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run_one() { # run_one NAME BIN: junit XML in $out/NAME.xml, log in $out/NAME.log
  local port; port=$(free_port)
  echo "running the suite against $1 (${#files[@]} files, log $out/$1.log)" >&2
  PORT=$port LLAMA_SERVER_BIN_PATH=$2 timeout "${SUITE_TIMEOUT:-3600}" \
    "$py" -m pytest "${pyargs[@]}" --junitxml="$out/$1.xml" "${files[@]}" >"$out/$1.log" 2>&1
  echo "  $(tail -1 "$out/$1.log")" >&2
}

if [ $table = 1 ]; then :; else
sel_key=$(printf '%s\n' "${files[@]}" "$kexpr" | md5sum | cut -c1-16)
if [ $kiln_only = 0 ]; then
  if [ $reuse = 1 ] && [ -f "$out/llama.xml" ] && [ "$(cat "$out/llama.sel" 2>/dev/null)" = "$sel_key" ]; then
    echo "llama-server: the results of the last run in $out" >&2
  else
    [ -x "$llama" ] || skip "no llama-server at $llama"
    run_one llama "$work/llama-server"
    echo "$sel_key" >"$out/llama.sel"
  fi
fi
run_one kiln "$work/kiln-server"
fi

"$py" - "$out" "$kiln_only" <<'EOF'
import sys, collections, xml.etree.ElementTree as ET
out, kiln_only = sys.argv[1], sys.argv[2] == "1"
def results(name):
    r = {}
    for tc in ET.parse(f"{out}/{name}.xml").iter("testcase"):
        key = tc.get("classname", "").replace(".", "/") + ".py::" + tc.get("name")
        kids = {c.tag for c in tc}
        r[key] = "skip" if "skipped" in kids else "fail" if kids & {"failure", "error"} else "pass"
    return r
k = results("kiln")
if kiln_only:
    bad = sorted(t for t, s in k.items() if s == "fail")
    print(f"kiln: {sum(s == 'pass' for s in k.values())} passed, {len(bad)} failed, "
          f"{sum(s == 'skip' for s in k.values())} skipped")
    for t in bad: print("  FAIL", t)
    sys.exit(1 if bad else 0)
l = results("llama")
count = lambda r, s: sum(v == s for v in r.values())
print(f"llama-server: {count(l, 'pass')} passed, {count(l, 'fail')} failed, {count(l, 'skip')} skipped")
print(f"kiln:         {count(k, 'pass')} passed, {count(k, 'fail')} failed, {count(k, 'skip')} skipped")
only = sorted(t for t, s in l.items() if s == "pass" and k.get(t) != "pass")
by = collections.Counter(t.split("::")[0] for t in only)
print(f"kiln-only failures: {len(only)}")
print(f"{'file':<40} {'kiln-only':>9}")
for f, n in sorted(by.items(), key=lambda x: (-x[1], x[0])): print(f"{f:<40} {n:>9}")
with open(f"{out}/kiln-only.txt", "w") as fh: fh.write("\n".join(only) + "\n")
print(f"(the tests: {out}/kiln-only.txt)")
EOF
