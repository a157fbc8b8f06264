#!/usr/bin/env bash
# test_serve_hostile.sh - kiln serve on a network with hostile clients
# (tests/serve_hostile.py): 600 idle and trickling connections under the
# default limit and past --max-connections, the header and body deadlines,
# 600 clients at once with --queue 1000, keyless 4 MiB uploads and RSS,
# tenants probing each other's prompts through the prefix cache (and the same
# probe succeeding with --prefix-share global), a 64-prompt request beside a
# one-prompt one, framing and JSON read two ways, half-closed clients, CORS,
# tool roles, the start-up warnings, and the new flags' errors.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-hostile
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
# 600 sockets on each side of loopback, plus the server's own: raise the soft limit
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 1600 ]; then
  echo "SKIP: ulimit -n is $(ulimit -n) (the hard limit); 600 connections need 1600"; exit 77
fi
limit=120; [ -n "${KILN_SANITIZED:-}" ] && limit=400

# flags
check "--help" exit_is 0 "$kiln" serve --help
for f in --max-connections --header-timeout --body-timeout --api-key-file --prefix-share --trusted-proxy \
  --cors-origins --threads-http; do
  check "--help names $f" grep -q -- "$f" "$tmp/out"
done
check "--prefix-share bogus" exit_is 2 "$kiln" serve -m "$model" --prefix-share bogus
check "--prefix-share named" err_has "--prefix-share"
check "--max-connections 3" exit_is 2 "$kiln" serve -m "$model" --max-connections 3
check "--header-timeout 0" exit_is 2 "$kiln" serve -m "$model" --header-timeout 0
check "--api-key-file missing" exit_is 1 "$kiln" serve -m "$model" --port 0 --api-key-file "$tmp/none"
check "--api-key-file missing named" err_has "$tmp/none"
printf 'k1 alice\nk1 bob\n' >"$tmp/dup.keys"
check "a key twice" exit_is 1 "$kiln" serve -m "$model" --port 0 --api-key-file "$tmp/dup.keys"
check "a key twice: line named" err_has "line 2"
printf 'k1 alice extra\n' >"$tmp/bad.keys"
check "three fields" exit_is 1 "$kiln" serve -m "$model" --port 0 --api-key-file "$tmp/bad.keys"
check "--trusted-proxy not an address" exit_is 1 "$kiln" serve -m "$model" --port 0 --trusted-proxy nowhere
check "--cors-origins with a path" exit_is 1 "$kiln" serve -m "$model" --port 0 --cors-origins http://a.example/x
check "--max-connections over the descriptors" exit_is 1 bash -c "ulimit -n 256; exec \"$kiln\" serve -m \"$model\" --port 0 --max-connections 1000"
check "--max-connections over the descriptors: named" err_has "ulimit -n"

# connections: 600 held under the default limit, cut by the deadlines
if check "server starts (default limit)" srv_start "$tmp/big.log" -np 1 -c 512 --header-timeout 8 --body-timeout 3; then
  check "start-up warns: no key and every origin" grep -q "warning: no API key is set and every origin" "$tmp/big.log"
  check "idle and trickling connections" timeout $limit python3 "$src/tests/serve_hostile.py" "$port" big
  check "SIGTERM: exit 0" srv_stop "$tmp/big.log"
fi
# ... and past --max-connections
if check "server starts (--max-connections 32)" srv_start "$tmp/small.log" -np 1 -c 512 --max-connections 32; then
  check "eviction and 503 past the limit" timeout $limit python3 "$src/tests/serve_hostile.py" "$port" small
  check "SIGTERM: exit 0" srv_stop "$tmp/small.log"
fi

# everything else: keys of two tenants (three keys), a trusted proxy, two CORS origins
printf '# kiln keys\nkey-alice-1 alice\nkey-bob bob\n\nkey-alice-2 alice\n' >"$tmp/keys"
if check "server starts (tenants)" srv_start "$tmp/main.log" -np 4 -c 2048 --queue 1000 --api-key-file "$tmp/keys" \
    --trusted-proxy 127.0.0.1 --cors-origins "http://a.example, http://b.example"; then
  check "no CORS warning with keys" test "$(grep -c warning "$tmp/main.log")" -eq 0
  check "parsing, uploads, tenants, 600 clients, fairness" \
    timeout $limit python3 "$src/tests/serve_hostile.py" "$port" main "$pid"
  check "SIGTERM: exit 0" srv_stop "$tmp/main.log"
fi
# the same probe against a server that shares the cache between tenants finds the secret
if check "server starts (--prefix-share global)" srv_start "$tmp/global.log" -np 2 -c 1024 \
    --api-key-file "$tmp/keys" --prefix-share global; then
  check "the probe works" timeout $limit python3 "$src/tests/serve_hostile.py" "$port" global
  check "SIGTERM: exit 0" srv_stop "$tmp/global.log"
fi
# a keyless server on every address warns that anyone who reaches it can use it
if check "server starts on 0.0.0.0" srv_start "$tmp/any.log" -np 1 -c 256 --host 0.0.0.0 --cors-origins localhost; then
  check "start-up warns: no key on a non-loopback address" grep -q "warning: no API key is set and 0.0.0.0" "$tmp/any.log"
  check "SIGTERM: exit 0" srv_stop "$tmp/any.log"
fi
tu_finish test_serve_hostile
