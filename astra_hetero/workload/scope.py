"""The spec's `scope`: cut a planned partition down to a few layers and micro-batches.

Applied after planning and the memory check, so that `auto` balancing and feasibility are those of the
whole model and batch; only the work simulated shrinks. Stages keep their first layers and replicas
their first micro-batches, so a stage with fewer layers than the cap keeps them all.
"""

from __future__ import annotations

from astra_hetero.spec.schema import ScopeSpec
from astra_hetero.workload.partition import Partition


def scoped(partition: Partition, scope: ScopeSpec | None) -> Partition:
    if scope is None:
        return partition
    return Partition(
        _capped(partition.layers_per_stage, scope.layers_per_stage),
        _capped(partition.micro_batches_per_replica, scope.micro_batches_per_replica),
    )


def _capped(counts: tuple[int, ...], cap: int | None) -> tuple[int, ...]:
    return counts if cap is None else tuple(min(count, cap) for count in counts)
