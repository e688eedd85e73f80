"""Options several subcommands share: the output directory, `--force`, the work limits, `--json`."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from astra_hetero.bounds import WorkLimits
from astra_hetero.results.figure_files import FIGURE_FORMATS


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every spec → run-directory command takes."""
    parser.add_argument("spec", type=Path, help="experiment spec (YAML)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="run directory")
    add_force_argument(parser)
    add_limit_arguments(parser)


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into an existing directory that astra-hetero did not create: entries with the names "
        "astra-hetero uses there are replaced or removed, all others kept",
    )


# (option, WorkLimits field, what it bounds)
LIMITS = (
    ("--max-nodes", "max_nodes", "most trace nodes over all ranks"),
    ("--max-rank-nodes", "max_rank_nodes", "most trace nodes on one rank"),
    ("--max-links", "max_links", "most links in the cluster network"),
    ("--max-flows", "max_flows", "most network transfers the collectives make"),
)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = WorkLimits()
    group = parser.add_argument_group("work limits (a larger spec is refused before any work is done)")
    for flag, name, what in LIMITS:
        default = getattr(defaults, name)
        group.add_argument(
            flag, type=positive_int, default=default, metavar="N", help=f"{what} (default {default:,})"
        )


def limits_from(args: argparse.Namespace) -> WorkLimits:
    return WorkLimits(**{name: getattr(args, name) for _, name, _ in LIMITS})


def positive_int(text: str) -> int:
    try:
        number = float(text.replace("_", ""))  # 5e6 and 5_000_000 both read
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    value = int(number)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A timeout: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as one JSON object on stdout instead of tables (for scripts)",
    )


def print_json(document: Any) -> None:
    """One JSON object on stdout; NaN and infinities (not JSON) as null."""
    print(json.dumps(_finite(document), indent=2))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def add_figure_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--figure-format",
        choices=FIGURE_FORMATS,
        default="png",
        help="write the figures as PNG (default), SVG or PDF",
    )
