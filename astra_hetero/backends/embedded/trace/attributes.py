"""Reading one Chakra node's attributes: a serialized AttributeProto's value, a node's label for
messages, and a required integer attribute, checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

INT64_MAX = (1 << 63) - 1


def attribute(blob: bytes, path: Path, node: Any) -> tuple[str, Any] | None:
    """(name, value) of one serialized AttributeProto, None when it holds no value."""
    try:
        attr = pb.AttributeProto.FromString(blob)
    except DecodeError as exc:
        raise RunDirError(f"{path}: {label(node)} has a corrupt attribute ({exc})") from None
    kind = attr.WhichOneof("value")
    return None if kind is None else (attr.name, getattr(attr, kind))


def label(node: Any) -> str:
    return f"node {node.id} ({node.name.decode('utf-8', 'replace')!r})"


def require(
    values: dict[str, Any], key: str, path: Path, node: Any, low: int = 0, high: int = INT64_MAX
) -> int:
    """The integer attribute `key`, which must lie in [low, high] (an int, never a bool or a float)."""
    if key not in values:
        raise RunDirError(f"{path}: {label(node)} lacks required attribute {key!r}")
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunDirError(f"{path}: {label(node)} attribute {key!r} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise RunDirError(f"{path}: {label(node)} attribute {key}={value} is outside {low}..{high}")
    return value
