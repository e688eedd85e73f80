"""Device-to-parallelism mapping: which GPU plays which (stage, replica, TP index).

A pipeline *cell* is the TP group that serves one stage of one replica. Cells are filled in
stage-major order (stage 0 of every replica, then stage 1, ...), each taking `tp` consecutive GPUs
from a pool: the whole cluster in order by default (Megatron's TP-innermost, then DP, then PP), or the
node group that `mapping.stages` / `mapping.replicas` names for that cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.errors import SpecError
from astra_hetero.spec.devices import Device, enumerate_devices
from astra_hetero.spec.schema import Spec


@dataclass(frozen=True)
class Placement:
    rank: int
    stage: int
    replica: int
    tp_index: int


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    devices: tuple[Device, ...]
    placements: tuple[Placement, ...]  # indexed by rank
    cells: tuple[tuple[tuple[int, ...], ...], ...]  # cells[stage][replica] -> ranks by TP index

    def rank_of(self, stage: int, replica: int, tp_index: int) -> int:
        return self.cells[stage][replica][tp_index]

    def cell_devices(self, stage: int, replica: int) -> list[Device]:
        return [self.devices[r] for r in self.cells[stage][replica]]

    @property
    def num_ranks(self) -> int:
        return len(self.devices)


def build_layout(spec: Spec) -> Layout:
    par = spec.parallelism
    devices = enumerate_devices(spec.cluster)
    names = spec.cluster.group_names
    pools: dict[str | None, list[Device]] = {None: list(devices)}
    for name in names:
        pools[name] = [d for d in devices if d.group_name == name]
    cursor = dict.fromkeys(pools, 0)

    def pool_for(stage: int, replica: int) -> tuple[str | None, str]:
        if spec.mapping.stages is not None:
            return spec.mapping.stages[stage], f"mapping.stages[{stage}]"
        if spec.mapping.replicas is not None:
            return spec.mapping.replicas[replica], f"mapping.replicas[{replica}]"
        return None, "parallelism"

    placements: list[Placement | None] = [None] * len(devices)
    cells: list[list[tuple[int, ...]]] = []
    for stage in range(par.pp):
        row = []
        for replica in range(par.dp):
            key, field = pool_for(stage, replica)
            pool, start = pools[key], cursor[key]
            if start + par.tp > len(pool):
                cells = sum(pool_for(s, r)[0] == key for s in range(par.pp) for r in range(par.dp))
                raise SpecError(
                    field,
                    f"node group {key!r} has {len(pool)} GPUs, too few for the {cells} cells "
                    f"mapped to it ({par.tp} GPUs each, {cells * par.tp} in all)",
                )
            cell = pool[start : start + par.tp]
            cursor[key] = start + par.tp
            _check_cell(cell, stage, replica, par.allow_tp_across_nodes)
            for tp_index, device in enumerate(cell):
                placements[device.rank] = Placement(device.rank, stage, replica, tp_index)
            row.append(tuple(d.rank for d in cell))
        cells.append(row)
    if any(p is None for p in placements):
        idle = sorted({d.group_name for d, p in zip(devices, placements, strict=True) if p is None})
        raise SpecError(
            "mapping",
            f"GPUs of node group(s) {', '.join(idle)} are not mapped to any "
            "stage or replica; tp·pp·dp must use every GPU",
        )
    return Layout(
        par.tp,
        par.pp,
        par.dp,
        tuple(devices),
        tuple(placements),  # type: ignore[arg-type]
        tuple(tuple(r) for r in cells),
    )


def _check_cell(cell: list[Device], stage: int, replica: int, allow_across_nodes: bool) -> None:
    types = sorted({d.gpu_type for d in cell})
    if len(types) > 1:
        raise SpecError(
            "mapping",
            f"the TP group of stage {stage}, replica {replica} spans GPU types "
            f"{' and '.join(types)}; a TP group must use one GPU type",
        )
    nodes = {d.node for d in cell}
    if len(nodes) > 1 and not allow_across_nodes:
        raise SpecError(
            "mapping",
            f"the TP group of stage {stage}, replica {replica} spans nodes "
            f"{sorted(nodes)}; set parallelism.allow_tp_across_nodes to permit it",
        )
