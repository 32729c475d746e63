#!/usr/bin/env bash
# CI for the Go client: checks the toolchain (go 1.19 or later), gofmt and go vet, then packs
# the module (a copy of its files outside this tree, as a consumer uses it by path) and runs
# its tests there with `go test ./...` against a real `delayq serve` (DELAYQ_BIN, default the
# workspace's target/release/delayq; Debian's redis-server on PATH; the tests start and stop
# their own servers on free loopback ports), then builds the example service in a consumer
# module of its own whose go.mod `replace`s the module by that path. Nothing is downloaded:
# the module uses the standard library only (GOPROXY=off). Exits non-zero on any failure;
# prints how long it took.
#
#   bash clients/go/ci.sh            # from the workspace root, or from here
set -euo pipefail
started=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
finish() { echo "clients/go ci: $1 after $(( $(date +%s) - started )) s"; }
trap 'finish "FAILED (exit $?)"' ERR

export GOPROXY=off GOTOOLCHAIN=local
export GOFLAGS=
export DELAYQ_BIN="${DELAYQ_BIN:-$here/../../target/release/delayq}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# go needs a cache; a CI without HOME gets one in the work directory.
if [[ -z "${HOME:-}" && -z "${GOCACHE:-}" ]]; then export GOCACHE="$work/gocache"; fi

if ! command -v go >/dev/null; then echo "go is not on PATH (apt-get install golang-go)" >&2; exit 1; fi
version=$(go env GOVERSION)
minor=$(sed -E 's/^go1\.([0-9]+).*/\1/' <<<"$version")
if [[ ! "$minor" =~ ^[0-9]+$ ]] || (( minor < 19 )); then echo "go 1.19 or later is needed, not $version" >&2; exit 1; fi
if [[ ! -x "$DELAYQ_BIN" ]]; then echo "no delayq binary at $DELAYQ_BIN (build it, or set DELAYQ_BIN)" >&2; exit 1; fi
if ! command -v redis-server >/dev/null; then echo "redis-server is not on PATH (apt-get install redis-server)" >&2; exit 1; fi
DELAYQ_BIN="$(cd "$(dirname "$DELAYQ_BIN")" && pwd)/$(basename "$DELAYQ_BIN")"
echo "--- $version, DELAYQ_BIN=$DELAYQ_BIN"

echo "--- gofmt -l"
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then echo "not gofmt-ed:"; echo "$unformatted"; exit 1; fi
echo "--- go vet ./..."
go vet ./...

echo "--- pack: the module's files, outside this tree"
module="$work/delayq-go"
mkdir -p "$module"
if git -C "$here" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # The files a checkout has (tracked, and new ones not ignored): what a consumer gets.
  git -C "$here" ls-files -z --cached --others --exclude-standard -- . \
    | (cd "$here" && xargs -0 cp --parents -t "$module")
else
  cp -R . "$module"
fi
test -f "$module/go.mod" && test -f "$module/README.md"

echo "--- go test ./... (from the packed module; -p 1: the machine is shared)"
# A test stuck past 4 minutes fails; the whole run is bounded too, so CI never hangs.
(cd "$module" && timeout --kill-after=10 420 go test -p 1 -count=1 -timeout 4m ./...)

echo "--- the example service, built in a consumer module that replaces the module by path"
app="$work/app"
mkdir -p "$app"
cp examples/service/main.go "$app/main.go"
cat > "$app/go.mod" <<MOD
module example.com/orderservice

go 1.19

require github.com/delayq/delayq/clients/go v1.0.0

replace github.com/delayq/delayq/clients/go => ../delayq-go
MOD
(cd "$app" && go vet . && go build -o "$work/orderservice" .)
# -h prints the flags and exits 2: the binary runs.
usage=$("$work/orderservice" -h 2>&1 || true)
if ! grep -q -- '-close-after' <<<"$usage"; then echo "the built service does not run: $usage" >&2; exit 1; fi
echo "built example.com/orderservice against the packed module; it runs (-h)"
finish "passed"
