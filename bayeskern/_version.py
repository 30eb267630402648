"""The installed version of bayeskern, read from the package metadata (``pyproject.toml`` is its one source)."""

from importlib import metadata

try:
    __version__ = metadata.version("bayeskern")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
