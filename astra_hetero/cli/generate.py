"""`astra-hetero generate SPEC.yaml -o RUN_DIR`: Chakra traces, comm groups and manifest."""

from __future__ import annotations

import argparse

from astra_hetero.cli.options import add_spec_arguments, limits_from
from astra_hetero.pipeline import build_run_dir
from astra_hetero.rundir import RunDir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate", help="write the Chakra traces (one per class of alike ranks), comm groups and manifest"
    )
    add_spec_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--per-rank",
        action="store_true",
        help="also write every rank's trace (workload/workload.<rank>.et), as ASTRA-sim reads them; without "
        "it the traces are written once per class of alike ranks (workload/classes/, rank_classes.json) and "
        "`run --backend analytical|ns3` writes the per-rank files when it needs them",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from astra_hetero.jobs.load import load_run_spec  # here: every command imports this module when parsing

    spec = load_run_spec(args.spec)
    run_dir = build_run_dir(
        spec,
        args.output,
        topology=False,
        progress=not args.quiet,
        limits=limits_from(args),
        force=args.force,
        per_rank=args.per_rank,
    )
    print(describe_workload(run_dir))
    return 0


def describe_workload(run_dir: RunDir) -> str:
    manifest = run_dir.read_manifest()
    head = f"{manifest['num_ranks']} ranks written to {run_dir.root}/workload"
    if "jobs" not in manifest:
        return f"{head} ({_plan_text(manifest)})"
    lines = [f"{head}, {len(manifest['jobs'])} jobs:"]
    for job in manifest["jobs"]:
        ranges = ", ".join(f"{a}-{b - 1}" for a, b in job["ranks"])
        lines.append(f"  {job['name']}: ranks {ranges} ({_plan_text(job)})")
    if manifest.get("idle_ranks"):
        lines.append(f"  idle: {len(manifest['idle_ranks'])} GPUs")
    return "\n".join(lines)


def _plan_text(plan: dict) -> str:
    """A plan's layers and micro-batches as the manifest records them (of the run, or of one job)."""
    chunks = ""
    if plan.get("virtual_stages", 1) > 1:
        chunks = f"per virtual stage {plan['layers_per_virtual_stage']}, "
    return (
        f"layers per stage {plan['layers_per_stage']}, {chunks}"
        f"micro-batches per replica {plan['micro_batches_per_replica']}"
    )
