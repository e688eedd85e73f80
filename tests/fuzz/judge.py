"""Running one CLI call in-process and judging its outcome against the house rule on bad input."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.cli.main import main


@dataclass(frozen=True)
class Outcome:
    """What one CLI call did: its exit code, stderr, and what its outputs looked like afterwards."""

    code: int
    stderr: str
    changed: tuple[str, ...]  # output paths created or modified by a failing call
    bad_numbers: tuple[str, ...]  # JSON paths of non-finite or negative numbers a successful call wrote


def snapshot(paths: list[Path]) -> dict[str, str]:
    """Every file under `paths` with a hash of its content (directories as ''), to see what a call
    changed."""
    seen: dict[str, str] = {}
    for root in paths:
        if root.is_file():
            seen[str(root)] = hashlib.sha1(root.read_bytes()).hexdigest()
        elif root.is_dir():
            seen[str(root)] = ""
            for path in sorted(root.rglob("*")):
                seen[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else ""
    return seen


def invoke(argv: list[str], outputs: list[Path], results: Sequence[Path] = ()) -> Outcome:
    """Run `astra-hetero argv` in this process. `outputs`: what the call may write (and must leave as
    it was on failure); `results`: result/summary JSON files whose numbers must be finite on success."""
    before = snapshot(outputs)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    after = snapshot(outputs)
    changed = ()
    if code != 0:
        changed = tuple(sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p)))
    bad: tuple[str, ...] = ()
    if code == 0:
        bad = tuple(b for path in results if path.is_file() for b in bad_numbers(_load_json(path), path.name))
    return Outcome(code, err.getvalue(), changed, bad)


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(), parse_constant=lambda name: float(name))


# Quantities that may be negative: differences, errors, slopes, offsets.
_SIGNED = ("error", "delta", "diff", "change", "slope", "offset", "gain", "vs_", "pct_of", "speedup")


def bad_numbers(data: Any, where: str = "") -> Iterator[str]:
    """JSON paths of NaN/infinite numbers, and of negative ones whose name does not say they are
    signed."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from bad_numbers(value, f"{where}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from bad_numbers(value, f"{where}[{i}]")
    elif isinstance(data, float | int) and not isinstance(data, bool):
        if not math.isfinite(data):
            yield f"{where}={data}"
        elif data < 0 and not any(s in where.lower() for s in _SIGNED):
            yield f"{where}={data}"


def judge(outcome: Outcome, names: tuple[str, ...], point_failures: bool = False) -> list[str]:
    """The house rules `outcome` breaks (empty: none). `names`: words of which the error must contain
    at least one (the mutated field's keys, the file's name). `point_failures`: a sweep or study, where
    a point whose spec turns out invalid fails alone, in the table, and the command exits 1 (by design:
    the other points still run)."""
    broken = []
    err = outcome.stderr.strip()
    if point_failures and outcome.code == 1 and "unexpected" not in err:
        return []
    if outcome.code not in (0, 2):
        broken.append(f"exit-{outcome.code}")
    if "Traceback" in err:
        broken.append("traceback")
    if outcome.code == 2:
        if err.count("\n") > 0 and not err.startswith("usage:"):
            broken.append("multi-line")
        if names and not _names_something(err, names):
            broken.append("unnamed")
    if outcome.code != 0 and outcome.changed:
        broken.append("leftover")
    if outcome.bad_numbers:
        broken.append("bad-number")
    return broken


# "error: cluster.node_groups[0].nic: ...", "error: parallelism['tp:']: ..." or "error: /path/file.json:
# ...": a field path (with a key quoted as written) or a file
_NAMED = re.compile(r"^error: ([^\s:']*'[^']*'[^\s:]*|[^\s:]*[\w\]/][^\s:]*)(:\d+)?: \S")


def _names_something(err: str, names: tuple[str, ...]) -> bool:
    """Whether the error names one of `names` or starts with a field path or a file path (a mutation
    can rightly be reported at another field, e.g. tp at the product tp·pp·dp)."""
    return any(name.lower() in err.lower() for name in names if name) or bool(_NAMED.match(err))
