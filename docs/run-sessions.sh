#!/usr/bin/env bash
# Runs the shell samples of docs/events.md (the live event stream) and docs/upgrading.md
# (`delayq format`) exactly as written, against a `delayq serve` with its embedded Redis,
# after the setup each assumes (a queue recording events, with an acked message), and
# checks what a reader would see. Usage: docs/run-sessions.sh DELAYQ_BINARY
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
delayq serve > serve.log 2>&1 &
serve=$!
stop() { kill -TERM "$serve" 2>/dev/null || true; wait "$serve" 2>/dev/null || true; cd /; rm -rf "$dir"; }
trap stop EXIT
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null && break; sleep 0.1; done
if ! kill -0 "$serve" 2>/dev/null; then echo "delayq serve did not start:"; cat serve.log; exit 1; fi

# The n-th ```sh block of a page.
block() { awk -v n="$2" '/^ *```sh/{k++; if (k==n) {grab=1; next}} grab && /^ *```/{exit} grab' "$docs/$1"; }
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
