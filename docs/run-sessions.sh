#!/usr/bin/env bash
# Runs the shell samples of docs/events.md (the live event stream, a webhook, OTLP export),
# docs/operations.md (/readyz, the Functions library on the server, a tokens reload, the
# CLI on call over HTTP, a queue's delete, a scoped token), docs/http-api.md (an ack with the next receive), docs/schedules.md,
# docs/upgrading.md (`delayq format`) and docs/cluster.md (a queue of 6 partitions on a
# Redis Cluster) exactly as written, after the setup each assumes (a `delayq serve` with its
# embedded Redis, a receiver, a collector, a cluster on 127.0.0.1:7000-7002), and checks
# what a reader would see. The shell samples it does not run are marked on the line above
# their fence, `<!-- not run in CI: why -->`; crates/docs-snippets/tests/docs/shell_samples.rs
# holds every one to either. Usage: docs/run-sessions.sh DELAYQ_BINARY
set -euo pipefail
binary=$(realpath "$1")
docs=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
mkdir -p "$dir/bin"
ln -s "$binary" "$dir/bin/delayq"
export PATH="$dir/bin:$PATH"
cd "$dir"
# The port is the docs' 7400: wait for a server of an earlier session to be gone.
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null || break; sleep 0.1; done
delayq serve --push-allow 127.0.0.1 > serve.log 2>&1 &
serve=$!
stop() {
  kill -TERM "$serve" 2>/dev/null || true
  wait "$serve" 2>/dev/null || true
  for pid in $(cat pids 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cd /; rm -rf "$dir"
}
trap stop EXIT
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null && break; sleep 0.1; done
if ! kill -0 "$serve" 2>/dev/null; then echo "delayq serve did not start:"; cat serve.log; exit 1; fi

# The n-th shell block of a page (```sh, ```bash, ```shell or ```console), counted from 1
# as crates/docs-snippets/tests/docs/shell_samples.rs counts them.
block() {
  awk -v n="$2" '/^ *```(sh|bash|shell|console)([ \t]|$)/{k++; if (k==n) {grab=1; next}}
    grab && /^ *```/{exit} grab' "$docs/$1"
}
json() { curl -sf "localhost:7400$1" -H 'content-type: application/json' "${@:2}"; }

# docs/events.md, block 1: the live stream of acked events, from now on. Setup: events on;
# then, while the stream runs, one reminder sent, received and acked.
json /v1/queues/reminders -X PATCH -d '{"events": {}}' >/dev/null
block events.md 1 > stream.sh
setsid bash stream.sh > stream.out 2>&1 &
stream=$!
for _ in $(seq 1 50); do grep -q '^retry:' stream.out && break; sleep 0.1; done
json /v1/queues/reminders/messages -d '{"payload": 1, "id": "remind-A-1"}' >/dev/null
receipt=$(json /v1/queues/reminders/receive -d '{"max": 1, "wait": "5s"}' | grep -o '"receipt":"[^"]*"' | cut -d'"' -f4)
json /v1/queues/reminders/ack -d "{\"receipt\": \"$receipt\"}" >/dev/null
for _ in $(seq 1 50); do grep -q '"id":"remind-A-1"' stream.out && break; sleep 0.1; done
kill -TERM -- "-$stream" 2>/dev/null || true
if ! grep -q '^event: acked' stream.out || ! grep -q '"id":"remind-A-1"' stream.out; then
  echo "docs/events.md stream session: no acked event for remind-A-1:"; cat stream.out; exit 1
fi
echo "docs/events.md stream session: the acked event arrived"

# docs/upgrading.md: `delayq format show` and `upgrade --all`, on the server's Redis.
socket=$(grep -o 'redis+unix://[^ ]*' serve.log | head -1)
block upgrading.md 1 > format.sh
if ! DELAYQ_REDIS_URL="$socket" bash format.sh > format.out 2>&1 || ! grep -q reminders format.out; then
  echo "docs/upgrading.md format session failed:"; cat format.out; exit 1
fi
echo "docs/upgrading.md format session: ran"

# docs/operations.md, block 2: delayq's Functions library, asked of the embedded Redis
# through its socket (after a call has loaded it).
block operations.md 2 > functions.sh
if ! bash functions.sh > functions.out 2>&1 || ! grep -q '^delayq_[0-9a-f]*$' functions.out; then
  echo "docs/operations.md FUNCTION LIST session printed no delayq library:"; cat functions.out; exit 1
fi
echo "docs/operations.md FUNCTION LIST session: $(tail -1 functions.out)"

# docs/operations.md, block 1: /readyz names the server in use (this server has no tokens
# file, so /readyz takes no token).
block operations.md 1 > readyz.sh
if ! bash readyz.sh > readyz.out 2>&1 \
  || ! grep -q '^{"status":"ready","server":{"kind":"[a-z]*","version":"[0-9.]*"}}$' readyz.out; then
  echo "docs/operations.md /readyz session failed:"; cat readyz.out; exit 1
fi
echo "docs/operations.md /readyz session: $(cat readyz.out)"

# docs/http-api.md, block 1: acks with the next receive. Setup: close-1234 sent to orders
# and received, its receipt put in place of the page's (a receipt names one lease, so a
# reader puts in their own); close-1235 sent, so the receive answers at once, not in 20 s.
json /v1/queues/orders/messages -d '{"payload": {"order": 1234}, "id": "close-1234"}' >/dev/null
receipt=$(json /v1/queues/orders/receive -d '{"max": 1, "wait": "5s"}' | grep -o '"receipt":"[^"]*"' | cut -d'"' -f4)
json /v1/queues/orders/messages -d '{"payload": {"order": 1235}, "id": "close-1235"}' >/dev/null
written=$(block http-api.md 1 | grep -o '"acks": \["[^"]*' | cut -d'"' -f4 || true)
if [[ -z $written || -z $receipt ]]; then
  echo "docs/http-api.md acks session: no receipt in the page's acks (${written:-none}) or none received"; exit 1
fi
block http-api.md 1 | sed "s/$written/$receipt/" > acks.sh
if ! bash acks.sh > acks.out 2>&1 || ! grep -qF "\"acked\":[{\"receipt\":\"$receipt\",\"ok\":true}]" acks.out \
  || ! grep -q '"deliveries":\[{[^]]*"id":"close-1235"' acks.out; then
  echo "docs/http-api.md acks session: close-1234 not acked, or close-1235 not delivered:"; cat acks.out; exit 1
fi
echo "docs/http-api.md acks session: close-1234 acked (\"ok\":true), close-1235 received in the same call"

# docs/schedules.md: a schedule put over HTTP, then from the CLI, and listed.
block schedules.md 1 > schedules.sh
if ! bash schedules.sh > schedules.out 2>&1 || [[ $(grep -c daily-sales schedules.out) -lt 2 ]]; then
  echo "docs/schedules.md session failed:"; cat schedules.out; exit 1
fi
echo "docs/schedules.md session: put and listed"

# docs/events.md, block 2: a webhook on a loopback URL (the server allows 127.0.0.1).
block events.md 2 > webhook.sh
if ! bash webhook.sh > webhook.out 2>&1 || ! grep -q '"signing_keys"' webhook.out; then
  echo "docs/events.md webhook session failed:"; cat webhook.out; exit 1
fi
echo "docs/events.md webhook session: subscribed"
kill -TERM "$serve"; wait "$serve" 2>/dev/null || true

# docs/events.md, block 3: `delayq serve --otlp-endpoint`, with a collector on 4318 that
# takes OTLP posts; one send, then its spans must arrive.
python3 -c '
from http.server import BaseHTTPRequestHandler, HTTPServer
class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"] or 0))
        print(self.path, flush=True)
        self.send_response(200); self.end_headers()
    def log_message(self, *args): pass
HTTPServer(("127.0.0.1", 4318), Collector).serve_forever()' > collector.out 2>&1 &
echo $! >> pids
block events.md 3 > otlp.sh
OTEL_BSP_SCHEDULE_DELAY=200 setsid bash otlp.sh > otlp-serve.log 2>&1 &
serve=$!
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null && break; sleep 0.1; done
json /v1/queues/traced/messages -d '{"payload": 1}' >/dev/null
for _ in $(seq 1 100); do grep -q '^/v1/traces' collector.out && break; sleep 0.1; done
if ! grep -q '^/v1/traces' collector.out; then
  echo "docs/events.md OTLP session: no spans reached the collector:"; cat otlp-serve.log; exit 1
fi
echo "docs/events.md OTLP session: spans arrived"
# SIGTERM to the session's group: the server (and through it, its Redis) too.
kill -TERM -- "-$serve"; wait "$serve" 2>/dev/null || true

# docs/operations.md: the configuration sample starts a server (its tokens file and data
# directory given here as flags, which win over the file: those paths are a real host's).
awk '/^```toml/{grab=1; next} grab && /^```/{exit} grab' "$docs/operations.md" > delayq.toml
echo "admin:an-admin-token-0123456789" > tokens
# The OTLP session's server gone first: this one must be the only server on the port.
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null || break; sleep 0.1; done
delayq serve --config delayq.toml --listen 127.0.0.1:7400 --tokens-file tokens \
  --data-dir "$dir/configured" > configured.log 2>&1 &
serve=$!
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null && break; sleep 0.1; done
if ! curl -sf localhost:7400/v1/queues -H 'authorization: Bearer an-admin-token-0123456789' >/dev/null; then
  echo "docs/operations.md configuration did not start a server:"; cat configured.log; exit 1
fi
echo "docs/operations.md configuration: a server started from it"

# docs/operations.md, block 5: `kill -HUP "$(pidof delayq)"` reloads the tokens file. Setup:
# a second admin token added to the file; the block must find this server alone. pidof is
# the host's, kept to this session's processes (working directory $dir): on a developer's
# machine another checkout's tests may run delayq processes, which must not be signalled.
real_pidof=$(command -v pidof) || { echo "docs/operations.md reload session: no pidof here"; exit 1; }
cat > bin/pidof <<EOF
#!/usr/bin/env bash
mine=()
for pid in \$("$real_pidof" "\$@"); do
  [[ \$(readlink "/proc/\$pid/cwd") == "$(pwd -P)" ]] && mine+=("\$pid")
done
echo "\${mine[*]}"
[[ \${#mine[@]} -gt 0 ]]
EOF
chmod +x bin/pidof
# The OTLP session's delayq may still be finishing its stop.
for _ in $(seq 1 100); do [[ $(pidof delayq) == "$serve" ]] && break; sleep 0.1; done
if [[ $(pidof delayq) != "$serve" ]]; then
  echo "docs/operations.md reload session: pidof delayq finds '$(pidof delayq)', not the server ($serve) alone"; exit 1
fi
echo "admin:a-rotated-token-0123456789" >> tokens
block operations.md 5 > reload.sh
bash reload.sh > reload.out 2>&1 || true
rotated=(-H 'authorization: Bearer a-rotated-token-0123456789')
for _ in $(seq 1 30); do
  curl -sf localhost:7400/v1/queues "${rotated[@]}" >/dev/null && grep -q 'tokens reloaded why="SIGHUP"' configured.log && break
  sleep 0.1
done
if ! curl -sf localhost:7400/v1/queues "${rotated[@]}" >/dev/null || ! grep -q 'tokens reloaded why="SIGHUP"' configured.log; then
  echo "docs/operations.md reload session: the added token was not taken on SIGHUP:"; cat reload.out configured.log; exit 1
fi
echo "docs/operations.md reload session: kill -HUP took the added token in (tokens reloaded why=\"SIGHUP\")"

# docs/operations.md, block 6: on call, the CLI over HTTP with DELAYQ_URL and DELAYQ_TOKEN
# (and no data directory). Setup: orders holds a ready message and three delayed ones, two
# of them customer 42's.
admin=(-H 'authorization: Bearer an-admin-token-0123456789')
json /v1/queues/orders/messages "${admin[@]}" -d '{"payload": {"customer": 7}}' >/dev/null
for c in 42 42 9; do
  json /v1/queues/orders/messages "${admin[@]}" -d "{\"payload\": {\"customer\":$c}, \"delay\": \"1h\"}" >/dev/null
done
block operations.md 6 > oncall.sh
if ! DELAYQ_URL=http://localhost:7400 DELAYQ_TOKEN=an-admin-token-0123456789 \
     DELAYQ_DATA_DIR="$dir/nowhere" bash oncall.sh > oncall.out 2>&1 \
  || ! grep -q '(this one)' oncall.out \
  || ! grep -q '^2 would be cancelled' oncall.out \
  || ! grep -q '^cancelled 2 of 2' oncall.out; then
  echo "docs/operations.md on-call session failed:"; cat oncall.out; exit 1
fi
echo "docs/operations.md on-call session: stats, processes, a list, a dry run, 2 cancelled by search"

# docs/operations.md, block 7: a queue's delete, refused while it holds messages, then
# forced from the CLI (on this server's embedded Redis, found by its data directory) and
# over HTTP with an admin token as $ADMIN. Setup: old-orders holds 3 messages, old-invoices 2.
for i in 1 2 3; do json /v1/queues/old-orders/messages "${admin[@]}" -d "{\"payload\": $i}" >/dev/null; done
for i in 1 2; do json /v1/queues/old-invoices/messages "${admin[@]}" -d "{\"payload\": $i}" >/dev/null; done
block operations.md 7 > delete.sh
if ! ADMIN=an-admin-token-0123456789 DELAYQ_DATA_DIR="$dir/configured" bash delete.sh > delete.out 2>&1 \
  || ! grep -q 'queue old-orders holds 3 messages' delete.out \
  || ! grep -q '^old-orders: deleted (3 messages' delete.out \
  || ! grep -q '^{"queue":"old-invoices","messages":2,' delete.out; then
  echo "docs/operations.md delete-queue session failed:"; cat delete.out; exit 1
fi
echo "docs/operations.md delete-queue session: refused, then old-orders deleted (CLI), old-invoices (HTTP)"

# docs/operations.md, blocks 8 and 9: a scoped token made by `delayq token create`, added to
# this server's tokens file (`tokens` here) and taken on SIGHUP; then the billing service's
# send to billing.invoices (201) and to orders (403 out_of_scope).
block operations.md 8 > scoped.sh
if ! bash scoped.sh > scoped.out 2>&1 || ! grep -q '^line:  name=billing-sender role=send queues=billing.\* sha256=' scoped.out; then
  echo "docs/operations.md scoped-token session failed:"; cat scoped.out; exit 1
fi
billing=(-H "authorization: Bearer $(grep '^token:' billing.txt | cut -c8-)")
for _ in $(seq 1 50); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' localhost:7400/v1/queues/billing.x/messages?state=delayed "${billing[@]}") == 200 ]] && break
  sleep 0.1
done
block operations.md 9 > scoped_send.sh
if ! bash scoped_send.sh > scoped_send.out 2>&1 \
  || ! grep -q '^{"id":"[0-9]*-[0-9]*","due_ms":[0-9]*,"duplicate":false}' scoped_send.out \
  || ! grep -q '"code":"out_of_scope"' scoped_send.out; then
  echo "docs/operations.md scoped-token send session failed:"; cat scoped_send.out configured.log; exit 1
fi
echo "docs/operations.md scoped-token session: billing.invoices took the send, orders answered out_of_scope"
kill -TERM "$serve"; wait "$serve" 2>/dev/null || true

# docs/push.md's Python check of a signature, on the known answer that the server's own
# signer is pinned to (push/signature.rs: key "key", t=1, orders/close-1234/2, body "body").
awk '/^```python/{grab=1; next} grab && /^```/{exit} grab' "$docs/push.md" > verify.py
python3 - <<'PY'
exec(open("verify.py").read())
headers = {
    "Delayq-Signature": "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5,"
    "v2=80755dc13779b3023f019d27621185b6d160d67896fd5fa599eed19b4dfc5dd0",
    "Delayq-Queue": "orders", "Delayq-Message-Id": "close-1234", "Delayq-Attempt": "2",
}
forever = 10**12
assert verify("key", headers, b"body", tolerance=forever), "the server's signature"
assert not verify("key", headers, b"bodY", tolerance=forever), "a changed body"
assert not verify("other", headers, b"body", tolerance=forever), "another key"
assert not verify("key", dict(headers, **{"Delayq-Attempt": "3"}), b"body", tolerance=forever)
assert not verify("key", headers, b"body"), "t=1 is long past"
PY
echo "docs/push.md signature check: verifies the server's signature, refuses tampering"

# docs/cluster.md: a queue of 6 partitions on a Redis Cluster of three masters.
for port in 7000 7001 7002; do
  mkdir -p "node-$port"
  redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --save '' \
    --appendonly no --dir "$dir/node-$port" --daemonize no > "node-$port.log" 2>&1 &
  echo $! >> pids
done
for port in 7000 7001 7002; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002 --cluster-yes > cluster.log 2>&1
for _ in $(seq 1 100); do
  redis-cli -p 7000 cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1
done
block cluster.md 1 > cluster.sh
if ! bash cluster.sh > cluster.out 2>&1; then
  echo "docs/cluster.md session failed:"; cat cluster.out; exit 1
fi
partitions=$(redis-cli -c -p 7000 get 'dq:{orders}:partitions')
if [[ "$partitions" != 6 ]]; then
  echo "docs/cluster.md session: the queue has ${partitions:-no} partitions, not 6:"; cat cluster.out; exit 1
fi
echo "docs/cluster.md session: a queue of 6 partitions"
