"""Reading generated traces back through Chakra's own reader (protolib), independent of our writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd


def read_with_chakra(path: Path) -> tuple[Any, list[Any]]:
    handle = openFileRd(str(path))
    try:
        metadata = pb.GlobalMetadata()
        assert decodeMessage(handle, metadata), f"{path}: no GlobalMetadata"
        nodes = []
        while True:
            node = pb.Node()
            if not decodeMessage(handle, node):
                break
            nodes.append(node)
        return metadata, nodes
    finally:
        handle.close()


def attrs(node: Any) -> dict[str, Any]:
    out = {}
    for attr in node.attr:
        kind = attr.WhichOneof("value")
        out[attr.name] = getattr(attr, kind)
    return out
