"""The list of reproducible experiments (examples/experiments.yaml) and `study --check`: a finished
study's numbers against the ones the list expects, each within its tolerance.

The list, one entry per experiment:

    format: astra-hetero/experiments@1
    experiments:
      - id: E1
        title: ...
        study: studies/heterogeneity_impact.yaml    (relative to the list; entries without one are
                                                     checked by their own command, e.g. a benchmark)
        backend: embedded                           (what its numbers need; an expected number may name
                                                     another: those hold when the study runs on that one)
        command: astra-hetero study ... --check
        runtime_s: 40                               (wall clock on 2 shared cores)
        expected:
          - {point: v100_by-stage, column: slowdown_pct, value: 201.1, rel_tol: 0.02}
        reduced: {command: ..., runtime_s: ..., expected: [...]}   (the study's --reduced version)

A number passes when |actual − value| ≤ max(abs_tol, rel_tol·|value|).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from astra_hetero.errors import SpecError
from astra_hetero.spec.yamlfile import read_yaml

FORMAT = "astra-hetero/experiments@1"
FILE_NAME = "experiments.yaml"


class Expected(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="the point's name (results.csv `point`), or a benchmark's row id")
    column: str = Field(description="a results.csv column (metric or derived)")
    value: float
    backend: str | None = Field(
        default=None, description="the study's backend these numbers hold for (default: the experiment's)"
    )
    rel_tol: float = Field(default=0.0, ge=0)
    abs_tol: float = Field(default=0.0, ge=0)
    note: str = ""

    @model_validator(mode="after")
    def _has_tolerance(self) -> Expected:
        if self.rel_tol == 0 and self.abs_tol == 0:
            raise ValueError("give rel_tol or abs_tol (an exact float comparison is not reproducible)")
        return self

    def passes(self, actual: float) -> bool:
        return abs(actual - self.value) <= max(self.abs_tol, self.rel_tol * abs(self.value))

    @property
    def tolerance_text(self) -> str:
        parts = [f"±{self.rel_tol:.1%}" if self.rel_tol else "", f"±{self.abs_tol:g}" if self.abs_tol else ""]
        return " or ".join(p for p in parts if p)


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str
    runtime_s: float | None = Field(
        default=None, gt=0, description="wall clock on a 2-core machine; null where not measured (say why)"
    )
    runtime_note: str = ""
    expected: list[Expected] = Field(min_length=1)


class Experiment(Variant):
    id: str
    title: str
    backend: str
    study: str | None = None
    description: str = ""
    reduced: Variant | None = None


class Experiments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str
    machine: str = ""
    experiments: list[Experiment] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Experiments:
        if self.format != FORMAT:
            raise ValueError(f"format must be {FORMAT!r}")
        ids = [e.id for e in self.experiments]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"experiment ids repeat: {', '.join(duplicates)}")
        return self


def load_experiments(path: Path) -> Experiments:
    path = Path(path)
    data = read_yaml(path, "--check", "experiments list")
    try:
        return Experiments.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        raise SpecError(where, f"{path}: {error['msg']}") from None


def find_list(study_file: Path, given: Path | None = None) -> Path:
    """`given`, else the first experiments.yaml in the study file's directory or the one above it."""
    if given is not None:
        if not Path(given).is_file():
            raise SpecError("--check", f"{given}: no such experiments list")
        return Path(given)
    for directory in (Path(study_file).resolve().parent, Path(study_file).resolve().parent.parent):
        candidate = directory / FILE_NAME
        if candidate.is_file():
            return candidate
    raise SpecError(
        "--check",
        f"no {FILE_NAME} beside {study_file} or in the directory above it; name the list: --check FILE",
    )


def experiment_for(experiments: Experiments, list_path: Path, study_file: Path) -> Experiment:
    """The entry whose `study` is `study_file`."""
    study = Path(study_file).resolve()
    for experiment in experiments.experiments:
        if experiment.study and (Path(list_path).resolve().parent / experiment.study).resolve() == study:
            return experiment
    raise SpecError("--check", f"{list_path}: no experiment names the study {study_file}")


def for_backend(experiment: Experiment, variant: Variant, backend: str) -> list[Expected]:
    """The variant's numbers for a study run on `backend` (an entry without one: the experiment's)."""
    return [e for e in variant.expected if (e.backend or experiment.backend) == backend]


@dataclass(frozen=True)
class Check:
    expected: Expected
    actual: float | None
    why: str = ""  # why there is no number to compare

    @property
    def ok(self) -> bool:
        return self.actual is not None and self.expected.passes(self.actual)


def check_values(expected: Sequence[Expected], actual: Mapping[tuple[str, str], float | None]) -> list[Check]:
    """Each expected number against `actual[(point, column)]` (absent or None: a failure, with why)."""
    checks = []
    for item in expected:
        key = (item.point, item.column)
        value = actual.get(key)
        if key not in actual:
            checks.append(Check(item, None, "no such point or column"))
        elif value is None or (isinstance(value, float) and math.isnan(value)):
            checks.append(Check(item, None, "no value (the point failed or the column is blank)"))
        else:
            checks.append(Check(item, float(value)))
    return checks


def table_values(rows: Sequence[Any], columns: Sequence[str]) -> dict[tuple[str, str], float | None]:
    """(point, column) -> value of a study's rows (studies/table.Row); a failed point's values are None."""
    values: dict[tuple[str, str], float | None] = {}
    for row in rows:
        for column in columns:
            values[(row.point, column)] = row.values.get(column) if row.ok else None
    return values


def check_lines(experiment_id: str, variant: str, checks: Sequence[Check]) -> list[str]:
    """One line per number: PASS/FAIL, where, expected ± tolerance, actual."""
    lines = [f"check {experiment_id} ({variant}) against the experiments list:"]
    for check in checks:
        item = check.expected
        actual = f"{check.actual:.6g}" if check.actual is not None else f"— ({check.why})"
        lines.append(
            f"  {'PASS' if check.ok else 'FAIL'}  {item.point} {item.column}: expected {item.value:.6g} "
            f"{item.tolerance_text}, got {actual}"
        )
    failed = sum(not c.ok for c in checks)
    summary = f"{len(checks) - failed} of {len(checks)} numbers within tolerance"
    lines.append(summary + (f", {failed} not" if failed else ""))
    return lines
