"""`astra-hetero` entry point: parse, dispatch to one subcommand module, map errors to exit codes.

Exit codes: 0 success, 1 a run failed (backend error, deadlock), 2 bad input (spec, run directory).
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from astra_hetero import __version__
from astra_hetero.errors import AstraHeteroError

# Each module defines `register(subparsers) -> None`, which sets `func(args) -> int` as a default.
SUBCOMMANDS = ("generate", "topology", "build", "run", "report", "sweep", "study")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="astra-hetero",
        description="Heterogeneity-aware LLM-training simulation on ASTRA-sim and ns-3.",
    )
    parser.add_argument("--version", action="version", version=f"astra-hetero {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        import_module(f"astra_hetero.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except AstraHeteroError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
