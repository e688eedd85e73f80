"""Per-GPU-type times the estimate and the bounds are made of, from the generator's own timed blocks.

Compute comes from exactly the blocks the traces are written from (`generate.timed_blocks`), so a
change to the cost model changes the planner's ranking with it. Communication uses closed forms of
the embedded engine's model: ring phases over a link of the group's fabric (TP, inside a node) or of
its per-GPU share of NIC bandwidth (across nodes), latency per step, and reductions streamed through
device memory (3 bytes moved per byte reduced).
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import NodeGroupSpec
from astra_hetero.workload.blocks import Block, DeviceBlocks, OptimizerCost, Segment
from astra_hetero.workload.costs import Collective

# Bytes each rank sends, and reduces, per byte of a collective's full buffer on n ranks (ring).
SEND_FRACTION = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
}
REDUCE_FRACTION = {
    "all_reduce": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: 0.0,
}
STEPS = {
    "all_reduce": lambda n: 2 * (n - 1),
    "reduce_scatter": lambda n: n - 1,
    "all_gather": lambda n: n - 1,
}


@dataclass(frozen=True)
class Links:
    """What one GPU of a node group can move (bytes per ns) and how long a hop takes (ns)."""

    fabric_bytes_per_ns: float
    fabric_hop_ns: float  # GPU -> node switch -> GPU
    network_bytes_per_ns: float  # the GPU's share of its node's NIC bandwidth
    network_hop_ns: float  # GPU -> NIC -> fabric -> NIC -> GPU, one way
    memory_bytes_per_ns: float  # peak HBM, as the engine charges reductions

    @classmethod
    def of(cls, group: NodeGroupSpec, link_latency_ns: float) -> Links:
        fabric = group.intra_node_fabric
        return cls(
            fabric_bytes_per_ns=fabric.gbytes_per_s,
            fabric_hop_ns=2 * fabric.latency_ns,
            network_bytes_per_ns=group.nic.gbps * group.nics_per_node / group.gpus_per_node / 8,
            network_hop_ns=2 * group.nic.latency_ns + 4 * link_latency_ns,
            memory_bytes_per_ns=group.gpu.hbm_tbps * group.gpu.compute_multiplier * 1000,
        )

    @property
    def injection_bytes_per_ns(self) -> float:
        """Everything the GPU can push at once (fabric and NIC): no transfer of it is faster."""
        return self.fabric_bytes_per_ns + self.network_bytes_per_ns


def ring_ns(
    kind: str, size: float, n: int, bytes_per_ns: float, hop_ns: float, memory_bytes_per_ns: float
) -> float:
    """One ring collective of a `size`-byte buffer on n ranks: transfer + latency steps + reduction."""
    if n < 2 or size <= 0:
        return 0.0
    transfer = SEND_FRACTION[kind](n) * size / bytes_per_ns
    reduction = 3 * REDUCE_FRACTION[kind](n) * size / memory_bytes_per_ns
    return transfer + STEPS[kind](n) * hop_ns + reduction


def ring_floor_ns(kind: str, size: float, n: int, links: Links) -> float:
    """No algorithm does better: each rank must send this share of the buffer through its links."""
    return SEND_FRACTION[kind](n) * size / links.injection_bytes_per_ns if n >= 2 else 0.0


@dataclass(frozen=True)
class ClassTimes:
    """One TP rank of one GPU type under one set of options, per micro-batch (ns)."""

    layer_fwd: float  # compute and the layer's TP collectives (estimate)
    layer_bwd: float  # compute (recompute included) and TP collectives
    layer_fwd_floor: float  # compute and the TP collectives' lower bounds
    layer_bwd_floor: float
    first_fwd: float  # embedding (first stage)
    first_bwd: float
    last_fwd: float  # final norm, LM head, loss (last stage)
    last_bwd: float
    optimizer: OptimizerCost  # the optimizer step, affine in the rank's parameters


def _compute_ns(block: Block) -> float:
    return sum(item.time_ns for item in block if isinstance(item, Segment))


def _collectives(block: Block) -> list[Collective]:
    return [item for item in block if isinstance(item, Collective)]


def class_times(blocks: DeviceBlocks, links: Links, tp: int, full_recompute: bool) -> ClassTimes:
    def tp_ns(block: Block) -> float:
        return sum(
            ring_ns(
                c.kind, c.bytes, tp, links.fabric_bytes_per_ns, links.fabric_hop_ns, links.memory_bytes_per_ns
            )
            for c in _collectives(block)
        )

    def tp_floor_ns(block: Block) -> float:
        return sum(ring_floor_ns(c.kind, c.bytes, tp, links) for c in _collectives(block))

    fwd, bwd = blocks.layer_fwd, blocks.layer_bwd
    recompute = (_compute_ns(fwd), tp_ns(fwd), tp_floor_ns(fwd)) if full_recompute else (0.0, 0.0, 0.0)
    return ClassTimes(
        layer_fwd=_compute_ns(fwd) + tp_ns(fwd),
        layer_bwd=_compute_ns(bwd) + tp_ns(bwd) + recompute[0] + recompute[1],
        layer_fwd_floor=_compute_ns(fwd) + tp_floor_ns(fwd),
        layer_bwd_floor=_compute_ns(bwd) + tp_floor_ns(bwd) + recompute[0] + recompute[2],
        first_fwd=_compute_ns(blocks.embedding_fwd),
        first_bwd=_compute_ns(blocks.embedding_bwd),
        last_fwd=_compute_ns(blocks.head_fwd),
        last_bwd=_compute_ns(blocks.head_bwd),
        optimizer=blocks.optimizer,
    )
