# serve_lib.sh - what the kiln serve shell tests share (after lib.sh): the model
# they serve and starting/stopping a server on a free loopback port.
# Sets model (../shared/models/kjv-q8_0.gguf, else models/kjv-q4_0.gguf) and limit.
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed (scripts/deps.sh test)"; exit 77; }
model=$shared/models/kjv-q8_0.gguf
[ -f "$model" ] || model=$src/models/kjv-q4_0.gguf
[ -f "$model" ] || { echo "SKIP: neither ../shared/models/kjv-q8_0.gguf nor models/kjv-q4_0.gguf"; exit 77; }
limit=60; [ -n "${KILN_SANITIZED:-}" ] && limit=300

# srv_start LOG ARGS...: a server on a free port; sets pid and port, false if it never got healthy
srv_start() {
  local log=$1; shift
  : >"$log"
  "$kiln" serve -m "$model" --port 0 --metrics "$@" 2>"$log" &
  pid=$! port=
  for _ in $(seq 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && python3 -c 'import sys, urllib.request as u; sys.exit(u.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).status != 200)' "$port" 2>/dev/null && return 0
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  echo "  server did not become healthy:" >&2; cat "$log" >&2
  return 1
}
# srv_stop LOG [SIGNAL] [PID]: SIGTERM (or SIGNAL), exit 0 within 60 s
srv_stop() {
  local p=${3:-$pid}
  kill -"${2:-TERM}" "$p" 2>/dev/null
  for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  wait "$p"; local rc=$?
  [ $rc -eq 0 ] || { echo "  server exit $rc:" >&2; tail -20 "$1" >&2; return 1; }
}
