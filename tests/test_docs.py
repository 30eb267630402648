"""The documentation cannot rot: every public name is documented and in the built API reference, every
runnable block of the guides and how-tos runs, doctests pass, no file cites material outside the repository,
and the package ships its licence, changelog and type marker."""

import ast
import dataclasses
import doctest
import importlib
import inspect
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from html import unescape
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
                  "bayeskern.compression.exact_gaussian", "bayeskern.distributed", "bayeskern.cli"]


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

    problems = _reference_shows_code(site) + _module_summaries_not_once(site) + _math_needs_a_network(site)
    assert not problems, "\n".join(problems)
    if shutil.which("chromium"):  # where a headless browser is installed (CI has none), render the guides offline
        problems = [problem for page in sorted(site.glob("guide/*/index.html")) for problem in _raw_tex_in(page)]
        assert not problems, "\n".join(problems)


def _raw_tex_in(page):
    """Formulas left as TeX after a headless Chromium (no network) has run the page's scripts from disk."""
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update", "--disable-sync",
                              f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom",
                              page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    text = _text(re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S))
    formulas = dom.count('class="arithmatex"')
    problems = [f"{page.parent.name}: {text.count(d)} formulas left as TeX ({d} ...)" for d in ("\\(", "\\[")
                if d in text]
    if formulas and dom.count("<mjx-container") < formulas:
        problems.append(f"{page.parent.name}: {dom.count('<mjx-container')} of {formulas} formulas rendered")
    return problems


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def _reference_shows_code(site):
    """Attribute entries whose shown value is code rather than a literal (e.g. ``eta = None if eta is None else
    check_positive(...)``), class data rendered as members instead of described in Attributes, pytree protocol."""
    problems = []
    for page in sorted((site / "api").glob("*/index.html")):
        html = page.read_text()
        for label in ("instance-attribute", "class-attribute", "tree_flatten"):
            if label in html:
                problems.append(f"{page.parent.name}: shows {label}")
        for block in re.findall(r'<div class="doc-signature highlight"><pre>.*?<code>(.*?)</code></pre>', html, re.S):
            signature = _text(block).strip()
            name_value = re.match(r"^(\w+)\s*=\s*(.*)$", signature)
            if name_value:
                try:
                    ast.literal_eval(name_value.group(2))
                except (ValueError, SyntaxError):
                    problems.append(f"{page.parent.name}: {signature[:100]}")
    return problems


def _module_summaries_not_once(site):
    """Each documented module's summary (its docstring's first line) appears exactly once on its API page."""
    problems = []
    for source in sorted((DOCS / "api").glob("*.md")):
        text = re.sub(r"\s", "", _text((site / "api" / source.stem / "index.html").read_text()))
        for module in re.findall(r"^::: ([\w.]+)", source.read_text(), flags=re.M):
            first = importlib.import_module(module).__doc__.strip().splitlines()[0]
            first = re.sub(r"\s|:\w+:`~?|[`*]", "", first)[:50]  # as rendered: without roles, markup or spacing
            if text.count(first) != 1:
                problems.append(f"{source.stem}: the summary of {module} appears {text.count(first)} times")
    return problems


def _math_needs_a_network(site):
    """Formulas render from the site alone: no script from another host, MathJax and its fonts shipped, and every
    page with TeX loads the shipped copy."""
    problems = [f"{page.relative_to(site)}: loads {src}" for page in site.rglob("*.html")
                for src in re.findall(r'<script[^>]+src="([^"]+)"', page.read_text()) if "://" in src]
    mathjax = site / "javascripts" / "mathjax"
    if not ((mathjax / "tex-chtml.js").is_file() and list(mathjax.glob("output/chtml/fonts/woff-v2/*.woff"))
            and (mathjax / "input" / "tex" / "extensions" / "boldsymbol.js").is_file()):
        problems.append("MathJax (script, TeX extensions, fonts) is not shipped with the site")
    for page in site.rglob("*.html"):
        html = page.read_text()
        if 'class="arithmatex"' in html and "javascripts/mathjax/tex-chtml.js" not in html:
            problems.append(f"{page.relative_to(site)}: has formulas but does not load the shipped MathJax")
    return problems


