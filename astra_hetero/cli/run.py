"""`astra-hetero run SPEC.yaml|RUN_DIR -o RUN_DIR [--backend NAME]`: simulate and summarise."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.backends.base import backend_names
from astra_hetero.cli.options import (
    add_force_argument,
    add_json_argument,
    add_limit_arguments,
    limits_from,
    positive_int,
    positive_seconds,
    print_json,
)
from astra_hetero.errors import RunDirError
from astra_hetero.pipeline import TIMELINE_MODES, execute, run_spec
from astra_hetero.rundir import shared_reads

if TYPE_CHECKING:
    from astra_hetero.results.model import RunResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="simulate a spec or an existing run directory")
    parser.add_argument("source", type=Path, help="experiment spec (YAML) or run directory")
    parser.add_argument("-o", "--output", type=Path, help="run directory (required with a spec)")
    parser.add_argument(
        "--backend",
        default="embedded",
        choices=backend_names(),
        help="simulator (default: embedded, needs nothing compiled)",
    )
    add_astrasim_options(parser, timeout_help="kill the simulator after this long")
    parser.add_argument(
        "--timeline",
        choices=TIMELINE_MODES,
        default="auto",
        help="trace.json: every span (all), none, or sampled ranks for large runs (auto)",
    )
    parser.add_argument(
        "--no-fold",
        action="store_true",
        help="embedded backend: simulate every rank instead of one per class of interchangeable ranks "
        "(the reference the folded simulation is checked against)",
    )
    parser.add_argument(
        "--collective-model",
        choices=("ideal", "nccl"),
        help="embedded backend: price collectives with this model instead of the run directory's (nccl: "
        "what NCCL would do; ideal: ASTRA-sim's analytical collectives)",
    )
    parser.add_argument(
        "--iterations",
        type=positive_int,
        help="simulate this many back-to-back iterations (overrides the spec's `iterations:`)",
    )
    parser.add_argument(
        "--no-solo",
        action="store_true",
        help="several jobs (`jobs:`): skip simulating each job alone (its slowdown is then not reported)",
    )
    parser.add_argument(
        "--hetero",
        type=Path,
        metavar="OVERLAY.yaml",
        help="an imported study: lay this heterogeneity overlay over it first (the study as it was moves "
        "to RUN_DIR/original; -o writes the overlaid study elsewhere)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_argument(parser, "the run summary")
    add_force_argument(parser)
    add_limit_arguments(parser)
    parser.set_defaults(func=run)


def add_astrasim_options(parser: argparse.ArgumentParser, timeout_help: str) -> None:
    """--binary, --bin-dir, --docker, --timeout: how the ASTRA-sim backends find and bound their binary."""
    parser.add_argument("--binary", help="ASTRA-sim binary to use (ASTRA-sim backends)")
    parser.add_argument(
        "--bin-dir", help="directory holding the ASTRA-sim binaries (else $ASTRA_SIM_BIN_DIR, PATH)"
    )
    parser.add_argument("--docker", metavar="IMAGE", help="run the ASTRA-sim binary inside this Docker image")
    parser.add_argument("--timeout", type=positive_seconds, metavar="SECONDS", help=timeout_help)


def simulate(args: argparse.Namespace) -> tuple[Path, RunResult]:
    """Run the run directory `args.source`, or build the spec `args.source` into `args.output` and run
    it (inputs and result published together)."""
    source, output = args.source, args.output
    options = backend_options(args)
    if getattr(args, "hetero", None) is not None:
        if not source.is_dir():
            raise RunDirError(f"{source}: --hetero lays an overlay over an imported run directory")
        from astra_hetero.importer.pipeline import overlay_run_dir

        overlay_run_dir(source, args.hetero, output, force=args.force)
        source, output = output or source, None
    if source.is_dir():
        if output is not None and os.path.realpath(output) != os.path.realpath(source):
            raise RunDirError(f"{source} is a run directory; -o must be omitted or name the same directory")
        return source, execute(source, args.backend, args.timeline, force=args.force, **options)
    if output is None:
        raise RunDirError(f"{source} is a spec: give -o RUN_DIR for the run directory to build")
    from astra_hetero.jobs.load import load_run_spec  # here: every command imports this module when parsing

    spec = load_run_spec(source)
    result = run_spec(
        spec,
        output,
        args.backend,
        args.timeline,
        limits=limits_from(args),
        force=args.force,
        progress=not args.quiet,
        **options,
    )
    return output, result


def backend_options(args: argparse.Namespace) -> dict[str, object]:
    iterations = getattr(args, "iterations", None)
    extra: dict[str, object] = {} if iterations is None else {"iterations": iterations}
    if getattr(args, "no_solo", False):
        extra["solo"] = False
    if args.backend == "embedded":
        model = getattr(args, "collective_model", None)
        return {
            "fold": not getattr(args, "no_fold", False),
            **extra,
            **({"collective_model": model} if model else {}),
        }
    return {
        "binary": args.binary,
        "bin_dir": args.bin_dir,
        "docker_image": args.docker,
        "timeout_s": args.timeout,
        **extra,
    }


def run(args: argparse.Namespace) -> int:
    from astra_hetero.results.facts import read_facts
    from astra_hetero.results.jobs_report import render_run_summary

    args.quiet = args.quiet or args.json  # stdout carries the JSON document alone
    with shared_reads():  # manifest.json parsed once for the engine, the result and the summary
        run_dir, result = simulate(args)
        facts = read_facts(run_dir)
    trace = None if args.timeline == "none" else run_dir / "trace.json"
    if args.json:
        from astra_hetero.results.document import run_document

        files = {"result": run_dir / "result.json", "trace": trace}
        print_json(run_document(result, run_dir, facts, files))
        return 0
    print(render_run_summary(result, label=run_dir.name, facts=facts))
    wrote = "result.json" + ("" if trace is None else " and trace.json")
    print(f"wrote {wrote} in {run_dir}")
    original = original_result(run_dir, args)
    if original is not None:
        change = (
            result.iteration_time_us / original.iteration_time_us - 1 if original.iteration_time_us else 0.0
        )
        print(
            f"the study without its overlay (original/): {original.iteration_time_us / 1000:.4g} ms; with it "
            f"{result.iteration_time_us / 1000:.4g} ms ({change:+.1%}); `astra-hetero report {run_dir}` "
            "compares them side by side"
        )
    return 0


def original_result(run_dir: Path, args: argparse.Namespace) -> RunResult | None:
    """An overlaid import's original study, simulated by the same backend if it has no such result."""
    from astra_hetero.results.io import read_result

    original = run_dir / "original"
    if not (original / "manifest.json").is_file() or not (run_dir / "overlay.yaml").is_file():
        return None
    options = backend_options(args)
    if (original / "result.json").is_file():
        previous = read_result(original)
        model = options.get("collective_model")
        if previous.backend == args.backend and model in (None, previous.meta.get("collective_model")):
            return previous
    try:
        return execute(original, args.backend, args.timeline, **options)
    except RunDirError as exc:
        print(f"(the study without its overlay was not simulated: {exc})")
        return None
