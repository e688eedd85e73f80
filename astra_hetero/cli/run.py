"""`astra-hetero run SPEC.yaml|RUN_DIR -o RUN_DIR [--backend NAME]`: simulate and summarise."""

from __future__ import annotations

import argparse
from pathlib import Path

from astra_hetero.backends.base import backend_names
from astra_hetero.errors import RunDirError
from astra_hetero.pipeline import TIMELINE_MODES, build_run_dir, execute
from astra_hetero.rundir import RunDir
from astra_hetero.spec import load_spec


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
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def add_astrasim_options(parser: argparse.ArgumentParser, timeout_help: str) -> None:
    """--binary, --bin-dir, --docker, --timeout: how the ASTRA-sim backends find and bound their binary."""
    parser.add_argument("--binary", help="ASTRA-sim binary to use (ASTRA-sim backends)")
    parser.add_argument(
        "--bin-dir", help="directory holding the ASTRA-sim binaries (else $ASTRA_SIM_BIN_DIR, PATH)"
    )
    parser.add_argument("--docker", metavar="IMAGE", help="run the ASTRA-sim binary inside this Docker image")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=timeout_help)


def resolve_run_dir(source: Path, output: Path | None, quiet: bool = True) -> Path:
    """A run directory to execute: `source` itself, or one built from the spec `source` into `output`."""
    if source.is_dir():
        if output is not None and output.resolve() != source.resolve():
            raise RunDirError(f"{source} is a run directory; -o must be omitted or name the same directory")
        return source
    if output is None:
        raise RunDirError(f"{source} is a spec: give -o RUN_DIR for the run directory to build")
    run_dir = RunDir(output)
    spec = load_spec(source)
    build_run_dir(spec, output, progress=not quiet)
    return run_dir.root


def backend_options(args: argparse.Namespace) -> dict[str, object]:
    if args.backend == "embedded":
        return {}
    return {
        "binary": args.binary,
        "bin_dir": args.bin_dir,
        "docker_image": args.docker,
        "timeout_s": args.timeout,
    }


def run(args: argparse.Namespace) -> int:
    from astra_hetero.results.report import render_summary

    run_dir = resolve_run_dir(args.source, args.output, args.quiet)
    result = execute(run_dir, args.backend, timeline=args.timeline, **backend_options(args))
    print(render_summary(result, label=run_dir.name))
    wrote = "result.json" + ("" if args.timeline == "none" else " and trace.json")
    print(f"wrote {wrote} in {run_dir}")
    return 0
