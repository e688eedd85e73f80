"""A plan spec → the problem the planners solve: the spec as written, the `search:` settings, and the
cluster's device classes (node groups with identical hardware, which the search treats as one pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from astra_hetero.dynamics.selection import check_dynamics
from astra_hetero.errors import SpecError
from astra_hetero.planner.neighbours import Neighbours, job_problem
from astra_hetero.planner.settings import SearchSettings
from astra_hetero.spec.devices import Device, enumerate_devices
from astra_hetero.spec.load import read_spec_data, spec_error_from_validation, validate_sections
from astra_hetero.spec.schema import NodeGroupSpec, Spec


@dataclass(frozen=True)
class DeviceClass:
    """Node groups that differ only in name: any cell of one could sit in another."""

    index: int
    groups: tuple[str, ...]  # node group names, cluster order
    group_gpus: tuple[int, ...]  # GPUs of each of those groups
    spec: NodeGroupSpec  # the hardware they share

    @property
    def name(self) -> str:
        return self.groups[0] if len(self.groups) == 1 else "+".join(self.groups)

    @property
    def gpu_type(self) -> str:
        return self.spec.gpu.type_key

    @property
    def num_gpus(self) -> int:
        return sum(self.group_gpus)

    @property
    def memory_gib(self) -> float:
        return self.spec.gpu.memory_gib

    def cells(self, tp: int, across_nodes: bool, cp: int = 1) -> int:
        """How many cells of tp·cp GPUs the class can hold (each TP group inside one node, or one
        scale-up domain, unless allowed; the CP ranks of a cell may span them)."""
        if not across_nodes and self.spec.scale_up_gpus % tp:
            return 0
        return sum(n // (tp * cp) for n in self.group_gpus)


@dataclass(frozen=True)
class Problem:
    base: Spec  # as written; its parallelism / mapping / partition choices are replaced by plans
    settings: Any  # SearchSettings
    classes: tuple[DeviceClass, ...]
    devices: tuple[Device, ...]
    source: Path | None = None
    neighbours: Neighbours | None = None  # planning one job of a shared cluster (`search.job`)

    @property
    def bounds_hold(self) -> bool:
        """Whether a plan's lower bound (of one static iteration) bounds its simulated time. Under
        `dynamics:` (a faster link, jitter below 1) or over several iterations (the next one starts
        while the last ranks finish) the simulated mean can be lower: bounds then prune nothing."""
        events = self.base.dynamics or (self.neighbours is not None and self.neighbours.dynamic)
        return not events and self.base.iterations == 1

    @property
    def num_gpus(self) -> int:
        return len(self.devices)

    @property
    def class_of_group(self) -> dict[str, DeviceClass]:
        return {name: c for c in self.classes for name in c.groups}

    @property
    def tokens_per_iteration(self) -> int:
        return self.base.parallelism.global_batch_size * self.base.model.seq_len


def load_problem(path: str | Path) -> Problem:
    path = Path(path)
    return problem_from_data(read_spec_data(path), path)


def problem_from_data(data: Any, source: Path | None = None) -> Problem:
    """Split off `search:`, validate both parts; the spec's cross-section checks run per candidate."""
    if not isinstance(data, dict):
        raise SpecError("", f"the spec must be a mapping of sections, got {type(data).__name__}")
    data = dict(data)
    raw_settings = data.pop("search", None) or {}
    if not isinstance(raw_settings, dict):
        raise SpecError("search", "must be a mapping of search settings")
    try:
        settings = SearchSettings.model_validate(raw_settings)
    except ValidationError as exc:
        error = spec_error_from_validation(exc)
        raise SpecError(f"search.{error.field}".rstrip("."), error.reason) from None
    neighbours = None
    if "jobs" in data:  # one job of a shared cluster, planned beside the others
        base, neighbours = job_problem(data, settings.job, source, settings.neighbours == "simulate")
    elif settings.job is not None:
        raise SpecError("search.job", "names a job, but the spec has no `jobs:` (it is one job)")
    else:
        base = validate_sections(data, source)
        check_dynamics(base)  # a bad event is the spec's error, not every candidate's
    if base.mapping.experts is not None:
        field = f"{neighbours.where}.mapping.experts" if neighbours is not None else "mapping.experts"
        raise SpecError(
            field,
            "the planner chooses the mapping and does not place experts; drop mapping.experts from a "
            "spec with search:, or run the spec as written",
        )
    devices = tuple(enumerate_devices(base.cluster))
    problem = Problem(base, settings, device_classes(base), devices, source, neighbours)
    _check_settings(problem)
    return problem


def device_classes(spec: Spec) -> tuple[DeviceClass, ...]:
    """Node groups merged by hardware (everything but the name), in order of first appearance."""
    found: list[tuple[NodeGroupSpec, list[str], list[int]]] = []
    for group, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True):
        hardware = group.model_copy(update={"name": None})
        for known, names, gpus in found:
            if known == hardware:
                names.append(name)
                gpus.append(group.num_gpus)
                break
        else:
            found.append((hardware, [name], [group.num_gpus]))
    return tuple(
        DeviceClass(i, tuple(names), tuple(gpus), hardware) for i, (hardware, names, gpus) in enumerate(found)
    )


def _check_settings(problem: Problem) -> None:
    settings, spec = problem.settings, problem.base
    types = sorted({c.gpu_type for c in problem.classes})
    prices = settings.prices_per_gpu_hour
    for key in prices:
        if key not in types:
            raise SpecError(
                f"search.prices_per_gpu_hour.{key}",
                f"not a GPU type of the cluster; types: {', '.join(types)}",
            )
    if prices and set(prices) != set(types):
        missing = ", ".join(t for t in types if t not in prices)
        raise SpecError("search.prices_per_gpu_hour", f"gives no price for {missing}")
    written = spec.mapping.grid or spec.mapping.stages or spec.mapping.replicas
    if settings.mapping == "spec" and not written:
        raise SpecError("search.mapping", "is 'spec' but the spec has no mapping (grid, stages or replicas)")
    for field in ("layers", "micro_batches"):
        if getattr(settings, field) == "spec" and not isinstance(getattr(spec.partition, field), list):
            raise SpecError(f"search.{field}", f"is 'spec' but partition.{field} is not an explicit list")
