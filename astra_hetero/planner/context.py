"""What every candidate with the same shape and options shares, computed once: the validated
parallelism section, the per-GPU-type times, parameters per stage, and memory needs per cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from astra_hetero.planner.candidate import Shape, parallelism_for
from astra_hetero.planner.costs import ClassTimes, Links, class_times
from astra_hetero.planner.problem import Problem
from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.units import BYTES_PER_GIB
from astra_hetero.workload.costs import BYTES_BF16, stage_parameters
from astra_hetero.workload.generate import timed_blocks
from astra_hetero.workload.memory import estimate as memory_estimate
from astra_hetero.workload.partition import micro_batch_group

Options = tuple[tuple[str, Any], ...]


@dataclass
class OptionContext:
    problem: Problem
    shape: Shape
    options: Options
    parallelism: ParallelismSpec
    _memory: dict[tuple[int, int, int], float] = field(default_factory=dict)
    _params: dict[tuple[int, int], float] = field(default_factory=dict)
    memo: dict[tuple[object, ...], object] = field(default_factory=dict)  # for callers' derived values

    @cached_property
    def spec(self) -> Spec:
        """The base spec with this parallelism (mapping and partition as written: unused here)."""
        return self.problem.base.model_copy(update={"parallelism": self.parallelism})

    @cached_property
    def links(self) -> dict[int, Links]:
        latency = self.problem.base.network.link_latency_ns
        return {c.index: Links.of(c.spec, latency) for c in self.problem.classes}

    @cached_property
    def times(self) -> dict[int, ClassTimes]:
        """Per device class, from the blocks the generator times for one of the class's GPUs."""
        full = self.parallelism.recompute == "full"
        first_device = {}
        for device in self.problem.devices:
            first_device.setdefault(device.group_name, device)
        found = {}
        for c in self.problem.classes:
            (blocks,) = timed_blocks(self.spec, [first_device[c.groups[0]]]).values()
            found[c.index] = class_times(blocks, self.links[c.index], self.shape.tp, full)
        return found

    @cached_property
    def num_micro_batches(self) -> int:
        return self.parallelism.global_batch_size // self.parallelism.micro_batch_size

    @cached_property
    def virtual_stages(self) -> int:
        return int(getattr(self.parallelism, "virtual_stages", 1) or 1)

    @cached_property
    def activation_bytes(self) -> float:
        """What one TP rank sends to the next stage per micro-batch (as the generator emits it)."""
        model, par = self.problem.base.model, self.parallelism
        return BYTES_BF16 * par.micro_batch_size * model.seq_len * model.hidden_size / par.tp

    def params_on_rank(self, stage: int, num_layers: int) -> float:
        key = (stage, num_layers)
        params = self._params.get(key)
        if params is None:
            params = stage_parameters(self.problem.base.model, self.parallelism, stage, num_layers)[0]
            self._params[key] = params
        return params

    def grad_bytes(self, stage: int, num_layers: int) -> float:
        width = 4 if self.parallelism.grad_reduce_in_fp32 else BYTES_BF16
        return self.params_on_rank(stage, num_layers) * width

    def memory_need_gib(self, stage: int, num_layers: int, num_micro_batches: int) -> float:
        """The generator's own estimate (workload.memory), cached. A replica's micro-batches come in
        whole groups (interleaving: groups of pp), so a count is rounded up to the next group: memory
        only grows with micro-batches, so bounds taken at a smaller count stay bounds."""
        unit = micro_batch_group(self.parallelism)
        num_micro_batches = -(-num_micro_batches // unit) * unit
        key = (stage, num_layers, num_micro_batches)
        need = self._memory.get(key)
        if need is None:
            need = memory_estimate(self.spec, stage, num_layers, num_micro_batches).total / BYTES_PER_GIB
            self._memory[key] = need
        return need

    def max_layers(self, stage: int, num_micro_batches: int, capacity_gib: float) -> int:
        """Most layers `stage` can hold within `capacity_gib` (0 if not one); the need grows with the
        layers, so a binary search over them finds it."""
        key = ("max_layers", stage, num_micro_batches, capacity_gib)
        found = self.memo.get(key)
        if found is None:
            low, high = 0, self.problem.base.model.num_layers  # low fits (or is 0), high + 1 does not
            while low < high:
                middle = (low + high + 1) // 2
                if self.memory_need_gib(stage, middle, num_micro_batches) <= capacity_gib:
                    low = middle
                else:
                    high = middle - 1
            found = self.memo[key] = low
        return found  # type: ignore[return-value]


class Contexts:
    """OptionContext per (shape, options), built on first use; raises SpecError for bad options."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._cache: dict[tuple[Shape, Options], OptionContext] = {}

    def get(self, shape: Shape, options: Options) -> OptionContext:
        key = (shape, options)
        context = self._cache.get(key)
        if context is None:
            parallelism = parallelism_for(self.problem.base, shape, options)
            context = self._cache[key] = OptionContext(self.problem, shape, options, parallelism)
        return context
