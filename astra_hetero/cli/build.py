"""`astra-hetero build SPEC.yaml -o RUN_DIR`: workload and topology in one run directory."""

from __future__ import annotations

import argparse

from astra_hetero.cli.generate import describe_workload
from astra_hetero.cli.options import add_spec_arguments, limits_from
from astra_hetero.pipeline import build_run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("build", help="generate the workload and render the topology")
    add_spec_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--per-rank", action="store_true", help="also write every rank's trace file (see `generate --help`)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from astra_hetero.jobs.load import load_run_spec  # here: every command imports this module when parsing

    spec = load_run_spec(args.spec)
    run_dir = build_run_dir(
        spec,
        args.output,
        progress=not args.quiet,
        limits=limits_from(args),
        force=args.force,
        per_rank=args.per_rank,
    )
    print(describe_workload(run_dir))
    print(f"network inputs written to {run_dir.root}/ns3 and {run_dir.root}/analytical")
    return 0
