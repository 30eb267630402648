"""MkDocs hooks: the source tree the API reference reads, and the command-line page's help text.

bayeskern installs ``models/`` and ``inference/`` as ``bayeskern.models`` and ``bayeskern.inference``; the API
reference reads sources statically, so the build first lays out the installed package shape in ``.docs-src/``
(symbolic links only). The command-line page shows the parser's own help text, so it cannot drift from the code,
and Sphinx-style roles in docstrings (:func:`name`) are shown as plain code.
"""

import argparse
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / ".docs-src"

MARKER = "<!-- cli-help -->"
ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc):(?=<code>)")


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
    """Docstrings write references the Sphinx way (:func:`name`); show them as code, without the role."""
    return ROLE.sub("", html)
