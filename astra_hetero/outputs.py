"""Output directories we write (run directories, reports): what is ours in them, and their publication.

Every directory astra-hetero publishes holds a marker, `.astra-hetero.json`, that records what each
*part* of the directory is (its top-level entries) and which inputs it was built from:

    {"format": "astra-hetero/output@1",
     "parts": {"workload": {"inputs": "<sha256 of cluster+network>", "entries": ["manifest.json", ...]},
               "topology": {"inputs": "...", "entries": ["analytical", "ns3"]},
               "result":   {"inputs": "...", "entries": ["logs", "result.json", "trace.json"]}}}

A new state of the directory is assembled in a staging directory (see `staging`) from the parts just
written and the old parts that still match them, then published in one step; results never survive a
change of inputs. The marker also tells our directories from a user's: entries of a directory that is
not ours are replaced only with `force` (the CLI's `--force`), and entries no part claims are the
user's and are carried over untouched.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.errors import AstraHeteroError, RunDirError
from astra_hetero.staging import Staging, staged

logger = logging.getLogger(__name__)

MARKER = ".astra-hetero.json"
MARKER_FORMAT = "astra-hetero/output@1"

# The entries of each part of a run directory, for directories written before the marker recorded them.
RUN_PARTS: dict[str, tuple[str, ...]] = {
    "workload": (
        rundir.SPEC,
        rundir.MANIFEST,
        rundir.WORKLOAD_DIR,
        rundir.CALIBRATION,
        rundir.NCCL_TESTS_DIR,
        rundir.DYNAMICS,
    ),
    "topology": (rundir.NS3_DIR, rundir.ANALYTICAL_DIR, *rundir.TOPOLOGY_FIGURES),
    "result": (rundir.RESULT, rundir.TIMELINE, rundir.LOGS_DIR, rundir.REPORT_DIR),
}
INPUT_PARTS = ("workload", "topology")


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The marker of `directory` if it is one of ours, else None."""
    path = directory / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT:
        return None
    return data


def is_ours(directory: Path) -> bool:
    """Ours: it holds our marker, or the manifest of a run directory (or the report.json of a report)
    written before the marker existed."""
    if read_marker(directory) is not None:
        return True
    return any(_format_of(directory / name).startswith(prefix) for name, prefix in LEGACY_FORMATS.items())


# Files whose `format` field identified our directories before the marker existed.
LEGACY_FORMATS = {rundir.MANIFEST: "astra-hetero/manifest", "report.json": "astra-hetero/report"}


def _format_of(path: Path) -> str:
    if path.is_symlink() or not path.is_file():
        return ""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return ""
    return str(data.get("format", "")) if isinstance(data, dict) else ""


class OutputStaging:
    """A directory being assembled from new parts and the old directory's parts that still hold."""

    def __init__(self, staging: Staging, legacy_parts: dict[str, tuple[str, ...]]) -> None:
        self.staging = staging
        self.path = staging.path
        self.root = staging.root
        self.parts: dict[str, dict[str, Any]] = {}
        marker = read_marker(staging.previous) if staging.previous is not None else None
        if marker is not None:
            self.old_parts = _parts_of(marker)
        else:
            present = set(staging.previous_entries())
            self.old_parts = {
                name: {"inputs": None, "entries": [e for e in entries if e in present]}
                for name, entries in legacy_parts.items()
                if present & set(entries)
            }

    def write(self, part: str, inputs: str | None, writer: Callable[[Path], Any]) -> Any:
        """Run `writer(staging path)`; what it adds at the top level becomes `part`."""
        before = set(os.listdir(self.path))
        value = writer(self.path)
        entries = sorted(set(os.listdir(self.path)) - before)
        self.parts[part] = {"inputs": inputs, "entries": entries}
        return value

    def keep(
        self, part: str, inputs: str | None = None, skip: Callable[[str], bool] = lambda p: False
    ) -> bool:
        """Carry the old directory's `part` if it exists and was built from `inputs` (any, if None)."""
        old = self.old_parts.get(part)
        if old is None or (inputs is not None and old.get("inputs") != inputs):
            return False
        for entry in old["entries"]:
            self.staging.carry(entry, skip)
        self.parts[part] = old
        return True

    def old_inputs(self, part: str) -> str | None:
        return self.old_parts.get(part, {}).get("inputs")

    def finish(self, known: set[str]) -> None:
        """Carry the entries no part claims (the user's), then write the marker."""
        claimed = known | {MARKER} | {e for part in self.old_parts.values() for e in part["entries"]}
        present = set(os.listdir(self.path))
        for entry in self.staging.previous_entries():
            if entry not in claimed and entry not in present and not _is_leftover(entry):
                self.staging.carry(entry)
        marker = {"format": MARKER_FORMAT, "parts": self.parts}
        rundir.write_json_atomic(self.path / MARKER, marker)


