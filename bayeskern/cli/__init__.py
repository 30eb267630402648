"""The ``bayeskern`` command line, as functions: the parser, the entry point and the table reader it uses."""

import argparse
import sys
from pathlib import Path

from .._version import __version__
from . import compress, filtering, forecast, independence, jdl, two_sample
from ._io import CLIError, load_sample, output_folder, report, start_clock

__all__ = ["main", "build_parser", "load_sample", "CLIError"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``bayeskern`` command and its subcommands.

    Returns:
        argparse.ArgumentParser: each subcommand's namespace carries its ``check``, ``outputs`` and ``run``.
    """
    parser = argparse.ArgumentParser(
        prog="bayeskern", description="Bayesian kernel embeddings, kernel tests, kernel Bayes filtering, "
        "forecasting, conditional distribution compression and joint distribution learning on JAX.",
        epilog="'bayeskern COMMAND --help' explains a command's inputs, options and output files.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (two_sample, independence, filtering, forecast, compress, jdl):
        module.add_parsers(sub)
    return parser


def main(argv=None) -> int:
    """Run one ``bayeskern`` command: the console script calls it.

    Args:
        argv: the arguments after ``bayeskern`` (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 when done, 2 for bad files or arguments (one line on stderr), 130 after Ctrl-C (the
        complete outputs listed on stderr).

    Raises:
        SystemExit: from argparse, for ``--help``, ``--version`` or arguments it cannot parse.
    """
    args = build_parser().parse_args(argv)
    import bayeskern as bk

    bk.enable_x64()
    try:
        args.check(args)
        output_folder(args.out, args.outputs(args), force=args.force)  # before any work: refuse to overwrite
        start_clock()
        args.run(args)
    except (CLIError, ValueError, TypeError) as e:
        print(f"bayeskern: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        done = sorted(p.name for p in Path(args.out).glob("*") if not p.name.startswith(".")) \
            if Path(args.out).is_dir() else []
        print(f"bayeskern: interrupted; complete files in {args.out}: {', '.join(done) or 'none'} (every file is "
              "written whole or not at all; a long run keeps what it finished)", file=sys.stderr)
        return 130
    report(f"{args.command}: done, outputs in {args.out}")
    return 0
