"""Checks the built sdist and wheel (``python ci/check_dist.py dist``): each holds every
module of ``src/delayq`` and ``py.typed``, at the version of ``src/delayq/_version.py``; the
sdist also its README, CHANGELOG, pyproject, examples and tests, so a wheel built from it
(as ``python -m build`` does) is built from what a user downloads; the wheel nothing but the
package and its metadata. Prints what it checked; exits 1 naming what is missing."""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import List, Set

HERE = Path(__file__).resolve().parents[1]
PACKAGE = HERE / "src" / "delayq"


def version() -> str:
    text = (PACKAGE / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match, "no __version__ in _version.py"
    return match.group(1)


def package_files() -> Set[str]:
    """The package's files as they sit under ``delayq/`` in an archive."""
    files = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    return {f"delayq/{f}" for f in files} | {"delayq/py.typed"}


def check(dist: Path) -> List[str]:
    v = version()
    problems: List[str] = []
    sdists = sorted(dist.glob("delayq-*.tar.gz"))
    wheels = sorted(dist.glob("delayq-*-py3-none-any.whl"))
    if [p.name for p in sdists] != [f"delayq-{v}.tar.gz"]:
        problems.append(f"expected one sdist delayq-{v}.tar.gz, found {[p.name for p in sdists]}")
    if [p.name for p in wheels] != [f"delayq-{v}-py3-none-any.whl"]:
        problems.append(f"expected one wheel delayq-{v}-py3-none-any.whl, found "
                        f"{[p.name for p in wheels]}")
    if problems:
        return problems
    wanted = package_files()

    with tarfile.open(sdists[0]) as sdist:
        root = f"delayq-{v}/"
        names = {n[len(root):] for n in sdist.getnames() if n.startswith(root)}
    sdist_wanted = {f"src/{f}" for f in wanted} | {
        "README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO", "examples/order_service.py",
        "examples/fastapi_receiver.py", "tests/conftest.py", "tests/serverproc.py",
        "tests/test_scenarios.py"}
    problems += [f"sdist lacks {n}" for n in sorted(sdist_wanted - names)]

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        meta = wheel.read(f"delayq-{v}.dist-info/METADATA").decode()
    problems += [f"wheel lacks {n}" for n in sorted(wanted - names)]
    strays = sorted(n for n in names if not n.startswith(("delayq/", f"delayq-{v}.dist-info/")))
    problems += [f"wheel carries {n}, which is not the package" for n in strays]
    for line in (f"Version: {v}", "Requires-Python: >=3.10", "Requires-Dist: httpx"):
        if line not in meta:
            problems.append(f"wheel METADATA lacks {line!r}")
    if not problems:
        print(f"{sdists[0].name}: {len(sdist_wanted)} required files present; "
              f"{wheels[0].name}: {len(wanted)} package files, py.typed included, "
              f"nothing else")
    return problems


if __name__ == "__main__":
    found = check(Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "dist"))
    for problem in found:
        print(f"check_dist: {problem}", file=sys.stderr)
    sys.exit(1 if found else 0)
