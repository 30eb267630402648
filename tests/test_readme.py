"""The README cannot rot: every Python block runs on its own, every ``bayeskern`` command line parses with the real
command-line parser, and the test command is the one ``.ci/run`` runs."""

import re
import shlex
from pathlib import Path

import pytest

from bayeskern.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language):
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.S | re.M)


def test_readme_fences_are_balanced():
    fences = re.findall(r"^```", README, flags=re.M)
    assert len(fences) % 2 == 0 and "```-" not in README and len(_blocks("python")) >= 5


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_block_runs_on_its_own(index, tmp_path, monkeypatch):
    """Each block is self-contained (imports and data of its own): copied alone into a fresh session, it runs."""
    monkeypatch.chdir(tmp_path)  # blocks write their example files here
    code = _blocks("python")[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {})


def test_readme_command_lines_parse_and_match_ci():
    commands = [line for block in _blocks("bash") for line in block.splitlines()]
    parser = build_parser()
    lines = [c.split("&&")[-1].strip() if "&&" in c else c.strip() for c in commands]
    cli = [line for line in lines if line.startswith("bayeskern ")]
    assert {shlex.split(line)[1] for line in cli} >= {"demo", "two-sample", "independence", "filter", "compress", "jdl"}
    for line in cli:
        parser.parse_args(shlex.split(line, comments=True)[1:])  # SystemExit (a test error) on an unknown option
    test_command = next(c for c in commands if c.rstrip().endswith("pytest"))
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command.strip() in ci
