"""`astra-hetero generate SPEC.yaml -o RUN_DIR`: Chakra traces, comm groups and manifest."""

from __future__ import annotations

import argparse

from astra_hetero.cli.options import add_spec_arguments, limits_from
from astra_hetero.pipeline import build_run_dir
from astra_hetero.rundir import RunDir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate", help="write one Chakra trace per rank, comm groups and manifest"
    )
    add_spec_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from astra_hetero.spec import load_spec  # here: every command imports this module when parsing

    spec = load_spec(args.spec)
    run_dir = build_run_dir(
        spec, args.output, topology=False, progress=not args.quiet, limits=limits_from(args), force=args.force
    )
    print(describe_workload(run_dir))
    return 0


def describe_workload(run_dir: RunDir) -> str:
    manifest = run_dir.read_manifest()
    chunks = ""
    if manifest.get("virtual_stages", 1) > 1:
        chunks = f"per virtual stage {manifest['layers_per_virtual_stage']}, "
    return (
        f"{manifest['num_ranks']} ranks written to {run_dir.root}/workload "
        f"(layers per stage {manifest['layers_per_stage']}, {chunks}"
        f"micro-batches per replica {manifest['micro_batches_per_replica']})"
    )
