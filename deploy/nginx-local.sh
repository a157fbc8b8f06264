#!/usr/bin/env bash
# nginx-local.sh - deploy/kiln-nginx.conf in the foreground, without root or
# system paths: config, pid, logs and temp files under DIR, the given replicas
# (loopback ports) in place of the file's example servers. For tests and
# benchmarks on one machine; run as root, nginx still runs as nobody.
# usage: deploy/nginx-local.sh DIR PORT REPLICA_PORT... [-t]   (-t: check the config only)
set -euo pipefail
usage() { echo "usage: $0 DIR PORT REPLICA_PORT... [-t]" >&2; exit 2; }
[ $# -ge 3 ] || usage
dir=$1 port=$2
shift 2
check_only=0 replicas=()
for a in "$@"; do
  case "$a" in
    -t) check_only=1 ;;
    *[!0-9]* | "") echo "nginx-local.sh: '$a' is not a port" >&2; exit 2 ;;
    *) replicas+=("$a") ;;
  esac
done
[ ${#replicas[@]} -ge 1 ] || usage
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx-local.sh: nginx is not installed (scripts/deps.sh test)" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# each upstream's example server lines become one line per replica
servers=""
for p in "${replicas[@]}"; do servers+="    server 127.0.0.1:$p max_fails=3 fail_timeout=5s;\n"; done
awk -v servers="$servers" -v port="$port" '
  /^upstream / { up = $2 }
  /^ *server 127\.0\.0\.1:[0-9]+ / { if (!done[up]++) printf "%s", servers; next }
  { sub(/listen 127\.0\.0\.1:8080;/, "listen 127.0.0.1:" port ";"); print }' "$here/kiln-nginx.conf" >"$dir/kiln.conf"
cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log $dir/access.log;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    include $dir/kiln.conf;
}
CONF
run=("$nginx")
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$dir"
  run=(setpriv --reuid=65534 --regid=65534 --clear-groups "$nginx")
fi
args=(-p "$dir/" -c "$dir/nginx.conf" -g "daemon off; pid $dir/nginx.pid; error_log $dir/error.log notice;")
[ $check_only = 1 ] && exec "${run[@]}" "${args[@]}" -t
exec "${run[@]}" "${args[@]}"
