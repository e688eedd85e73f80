"""ZeRO-3 / PyTorch FSDP: parameters sharded over the data-parallel ranks, gathered per unit when used.

A unit is one transformer layer, the embedding, or the LM head with the final norm (FSDP's usual
wrapping: one unit per transformer block, the rest in the root). For every micro-batch:
- forward: a unit's parameters are all-gathered before its forward runs; the next unit's all-gather is
  issued as the unit starts (FSDP's forward prefetch), so it travels while the unit computes;
- backward: the same again (the gathered copy was freed after the forward, FSDP's default
  `reshard_after_forward`), the next unit's gather issued as a unit's backward starts (FSDP's
  BACKWARD_PRE prefetch), and once a unit's backward is done its gradients are reduce-scattered,
  every micro-batch (FSDP without `no_sync`, as DeepSpeed's ZeRO-3).
The optimizer then updates the rank's shard; there is no parameter gather after it. Gathers and
reductions share the data-parallel communicator (one NCCL stream, in program order). A MoE layer's
routed experts are sharded over the expert-data-parallel group and gathered there alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astra_hetero.spec.schema import Spec
from astra_hetero.workload.costs import expert_parameters_on_rank, parameter_counts
from astra_hetero.workload.gradsync import (
    DataParallelStream,
    PassLike,
    UnitHook,
    chunk_units,
    expert_units,
    sync_groups,
)

if TYPE_CHECKING:
    from astra_hetero.workload.program import RankContext, RankGraph


class ShardedUnits:
    """The data-parallel work of one rank under ZeRO-3 (the graph calls these hooks)."""

    def __init__(self, graph: RankGraph, ctx: RankContext) -> None:
        self.graph, self.ctx = graph, ctx
        self.streams: list[tuple[DataParallelStream, dict[tuple[int, str], float]]] = []
        for group in sync_groups(ctx):
            units = expert_units if group.role == "edp" else chunk_units
            sizes = {(c, label): size for c in range(ctx.num_chunks) for label, size in units(ctx, c)}
            self.streams.append((DataParallelStream(graph, ctx, group.role, group.size), sizes))
        # per chunk, the units in forward order
        self.order = [[label for label, _ in reversed(chunk_units(ctx, c))] for c in range(ctx.num_chunks)]
        self.pending: dict[tuple[int, str], list[int]] = {}  # gathers issued, not yet waited for
        self.reduced: list[int] = []

    # --- gathers ----------------------------------------------------------------------------------
    def _gather(self, chunk: int, unit: str, deps: list[int]) -> None:
        key = (chunk, unit)
        if key in self.pending:
            return
        nodes = []
        for stream, sizes in self.streams:
            grad_bytes = sizes.get(key, 0.0)
            if grad_bytes > 0:
                size = grad_bytes * self.ctx.param_bytes_per_grad_byte
                nodes.append(stream.issue(f"{stream.role}.param_all_gather.{unit}", "all_gather", size, deps))
        self.pending[key] = nodes

    def _use(self, run: PassLike, chunk: int, unit: str, following: str | None) -> None:
        """Wait for this unit's gather (issuing it now if not prefetched), prefetch the next one."""
        deps = [self.graph.last_compute] if self.graph.last_compute >= 0 else []
        self._gather(chunk, unit, deps)
        for node in self.pending.pop((chunk, unit)):
            run.wait(node)
        if following is not None:
            self._gather(chunk, following, run.flush())

    def before_forward(self, forward_index: int) -> None:
        del forward_index

    def before_unit(self, run: PassLike, chunk: int, unit: str) -> None:
        order = self.order[chunk]
        if unit not in order:
            return
        index = order.index(unit)
        self._use(run, chunk, unit, order[index + 1] if index + 1 < len(order) else None)

    def before_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None:
        del backward_index
        order = list(reversed(self.order[chunk]))

        def hook(run: PassLike, unit: str) -> None:
            if unit in order:
                index = order.index(unit)
                self._use(run, chunk, unit, order[index + 1] if index + 1 < len(order) else None)

        return hook

    # --- reductions -------------------------------------------------------------------------------
    def after_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None:
        del backward_index

        def hook(run: PassLike, unit: str) -> None:
            run.flush()
            ready = [self.graph.last_compute]
            for stream, sizes in self.streams:
                grad_bytes = sizes.get((chunk, unit), 0.0)
                if grad_bytes > 0:
                    name = f"{stream.role}.grad_reduce_scatter.{unit}"
                    self.reduced.append(stream.issue(name, "reduce_scatter", grad_bytes, ready))

        return hook

    def after_backward(self, backward_index: int) -> None:
        del backward_index

    def finish(self) -> list[int]:
        return list(self.reduced)

    def after_step(self, last: int) -> None:
        del last  # the next iteration gathers what it uses


def data_parallel_sizes(spec: Spec) -> tuple[int, int]:
    """(ranks sharing the dense weights: dp·cp, ranks sharing the experts: tp·cp·dp / (ep·etp))."""
    par = spec.parallelism
    dense = par.dp * par.cp
    if spec.model.moe is None:
        return dense, dense
    return dense, par.tp * par.cp * par.dp // (par.ep * par.expert_tp)


def sharded_state_bytes(
    spec: Spec, dense_params: float, expert_params: float, per_param: tuple[float, float, float]
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) in bytes on one rank holding these parameters, at
    `per_param` bytes each unsharded: ZeRO-1 shards the optimizer states over the data-parallel ranks,
    ZeRO-2 the gradients too (plus the two buckets in flight), ZeRO-3 the weights too (the gathered
    units are the memory estimate's)."""
    par = spec.parallelism
    stage = par.sharding_stage
    dense_ranks, expert_ranks = data_parallel_sizes(spec)
    whole = dense_params + expert_params
    shard = dense_params / dense_ranks + expert_params / expert_ranks
    weight, grad, optimizer = per_param
    gradients = grad * (shard if stage >= 2 else whole)
    if stage == 2:
        gradients += 2 * par.dp_bucket_mib * 1024**2
    return weight * (shard if stage >= 3 else whole), gradients, optimizer * (shard if stage >= 1 else whole)


def largest_unit_parameters(spec: Spec, stage: int) -> float:
    """Parameters on one rank of the stage's largest ZeRO-3 unit (a layer, the embedding, the head)."""
    model, par = spec.model, spec.parallelism
    counts = parameter_counts(model)
    units = [counts.per_layer / par.tp + expert_parameters_on_rank(model, par)]
    if stage == 0:
        units.append(counts.embedding / par.tp)
    if stage == par.pp - 1:
        units.append((counts.head + counts.final_norm) / par.tp)
    return max(units)
