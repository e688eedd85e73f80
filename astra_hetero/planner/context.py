"""What every candidate with the same shape and options shares, computed once: the validated
parallelism section, the per-GPU-type times, parameters per stage, chunk splits, and memory needs per
cell. The communication model (`planner.comm`) is built once per problem and shared by all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from astra_hetero.planner.candidate import parallelism_for
from astra_hetero.planner.comm import P2P, CommModel, Op, trace_size
from astra_hetero.planner.costs import ClassTimes, class_times
from astra_hetero.planner.dimensions import with_options
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.shape import Shape
from astra_hetero.spec.devices import Device
from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.units import BYTES_PER_GIB
from astra_hetero.workload.blocks import DeviceBlocks
from astra_hetero.workload.costs import (
    Collective,
    expert_parameters_on_rank,
    parameter_counts,
    stage_parameters,
)
from astra_hetero.workload.generate import timed_blocks
from astra_hetero.workload.memory import estimate as memory_estimate
from astra_hetero.workload.ops import Transfer, shape_of
from astra_hetero.workload.partition import PassCosts, micro_batch_group, pass_costs, split_into_chunks
from astra_hetero.workload.precision import Dtypes
from astra_hetero.workload.sharding import data_parallel_sizes

Options = tuple[tuple[str, Any], ...]


class Shared:
    """What contexts of every shape and option set share: the communication model, and the timed
    blocks and class times, which depend only on the device class, the operators' shape (TP degree,
    micro-batch size, sequence parallelism) and recomputation."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._blocks: dict[tuple[object, ...], DeviceBlocks] = {}
        self._times: dict[tuple[object, ...], ClassTimes] = {}

    @cached_property
    def comm(self) -> CommModel:
        return CommModel(self.problem.base, self.problem.devices)

    def first_cell(self, device_class: int, tp: int) -> list[Device]:
        """The first `tp` GPUs of the class's first node group, as the layout would take them."""
        name = self.problem.classes[device_class].groups[0]
        return [d for d in self.problem.devices if d.group_name == name][:tp]

    def blocks(self, device_class: int, spec: Spec) -> DeviceBlocks:
        """The blocks the generator times for one of the class's GPUs."""
        par = spec.parallelism
        key = (device_class, _shape(spec), par.recompute)
        found = self._blocks.get(key)
        if found is None:
            device = self.first_cell(device_class, 1)[0]
            (found,) = timed_blocks(spec, [device]).values()
            self._blocks[key] = found
        return found

    def times(
        self,
        device_class: int,
        spec: Spec,
        floor: bool = False,
        members: tuple[tuple[str, tuple[int, ...]], ...] | None = None,
    ) -> ClassTimes:
        """TP collectives timed on the class's first cell (the class's nodes are alike); the other
        groups' collectives and ring transfers on `members` (role → ranks; default: representative
        members among the class's GPUs), or (`floor`, for the bounds) at nothing."""
        par = spec.parallelism
        key = (device_class, _shape(spec), par.recompute, floor, members)
        found = self._times.get(key)
        if found is None:
            chosen = self.role_members(device_class, par)
            chosen.update(dict(members or ()))
            members_of = chosen

            def comm_ns(c: Collective | Transfer) -> float:
                if isinstance(c, Transfer):
                    pair = members_of.get("cp_pair", ())
                    return 0.0 if floor or len(pair) < 2 else self.comm.alone_ns(Op(pair, P2P, c.bytes))
                ranks = members_of.get(c.group, ())
                if len(ranks) < 2 or (floor and c.group != "tp"):
                    return 0.0
                return self.comm.alone_ns(Op(ranks, c.kind, trace_size(c.kind, c.bytes, len(ranks))))

            blocks = self.blocks(device_class, spec)
            found = self._times[key] = class_times(blocks, comm_ns, par.recompute == "full")
        return found

    def role_members(self, device_class: int, par: ParallelismSpec) -> dict[str, tuple[int, ...]]:
        """Members of each layer comm group as the layout would form the class's first ones: its first
        cell's TP group and CP ranks, and the expert groups over its first GPUs (Megatron-core's
        order: expert TP innermost, then EP)."""
        name = self.problem.classes[device_class].groups[0]
        gpus = [d.rank for d in self.problem.devices if d.group_name == name]
        if len(gpus) < par.tp * par.cp:  # a cell of the class spans groups alike in hardware
            groups = self.problem.classes[device_class].groups
            gpus = [d.rank for d in self.problem.devices if d.group_name in groups]
        etp, ep = par.expert_tp, par.ep
        expert = gpus[: etp * ep] if len(gpus) >= etp * ep else []
        return {
            "tp": tuple(gpus[: par.tp]),
            "cp": tuple(gpus[: par.tp * par.cp : par.tp]),
            "cp_pair": tuple(gpus[: par.tp + 1 : par.tp]) if par.cp > 1 else (),
            "etp": tuple(expert[:etp]),
            "ep": tuple(expert[::etp]),
            "moe": tuple(expert),
        }


