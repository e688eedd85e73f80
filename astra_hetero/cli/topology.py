"""`astra-hetero topology SPEC.yaml -o RUN_DIR [--draw]`: write the ns-3 and analytical network inputs."""

from __future__ import annotations

import argparse

from astra_hetero import rundir
from astra_hetero.cli.options import add_spec_arguments, limits_from
from astra_hetero.pipeline import build_run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topology", help="write the cluster network for ns-3 and the analytical backend into a run directory"
    )
    add_spec_arguments(parser)
    parser.add_argument("--draw", action="store_true", help="also write RUN_DIR/topology.png")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # here, not at the top: every command imports this module when parsing
    from astra_hetero.spec import load_spec
    from astra_hetero.topology import checked_graph, figures

    spec = load_spec(args.spec)
    build_run_dir(
        spec, args.output, workload=False, limits=limits_from(args), force=args.force, draw=args.draw
    )
    print(f"wrote {args.output / rundir.NS3_DIR}/ and {args.output / rundir.ANALYTICAL_DIR}/")
    if args.draw:
        print(f"wrote {args.output / rundir.TOPOLOGY_PNG}")
    for line in figures(checked_graph(spec)).lines():
        print(line)
    return 0
