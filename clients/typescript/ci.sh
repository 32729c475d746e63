#!/usr/bin/env bash
# CI for the TypeScript client, run on the artifact a registry would take: installs the dev
# dependencies from package-lock.json (npm ci), builds the npm tarball (npm pack, whose
# prepare script compiles a fresh dist/), checks what the tarball holds, installs it into an
# empty folder with nothing else of this repository, type-checks a consumer file against the
# installed declarations with `tsc --strict`, and runs the tests and the example from that
# folder, so that they import 'delayq' from node_modules as a user does: a file missing from
# the tarball, a wrong exports/main or a build that works only in the source tree fails here.
# The tests start real `delayq serve`s (DELAYQ_BIN, default: the workspace's
# target/release/delayq; it needs Debian's redis-server on PATH). Exits non-zero on any
# failure; prints how long it took.
#
#   bash clients/typescript/ci.sh            # from the workspace root, or from here
set -euo pipefail
started=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
finish() { echo "clients/typescript ci: $1 after $(( $(date +%s) - started )) s"; }
trap 'finish "FAILED (exit $?)"' ERR

DELAYQ_BIN="${DELAYQ_BIN:-$here/../../target/release/delayq}"
# Absolute: the tests run from another folder.
DELAYQ_BIN="$(cd "$(dirname "$DELAYQ_BIN")" 2>/dev/null && pwd)/$(basename "$DELAYQ_BIN")"
export DELAYQ_BIN
export DELAYQ_DOCS_DIR="$here/../../docs"
node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < 18 )); then echo "node 18 or later is needed, not $(node --version)" >&2; exit 1; fi
if [[ ! -x "$DELAYQ_BIN" ]]; then echo "no delayq binary at $DELAYQ_BIN (build it, or set DELAYQ_BIN)" >&2; exit 1; fi
if ! command -v redis-server >/dev/null; then echo "redis-server is not on PATH (apt-get install redis-server)" >&2; exit 1; fi

work="$(mktemp -d "${TMPDIR:-/tmp}/delayq-ts-ci.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "--- npm ci"
# No scripts: the build below is the pack's own (prepare), from an empty dist/.
npm ci --no-audit --no-fund --ignore-scripts

echo "--- npm pack"
rm -rf dist
tarball="$work/$(npm pack --pack-destination "$work" --silent | tail -n 1)"
listing="$(tar -tzf "$tarball")"
for f in package/package.json package/README.md package/CHANGELOG.md package/dist/index.js package/dist/index.d.ts \
  package/dist/worker.js package/dist/duration.d.ts; do
  grep -qx "$f" <<<"$listing" || { echo "the tarball lacks $f" >&2; false; }
done
if grep -q '^package/test/' <<<"$listing"; then echo "the tarball holds the tests" >&2; false; fi
echo "$(basename "$tarball"): $(wc -l <<<"$listing") files"

echo "--- install the tarball into an empty folder"
consumer="$work/consumer"
mkdir "$consumer"
cd "$consumer"
printf '{ "name": "delayq-ci-consumer", "private": true, "type": "module" }\n' > package.json
# TypeScript and Node's types only for the type checks, at the versions package-lock.json has.
ts_version=$(node -p "require('$here/node_modules/typescript/package.json').version")
types_version=$(node -p "require('$here/node_modules/@types/node/package.json').version")
npm install --no-audit --no-fund --no-package-lock --prefer-offline \
  "$tarball" "typescript@$ts_version" "@types/node@$types_version"
resolved=$(node -p "require.resolve('delayq/package.json')")
[[ "$resolved" == "$consumer/node_modules/delayq/package.json" ]] || { echo "'delayq' resolves to $resolved" >&2; false; }
echo "'delayq' resolves to $resolved"
# The tests, the examples, and the README that shipped (its samples are compiled).
cp -R "$here/test" "$here/examples" .
cp node_modules/delayq/README.md .

echo "--- tsc --strict on a consumer file, against the installed declarations"
cp test/fixtures/consumer.ts consumer.mts
npx tsc --strict --noEmit --module nodenext --moduleResolution nodenext --target es2022 --types node consumer.mts

echo "--- node --test, from the installed package (DELAYQ_BIN=$DELAYQ_BIN)"
# A test stuck past a minute fails; the whole run is bounded too, so CI never hangs. One
# test file at a time: each starts its own server, and the machine's 2 cores are shared.
flags=()
if node --help | grep -q -- --test-concurrency; then flags+=(--test-concurrency=1); fi
if node --help | grep -q -- --test-timeout; then flags+=(--test-timeout=60000); fi
timeout --kill-after=10 420 node --test "${flags[@]}" test/*.test.js
finish "passed"