@dataclass
class OptionContext:
    problem: Problem
    shape: Shape
    options: Options
    parallelism: ParallelismSpec
    shared: Shared
    _memory: dict[tuple[object, ...], float] = field(default_factory=dict)
    _params: dict[tuple[int, int], float] = field(default_factory=dict)
    memo: dict[tuple[object, ...], object] = field(default_factory=dict)  # for callers' derived values

    @cached_property
    def spec(self) -> Spec:
        """The base spec with this parallelism and options (mapping and partition as written: unused)."""
        return with_options(self.problem.base, self.parallelism, self.options)

    @property
    def comm(self) -> CommModel:
        return self.shared.comm

    @cached_property
    def blocks(self) -> dict[int, DeviceBlocks]:
        """Per device class, the blocks the generator times for one of the class's GPUs."""
        return {c.index: self.shared.blocks(c.index, self.spec) for c in self.problem.classes}

    @cached_property
    def times(self) -> dict[int, ClassTimes]:
        return {c.index: self.shared.times(c.index, self.spec) for c in self.problem.classes}

    def times_with(self, device_class: int, members: tuple[tuple[str, tuple[int, ...]], ...]) -> ClassTimes:
        """The class's times with the expert groups a candidate's layout forms (see `stage_members`)."""
        return self.shared.times(device_class, self.spec, members=members or None)

    @cached_property
    def floor_times(self) -> dict[int, ClassTimes]:
        """The times the bounds use: only what no plan can beat (see planner.costs)."""
        return {c.index: self.shared.times(c.index, self.spec, floor=True) for c in self.problem.classes}

    @cached_property
    def pass_costs(self) -> dict[int, PassCosts]:
        full = self.parallelism.recompute == "full"
        return {k: pass_costs(blocks, full) for k, blocks in self.blocks.items()}

    def chunk_layers(self, stage: int, num_layers: int, classes: frozenset[int]) -> tuple[int, ...]:
        """The stage's layers per model chunk as the generator splits them: equal time on the slowest
        GPU type serving the stage (`partition.split_into_chunks`)."""
        v = self.virtual_stages
        if v == 1:
            return (num_layers,)
        key = ("chunks", stage, num_layers, classes)
        found = self.memo.get(key)
        if found is None:
            last = stage == self.shape.pp - 1

            def pace(k: int) -> float:
                c = self.pass_costs[k]
                return c.per_layer + (c.embedding if stage == 0 else 0.0) + (c.head if last else 0.0)

            slowest = self.pass_costs[max(sorted(classes), key=pace)]
            found = self.memo[key] = tuple(split_into_chunks(num_layers, stage, self.parallelism, slowest))
        return found  # type: ignore[return-value]

    @cached_property
    def num_micro_batches(self) -> int:
        return self.parallelism.global_batch_size // self.parallelism.micro_batch_size

    @cached_property
    def virtual_stages(self) -> int:
        return int(getattr(self.parallelism, "virtual_stages", 1) or 1)

    @cached_property
    def activation_bytes(self) -> int:
        """What one TP rank sends to the next stage per micro-batch (as the generator emits it)."""
        model, par = self.problem.base.model, self.parallelism
        width = self.dtypes.activation_bytes
        tokens = par.micro_batch_size * model.seq_len // par.cp
        return int(width * tokens * model.hidden_size / par.tp)

    @cached_property
    def dtypes(self) -> Dtypes:
        return Dtypes.from_spec(self.spec)

    @cached_property
    def grad_width(self) -> int:
        return self.dtypes.grad_bytes

    def unit_grad_bytes(self, stage: int) -> tuple[float, float, float]:
        """(a layer's, the head's, the embedding's) gradient bytes on one TP rank of `stage`, as the
        generator's rank context has them (the head's and embedding's are 0 off the last/first stage)."""
        model, par = self.problem.base.model, self.parallelism
        counts = parameter_counts(model)
        extra = stage_parameters(model, par, stage, 0)[1]
        embedding = counts.embedding / par.tp if stage == 0 else 0.0
        return (
            counts.per_layer / par.tp * self.grad_width,
            (extra - embedding) * self.grad_width,
            embedding * self.grad_width,
        )

    @cached_property
    def embedding_grad_bytes(self) -> int:
        """The tied-embedding all-reduce between the first and last stage."""
        counts = parameter_counts(self.problem.base.model)
        return int(counts.embedding / self.parallelism.tp * self.grad_width)

    def params_on_rank(self, stage: int, num_layers: int) -> float:
        key = (stage, num_layers)
        params = self._params.get(key)
        if params is None:
            params = stage_parameters(self.problem.base.model, self.parallelism, stage, num_layers)[0]
            self._params[key] = params
        return params

    def updated_params(self, stage: int, num_layers: int) -> float:
        """The parameters whose optimizer states a rank of the stage holds: with the distributed
        optimizer its shard of the dense weights (over dp·cp) and of the experts (over their
        data-parallel group), as the generator's rank context has them."""
        params = self.params_on_rank(stage, num_layers)
        par = self.parallelism
        if not par.distributed_optimizer:
            return params
        experts = expert_parameters_on_rank(self.problem.base.model, par) * num_layers
        dense_ranks, expert_ranks = data_parallel_sizes(self.spec)
        return (params - experts) / dense_ranks + experts / expert_ranks

    def memory_need_gib(
        self, stage: int, num_layers: int, num_micro_batches: int, chunks: tuple[int, ...] | None = None
    ) -> float:
        """The generator's own estimate (workload.memory), cached; `chunks`: the stage's layers per
        model chunk (default: as even as they go). A replica's micro-batches come in whole groups
        (interleaving: groups of pp), so a count is rounded up to the next group: memory only grows
        with micro-batches, so bounds taken at a smaller count stay bounds."""
        unit = micro_batch_group(self.parallelism)
        num_micro_batches = -(-num_micro_batches // unit) * unit
        key = (stage, num_layers, num_micro_batches, chunks)
        need = self._memory.get(key)
        if need is None:
            estimate = memory_estimate(self.spec, stage, num_layers, num_micro_batches, chunks)
            need = self._memory[key] = estimate.total / BYTES_PER_GIB
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
        self.shared = Shared(problem)
        self._cache: dict[tuple[Shape, Options], OptionContext] = {}

    def get(self, shape: Shape, options: Options) -> OptionContext:
        key = (shape, options)
        context = self._cache.get(key)
        if context is None:
            parallelism = parallelism_for(self.problem.base, shape, options)
            context = self._cache[key] = OptionContext(self.problem, shape, options, parallelism, self.shared)
        return context


def _shape(spec: Spec) -> object:
    """What a class's timed blocks depend on besides the device and recomputation."""
    return shape_of(
        spec.model,
        spec.parallelism,
        spec.compute.attention,
        Dtypes.from_spec(spec),
        attention_kernel=spec.compute.attention_kernel,
        framework=spec.compute.framework,
    )
