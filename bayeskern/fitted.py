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

import contextlib
import dataclasses
import json
import os
import tempfile
import zipfile

import jax
import jax.numpy as jnp
import numpy as np

from ._config import x64_enabled
from ._trees import tree_hash, trees_equal
from ._version import __version__
from .kernels.base import Kernel, kernel_class

__all__ = ["fitted", "static", "saveable", "save", "load", "load_as", "read_tag", "is_registered",
           "write_atomic", "FileFormatError", "FORMAT_VERSION"]

FORMAT_VERSION = 1
"""Version of the ``.npz`` save format; files written by a newer version are refused."""
_HEADER = "__bayeskern__"
_REGISTRY: dict[str, type] = {}


class FileFormatError(ValueError):
    """A file that is not a bayeskern save, is damaged, or comes from a newer format version."""


def static(**kwargs):
    """A dataclass field that is pytree structure (hashable settings such as a method name), not a leaf.

    Args:
        **kwargs: passed on to ``dataclasses.field`` (e.g. ``default="iw"``).

    Returns:
        The ``dataclasses.Field``, marked static for :func:`fitted`.

    Raises:
        TypeError: for keywords that ``dataclasses.field`` does not take.
    """
    return dataclasses.field(metadata={"static": True}, **kwargs)


def saveable(cls):
    """Register a component class (a NamedTuple or dataclass held by fitted objects) for :func:`load`.

    Args:
        cls: the class; its name is the tag files store.

    Returns:
        ``cls`` itself (a class decorator).

    Raises:
        TypeError: when cls is not a class.
        RuntimeError: when another registered class has the same name.
    """
    _check_class(cls)
    tag = cls.__name__
    if _REGISTRY.get(tag, cls) is not cls:
        raise RuntimeError(f"two saveable classes share the name {tag!r}")
    _REGISTRY[tag] = cls
    return cls


def fitted(cls):
    """Class decorator: a frozen dataclass, a JAX pytree, registered for :func:`load`, with ``.save(path)``.

    Two fitted objects are ``==`` when they are of one class with equal settings and equal arrays (shape, dtype and
    values, NaN matching NaN), so an object and its saved-and-loaded copy compare equal.

    Args:
        cls: a class with annotated fields (the dataclass fields); mark settings with :func:`static`.

    Returns:
        The frozen dataclass.

    Raises:
        TypeError: when cls is not a class.
        RuntimeError: when another registered class has the same name.
    """
    _check_class(cls)
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)
    meta = [f.name for f in fields if f.metadata.get("static")]
    data = [f.name for f in fields if not f.metadata.get("static")]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    cls.save = _save_method
    cls.__eq__, cls.__hash__ = trees_equal, tree_hash
    return saveable(cls)


def _save_method(self, path) -> None:
    """Write this object to ``path`` (an ``.npz`` archive, atomically); ``bayeskern.load(path)`` restores it.

    Args:
        path: the file to write (str or os.PathLike; the name is used as given).

    Raises:
        TypeError: for a path that is not a path, or a field value bayeskern cannot save.
        FileNotFoundError: when the folder does not exist.
    """
    save(self, path)


def is_registered(tag: str) -> bool:
    """Whether a class tag (as stored in a file) names a class that :func:`load` can build now.

    Args:
        tag: a class name, e.g. ``"KernelBayesFilter"``.

    Returns:
        True when the class is registered.

    Raises:
        TypeError: for a tag that is not a string.
    """
    if not isinstance(tag, str):
        raise TypeError(f"tag must be a class name (a string), got {tag!r}")
    return tag in _REGISTRY


def _check_class(cls):
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a class to decorate, got {cls!r}")


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
        if isinstance(value, (int, float)):  # bool was handled above
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
        raise TypeError(f"cannot save a value of type {type(value).__name__}: bayeskern saves arrays, numbers, "
                        "strings, kernels, containers of these and its own fitted classes")


def save(obj, path) -> None:
    """Write a fitted object to ``path`` (``.npz``; the name is used as given), atomically.

    Args:
        obj: a fitted object, or a value built of arrays, numbers, strings, kernels and containers of these.
        path: the file to write (str or os.PathLike).

    Raises:
        TypeError: for a path that is not a path, or a value bayeskern cannot save (e.g. a function).
        FileNotFoundError: when the folder does not exist.
    """
    encode = _Encoder()
    header = {"format": "bayeskern", "format_version": FORMAT_VERSION, "bayeskern_version": __version__,
              "object": encode(obj)}
    payload = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    write_atomic(path, lambda f: np.savez(f, **{_HEADER: payload}, **encode.arrays))


def write_atomic(path, write) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it to ``path`` (all or nothing).

    An interrupted or failing write leaves the previous file (or none) and no temporary file.

    Args:
        path: the file to write (str or os.PathLike).
        write: a function taking a binary file object and writing the contents.

    Raises:
        TypeError: for a path that is not a path or a write that is not callable.
        FileNotFoundError: when the folder does not exist.
    """
    path = _path(path)
    if not callable(write):
        raise TypeError(f"write must be a function write(file) that writes the contents, got {type(write).__name__}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path!r}: the folder {directory!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _new_file_mode())  # mkstemp makes the file private (0600); give it the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _new_file_mode() -> int:
    """The permissions ``open(path, "w")`` gives a new file: 0666 less the process umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


# --- decoding -----------------------------------------------------------------------------------------------
_READ_ERRORS = (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, UnicodeDecodeError)


