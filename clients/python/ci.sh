#!/usr/bin/env bash
# CI for the Python client: makes the venv (.venv) if it is missing, installs the package
# with its test extras, type-checks it (mypy --strict), and runs pytest against a real delayq server binary (DELAYQ_BIN,
# default: the workspace's release build; the tests start and stop their own servers).
# Extra arguments go to pytest. Exits non-zero when anything fails; prints how long it took.
set -euo pipefail

start=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

finish() {
    local status=$?
    echo "clients/python/ci.sh: exit ${status} after $(( $(date +%s) - start ))s"
}
trap finish EXIT

if [ ! -x .venv/bin/python ]; then
    python="${PYTHON:-}"
    if [ -z "$python" ]; then
        python=$(command -v python3.11 || command -v python3)
    fi
    echo "creating .venv with $("$python" --version 2>&1)"
    "$python" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

export DELAYQ_BIN="${DELAYQ_BIN:-$here/../../target/release/delayq}"
if [ ! -x "$DELAYQ_BIN" ]; then
    echo "no delayq binary at $DELAYQ_BIN: build it (cargo build --release -p delayq-server)" \
        "or set DELAYQ_BIN" >&2
    exit 1
fi

# The package is typed (py.typed): its annotations must hold.
.venv/bin/python -m mypy --strict src

.venv/bin/python -m pytest "$@"
