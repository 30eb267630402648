"""The documentation cannot rot: every public name is documented and in the built API reference, every
runnable block of the guides and how-tos runs, doctests pass, no file cites material outside the repository,
and the package ships its licence, changelog and type marker."""

import ast
import doctest
import importlib
import re
import subprocess
import sys
import types
import zipfile
import zlib
from pathlib import Path

import jax
import pytest

import bayeskern

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PUBLIC_MODULES = ["bayeskern", "bayeskern.kernels", "bayeskern.bke", "bayeskern.kbr", "bayeskern.jdl",
                  "bayeskern.compression", "bayeskern.models", "bayeskern.inference", "bayeskern.linalg",
                  "bayeskern.fitted", "bayeskern.conditional", "bayeskern.optim", "bayeskern.sharding",
                  "bayeskern.plotting", "bayeskern.datasets", "bayeskern.kbr.data", "bayeskern.compression.data",
                  "bayeskern.compression.exact_gaussian"]


def _public_names():
    return [(module, name) for module in PUBLIC_MODULES for name in importlib.import_module(module).__all__]


# --- no citations of documents outside the repository -----------------------------------------------------------
# a specification file, a section sign (the papers are cited as "Section 5.2", "eq. 15"), or the reference folder
EXTERNAL = re.compile(r"\bspec\s+[a-z_]+\.md|\bspec\s*§|\bspec's\b|\bthe spec\b|§|\.\./shared|\bseed's\b|\bseeds? 0\d\d",
                      re.IGNORECASE)


def _repository_files():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / f for f in listed if f.endswith((".py", ".md", ".toml", ".yml", ".txt", ".cfg")) or "/" not in f]


def test_no_file_cites_external_specifications():
    offending = []
    for path in _repository_files():
        if not path.is_file() or path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if EXTERNAL.search(line):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offending, "citations of documents users cannot open:\n" + "\n".join(offending)


def test_the_citation_check_would_catch_each_form():
    # the forms are assembled from parts, so that this file holds no citation itself
    word, section, folder = "sp" + "ec", chr(0xA7), ".." + "/shared"
    for line in (f"see {word} notes.md {section}1.2", f"({word} {section}3)", f"the {word}'s grid",
                 f"{folder}/x.md", "the se" + "ed's appendix", "seeds 0" + "01/002", f"the {section}1 protocol"):
        assert EXTERNAL.search(line), line
    for line in ("PartitionSpec('rows')", "module_spec = importlib.util.spec_from_file_location",
                 "inspect the spectrum"):
        assert not EXTERNAL.search(line), line


# --- docstrings and the API reference --------------------------------------------------------------------------
def _attribute_docstrings():
    """{name: docstring} of module-level constants documented by a string right after their assignment."""
    found = {}
    for path in [*ROOT.glob("bayeskern/**/*.py"), *ROOT.glob("models/*.py"), *ROOT.glob("inference/*.py")]:
        body = ast.parse(path.read_text()).body
        for node, after in zip(body, body[1:]):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                found.update({t.id: after.value.value for t in targets if isinstance(t, ast.Name)})
    return found


def _own_docstring(obj):
    doc = obj.__doc__ if isinstance(obj, (type, types.ModuleType, types.FunctionType)) or callable(obj) else None
    generated = doc and re.match(rf"{re.escape(getattr(obj, '__name__', ''))}\(", doc)  # dataclass/NamedTuple stub
    return None if generated else doc


def test_every_public_name_has_a_docstring():
    """Classes, functions and modules by their own docstring; constants by a string under their assignment (what
    the API reference shows)."""
    constants = _attribute_docstrings()
    missing = []
    for module, name in _public_names():
        obj = getattr(importlib.import_module(module), name)
        documented = constants.get(name) if not (callable(obj) or isinstance(obj, types.ModuleType)) \
            else _own_docstring(obj)
        if not (documented and documented.strip()):
            missing.append(f"{module}.{name}")
    assert not missing, f"public names without a docstring: {missing}"


