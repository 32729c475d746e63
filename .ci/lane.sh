#!/usr/bin/env bash
# A CI lane on another server: the library's and the server's test suites, then the short
# chaos run, all on the server binary given, with the test binaries `cargo test --workspace`
# built (run directly, so that no package is built again with other features).
#
# Usage: .ci/lane.sh NAME SERVER-BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
# Absolute, but not resolved: Debian's redis-server is a link to redis-check-rdb, and the
# binary acts by the name it was started as.
case $2 in /*) server=$2 ;; *) server=$PWD/$2 ;; esac
target="${CARGO_TARGET_DIR:-$PWD/target}"
export DELAYQ_REDIS_SERVER="$server"
# A test that needs what this server's build lacks (TLS) says so in the log instead of failing.
unset DELAYQ_REQUIRE_SERVERS
echo "=== lane $name: $("$server" --version)"
started=$SECONDS

# The test binaries of the two packages, each run from its package's directory as cargo does.
cargo test -q --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m["profile"]["test"]:
        continue
    package = m["package_id"]
    if "/crates/delayq#" in package or "/crates/delayq-server#" in package:
        print(m["executable"] + "\t" + m["manifest_path"].rsplit("/", 1)[0])
' > "$target/lane-tests.txt"
if [ "$(wc -l < "$target/lane-tests.txt")" -lt 4 ]; then
  echo "lane $name: the test binaries were not found"; cat "$target/lane-tests.txt"; exit 1
fi
while IFS=$'\t' read -r binary dir; do
  echo "--- $name: $(basename "$binary")"
  (cd "$dir" && "$binary" -q)
done < "$target/lane-tests.txt"

"$target/release/delayq-chaos" run --short --dir "$(mktemp -d)/chaos-$name"
echo "=== lane $name passed in $((SECONDS - started)) s"