# --- docstring sections ----------------------------------------------------------------------------------------
SECTION = re.compile(r"^( *)(Args|Returns|Yields|Raises|Attributes|Examples|Warns|Note):[ \t]*$", re.M)
PROTOCOL_METHODS = {"tree_flatten", "tree_unflatten"}  # JAX's pytree protocol, not API (not in the reference)
RAISES_NOTHING = {  # public callables that cannot raise for any input, with the reason
    "bayeskern.x64_enabled": "takes no argument and reads a flag",
    "bayeskern.AggregatedTestResult.ranking": "sorts the arrays the result holds",
    "bayeskern.enable_x64": "a switch: any value is read as true or false",
    "bayeskern.cli.build_parser": "takes no argument and builds a fixed parser",
    "bayeskern.inference.MCMCResult.draws": "reshapes arrays the result holds",
    "bayeskern.inference.Backtest.coverage": "compares arrays the result holds",
    "bayeskern.inference.Backtest.rmse": "averages arrays the result holds",
    "bayeskern.kbr.Factored.dense": "multiplies the two factors it holds",
    "bayeskern.jdl.JointDistributionModel.marginal_x": "sums the model's own arrays",
    "bayeskern.jdl.JointDistributionModel.marginal_y": "sums the model's own arrays",
    "bayeskern.jdl.JointDistributionModel.total_mass": "sums the model's own arrays",
    "bayeskern.kbr.KernelBayesFilter.initial_state": "builds uniform weights from the filter's own atoms",
    "bayeskern.kbr.KernelBayesFilter.observation_gram": "the unchecked path of filter, for traced code",
}
# the unchecked fast paths of kernels, for traced code: they inspect nothing, so they raise nothing of their own
UNCHECKED_KERNEL_METHODS = {"evaluate", "evaluate_paired", "profile"}


def _sections(doc: str) -> dict[str, list[str]]:
    """{section title: its lines} of a Google-style docstring (its body lines, indentation removed)."""
    doc = inspect.cleandoc(doc or "")
    found, lines = {}, doc.splitlines()
    for index, line in enumerate(lines):
        match = SECTION.match(line)
        if match:
            body = []
            for follow in lines[index + 1:]:
                if follow.strip() and len(follow) - len(follow.lstrip()) <= len(match.group(1)):
                    break
                body.append(follow[len(match.group(1)):])
            found[match.group(2)] = body
    return found


def _documented_names(body: list[str]) -> set[str]:
    """Names an Args or Attributes section describes: ``name:`` or ``name (type):`` at the first indentation."""
    indents = [len(line) - len(line.lstrip()) for line in body if line.strip()]
    first = min(indents, default=0)
    names = set()
    for line in body:
        match = re.match(rf"^ {{{first}}}(\*{{0,2}}\w+)(?: \([^)]*\))?:", line)
        if match:
            names.add(match.group(1).lstrip("*"))
    return names


def _returns_a_value(function) -> bool:
    """Whether ``function`` returns or yields something other than None (its source, nested functions aside)."""
    annotation = inspect.signature(function).return_annotation
    if annotation is None or annotation == "None":
        return False
    if getattr(function, "__isabstractmethod__", False):
        return True
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0]

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, (ast.Yield, ast.YieldFrom)):
                return True
            if isinstance(child, ast.Return) and child.value is not None and \
                    not (isinstance(child.value, ast.Constant) and child.value.value is None):
                return True
            if visit(child):
                return True
        return False

    return visit(body)


def missing_sections(name: str, function) -> list[str]:
    """What the docstring of a public function or method lacks: Args naming every parameter, Returns (or
    Yields) when it returns a value, Raises."""
    doc = inspect.getdoc(function) or ""
    if not doc.strip():
        return [f"{name}: no docstring"]
    sections, problems = _sections(doc), []
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name not in ("self", "cls")]
    if parameters:
        undocumented = {p.name for p in parameters} - _documented_names(sections.get("Args", []))
        if undocumented:
            problems.append(f"{name}: Args does not describe {sorted(undocumented)}")
    if _returns_a_value(function) and not ({"Returns", "Yields"} & set(sections)):
        problems.append(f"{name}: no Returns (or Yields) section")
    unchecked = name.rpartition(".")[2] in UNCHECKED_KERNEL_METHODS and "Nothing is inspected" in doc
    if "Raises" not in sections and name not in RAISES_NOTHING and not unchecked:
        problems.append(f"{name}: no Raises section")
    return problems


def _fields(cls) -> list[str]:
    """The public data a class holds: dataclass or NamedTuple fields, kernel hyperparameters and settings."""
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
    elif hasattr(cls, "_fields"):
        names = list(cls._fields)
    else:
        names = list(getattr(cls, "_leaves", ())) + list(getattr(cls, "_static", ()))
    return [n for n in names if not n.startswith("_")]


