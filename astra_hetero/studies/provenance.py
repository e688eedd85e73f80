"""A study's provenance.json: what produced its numbers — astra-hetero's version and commit, the study
file's hash, each backend's binary or image identity as its points recorded them, and each point's spec hash
(the layout of one record is in astra_hetero/provenance.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astra_hetero import provenance, rundir
from astra_hetero.studies.table import ResultsTable

PROVENANCE_NAME = "provenance.json"
FORMAT = "astra-hetero/study-provenance@1"


def study_provenance(table: ResultsTable, study_file: Path | None) -> dict[str, Any]:
    backends: list[dict[str, Any]] = []
    points: dict[str, Any] = {}
    for row in table.rows:
        record = row.provenance or {}
        backend = record.get("backend")
        if backend and backend not in backends:
            backends.append(backend)
        points[row.point] = {
            "backend": row.backend or (backend or {}).get("name"),
            "status": row.status,
            "spec_sha256": record.get("spec_sha256"),
            "astra_hetero_commit": (record.get("astra_hetero") or {}).get("commit"),
        }
    study_path = Path(study_file) if study_file else None
    return {
        "format": FORMAT,
        "astra_hetero": dict(provenance.tool_identity()),
        "study_file": str(study_path) if study_path else None,
        "study_sha256": rundir.file_sha256(study_path) if study_path and study_path.is_file() else None,
        "reduced": table.study.reduced,
        "environment": provenance.environment(),
        "backends": backends,
        "points": points,
    }


def provenance_lines(data: dict[str, Any]) -> list[str]:
    """Markdown list items for report.md."""
    tool = provenance.short({"astra_hetero": data["astra_hetero"]})["astra-hetero"]
    lines = [f"- astra-hetero {tool}"]
    if data.get("study_sha256"):
        lines.append(f"- study file sha256: `{data['study_sha256']}`")
    for backend in data["backends"]:
        facts = provenance.short({"astra_hetero": data["astra_hetero"], "backend": backend})
        detail = "; ".join(f"{k} {facts[k]}" for k in ("binary", "image", "components") if k in facts)
        lines.append(f"- backend {facts['backend']}" + (f": {detail}" if detail else ""))
    lines.append(f"- per point: spec sha256 and more in `{PROVENANCE_NAME}`")
    return lines


def provenance_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"