def _inventory(site):
    data = (site / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode()
    return {line.split()[0] for line in body.splitlines() if line.strip()}


def test_strict_docs_build_documents_every_public_name_the_gallery_and_the_cli(tmp_path):
    """One build (the hook lays out .docs-src, so builds must not run in parallel): every public name is in the
    API inventory, every example has a gallery page with its figure and output, the CLI page is the parser's help."""
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]

    documented = _inventory(site)
    missing = [f"{m}.{n}" for m, n in _public_names() if f"{m}.{n}" not in documented]
    assert not missing, f"public names missing from the API reference: {missing}"

    for script in sorted((ROOT / "examples").glob("*.py")):
        page = DOCS / "gallery" / f"{script.stem}.md"
        assert page.is_file(), f"no gallery page for {script.name}: run docs/gallery/generate.py"
        text = page.read_text()
        assert f"img/{script.stem}.png" in text and "```text" in text
        assert (DOCS / "gallery" / "img" / f"{script.stem}.png").stat().st_size > 10_000
        assert (site / "gallery" / "img" / f"{script.stem}.png").is_file()

    jdl_page = (site / "api" / "jdl" / "index.html").read_text()  # docstring references became links
    assert '<a href="./#bayeskern.jdl.jdl_bases"><code>jdl_bases</code></a>' in jdl_page and ":func:" not in jdl_page

    html = (site / "api" / "cli" / "index.html").read_text()
    for command in ("demo", "two-sample", "independence", "filter", "compress", "jdl"):
        assert f"bayeskern {command}" in html
    assert "--permutations" in html and "--version" in html


# --- runnable documentation ------------------------------------------------------------------------------------
_CACHE_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
SLOW_BLOCKS = {"howto/filtering-3"}  # NUTS over the filter's hyperparameters: runs with pytest -m slow


def _python_blocks():
    blocks = []
    for page in sorted([*DOCS.glob("guide/*.md"), *DOCS.glob("howto/*.md"), DOCS / "index.md"]):
        for index, code in enumerate(re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.S | re.M)):
            name = f"{page.parent.name}/{page.stem}-{index + 1}"
            marks = [pytest.mark.slow] if name in SLOW_BLOCKS else []
            blocks.append(pytest.param(code, id=name, marks=marks))
    return blocks


@pytest.mark.parametrize("code", _python_blocks())
def test_docs_python_block_runs_on_its_own(code, tmp_path, monkeypatch):
    """Every ```python block of the guides and how-tos is self-contained and runs (```py marks fragments)."""
    monkeypatch.chdir(tmp_path)
    cache = {name: getattr(jax.config, name) for name in _CACHE_OPTIONS}
    try:
        exec(compile(code, "docs block", "exec"), {})
    finally:  # the compile-time how-to turns on the persistent cache: not for the rest of the suite
        for name, value in cache.items():
            jax.config.update(name, value)


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = {}
    for module, name in _public_names():
        obj = getattr(importlib.import_module(module), name)
        for test in finder.find(obj, f"{module}.{name}", globs={}):
            if test.examples:
                found.setdefault(test.name, test)
    return [pytest.param(test, id=name) for name, test in sorted(found.items())]


def test_main_entry_points_carry_examples():
    names = {param.id for param in _doctests()}
    for entry in ("bayeskern.mmd_test", "bayeskern.hsic_test", "bayeskern.load", "bayeskern.jdl.fit_jdl",
                  "bayeskern.kbr.tune_kbf", "bayeskern.compression.ackip", "bayeskern.inference.run_nuts",
                  "bayeskern.inference.fit_type2", "bayeskern.bke.witness_posterior"):
        assert any(n == entry or n.startswith(entry + ".") for n in names), f"{entry} has no example"


@pytest.mark.parametrize("test", _doctests())
def test_docstring_examples(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
    assert runner.failures == 0


# --- package hygiene -------------------------------------------------------------------------------------------
def test_version_has_one_source_and_the_cli_prints_it():
    from importlib.metadata import version

    assert bayeskern.__version__ == version("bayeskern")
    assert 'version = "' in (ROOT / "pyproject.toml").read_text()
    assert not re.search(r"__version__\s*=\s*['\"]", (ROOT / "bayeskern" / "__init__.py").read_text())
    out = subprocess.run([sys.executable, "-m", "bayeskern.cli", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == f"bayeskern {version('bayeskern')}"


def test_wheel_ships_licence_changelog_and_type_marker(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("bayeskern-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "bayeskern/py.typed" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert any(n.endswith("CHANGELOG.md") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "Project-URL: Documentation" in metadata
