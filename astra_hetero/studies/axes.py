"""A study's axes as the table, the checks and the report see them: each axis's levels, and how an
axis value is written (`value_label`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from astra_hetero.studies.schema import Variant


@dataclass(frozen=True)
class AxisLevel:
    label: str  # the CSV cell and the name part: a variant's name, or a value written out
    value: Any  # the parameter value (numbers plot on a numeric axis), or the variant's name
    description: str = ""
    variant: Variant | None = None


@dataclass(frozen=True)
class AxisInfo:
    name: str
    levels: tuple[AxisLevel, ...]
    description: str = ""
    path: str | None = None  # parameter axes: the spec path they set

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(level.label for level in self.levels)

    @property
    def numeric(self) -> bool:
        return all(isinstance(v.value, int | float) and not isinstance(v.value, bool) for v in self.levels)


def value_label(value: Any) -> str:
    """How an axis value is written in the CSV, in `where:` filters and in point names."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
