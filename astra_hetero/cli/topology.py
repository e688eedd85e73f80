"""`astra-hetero topology SPEC.yaml -o RUN_DIR [--draw]`: write the ns-3 and analytical network inputs."""

from __future__ import annotations

import argparse

from astra_hetero import rundir
from astra_hetero.cli.options import add_figure_format_argument, add_spec_arguments, limits_from
from astra_hetero.pipeline import build_run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topology", help="write the cluster network for ns-3 and the analytical backend into a run directory"
    )
    add_spec_arguments(parser)
    parser.add_argument(
        "--draw", action="store_true", help="also draw the cluster: RUN_DIR/topology.png (or .svg, .pdf)"
    )
    add_figure_format_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # here, not at the top: every command imports this module when parsing
    from astra_hetero.jobs.load import load_run_spec
    from astra_hetero.topology import checked_graph, figures

    spec = load_run_spec(args.spec)
    draw = args.figure_format if args.draw else None
    build_run_dir(spec, args.output, workload=False, limits=limits_from(args), force=args.force, draw=draw)
    print(f"wrote {args.output / rundir.NS3_DIR}/ and {args.output / rundir.ANALYTICAL_DIR}/")
    if draw is not None:
        print(f"wrote {args.output / rundir.topology_figure(draw)}")
    for line in figures(checked_graph(spec)).lines():
        print(line)
    return 0
