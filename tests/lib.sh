# lib.sh - what the shell tests share: the kiln binary and ../shared from the
# environment, a scratch directory removed on exit, and the assertions below,
# which count passes and failures for tu_finish.
# Use: . "$(dirname "${BASH_SOURCE[0]}")/lib.sh" PREFIX  (sets kiln, shared, tmp)
kiln=${KILN_BIN:?KILN_BIN is not set}
shared=${KILN_SHARED:-../shared}
tmp=$(mktemp -d "/tmp/kiln-test-$1-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0 skips=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what" >&2; fails=$((fails + 1)); fi
}
exit_is() { # exit_is CODE COMMAND...: the command exits with CODE (stdout/stderr to $tmp/out, $tmp/err)
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || { echo "  exit $rc, want $want: $*" >&2; cat "$tmp/err" >&2; return 1; }
}
err_has() { grep -qF -- "$1" "$tmp/err" || { echo "  stderr lacks '$1':" >&2; cat "$tmp/err" >&2; return 1; }; }
skip_part() { # skip_part WHY: a part that cannot run here (data or a tool absent); said, and counted
  echo "SKIP: $*"
  skips=$((skips + 1))
}
tu_finish() { # tu_finish NAME: the summary line; exit 1 on a failure, else 77 (ctest: skipped) when a
  # part was skipped, so that a pass means every check ran
  local sk=""; [ "$skips" -eq 0 ] || sk=", $skips parts skipped"
  echo "$1: $passes passed, $fails failed$sk"
  [ "$fails" -eq 0 ] || return 1
  [ "$skips" -eq 0 ] || return 77
}
