#!/usr/bin/env bash
# test_deploy.sh - deploy/kiln-nginx.conf on loopback: nginx (unprivileged,
# foreground, its own prefix, pid and logs in the scratch dir) in front of two
# kiln serve replicas on free ports. Sessions stick to a replica, least_conn
# spreads the rest; SIGKILL of one replica under concurrent clients loses only
# requests in flight on it and new requests go to the survivor; the killed one
# restarted is used again; SIGTERM (--drain) of the other loses nothing and it
# exits 0. SKIP when nginx is not installed (scripts/deps.sh test).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" deploy
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "SKIP: nginx is not installed (scripts/deps.sh test installs it)"; exit 77; }

ngx=$tmp/nginx
# nginx runs as nobody when the test runs as root: it must reach its directory
[ "$(id -u)" = 0 ] && chmod 711 "$tmp"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# two replicas, each with --drain so SIGTERM finishes what runs, and the limits on
replica_args=(-np 4 -c 2048 --drain 30 --queue 32 --request-timeout 120 --max-body 65536)
srv_start "$tmp/a.log" "${replica_args[@]}" || { tu_finish test_deploy; exit; }
pa=$port pid_a=$pid
srv_start "$tmp/b.log" "${replica_args[@]}" || { kill $pid_a; tu_finish test_deploy; exit; }
pb=$port pid_b=$pid
np=$(free_port)

check "nginx-local.sh: a replica that is not a port" exit_is 2 "$src/deploy/nginx-local.sh" "$ngx" "$np" 80x
check "nginx-local.sh: no replica" exit_is 2 "$src/deploy/nginx-local.sh" "$ngx" "$np"
# the shipped config with these ports (deploy/nginx-local.sh: own prefix, pid, logs)
check "nginx -t accepts the config" exit_is 0 "$src/deploy/nginx-local.sh" "$ngx" "$np" "$pa" "$pb" -t
check "the config names both replicas twice" test "$(grep -c "server 127.0.0.1:\($pa\|$pb\) " "$ngx/kiln.conf")" = 4
"$src/deploy/nginx-local.sh" "$ngx" "$np" "$pa" "$pb" 2>"$tmp/nginx.err" &
pid_n=$!
up=0
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$np/health" >/dev/null 2>&1 && { up=1; break; }
  sleep 0.1
done
check "nginx answers /health" test $up = 1
[ $up = 1 ] || cat "$tmp/nginx.err" "$ngx/error.log" >&2

if [ $up = 1 ]; then
  check "sessions and least_conn" timeout $limit python3 "$src/tests/deploy_check.py" spread "$np" "$pa" "$pb"
  check "SIGKILL of a replica mid-run" timeout $limit python3 "$src/tests/deploy_check.py" failover "$np" \
    "$pid_a" KILL "$pa" "$pb"
  wait $pid_a 2>/dev/null
  # the killed replica back on its port: nginx uses it again once its fail_timeout passed
  port=
  if check "replica restarts on its port" srv_start "$tmp/a2.log" --port "$pa" "${replica_args[@]}"; then
    pid_a=$pid
    check "nginx reaches the restarted replica" timeout $limit python3 "$src/tests/deploy_check.py" reach "$np" "$pa" 30
    check "SIGTERM of a replica mid-run (graceful)" timeout $limit python3 "$src/tests/deploy_check.py" failover \
      "$np" "$pid_b" TERM "$pb" "$pa"
    check "the drained replica exits 0" srv_stop "$tmp/b.log" 0 "$pid_b"
    check "the other replica exits 0" srv_stop "$tmp/a2.log" TERM "$pid_a"
  fi
fi
kill -TERM $pid_n 2>/dev/null
wait $pid_n 2>/dev/null
kill $pid_a $pid_b 2>/dev/null
tu_finish test_deploy
