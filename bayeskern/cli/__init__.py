"""The ``bayeskern`` command line: one subcommand per main job (``bayeskern --help``, ``bayeskern CMD --help``).

demo, two-sample (MMD + BKL + witness posterior), independence (HSIC), filter (kernel Bayes filter, optional NUTS
over its hyperparameters), compress (conditional distribution compression), jdl (joint distribution learning).
Inputs are CSV or NPY tables (one point per row); outputs are summary.json, PNG figures, CSV tables, npz fits and
arviz netCDF posteriors in the ``--out`` folder. Bad files or arguments give one-line errors and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from .._version import __version__
from . import compress, filtering, independence, jdl, two_sample
from ._io import CLIError, load_sample, output_folder, report, start_clock

__all__ = ["main", "build_parser", "load_sample", "CLIError"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayeskern", description="Bayesian kernel embeddings, kernel tests, kernel Bayes filtering, "
        "conditional distribution compression and joint distribution learning on JAX.",
        epilog="'bayeskern COMMAND --help' explains a command's inputs, options and output files.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (two_sample, independence, filtering, compress, jdl):
        module.add_parsers(sub)
    return parser


def main(argv=None) -> int:
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
