#!/usr/bin/env bash
# CI for the TypeScript client: installs the dev dependencies from package-lock.json (npm
# ci), builds with tsc, and runs the tests with node's test runner against a real
# `delayq serve` (DELAYQ_BIN, default: the workspace's target/release/delayq; it needs
# Debian's redis-server on PATH). Exits non-zero on any failure; prints how long it took.
#
#   bash clients/typescript/ci.sh            # from the workspace root, or from here
set -euo pipefail
started=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
finish() { echo "clients/typescript ci: $1 after $(( $(date +%s) - started )) s"; }
trap 'finish "FAILED (exit $?)"' ERR

export DELAYQ_BIN="${DELAYQ_BIN:-$here/../../target/release/delayq}"
node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < 18 )); then echo "node 18 or later is needed, not $(node --version)" >&2; exit 1; fi
if [[ ! -x "$DELAYQ_BIN" ]]; then echo "no delayq binary at $DELAYQ_BIN (build it, or set DELAYQ_BIN)" >&2; exit 1; fi
if ! command -v redis-server >/dev/null; then echo "redis-server is not on PATH (apt-get install redis-server)" >&2; exit 1; fi

echo "--- npm ci"
npm ci --no-audit --no-fund
echo "--- tsc"
rm -rf dist
npx tsc -p tsconfig.json
echo "--- node --test (DELAYQ_BIN=$DELAYQ_BIN)"
# A test stuck past a minute fails; the whole run is bounded too, so CI never hangs.
flags=()
if node --help | grep -q -- --test-timeout; then flags+=(--test-timeout=60000); fi
timeout --kill-after=10 300 node --test "${flags[@]}" test/*.test.js
finish "passed"
