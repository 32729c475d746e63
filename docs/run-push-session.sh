#!/usr/bin/env bash
# Runs the push session of docs/push.md exactly as written (a Python receiver on 8080,
# `delayq serve --push-allow 127.0.0.1`, a target and a message), and passes when the
# receiver prints the pushed message. Usage: docs/run-push-session.sh DELAYQ_BINARY
set -euo pipefail
binary=$(realpath "$1")
docs=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
mkdir -p "$dir/bin"
ln -s "$binary" "$dir/bin/delayq"
# The n-th shell block of a page, as docs/run-sessions.sh takes it.
block() {
  awk -v n="$2" '/^ *```(sh|bash|shell|console)([ \t]|$)/{k++; if (k==n) {grab=1; next}}
    grab && /^ *```/{exit} grab' "$docs/$1"
}
block push.md 1 > "$dir/session.sh"
# The session starts the receiver and the server in the background; its curl calls need
# the server up first, as a person typing it would have waited.
awk '/^delayq serve/{print; print "for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null \\&\\& break; sleep 0.1; done"; next} 1' \
  "$dir/session.sh" > "$dir/session-waiting.sh"
cd "$dir"
# The port is the docs' 7400: wait for a server of an earlier session to be gone.
for _ in $(seq 1 100); do curl -sf localhost:7400/healthz >/dev/null || break; sleep 0.1; done
setsid env PATH="$dir/bin:$PATH" bash session-waiting.sh > out.log 2>&1 &
session=$!
wanted='close-1234 1 {"order": 1234}'
ok=false
for _ in $(seq 1 200); do
  if grep -qF "$wanted" out.log; then ok=true; break; fi
  sleep 0.1
done
# Stop what the session left running (the receiver and the server): SIGTERM to its group.
kill -TERM -- "-$session" 2>/dev/null || true
pkill -TERM -f "$dir/bin/delayq serve" 2>/dev/null || true
sleep 1
cat out.log
cd / && rm -rf "$dir"
if [[ $ok != true ]]; then
  echo "docs/push.md session: the receiver never printed: $wanted"
  exit 1
fi
echo "docs/push.md session: the receiver got the push"