def missing_class_sections(name: str, cls) -> list[str]:
    """What the docstring of a public class lacks: an Attributes section describing every field and property (the
    API reference shows a class's data only there)."""
    fields = _fields(cls) + [a for a, value in vars(cls).items() if isinstance(value, property) and a[0] != "_"]
    if not fields:
        return []
    described = _documented_names(_sections(inspect.getdoc(cls) or "").get("Attributes", []))
    missing = sorted(set(fields) - described)
    return [f"{name}: Attributes does not describe {missing}"] if missing else []


def _public_callables():
    """(qualified name, function) of every public function and every public method of the public classes, each
    defining function once."""
    seen, out = set(), []
    for module, name in _public_names():
        obj = getattr(importlib.import_module(module), name)
        if inspect.isclass(obj):
            for attribute, value in vars(obj).items():
                if attribute.startswith("_") or attribute in PROTOCOL_METHODS:
                    continue
                function = getattr(value, "__func__", value)
                if inspect.isfunction(function) and id(function) not in seen:
                    seen.add(id(function))
                    out.append((f"{module}.{name}.{attribute}", function))
        elif callable(obj) and inspect.isfunction(inspect.unwrap(obj)) and id(inspect.unwrap(obj)) not in seen:
            seen.add(id(inspect.unwrap(obj)))  # functions behind a decorator (lru_cache, jit) by their own docstring
            out.append((f"{module}.{name}", inspect.unwrap(obj)))
    return out


def _public_classes():
    seen, out = set(), []
    for module, name in _public_names():
        obj = getattr(importlib.import_module(module), name)
        if inspect.isclass(obj) and id(obj) not in seen:
            seen.add(id(obj))
            out.append((f"{module}.{name}", obj))
    return out


def test_every_public_function_and_method_has_args_returns_and_raises_sections():
    problems = [p for name, function in _public_callables() for p in missing_sections(name, function)]
    assert not problems, f"{len(problems)} docstring gaps:\n" + "\n".join(problems)


def test_every_public_class_describes_its_fields():
    problems = [p for name, cls in _public_classes() for p in missing_class_sections(name, cls)]
    assert not problems, f"{len(problems)} classes without their fields:\n" + "\n".join(problems)


def test_the_section_check_fails_on_a_function_without_sections():
    """The check itself: free-form docstrings, an undocumented argument, a missing Returns or Raises are caught;
    a complete docstring passes."""

    def free_form(X, k):
        """Evaluate k at X: (n,)."""
        return X

    def undocumented_argument(X, k):
        """Evaluate k at X.

        Args:
            X: (n, d) points.

        Returns:
            (n,) values.

        Raises:
            ValueError: for bad X.
        """
        return X

    def complete(X, *, k=None):
        """Evaluate k at X.

        Args:
            X: (n, d) points.
            k (Kernel): the kernel.

        Returns:
            (n,) values.

        Raises:
            ValueError: for bad X.
        """
        return X

    def no_value(path):
        """Write a file.

        Args:
            path: where.

        Raises:
            OSError: when it cannot.
        """
        print(path)

    assert len(missing_sections("free_form", free_form)) == 3
    assert missing_sections("undocumented_argument", undocumented_argument) == [
        "undocumented_argument: Args does not describe ['k']"]
    assert missing_sections("complete", complete) == [] and missing_sections("no_value", no_value) == []
    assert missing_sections("undocumented", lambda: 1) == ["undocumented: no docstring"]

    @dataclasses.dataclass
    class Record:
        """A record.

        Attributes:
            mean: (q,) means.
        """

        mean: float
        mass: float

    assert missing_class_sections("Record", Record) == ["Record: Attributes does not describe ['mass']"]


# --- runnable documentation ------------------------------------------------------------------------------------
_CACHE_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
# pytest -m slow runs these: the low-rank filters of 3000 steps, and NUTS over the filter's hyperparameters (the
# default suite samples that model in the README's compressed-split block and checks sample_kbf_posterior's call in
# test_kbf_model; the slow test_nuts_on_the_hyperparameter_model_feeds_predictive_filtering runs the call end to end);
# and the tests at scale on thousands of points (7-11 s each): the switches to random features and their statistics
# are checked at small sizes in test_cyclic, repeated rows in every kernel rule in test_aggregate
SLOW_BLOCKS = {"howto/filtering-3", "howto/filtering-4", "howto/tests-at-scale-2", "howto/tests-at-scale-3",
               "howto/tests-at-scale-4"}


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
