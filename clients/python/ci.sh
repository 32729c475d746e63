#!/usr/bin/env bash
# CI for the Python client, run against what a user installs, not against the source tree:
#  1. builds the sdist and, from it, the wheel (python -m build, in isolated environments)
#     into dist/, with the build tool from .venv (made if missing);
#  2. checks both archives (ci/check_dist.py): every module and py.typed, the version, and
#     in the sdist the README, CHANGELOG, examples and tests;
#  3. makes a clean venv, .ci-venv (anew each run), and installs the built wheel with its
#     test extras into it;
#  4. type-checks the sources (mypy --strict, for the oldest Python supported) and, from the
#     clean venv, the examples against the installed package (which needs its py.typed);
#  5. runs pytest from the clean venv against real delayq servers (DELAYQ_BIN, default: the
#     workspace's release build; the tests start and stop their own): the tests check that
#     they import the installed wheel, and run the example service as its own process with
#     the clean venv's Python.
# Extra arguments go to pytest. PYTHON picks the interpreter (3.10 or later). Exits non-zero
# when anything fails; prints how long it took.
set -euo pipefail

start=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

finish() {
    local status=$?
    echo "clients/python/ci.sh: exit ${status} after $(( $(date +%s) - start ))s"
}
trap finish EXIT

export DELAYQ_BIN="${DELAYQ_BIN:-$here/../../target/release/delayq}"
if [ ! -x "$DELAYQ_BIN" ]; then
    echo "no delayq binary at $DELAYQ_BIN: build it (cargo build --release -p delayq-server)" \
        "or set DELAYQ_BIN" >&2
    exit 1
fi

python="${PYTHON:-}"
if [ -z "$python" ]; then
    python=$(command -v python3.11 || command -v python3)
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "the client needs Python 3.10 or later; $python is $("$python" --version 2>&1)" >&2
    exit 1
fi
pip_quiet=(--quiet --disable-pip-version-check)

# 1. Build: the sdist, then the wheel from the unpacked sdist.
if [ ! -x .venv/bin/python ]; then
    echo "creating .venv (the build tool) with $("$python" --version 2>&1)"
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install "${pip_quiet[@]}" --upgrade pip build
rm -rf dist
.venv/bin/python -m build --outdir dist . >/dev/null
# 2. What the archives hold.
.venv/bin/python ci/check_dist.py dist

# 3. A clean venv with the wheel, never the source tree.
rm -rf .ci-venv
"$python" -m venv .ci-venv
.ci-venv/bin/python -m pip install "${pip_quiet[@]}" --upgrade pip
wheel=(dist/delayq-*-py3-none-any.whl)
.ci-venv/bin/python -m pip install "${pip_quiet[@]}" "${wheel[0]}[test]"
echo "installed $(.ci-venv/bin/python -c 'import delayq; print(delayq.__version__, delayq.__file__)')"

# 4. Types: the sources, and code using the installed package (examples/ finds delayq only
# in .ci-venv's site-packages, typed through its py.typed).
.ci-venv/bin/python -m mypy --strict --python-version 3.10 --cache-dir .mypy_cache/src src
.ci-venv/bin/python -m mypy --strict --python-version 3.10 --cache-dir .mypy_cache/examples \
    examples

# 5. The tests, the installed wheel under them (test_packaging.py checks it is).
DELAYQ_TEST_INSTALLED=1 .ci-venv/bin/python -m pytest -p no:cacheprovider "$@"
