"""MkDocs hooks: the source tree the API reference reads, and the command-line page's help text.

bayeskern installs ``models/`` and ``inference/`` as ``bayeskern.models`` and ``bayeskern.inference``; the API
reference reads sources statically, so the build first lays out the installed package shape in ``.docs-src/``
(symbolic links only). The command-line page shows the parser's own help text, so it cannot drift from the code,
and Sphinx-style references in docstrings (:func:`name`) become links into the API reference.
"""

import argparse
import os
import re
import shutil
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / ".docs-src"

MARKER = "<!-- cli-help -->"
MATHJAX = Path("javascripts/mathjax/tex-chtml.js")  # where the site serves MathJax from (mkdocs.yml names it)
ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc):<code>(~?[\w.]+)</code>")
REFERENCE = re.compile(r'<code class="bk-ref">(~?)([\w.]+)</code>')  # "~name": show the last component only


def _help_sections():
    import warnings

    with warnings.catch_warnings():  # importing the package imports jaxopt, which announces its deprecation
        warnings.simplefilter("ignore", DeprecationWarning)
        from bayeskern.cli import build_parser

    os.environ["COLUMNS"] = "100"  # the same line breaks on every machine
    parser = build_parser()
    sections = ["## `bayeskern --help`\n\n```text\n" + parser.format_help() + "```\n"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                sections.append(f"## `bayeskern {name}`\n\n```text\n{sub.format_help()}```\n")
    return "\n".join(sections)


def layout_source(target: Path) -> Path:
    """Lay out target/bayeskern as installed: every entry of bayeskern/, plus models/ and inference/ as
    subpackages (symbolic links). Returns target."""
    shutil.rmtree(target, ignore_errors=True)
    package = target / "bayeskern"
    package.mkdir(parents=True)
    for entry in (ROOT / "bayeskern").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in ("models", "inference"):
        (package / name).symlink_to(ROOT / name)
    return target


def on_startup(command, dirty):
    layout_source(SOURCE)


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        return markdown.replace(MARKER, _help_sections())
    return markdown


def on_page_content(html, page, config, files):
    """Docstrings write references the Sphinx way (:func:`name`): mark them for linking once all pages exist."""
    return ROLE.sub(r'<code class="bk-ref">\1</code>', html)


def _inventory(site_dir: Path) -> dict:
    """identifier -> page-relative URI from the objects.inv mkdocstrings wrote."""
    data = (site_dir / "objects.inv").read_bytes().split(b"\n", 4)[4]
    uris = {}
    for line in zlib.decompress(data).decode().splitlines():
        name, _, _, uri, *_ = line.split(" ", 4) + [""]
        uris[name] = uri[:-1] + name if uri.endswith("$") else uri
    return uris


def _target(name: str, uris: dict):
    """The URI of a referenced name: itself, or the unique shortest identifier ending in it."""
    if name in uris:
        return uris[name]
    matches = sorted((len(i), i) for i in uris if i.endswith("." + name))
    if matches and (len(matches) == 1 or matches[0][0] < matches[1][0]):
        return uris[matches[0][1]]
    return None


def _copy_mathjax(site: Path):
    """Ship MathJax with the site (from the ``django-static-mathjax`` package of the docs extra), so formulas render
    from disk without a network: the TeX-to-HTML component, the TeX extensions it loads on demand (e.g.
    ``\\boldsymbol``) and its web fonts, laid out as MathJax expects them next to its script."""
    from importlib.resources import files

    es5 = Path(str(files("mathjax") / "static" / "mathjax" / "es5"))
    target = site / MATHJAX.parent
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copy2(es5 / MATHJAX.name, target / MATHJAX.name)
    for folder in ("input/tex/extensions", "output/chtml/fonts/woff-v2"):
        shutil.copytree(es5 / folder, target / folder)


def on_post_build(config):
    """Ship MathJax; turn the marked references into links to the API reference (names it does not document stay
    code)."""
    site = Path(config["site_dir"])
    _copy_mathjax(site)
    uris = _inventory(site)
    for page in site.rglob("*.html"):
        html = page.read_text()
        if "bk-ref" not in html:
            continue

        def link(match):
            short, name = match.groups()
            uri = _target(name, uris)
            code = f"<code>{name.rpartition('.')[2] if short else name}</code>"
            if uri is None:
                return code
            return f'<a href="{os.path.relpath(site / uri.split("#")[0], page.parent)}/#{uri.split("#")[1]}">{code}</a>'

        page.write_text(REFERENCE.sub(link, html))
