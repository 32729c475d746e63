#!/usr/bin/env bash
# What one script call costs Redis, in instructions: `delayq-bench call-cost` with its
# redis-server run under callgrind (valgrind). Instructions are the same run after run,
# where the wall clock on a shared machine is not; they compare two builds' scripts.
#
#   bash bench/call_cost.sh [target/release] [--calls N]
#
# Needs valgrind (Debian's `valgrind`) and redis-server.
set -euo pipefail
bin=${1:-target/release}
shift || true
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
server=$(command -v "${DELAYQ_REDIS_SERVER:-redis-server}")
cat > "$dir/redis-under-callgrind" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$dir/callgrind.out.%p "$server" "\$@"
WRAP
chmod +x "$dir/redis-under-callgrind"
CALLGRIND_DIR=$dir DELAYQ_REDIS_SERVER=$dir/redis-under-callgrind "$bin/delayq-bench" call-cost "$@"
