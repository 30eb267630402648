"""One protocol for fitted objects: immutable pytree dataclasses that save to and load from one file format.

Every fitted object of bayeskern (a type-II fit, a kernel Bayes filter, a JDL model, a low-rank CME, a KLR, a
compression result, an MCMC result, an embedding posterior) is declared with :func:`fitted`: a frozen dataclass,
registered as a JAX pytree (fields marked :func:`static` are hashable structure, the others are leaves or
sub-pytrees), with ``.save(path)``. :func:`load` restores any of them.

The file is an ``.npz`` archive (never pickled) holding every array under a numbered name and one JSON entry
``__bayeskern__`` with the format version, the bayeskern version and a description of the object: class tags,
fields, nested containers and kernels. Loading builds objects only from classes registered here (bayeskern's own
fitted classes, kernels and components); it never imports a module named in the file. Files are written to a
temporary file in the target directory and renamed into place, so an interrupted save leaves the old file or none.
"""

import dataclasses
import json
import os
import tempfile
import zipfile
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np

from ._config import x64_enabled
from .kernels.base import Kernel, kernel_class

__all__ = ["fitted", "static", "saveable", "save", "load", "load_as", "read_tag", "is_registered",
           "write_atomic", "FileFormatError", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_HEADER = "__bayeskern__"
_REGISTRY: dict[str, type] = {}


class FileFormatError(ValueError):
    """A file that is not a bayeskern save, is damaged, or comes from a newer format version."""


def static(**kwargs):
    """A dataclass field that is pytree structure (hashable settings such as a method name), not a leaf."""
    return dataclasses.field(metadata={"static": True}, **kwargs)


def saveable(cls):
    """Register a component class (a NamedTuple or dataclass held by fitted objects) for :func:`load`."""
    tag = cls.__name__
    if _REGISTRY.get(tag, cls) is not cls:
        raise RuntimeError(f"two saveable classes share the name {tag!r}")
    _REGISTRY[tag] = cls
    return cls


def fitted(cls):
    """Class decorator: a frozen dataclass, a JAX pytree, registered for :func:`load`, with ``.save(path)``."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    meta = [f.name for f in fields if f.metadata.get("static")]
    data = [f.name for f in fields if not f.metadata.get("static")]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    cls.save = _save_method
    return saveable(cls)


def _save_method(self, path) -> None:
    """Write this object to ``path`` (an ``.npz`` archive, atomically); ``bayeskern.load(path)`` restores it."""
    save(self, path)


def is_registered(tag: str) -> bool:
    """Whether a class tag (as stored in a file) names a class that :func:`load` can build now."""
    return tag in _REGISTRY


def _version() -> str:
    try:
        return metadata.version("bayeskern")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


# --- encoding -----------------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, value, kind: str):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"cannot save an array of dtype {arr.dtype}: only numeric arrays are stored")
        name = f"a{len(self.arrays)}"
        self.arrays[name] = arr
        return {"array": name, "kind": kind}

    def __call__(self, value):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"int": value} if isinstance(value, int) else {"float": value}
        if isinstance(value, jax.Array):
            return self.array(value, "jax_weak" if value.weak_type and value.ndim == 0 else "jax")
        if isinstance(value, np.ndarray):
            return self.array(value, "numpy")
        if isinstance(value, np.generic):
            return self.array(value, "numpy_scalar")
        if isinstance(value, Kernel):
            leaves, static_data = value.tree_flatten()
            return {"kernel": type(value).__name__, "static": self(static_data), "leaves": self(list(leaves))}
        tag = type(value).__name__
        if _REGISTRY.get(tag) is type(value):
            names = [f.name for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else value._fields
            return {"object": tag, "fields": {name: self(getattr(value, name)) for name in names}}
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return {"tuple": [self(v) for v in value]}
        if isinstance(value, list):
            return {"list": [self(v) for v in value]}
        if isinstance(value, dict):
            return {"dict": [[self(k), self(v)] for k, v in value.items()]}
        raise TypeError(f"cannot save a {type(value).__name__}: bayeskern saves arrays, numbers, strings, kernels, "
                        "containers of these and its own fitted classes")


def save(obj, path) -> None:
    """Write a fitted object to ``path`` (``.npz``; the name is used as given), atomically."""
    encode = _Encoder()
    header = {"format": "bayeskern", "format_version": FORMAT_VERSION, "bayeskern_version": _version(),
              "object": encode(obj)}
    payload = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    write_atomic(path, lambda f: np.savez(f, **{_HEADER: payload}, **encode.arrays))


def write_atomic(path, write) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it to ``path`` (all or nothing)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# --- decoding -----------------------------------------------------------------------------------------------
def _read(path):
    """(header, arrays) of a bayeskern file, with clear errors for anything else."""
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise FileFormatError(f"{os.fspath(path)!r} is a plain .npy array, not a bayeskern save")
        with archive:
            if _HEADER not in archive.files:
                raise FileFormatError(f"{os.fspath(path)!r} is an .npz archive but not a bayeskern save "
                                      f"(no {_HEADER!r} entry; it holds {sorted(archive.files)[:5]})")
            header = json.loads(archive[_HEADER].tobytes().decode())
            arrays = {name: archive[name] for name in archive.files if name != _HEADER}
    except FileFormatError:
        raise
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, UnicodeDecodeError) as err:
        raise FileFormatError(f"{os.fspath(path)!r} is not a readable bayeskern save (truncated or damaged?): "
                              f"{err}") from err
    if not isinstance(header, dict) or header.get("format") != "bayeskern":
        raise FileFormatError(f"{os.fspath(path)!r} is not a bayeskern save")
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise FileFormatError(f"{os.fspath(path)!r} has file format {version!r} (written by bayeskern "
                              f"{header.get('bayeskern_version')}); this bayeskern reads formats up to "
                              f"{FORMAT_VERSION}: upgrade bayeskern")
    return header, arrays


def read_tag(path) -> str | None:
    """The class tag of the object saved in ``path`` (None for a plain value)."""
    obj = _read(path)[0]["object"]
    return obj.get("object") if isinstance(obj, dict) else None


class _Decoder:
    def __init__(self, arrays, path):
        self.arrays, self.path = arrays, path

    def fail(self, what):
        raise FileFormatError(f"{os.fspath(self.path)!r}: {what}")

    def array(self, spec):
        if spec["array"] not in self.arrays:
            self.fail(f"array {spec['array']!r} is missing")
        arr = self.arrays[spec["array"]]
        if spec["kind"] == "numpy":
            return arr
        if spec["kind"] == "numpy_scalar":
            return arr[()]
        if arr.dtype in (np.float64, np.complex128, np.int64) and not x64_enabled():
            raise RuntimeError(f"{os.fspath(self.path)!r} holds {arr.dtype} arrays: call bayeskern.enable_x64() "
                               "before loading, or they would be truncated to 32 bits")
        if spec["kind"] == "jax_weak":  # a Python scalar's weak type (it decides promotion and compile caching)
            return jnp.asarray(arr.item())
        return jnp.asarray(arr)

    def __call__(self, spec):
        if spec is None or isinstance(spec, (bool, str)):
            return spec
        if not isinstance(spec, dict) or len(spec) == 0:
            self.fail(f"unexpected entry {spec!r}")
        if "int" in spec or "float" in spec:
            return spec.get("int", spec.get("float"))
        if "array" in spec:
            return self.array(spec)
        if "tuple" in spec:
            return tuple(self(v) for v in spec["tuple"])
        if "list" in spec:
            return [self(v) for v in spec["list"]]
        if "dict" in spec:
            return {self(k): self(v) for k, v in spec["dict"]}
        if "kernel" in spec:
            cls = kernel_class(spec["kernel"])
            if cls is None:
                self.fail(f"names the kernel class {spec['kernel']!r}, which is not a bayeskern kernel")
            return cls.tree_unflatten(self(spec["static"]), self(spec["leaves"]))
        if "object" in spec:
            cls = _REGISTRY.get(spec["object"])
            if cls is None:
                self.fail(f"names the class {spec['object']!r}, which is not a bayeskern fitted class")
            return cls(**{name: self(v) for name, v in spec["fields"].items()})
        self.fail(f"unexpected entry {sorted(spec)}")


def load_as(path, cls):
    """:func:`load`, refusing a file that holds anything but a ``cls`` (the per-family loaders)."""
    obj = load(path)
    if not isinstance(obj, cls):
        raise FileFormatError(f"{os.fspath(path)!r} holds a {type(obj).__name__}, not a {cls.__name__}")
    return obj


def load(path):
    """Restore an object written by ``.save(path)`` (same class, arrays bit for bit).

    Raises :class:`FileFormatError` for a file that is not a bayeskern save, is truncated, names a class that is
    not bayeskern's, or has a newer format version.
    """
    header, arrays = _read(path)
    return _Decoder(arrays, path)(header["object"])
