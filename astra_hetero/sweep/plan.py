"""A sweep file → the list of points to run.

    base: mixed.yaml            # a spec file (relative to the sweep file) or an inline spec mapping
    backend: embedded           # optional; `--backend` on the command line wins
    timeout_s: 3600             # optional, per point (ASTRA-sim backends)
    grid:                       # every combination of these dotted-path overrides ...
      cluster.node_groups[1].nic.gbps: [100, 200, 400]
      partition.layers: [uniform, auto]
    variants:                   # ... or an explicit list (give exactly one of grid / variants)
      - {name: slow-a100, set: {cluster.node_groups[1].gpu.compute_multiplier: 0.5}}

Paths address the spec as validated, with every default and preset filled in, so
`cluster.node_groups[1].nic.gbps` exists even where the base spec wrote `nic: 200`. A path that does not
exist is an error in the sweep file; a point whose spec turns out invalid fails alone when it runs.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from astra_hetero.bounds import MAX_SWEEP_POINTS
from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import RunSpec, load_run_spec, parse_run_spec
from astra_hetero.spec.load import spec_error_from_validation
from astra_hetero.spec.types import Seconds
from astra_hetero.spec.yamlfile import read_yaml_mapping

_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        pattern=r"^[A-Za-z0-9_.=+-]+$", max_length=100, description="used in the point's directory name"
    )
    set: dict[str, Any] = Field(default_factory=dict, description="dotted path -> value")


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base: str | dict[str, Any]
    name: str = "sweep"
    backend: str | None = None
    timeout_s: Seconds | None = None
    grid: dict[str, list[Any]] | None = None
    variants: list[Variant] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SweepFile:
        if (self.grid is None) == (self.variants is None):
            raise ValueError("give exactly one of `grid` and `variants`")
        if self.grid is not None and any(not values for values in self.grid.values()):
            raise ValueError("every grid entry needs at least one value")
        return self


@dataclass(frozen=True)
class SweepPoint:
    index: int
    name: str  # unique; also the point's directory name
    overrides: dict[str, Any]
    spec_data: dict[str, Any]
    backend: str | None = None  # this point's backend; None: the sweep's

    def spec(self) -> RunSpec:
        """The spec this point runs (of one job, or of several sharing the cluster); raises SpecError
        when the overrides made it invalid."""
        return parse_run_spec(self.spec_data)


@dataclass(frozen=True)
class Sweep:
    name: str
    points: tuple[SweepPoint, ...]
    override_keys: tuple[str, ...]  # the CSV's parameter columns, in file order
    backend: str | None = None
    timeout_s: float | None = None


MAX_POINTS = MAX_SWEEP_POINTS


def load_sweep(path: str | Path, max_points: int = MAX_POINTS) -> Sweep:
    path = Path(path)
    return plan_sweep(read_yaml_mapping(path, "", "sweep file"), path.parent, max_points)


def plan_sweep(data: Any, directory: Path, max_points: int = MAX_POINTS) -> Sweep:
    try:
        sweep = SweepFile.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_validation(exc) from None
    num_points = math.prod(len(v) for v in sweep.grid.values()) if sweep.grid else len(sweep.variants or [])
    if num_points > max_points:
        raise SpecError(
            "grid" if sweep.grid else "variants",
            f"{num_points:,} points, more than --max-points {max_points:,}; split the sweep or raise "
            "the limit",
        )
    base = base_data(sweep.base, directory)
    if sweep.grid is not None:
        keys = tuple(sweep.grid)
        named = [
            (_grid_name(keys, values), dict(zip(keys, values, strict=True)))
            for values in itertools.product(*sweep.grid.values())
        ]
        where = "grid"
    else:
        keys = tuple(dict.fromkeys(key for variant in sweep.variants or [] for key in variant.set))
        named = [(variant.name, variant.set) for variant in sweep.variants or []]
        where = "variants"
    points = []
    for index, (name, overrides) in enumerate(named):
        spec_data = copy.deepcopy(base)
        for key, value in overrides.items():
            set_path(spec_data, key, value, where)
        point_name = f"{index:03d}-{name}" if name else f"{index:03d}"
        points.append(SweepPoint(index, point_name, overrides, spec_data))
    return Sweep(sweep.name, tuple(points), keys, sweep.backend, sweep.timeout_s)


def set_path(data: dict[str, Any], dotted: str, value: Any, where: str = "grid") -> None:
    """Set `a.b[2].c` in nested dicts/lists; SpecError naming the sweep key if any step is absent."""
    steps = parse_path(dotted, where)
    node: Any = data
    for depth, step in enumerate(steps):
        here = _render(steps[:depth]) or "<spec>"
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise SpecError(f"{where}.{dotted}", f"{here} has no item [{step}]")
        elif not isinstance(node, dict) or step not in node:
            known = f"; fields: {', '.join(map(str, node))}" if isinstance(node, dict) else ""
            raise SpecError(f"{where}.{dotted}", f"{here} has no field {step!r}{known}")
        if depth == len(steps) - 1:
            node[step] = copy.deepcopy(value)
        else:
            node = node[step]


def parse_path(dotted: str, where: str = "grid") -> list[str | int]:
    steps: list[str | int] = []
    for part in dotted.split("."):
        matches = list(_TOKEN.finditer(part))
        if not matches or "".join(m.group(0) for m in matches) != part or matches[0].group(1) is None:
            raise SpecError(f"{where}.{dotted}", f"cannot read path segment {part!r} (write e.g. a.b[1].c)")
        steps.extend(m.group(1) if m.group(1) is not None else int(m.group(2)) for m in matches)
    return steps


def _render(steps: list[str | int]) -> str:
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def base_data(base: str | dict[str, Any], directory: Path) -> dict[str, Any]:
    """The base spec (a file relative to `directory`, or inline), validated, as plain data. Its errors
    name `base` (and the file), not only the field inside the base spec."""
    try:
        spec = load_run_spec(directory / base) if isinstance(base, str) else parse_run_spec(base)
    except SpecError as exc:
        field = f"base.{exc.field}" if exc.field else "base"
        where = f" (in {directory / base})" if isinstance(base, str) and exc.field else ""
        raise type(exc)(field, exc.reason + where) from None
    return spec.model_dump()


def _grid_name(keys: tuple[str, ...], values: tuple[Any, ...]) -> str:
    """`nic.gbps=100_layers=auto`: the last two path steps of each key, made filesystem-safe."""
    parts = []
    for key, value in zip(keys, values, strict=True):
        short = ".".join(re.sub(r"\[\d+\]", "", key).split(".")[-2:])
        parts.append(f"{short}={value}")
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", "_".join(parts))[:120]
