"""Device-to-parallelism mapping: which GPU plays which (stage, replica, TP index), and which GPUs idle.

A pipeline *cell* is the group of GPUs that serves one stage of one replica: its TP group, or with
context parallelism the cp TP groups that share each sequence (TP innermost, then CP, as Megatron-core
orders ranks). Cells are filled in stage-major order (stage 0 of every replica, then stage 1, ...),
each taking the next tp·cp GPUs of a pool: the whole cluster in order by default (Megatron's order:
TP innermost, then CP, DP, PP), or the node group that the mapping's grid (or its `stages` /
`replicas` shorthand) names for that cell. GPUs that no cell takes are idle (allowed only with
`mapping.allow_idle_gpus`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from astra_hetero.errors import SpecError
from astra_hetero.spec.devices import Device, enumerate_devices, too_few_gpus
from astra_hetero.spec.schema import Spec

# grid[stage][replica] -> node group name, or None for "next GPUs of the whole cluster"
CellGroups = Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Placement:
    rank: int
    stage: int
    replica: int
    tp_index: int
    cp_index: int = 0


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    devices: tuple[Device, ...]
    placements: tuple[Placement | None, ...]  # indexed by rank; None for an idle GPU
    cells: tuple[tuple[tuple[int, ...], ...], ...]  # cells[stage][replica] -> ranks by cp·tp + tp index
    cp: int = 1

    def rank_of(self, stage: int, replica: int, tp_index: int, cp_index: int = 0) -> int:
        return self.cells[stage][replica][cp_index * self.tp + tp_index]

    def stage_ranks(self, stage: int) -> list[int]:
        """The stage's ranks in Megatron-core's order: replica-major, then CP index, then TP index."""
        return [rank for cell in self.cells[stage] for rank in cell]

    def cell_devices(self, stage: int, replica: int) -> list[Device]:
        return [self.devices[r] for r in self.cells[stage][replica]]

    def placement(self, rank: int) -> Placement:
        """The placement of a rank that serves a cell (KeyError-like ValueError for an idle one)."""
        place = self.placements[rank]
        if place is None:
            raise ValueError(f"rank {rank} is idle")
        return place

    @property
    def num_ranks(self) -> int:
        return len(self.devices)

    @property
    def active_ranks(self) -> tuple[int, ...]:
        return tuple(rank for rank, place in enumerate(self.placements) if place is not None)

    @property
    def idle_ranks(self) -> tuple[int, ...]:
        return tuple(rank for rank, place in enumerate(self.placements) if place is None)


def cell_groups(spec: Spec) -> list[list[str | None]]:
    """The node group of every cell as the spec's mapping names it (None everywhere by default)."""
    par = spec.parallelism
    return [[spec.mapping.cell_group(s, r) for r in range(par.dp)] for s in range(par.pp)]


def build_layout(spec: Spec) -> Layout:
    par = spec.parallelism
    return place_cells(
        enumerate_devices(spec.cluster),
        cell_groups(spec),
        par.tp,
        allow_across_nodes=par.allow_tp_across_nodes,
        allow_idle=spec.mapping.allow_idle_gpus,
        cp=par.cp,
    )


def place_cells(
    devices: Sequence[Device],
    groups: CellGroups,
    tp: int,
    *,
    allow_across_nodes: bool = False,
    allow_idle: bool = False,
    cp: int = 1,
) -> Layout:
    """Give every cell tp·cp GPUs from its pool, stage by stage and replica by replica.

    Pure: the planner calls it for candidate grids without building a spec.
    """
    size = tp * cp
    pools: dict[str | None, list[Device]] = {None: list(devices)}
    for device in devices:
        pools.setdefault(device.group_name, []).append(device)
    cursor = dict.fromkeys(pools, 0)
    placements: list[Placement | None] = [None] * len(devices)
    cells: list[tuple[tuple[int, ...], ...]] = []
    for stage, row in enumerate(groups):
        ranks = []
        for replica, key in enumerate(row):
            pool, start = pools.get(key, []), cursor.get(key, 0)
            if start + size > len(pool):
                field = "parallelism" if key is None else "mapping"
                mapped = sum(k == key for r in groups for k in r)
                owner = "the cluster" if key is None else f"node group {key!r}"
                raise SpecError(field, too_few_gpus(owner, len(pool), mapped, size))
            cell = pool[start : start + size]
            cursor[key] = start + size
            _check_cell(cell, stage, replica, allow_across_nodes, tp)
            for index, device in enumerate(cell):
                cp_index, tp_index = divmod(index, tp)
                placements[device.rank] = Placement(device.rank, stage, replica, tp_index, cp_index)
            ranks.append(tuple(d.rank for d in cell))
        cells.append(tuple(ranks))
    if not allow_idle and any(p is None for p in placements):
        idle = sorted({d.group_name for d, p in zip(devices, placements, strict=True) if p is None})
        raise SpecError(
            "mapping",
            f"GPUs of node group(s) {', '.join(idle)} are not mapped to any stage or replica; tp·pp·dp "
            "must use every GPU unless mapping.allow_idle_gpus is set",
        )
    pp, dp = len(groups), len(groups[0]) if groups else 0
    return Layout(tp, pp, dp, tuple(devices), tuple(placements), tuple(cells), cp)


def _check_cell(cell: list[Device], stage: int, replica: int, allow_across_nodes: bool, tp: int) -> None:
    what = "TP group" if len(cell) == tp else "cell (the TP groups of its CP ranks)"
    types = sorted({d.gpu_type for d in cell})
    if len(types) > 1:
        raise SpecError(
            "mapping",
            f"the {what} of stage {stage}, replica {replica} spans GPU types "
            f"{' and '.join(types)}; a {what} must use one GPU type",
        )
    for first in range(0, len(cell), tp):
        group = cell[first : first + tp]
        domains = {d.domain for d in group}  # a node, or the scale-up domain it belongs to
        if len(domains) > 1 and not allow_across_nodes:
            raise SpecError(
                "mapping",
                f"the TP group of stage {stage}, replica {replica} spans nodes "
                f"{sorted({d.node for d in group})} outside one scale-up domain; set "
                "parallelism.allow_tp_across_nodes to permit it",
            )
