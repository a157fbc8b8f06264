#!/usr/bin/env bash
# The one list of what kiln needs from Debian 12, by purpose, and the one place
# that installs it. README's two commands and .ci/run all come through here.
#
#   scripts/deps.sh build   what `cmake --build` needs (the default)
#   scripts/deps.sh test    build + what the test suite needs
#   scripts/deps.sh suite   test + what llama.cpp's server test suite needs (tests/llama_server_suite.sh)
#   scripts/deps.sh --list [build|test|suite]   print the package names and exit
#
# Missing packages are installed with apt-get as root, or through sudo when it
# works without a password; otherwise the script names the packages and the
# command to install them, and exits 1.
set -euo pipefail

build_pkgs=(cmake gcc make pkg-config libpcre2-dev libmicrohttpd-dev libcjson-dev)
# clang: the fuzz harness build; python3: the shell tests read JSON with it;
# nodejs/npm: llama.cpp's peer libraries (../shared/peer) and the OpenAI client tests;
# nginx: the load-balancer test; curl: the server tests; python3-jinja2: the second chat-template
# oracle (test_jinja_conformance, for what @huggingface/jinja cannot render).
test_pkgs=(clang python3 python3-jinja2 nodejs npm nginx curl git)
# llama.cpp's own server tests (pytest) and the Python packages they import
suite_pkgs=(python3-pytest python3-requests python3-numpy python3-prometheus-client python3-wget python3-aiohttp
  python3-filelock)

list=0
what=build
for a in "$@"; do
  case "$a" in
    --list) list=1 ;;
    build | test | suite) what=$a ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown argument '$a' (build, test, suite, --list)" >&2; exit 2 ;;
  esac
done
pkgs=("${build_pkgs[@]}")
[ "$what" = build ] || pkgs+=("${test_pkgs[@]}")
[ "$what" = suite ] && pkgs+=("${suite_pkgs[@]}")
if [ $list = 1 ]; then
  echo "${pkgs[*]}"
  exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
  # node and npm may come from elsewhere than Debian (nvm, nodesource): a working command is enough.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm packages the tests use as oracles and clients (tests/node/package.json, exact
# versions) go into tests/node/node_modules, where the tests look for them.
npm_deps() {
  [ "$what" = build ] && return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/node"
  [ -f "$dir/node_modules/.kiln-installed" ] && [ "$dir/node_modules/.kiln-installed" -nt "$dir/package.json" ] && return 0
  echo "deps.sh: installing the tests' npm packages into $dir/node_modules" >&2
  if (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --silent >/dev/null); then
    touch "$dir/node_modules/.kiln-installed"
  else
    echo "deps.sh: npm install in $dir failed (the tests that need these packages will SKIP)" >&2
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  npm_deps
  exit 0
fi

if [ "$(id -u)" = 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "kiln needs these Debian packages, which are not installed: ${missing[*]}" >&2
  echo "install them as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
