"""What every spec section shares: strict keys, frozen values, and preset merging."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from astra_hetero.spec.catalog import normalize_key


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _merge_preset(data: Any, catalog: dict[str, Any], what: str) -> Any:
    """Accept `name` or `{preset: name, **overrides}`; return the preset's fields under the overrides."""
    if isinstance(data, str):
        data = {"preset": data}
    if not isinstance(data, dict) or data.get("preset") is None:
        return data
    key = normalize_key(str(data["preset"]))
    if key not in catalog:
        raise ValueError(f"unknown {what} preset {data['preset']!r}; known: {', '.join(sorted(catalog))}")
    record = vars(catalog[key]).copy()
    record.pop("key", None)
    return {**record, **data, "preset": key}
