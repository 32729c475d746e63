"""The package as installed: ci.sh runs the tests from a clean venv holding only the built
wheel (DELAYQ_TEST_INSTALLED=1), and this checks that they do import that wheel, typed, at
the version of the sources."""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

import pytest

import delayq

SRC = Path(__file__).resolve().parents[1] / "src"


def source_version() -> str:
    text = (SRC / "delayq" / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match
    return match.group(1)


def test_the_version_is_the_sources() -> None:
    assert delayq.__version__ == source_version()


@pytest.mark.skipif(not os.environ.get("DELAYQ_TEST_INSTALLED"),
                    reason="ci.sh runs the tests against the installed wheel")
def test_the_tests_run_against_the_installed_wheel() -> None:
    package = Path(delayq.__file__).resolve().parent
    assert "site-packages" in package.parts, package
    assert SRC not in package.parents, f"imported from the source tree: {package}"
    assert (package / "py.typed").is_file()
    assert importlib.metadata.version("delayq") == delayq.__version__
    dist = importlib.metadata.distribution("delayq")
    # A wheel's install, not an editable one pointing back at src/.
    assert not (dist.read_text("direct_url.json") or "").count('"editable": true')
