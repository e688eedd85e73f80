"""What a decoded Chakra trace is: one rank's nodes as numpy columns (`RankTrace`), the node kinds,
and the file layout a byte-level comparison needs (`DecodedTrace`)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

KIND_COMP, KIND_COLL, KIND_SEND, KIND_RECV = 0, 1, 2, 3


@dataclass(frozen=True)
class RankTrace:
    """One rank's nodes in file order; dependencies are indices (not Chakra ids) of predecessors:
    node i's are `deps[dep_ends[i-1]:dep_ends[i]]`, and its name is `names[name_ends[i-1]:name_ends[i]]`."""

    path: str
    ids: np.ndarray  # uint64 Chakra ids
    names: bytes  # every name's UTF-8 bytes, concatenated
    name_ends: np.ndarray
    kinds: np.ndarray
    durations_ns: np.ndarray
    sizes: np.ndarray
    coll_types: np.ndarray  # Chakra CollectiveCommType for collectives, -1 otherwise
    peers: np.ndarray  # send: destination rank, recv: source rank, -1 otherwise
    tags: np.ndarray
    group_names: tuple[str, ...]  # the distinct pg_names of the rank's collectives ("" = all ranks)
    groups: np.ndarray  # index into group_names for collectives, -1 otherwise
    dep_ends: np.ndarray
    deps: np.ndarray

    def __len__(self) -> int:
        return len(self.kinds)

    def name(self, i: int) -> str:
        start = int(self.name_ends[i - 1]) if i else 0
        return self.names[start : int(self.name_ends[i])].decode("utf-8", "replace")

    def all_names(self) -> list[str]:
        if not self.names.isascii():
            return [self.name(i) for i in range(len(self))]
        text = self.names.decode("ascii")  # one character per byte: slice the text by byte offsets
        return [text[start:end] for start, end in pairwise([0, *self.name_ends.tolist()])]

    def describe(self, i: int) -> str:
        return f"node {self.ids[i]} ({self.name(i)!r})"


@dataclass(frozen=True)
class DecodedTrace:
    """A trace with what a byte-level comparison against it needs: the file's bytes, where each
    node's record ends, each communication node's raw attribute blobs (empty for compute nodes), and
    whether every communication record is its node's canonical serialization (fields in number
    order, so the attributes, field 10, are the record's tail)."""

    trace: RankTrace
    data: bytes
    record_ends: np.ndarray
    attrs: list[tuple[bytes, ...]]
    canonical: bool