def _parts_of(marker: dict[str, Any]) -> dict[str, dict[str, Any]]:
    parts = marker.get("parts")
    if not isinstance(parts, dict):
        return {}
    valid = {}
    for name, part in parts.items():
        entries = part.get("entries") if isinstance(part, dict) else None
        if isinstance(entries, list) and all(_plain_name(e) for e in entries):
            valid[str(name)] = {"inputs": part.get("inputs"), "entries": list(entries)}
    return valid


def _plain_name(entry: Any) -> bool:
    """A top-level entry name (a marker must not make us carry `../x` or `a/b`)."""
    return isinstance(entry, str) and entry not in ("", ".", "..") and "/" not in entry and "\0" not in entry


def _is_leftover(entry: str) -> bool:
    return entry.startswith(".") and (".staging-" in entry or ".old-" in entry)


@contextmanager
def publish_output(
    root: Path,
    known_parts: dict[str, tuple[str, ...]],
    *,
    force: bool = False,
    what: str = "output",
    foreign_ok: bool = False,
    replaced: tuple[str, ...] | None = None,
) -> Iterator[OutputStaging]:
    """Assemble a new state of `root` and publish it whole (see the module docstring).

    `known_parts`: the entries each part has in directories written before the marker. An existing,
    non-empty directory that is not ours is written into only with `force`, or, with `foreign_ok`
    (running a plain ASTRA-sim input directory), as long as none of the names this publication
    replaces (`replaced`, default: all of these) is in it.
    """
    known = {entry for entries in known_parts.values() for entry in entries}
    at_stake = set(replaced) if replaced is not None else known
    with staged(root) as staging:
        previous = staging.previous
        entries = set(staging.previous_entries())
        if previous is not None and entries and not force and not is_ours(previous):
            clashes = sorted(entries & (at_stake | {MARKER}))
            if clashes or not foreign_ok:
                holds = (
                    f"it holds {', '.join(clashes)}, which would be replaced"
                    if clashes
                    else "it is not empty"
                )
                raise RunDirError(
                    f"{previous}: not an astra-hetero {what} (no {MARKER}) and {holds}; choose another "
                    "directory or pass --force"
                )
        output = OutputStaging(staging, known_parts)
        logger.debug("assembling the new %s of %s in %s", what, staging.root, staging.path)
        try:
            yield output
        except AstraHeteroError as exc:
            # Errors raised while building name the staging path; the user knows the directory as `root`.
            exc.args = tuple(_relabel(a, staging.path, staging.root) for a in exc.args)
            raise
        output.finish(known)
    logger.debug("published %s", root)


def _relabel(value: Any, staging: Path, root: Path) -> Any:
    return value.replace(str(staging), str(root)) if isinstance(value, str) else value


@contextmanager
def publish(root: Path, *, force: bool = False, entries: tuple[str, ...] = ()) -> Iterator[Path]:
    """Publish a directory of outputs (a report, a plan, a study) in one step: yield an empty staging
    directory; what is written there replaces the same names in `root`, and entries that a previous
    publication wrote but this one did not are dropped. Everything else in `root` is kept, so `root`
    may be a directory that also holds other things.

    `entries`: names this kind of output may hold; if `root` is not ours and already holds one of
    them, it is replaced only with `force`.
    """
    with publish_output(Path(root), {"output": entries}, force=force, foreign_ok=True) as output:
        yield output.path
        written = sorted(e for e in os.listdir(output.path) if e != MARKER)
        output.parts["output"] = {"inputs": None, "entries": written}
