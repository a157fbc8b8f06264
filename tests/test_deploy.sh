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
mkdir -p "$ngx"
run_nginx=("$nginx")
if [ "$(id -u)" = 0 ]; then
  # root: nginx still runs as nobody, with only its own directory writable
  chmod 711 "$tmp"
  chown 65534:65534 "$ngx"
  run_nginx=(setpriv --reuid=65534 --regid=65534 --clear-groups "$nginx")
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# two replicas, each with --drain so SIGTERM finishes what runs
replica_args=(-np 4 -c 2048 --drain 30)
srv_start "$tmp/a.log" "${replica_args[@]}" || { tu_finish test_deploy; exit; }
pa=$port pid_a=$pid
srv_start "$tmp/b.log" "${replica_args[@]}" || { kill $pid_a; tu_finish test_deploy; exit; }
pb=$port pid_b=$pid
np=$(free_port)

# the shipped config with these ports, inside a minimal nginx.conf of our own paths
sed -e "s/127\.0\.0\.1:8081/127.0.0.1:$pa/; s/127\.0\.0\.1:8082/127.0.0.1:$pb/; s/127\.0\.0\.1:8080/127.0.0.1:$np/" \
  "$src/deploy/kiln-nginx.conf" >"$ngx/kiln.conf"
check "the config names both replicas twice" test "$(grep -c "127.0.0.1:\($pa\|$pb\) " "$ngx/kiln.conf")" = 4
cat >"$ngx/nginx.conf" <<CONF
worker_processes 1;
events { worker_connections 512; }
http {
    access_log $ngx/access.log;
    client_body_temp_path $ngx/body;
    proxy_temp_path $ngx/proxy;
    fastcgi_temp_path $ngx/fastcgi;
    uwsgi_temp_path $ngx/uwsgi;
    scgi_temp_path $ngx/scgi;
    include $ngx/kiln.conf;
}
CONF
[ "$(id -u)" = 0 ] && chown 65534:65534 "$ngx"/*
globals="daemon off; pid $ngx/nginx.pid; error_log $ngx/error.log notice;"
check "nginx -t accepts the config" exit_is 0 "${run_nginx[@]}" -p "$ngx/" -c "$ngx/nginx.conf" -g "$globals" -t
"${run_nginx[@]}" -p "$ngx/" -c "$ngx/nginx.conf" -g "$globals" 2>"$ngx/stderr" &
pid_n=$!
up=0
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$np/health" >/dev/null 2>&1 && { up=1; break; }
  sleep 0.1
done
check "nginx answers /health" test $up = 1
[ $up = 1 ] || cat "$ngx/stderr" "$ngx/error.log" >&2

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
