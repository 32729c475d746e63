#!/usr/bin/env bash
# Fuzzes delayq's HTTP API from its own /openapi.json with schemathesis (PyPI), against the
# real server with its embedded Redis: no request may get a 5xx (but 503 not_replicated, as
# that Redis has no replicas), and a request the server rejects (4xx) may change nothing in
# Redis (checks.py).
#
#   crates/delayq-server/fuzz/run.sh target/release/delayq [examples per operation]
#
# CI runs it with 25 examples per operation; a deeper run by hand: 500.
set -euo pipefail
bin=$(realpath "${1:?usage: run.sh path/to/delayq [examples]}")
examples=${2:-25}
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v schemathesis >/dev/null 2>&1; then
  python3 -m pip install -q schemathesis
fi

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Long polls are cut to 2 s: a receive on a queue the fuzzer has paused or rate-limited waits
# its whole time, and one past schemathesis' 10 s request timeout reads as a network error.
# With a key, so that a queue's `encryption` may be turned on (without one, that is refused
# with 503 no_encryption_key, as documented).
"$bin" keys new --id fuzz >"$work/keys"
"$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --max-wait 2s \
  --keys-file "$work/keys" \
  >"$work/serve.log" 2>&1 &
serve_pid=$!
cleanup() {
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -sf "127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done

status=0
DELAYQ_FUZZ_REDIS_SOCKET="$work/data/redis.sock" PYTHONPATH="$here" \
  SCHEMATHESIS_HOOKS=checks \
  schemathesis run "http://127.0.0.1:$port/openapi.json" \
  --checks no_server_error,rejected_request_changes_nothing \
  --workers 1 --max-examples "$examples" --seed 1 \
  --generation-database none --no-color || status=$?
if [ "$status" -ne 0 ]; then
  echo "schemathesis found failures; the server's log:"
  tail -50 "$work/serve.log"
fi
exit "$status"