def _damaged(path, err):
    return FileFormatError(f"{os.fspath(path)!r} is not a readable bayeskern save (truncated or damaged?): {err}")


@contextlib.contextmanager
def _opened(path):
    """(header, archive) of a bayeskern file, with clear errors for anything else; arrays are read on demand."""
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise
    except _READ_ERRORS as err:
        raise _damaged(path, err) from err
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise FileFormatError(f"{os.fspath(path)!r} is a plain .npy array, not a bayeskern save")
    with archive:
        if _HEADER not in archive.files:
            raise FileFormatError(f"{os.fspath(path)!r} is an .npz archive but not a bayeskern save "
                                  f"(no {_HEADER!r} entry; it holds {sorted(archive.files)[:5]})")
        try:
            header = json.loads(archive[_HEADER].tobytes().decode())
        except _READ_ERRORS as err:
            raise _damaged(path, err) from err
        if not isinstance(header, dict) or header.get("format") != "bayeskern" or "object" not in header:
            raise FileFormatError(f"{os.fspath(path)!r} is not a bayeskern save")
        version = header.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise FileFormatError(f"{os.fspath(path)!r} has file format {version!r} (written by bayeskern "
                                  f"{header.get('bayeskern_version')}); this bayeskern reads formats up to "
                                  f"{FORMAT_VERSION}: upgrade bayeskern")
        yield header, archive


def read_tag(path) -> str | None:
    """The class tag of the object saved in ``path``; reads the header only.

    Args:
        path: a bayeskern save (str or os.PathLike).

    Returns:
        The class name, or None for a plain value.

    Raises:
        TypeError: for a path that is not a path.
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file that is not a bayeskern save, is damaged or has a newer format version.
    """
    with _opened(_path(path)) as (header, _):
        obj = header["object"]
    return obj.get("object") if isinstance(obj, dict) else None


class _Decoder:
    def __init__(self, archive, path):
        self.archive, self.path = archive, path

    def fail(self, what):
        raise FileFormatError(f"{os.fspath(self.path)!r}: {what}")

    def array(self, entry):
        if entry["array"] not in self.archive.files:
            self.fail(f"array {entry['array']!r} is missing")
        try:
            arr = self.archive[entry["array"]]
        except _READ_ERRORS as err:
            raise _damaged(self.path, err) from err
        if entry["kind"] == "numpy":
            return arr
        if entry["kind"] == "numpy_scalar":
            return arr[()]
        if arr.dtype in (np.float64, np.complex128, np.int64) and not x64_enabled():
            raise RuntimeError(f"{os.fspath(self.path)!r} holds {arr.dtype} arrays: call bayeskern.enable_x64() "
                               "before loading, or they would be truncated to 32 bits")
        if entry["kind"] == "jax_weak":  # a Python scalar's weak type (it decides promotion and compile caching)
            return jnp.asarray(arr.item())
        return jax.device_put(arr)   # no compiled copy per shape, as jnp.asarray would make

    def __call__(self, entry):
        if entry is None or isinstance(entry, (bool, str)):
            return entry
        if not isinstance(entry, dict) or len(entry) == 0:
            self.fail(f"unexpected entry {entry!r}")
        if "int" in entry or "float" in entry:
            return entry.get("int", entry.get("float"))
        if "array" in entry:
            return self.array(entry)
        if "tuple" in entry:
            return tuple(self(v) for v in entry["tuple"])
        if "list" in entry:
            return [self(v) for v in entry["list"]]
        if "dict" in entry:
            return {self(k): self(v) for k, v in entry["dict"]}
        if "kernel" in entry:
            cls = kernel_class(entry["kernel"])
            if cls is None:
                self.fail(f"names the kernel class {entry['kernel']!r}, which is not a bayeskern kernel")
            return cls.tree_unflatten(self(entry["static"]), self(entry["leaves"]))
        if "object" in entry:
            cls = _REGISTRY.get(entry["object"])
            if cls is None:
                self.fail(f"names the class {entry['object']!r}, which is not a bayeskern fitted class")
            fields = {name: self(v) for name, v in entry["fields"].items()}
            try:
                return cls(**fields)
            except TypeError as err:  # fields of another version of the class
                self.fail(f"does not describe a {cls.__name__} of this bayeskern version: {err}")
        self.fail(f"unexpected entry {sorted(entry)}")


def load_as(path, cls):
    """:func:`load`, refusing a file that holds anything but a ``cls`` (the per-family loaders).

    Args:
        path: a bayeskern save (str or os.PathLike).
        cls: the class the file must hold (or a subclass of it).

    Returns:
        The restored ``cls`` object.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file that holds another class, is not a bayeskern save, is damaged or is newer.
    """
    tag = read_tag(path)
    if tag is None or not issubclass(_REGISTRY.get(tag, type(None)), cls):
        raise FileFormatError(f"{os.fspath(path)!r} holds a {tag}, not a {cls.__name__}")
    return load(path)


def load(path):
    """Restore an object written by ``.save(path)`` (same class, arrays bit for bit); ``bayeskern.load`` also
    imports the method families first, so use that one.

    Args:
        path: a bayeskern save (str or os.PathLike).

    Returns:
        The object, equal (``==``) to the one saved.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file that is not a bayeskern save, is truncated, names a class that is not
            bayeskern's, or has a newer format version.
        RuntimeError: for a float64 file while float64 is off.
    """
    with _opened(path) as (header, archive):
        return _Decoder(archive, path)(header["object"])


def _path(path):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be a file path (str or os.PathLike), got {path!r}")
    return os.fspath(path)
