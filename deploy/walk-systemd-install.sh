#!/usr/bin/env bash
# Walks the systemd install of deploy/delayq.service as its header writes it, as far as a
# machine without systemd as PID 1 allows, and fails if the service would not come up:
#
# 1. the header's `install` lines, run as written, under a scratch root instead of / (the
#    binary given as the first argument in place of target/release/delayq);
# 2. what the operator does next: a token in the tokens file (left 0600 and root's, as
#    installed), and the config's paths and listen address edited for the scratch root
#    (loopback: CI binds nothing else);
# 3. what systemd does for the unit: a user of its own (an unused uid, as DynamicUser=
#    picks), its StateDirectory= owned by it, and each LoadCredential= copied into a
#    credentials directory only it reads (%d);
# 4. the unit's ExecStart=, run as that user, until /readyz answers to the monitor token and
#    a send token sends;
# 5. its ExecReload= (systemctl reload), as that user: the tokens are read again; then
#    SIGTERM, and a clean exit.
#
# Needs root (to run as another user), curl, setpriv (util-linux) and redis-server.
# Usage: deploy/walk-systemd-install.sh BINARY
set -euo pipefail
binary="$(realpath "${1:?usage: $0 BINARY}")"
here="$(cd "$(dirname "$0")/.." && pwd)"
unit="$here/deploy/delayq.service"
uid=61734 # as DynamicUser= picks: from 61184-65519, not in /etc/passwd
root="$(mktemp -d)"
chmod 0755 "$root"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill -KILL "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
fail() {
  echo "walk-systemd-install: $*" >&2
  [ -f "$root/serve.log" ] && cat "$root/serve.log" >&2
  exit 1
}
under_root() { sed -e "s|/usr/local/bin|$root/usr/local/bin|g" -e "s|/etc/|$root/etc/|g"; }

# 1. The header's install lines, as written (systemctl is systemd's part: step 3).
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system"
grep '^#   install ' "$unit" | sed -e 's/^#   //' -e 's/ *#.*$//' -e 's/ && systemctl.*$//' \
  | under_root | sed "s|target/release/delayq|$binary|" > "$root/install.sh"
(cd "$here" && bash -eux "$root/install.sh")
tokens="$root/etc/delayq/tokens"
[ "$(stat -c '%a %U' "$tokens")" = "600 root" ] || fail "the tokens file is not root's 0600"

# 2. The operator's part.
monitor="monitor-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sender="send-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf 'monitor:%s\nsend:%s\n' "$monitor" "$sender" >> "$tokens"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
config="$root/etc/delayq/delayq.toml"
sed -i -e "s|\"/var/lib/delayq\"|\"$root/var/lib/delayq\"|" -e "s|/etc/delayq/|$root/etc/delayq/|" \
  -e "s|^listen = .*|listen = \"127.0.0.1:$port\"|" "$config"

# 3. systemd's part.
grep -q '^DynamicUser=yes' "$unit" || fail "the unit has no DynamicUser=yes"
state="$root/var/lib/delayq"
mkdir -p "$state" && chown "$uid:$uid" "$state" && chmod 0700 "$state"
credentials="$root/run/credentials/delayq.service"
mkdir -p "$credentials"
{ grep '^LoadCredential=' "$unit" || true; } | sed 's/^LoadCredential=//' | under_root | while IFS=: read -r name path; do
  install -m 0400 -o "$uid" -g "$uid" "$path" "$credentials/$name"
done
chown "$uid:$uid" "$credentials" && chmod 0500 "$credentials"

# 4. ExecStart=, as the service's user.
exec_start=$(grep '^ExecStart=' "$unit" | sed 's/^ExecStart=//' | under_root | sed "s|%d|$credentials|g")
echo "ExecStart: $exec_start"
# shellcheck disable=SC2086 # the command line is split as systemd splits it
setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all \
  env -i PATH="/usr/local/bin:/usr/bin:/bin" HOME=/ RUST_LOG=info $exec_start \
  > "$root/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 150); do
  curl -sf "127.0.0.1:$port/healthz" > /dev/null && break
  kill -0 "$serve_pid" 2>/dev/null || fail "delayq serve exited"
  sleep 0.2
done
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $monitor" "127.0.0.1:$port/readyz")
[ "$status" = 200 ] || fail "/readyz answered $status to the monitor token"
status=$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/readyz")
[ "$status" = 401 ] || fail "/readyz answered $status without a token"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $sender" \
  -H 'content-type: application/json' -d '{"payload": 1, "delay": "1h"}' "127.0.0.1:$port/v1/queues/walk/messages")
[ "$status" = 201 ] || fail "a send answered $status"
# 5. ExecReload= (systemctl reload), as the service's user: SIGHUP, the tokens read again.
exec_reload=$(grep '^ExecReload=' "$unit" | sed 's/^ExecReload=//' | sed "s|\$MAINPID|$serve_pid|g")
echo "ExecReload: $exec_reload"
# shellcheck disable=SC2086 # the command line is split as systemd splits it
setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all $exec_reload
for _ in $(seq 1 50); do
  grep -q 'tokens reloaded' "$root/serve.log" && break
  sleep 0.1
done
grep -q 'tokens reloaded' "$root/serve.log" || fail "no 'tokens reloaded' in the log after ExecReload"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $monitor" "127.0.0.1:$port/readyz")
[ "$status" = 200 ] || fail "/readyz answered $status to the monitor token after the reload"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "delayq serve did not exit cleanly after SIGTERM"
serve_pid=""
echo "walk-systemd-install: the unit's install steps, credentials, ExecStart and ExecReload work as uid $uid"
