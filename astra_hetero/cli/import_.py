"""`astra-hetero import -o RUN_DIR --workload-configuration PREFIX ...`: an existing ASTRA-sim study as
a run directory, from the command line the user already runs (ASTRA-sim's option names, both
`--opt=value` and `--opt value`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from astra_hetero.cli.options import add_force_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="an existing ASTRA-sim study (traces, system, network files) as a run directory",
        description="Take an ASTRA-sim study's inputs, named as on ASTRA-sim's own command line, into a "
        "run directory that `astra-hetero run` simulates on every backend.",
    )
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="RUN_DIR", help="run directory")
    parser.add_argument(
        "--workload-configuration",
        required=True,
        metavar="PREFIX",
        help="the traces: PREFIX.<rank>.et for every NPU (or a directory holding one such set)",
    )
    parser.add_argument("--system-configuration", type=Path, required=True, metavar="SYSTEM.json")
    parser.add_argument(
        "--network-configuration",
        type=Path,
        required=True,
        metavar="NETWORK.yml|ns3-config.txt",
        help="an analytical network (YAML) or an ns-3 configuration",
    )
    parser.add_argument("--remote-memory-configuration", type=Path, metavar="MEM.json")
    parser.add_argument(
        "--comm-group-configuration", metavar="GROUPS.json", help="comm groups (or `empty`, ASTRA-sim's none)"
    )
    parser.add_argument(
        "--logical-topology-configuration",
        type=Path,
        metavar="LOGICAL.json",
        help="the ns-3 backend's NPU dimensions (ns-3 networks)",
    )
    parser.add_argument("--num-queues-per-dim", type=int, metavar="N")
    parser.add_argument("--injection-scale", type=float, metavar="X")
    parser.add_argument(
        "--comm-scale", type=float, metavar="X", help="recorded (ASTRA-sim 518bd51 ignores it)"
    )
    parser.add_argument(
        "--compute-scale", type=float, metavar="X", help="recorded (ASTRA-sim 518bd51 ignores it)"
    )
    parser.add_argument("--rendezvous-protocol", type=_boolean, metavar="true|false")
    parser.add_argument("--logging-folder", help=argparse.SUPPRESS)
    parser.add_argument("--logging-configuration", help=argparse.SUPPRESS)
    parser.add_argument("--hetero", type=Path, metavar="OVERLAY.yaml", help="a heterogeneity overlay")
    add_force_argument(parser)
    parser.set_defaults(func=run)


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def files_from(args: argparse.Namespace, argv: tuple[str, ...] = ()) -> object:
    from astra_hetero.importer.study import SCALAR_OPTIONS, StudyFiles

    groups = args.comm_group_configuration
    options = {
        name: getattr(args, name.replace("-", "_"))
        for name in SCALAR_OPTIONS
        if getattr(args, name.replace("-", "_")) is not None
    }
    return StudyFiles(
        workload=args.workload_configuration,
        system=args.system_configuration,
        network=args.network_configuration,
        remote_memory=args.remote_memory_configuration,
        comm_groups=None if groups in (None, "empty") else Path(groups),
        logical_topology=args.logical_topology_configuration,
        options=options,
        argv=argv,
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from astra_hetero.importer.pipeline import import_study

    files = files_from(args, tuple(sys.argv))
    study = import_study(files, args.output, force=args.force, overlay=args.hetero)
    print(
        f"imported {study.num_ranks} ranks ({study.trace_name}.<rank>.et, {study.backend} network "
        f"{' x '.join(map(str, study.dims))}) into {args.output}"
    )
    real = "ns3" if study.backend == "ns3" else "analytical-unaware"
    print(f"next: astra-hetero run {args.output}   (or --backend {real} for real ASTRA-sim)")
    return 0
