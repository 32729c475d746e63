"""The client's version: read by ``pyproject.toml`` (setuptools' ``attr:``) for the package's
metadata, sent in the user agent, and exported as ``delayq.__version__``."""

__version__ = "1.0.0"
