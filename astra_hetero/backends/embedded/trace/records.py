"""What a decoded Chakra trace is: one rank's nodes as numpy columns (`RankTrace`), the node kinds,
and the file layout a byte-level comparison needs (`DecodedTrace`)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

KIND_COMP, KIND_COLL, KIND_SEND, KIND_RECV = 0, 1, 2, 3
# A host operator (a compute node with is_cpu_op, or a metadata node) of a measured trace: it runs on
# the rank's CPU, beside its GPU work, as ASTRA-sim runs it. Negative, so that `kinds >= KIND_COLL`
# stays "communication" and `kinds > KIND_COLL` "send or recv".
KIND_CPU = -1


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
    # The first compute node of a trace whose compute nodes carry no time at all (every duration 0,
    # roofline off), -1 if none; and whether it carries roofline data (num_ops, tensor_size). Such a
    # trace is only valid for a rank the manifest marks idle (`rundir.compute_times`).
    untimed: int = -1
    untimed_roofline: bool = False

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

    def in_id_order(self) -> RankTrace:
        """The same trace with its nodes sorted by Chakra id (ASTRA-sim issues ready nodes lowest id
        first; with nodes in id order the engine's lowest index is the lowest id)."""
        if len(self.ids) < 2 or bool((self.ids[1:] > self.ids[:-1]).all()):
            return self
        order = np.argsort(self.ids, kind="stable")
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        names = self.all_names()
        encoded = [names[i].encode() for i in order.tolist()]
        starts = np.concatenate(([0], self.dep_ends[:-1]))
        lists = [inverse[self.deps[starts[i] : self.dep_ends[i]]] for i in order.tolist()]
        deps = np.concatenate(lists) if lists else self.deps
        return RankTrace(
            self.path,
            self.ids[order],
            b"".join(encoded),
            np.cumsum([len(n) for n in encoded], dtype=np.int64),
            self.kinds[order],
            self.durations_ns[order],
            self.sizes[order],
            self.coll_types[order],
            self.peers[order],
            self.tags[order],
            self.group_names,
            self.groups[order],
            np.cumsum([len(d) for d in lists], dtype=np.int64),
            deps.astype(self.deps.dtype),
            int(inverse[self.untimed]) if self.untimed >= 0 else -1,
            self.untimed_roofline,
        )


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
