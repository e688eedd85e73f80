"""The search space as lazy generators: shapes, cell compositions, grids, options and splits.

A grid is built from *columns* (the pipeline of one replica: a device class per stage). Replicas are
interchangeable — their micro-batch counts are split after the grid is chosen — so a grid is a
multiset of columns, generated once in canonical (sorted) order; node groups with identical hardware
form one device class, so they are never told apart either. Only then is a class grid turned into
node-group names (`materialize`), filling each class's groups in cluster order.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from astra_hetero.planner.candidate import Grid
from astra_hetero.planner.dimensions import active_dimensions
from astra_hetero.planner.problem import DeviceClass, Problem
from astra_hetero.planner.settings import allowed
from astra_hetero.planner.shape import Shape

Column = tuple[int, ...]  # device class per stage
ClassGrid = tuple[Column, ...]  # one column per replica, sorted


def shapes(problem: Problem) -> Iterator[Shape]:
    """(tp, pp, dp, cp) whose cells fit the cluster: all of it, or (use_all_gpus: false) part of it."""
    settings, model = problem.settings, problem.base.model
    across = problem.base.parallelism.allow_tp_across_nodes
    n = problem.num_gpus
    tps = allowed(settings.tp) or range(1, n + 1)
    pps = allowed(settings.pp) or range(1, model.num_layers + 1)
    dps = allowed(settings.dp) or range(1, problem.base.parallelism.global_batch_size + 1)
    cps = allowed(settings.cp) or context_parallel_degrees(model.seq_len)
    for tp in tps:
        for cp in cps:
            capacity = sum(c.cells(tp, across, cp) for c in problem.classes)
            for pp in pps:
                for dp in dps:
                    cells = pp * dp
                    if cells > capacity or (settings.use_all_gpus and tp * cp * cells != n):
                        continue
                    yield Shape(tp, pp, dp, cp)


# Context parallelism pays where attention dominates: NVIDIA's Llama 3 recipes split 8k sequences in
# two and longer ones further. By default the search tries powers of two that leave every CP rank at
# least this many tokens of a sequence (and split it into 2·cp equal chunks).
MIN_TOKENS_PER_CP_RANK = 4096


def context_parallel_degrees(seq_len: int) -> tuple[int, ...]:
    return tuple(
        cp
        for cp in (1, 2, 4, 8, 16)
        if cp == 1 or (seq_len % (2 * cp) == 0 and seq_len // cp >= MIN_TOKENS_PER_CP_RANK)
    )


def compositions(problem: Problem, shape: Shape) -> Iterator[tuple[int, ...]]:
    """Cells per device class: every class full when all GPUs are used; else any counts that leave
    whole nodes idle (a half-used node has every cost of a node and less of its work)."""
    across = problem.base.parallelism.allow_tp_across_nodes
    caps = [c.cells(shape.tp, across, shape.cp) for c in problem.classes]
    if problem.settings.use_all_gpus:
        if all(cap * shape.cell == c.num_gpus for cap, c in zip(caps, problem.classes, strict=True)):
            if sum(caps) == shape.num_cells:
                yield tuple(caps)
        return
    steps = [max(1, c.spec.gpus_per_node // shape.cell) for c in problem.classes]
    ranges = [sorted({*range(0, cap + 1, step), cap}) for cap, step in zip(caps, steps, strict=True)]
    for counts in itertools.product(*ranges):
        if sum(counts) == shape.num_cells:
            yield counts


def columns(problem: Problem, pp: int, composition: Sequence[int]) -> list[Column]:
    """Every pipeline (device class per stage) the settings allow, using only classes with cells."""
    classes = [k for k, count in enumerate(composition) if count]
    mode, order = problem.settings.mapping, problem.settings.stage_order
    if mode == "replicas":
        return [(k,) * pp for k in classes]
    if order == "any":
        return sorted(itertools.product(classes, repeat=pp))
    found: set[Column] = set()
    for counts in _splits_of(pp, len(classes)):
        used = [(k, c) for k, c in zip(classes, counts, strict=True) if c]
        for ordering in itertools.permutations(used):
            found.add(tuple(k for k, c in ordering for _ in range(c)))
    return sorted(found)


def _splits_of(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Non-negative integer vectors of length `parts` summing to `total`."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _splits_of(total - first, parts - 1):
            yield (first, *rest)


def class_grids(problem: Problem, shape: Shape, composition: tuple[int, ...]) -> Iterator[ClassGrid]:
    """Multisets of `dp` columns whose cells add up to `composition`, with at most
    `max_distinct_replicas` distinct columns (exactly one for `mapping: stages`)."""
    cols = columns(problem, shape.pp, composition)
    counts = [tuple(col.count(k) for k in range(len(composition))) for col in cols]
    limit = 1 if problem.settings.mapping == "stages" else problem.settings.max_distinct_replicas
    if problem.settings.mapping == "replicas":
        limit = len(composition)

    def extend(start: int, left: int, remaining: tuple[int, ...], distinct: int) -> Iterator[tuple[int, ...]]:
        if left == 0:
            if not any(remaining):
                yield ()
            return
        if distinct == limit:
            return
        for i in range(start, len(cols)):
            need = counts[i]
            for times in range(1, left + 1):
                after = tuple(r - times * c for r, c in zip(remaining, need, strict=True))
                if min(after) < 0:
                    break
                for rest in extend(i + 1, left - times, after, distinct + 1):
                    yield (i,) * times + rest

    for picks in extend(0, shape.dp, composition, 0):
        yield tuple(cols[i] for i in picks)


def materialize(problem: Problem, grid: ClassGrid, cell: int) -> Grid:
    """Node-group names per cell (grid[stage][replica]): each class's cells, stage by stage, go to its
    node groups in cluster order, as many as each group holds."""
    pp = len(grid[0])
    free = {c.index: _group_slots(c, cell) for c in problem.classes}
    rows = []
    for s in range(pp):
        row = []
        for column in grid:
            slots = free[column[s]]
            row.append(slots.pop(0))
        rows.append(tuple(row))
    return tuple(rows)


def _group_slots(device_class: DeviceClass, cell: int) -> list[str]:
    return [
        name
        for name, gpus in zip(device_class.groups, device_class.group_gpus, strict=True)
        for _ in range(gpus // cell)
    ]


@dataclass(frozen=True)
class Family:
    """The grids of one shape that put the same number of cells on each device class."""

    composition: tuple[int, ...] | None  # None: the mapping is given (cluster order or the spec's)
    class_grids: tuple[ClassGrid, ...] = ()
    fixed: tuple[Grid | None, ...] = ()

    def __len__(self) -> int:
        return len(self.class_grids) if self.composition is not None else len(self.fixed)

    def grids(
        self, problem: Problem, cell: int, indices: Sequence[int] | None = None
    ) -> Iterator[Grid | None]:
        """Node-group grids (None: cluster order), all of them or those at `indices`; `cell`: the
        GPUs of one cell (tp·cp)."""
        chosen = range(len(self)) if indices is None else indices
        for i in chosen:
            yield (
                materialize(problem, self.class_grids[i], cell)
                if self.composition is not None
                else self.fixed[i]
            )

    def representatives(self, most: int = 2) -> list[int]:
        """Grids that stand for the family in a quick estimate: of the stage-homogeneous ones (every
        replica the same pipeline; else of all), the first and the last — the stage orders at either
        end of the enumeration (one class's GPUs first, or last): which end of a pipeline holds the
        embedding and which the LM head and loss decides a mixed pipeline's pace, so one order alone
        can leave a whole branch estimated at its slowest; at most `most`."""
        if self.composition is None:
            return list(range(len(self.fixed)))[:most]
        alike = [i for i, grid in enumerate(self.class_grids) if len(set(grid)) == 1]
        pool = alike or list(range(len(self.class_grids)))
        ends = list(dict.fromkeys([pool[0], pool[-1]]))
        return ends[:most]

    def replica_orderings(self) -> int:
        """Grids left out because they only reorder the replicas of one of this family's grids."""
        extra = 0
        for grid in self.class_grids:
            count = math.factorial(len(grid))
            for copies in Counter(grid).values():
                count //= math.factorial(copies)
            extra += count - 1
        return extra


def families(problem: Problem, shape: Shape) -> list[Family]:
    """Every grid of the space for `shape`, by cell composition."""
    mode = problem.settings.mapping
    if mode == "default":
        return [Family(None, fixed=(None,))]
    if mode == "spec":
        written = spec_grid(problem)
        fits = len(written) == shape.pp and len(written[0]) == shape.dp
        return [Family(None, fixed=(written,))] if fits else []
    found = []
    for composition in compositions(problem, shape):
        grids = tuple(class_grids(problem, shape, composition))
        if grids:
            found.append(Family(composition, grids))
    return found


def spec_grid(problem: Problem) -> Grid:
    """The spec's own mapping as a grid (its pp and dp decide the shape it fits)."""
    mapping, par = problem.base.mapping, problem.base.parallelism
    if mapping.grid is not None:
        return tuple(tuple(row) for row in mapping.grid)
    if mapping.stages is not None:
        return tuple((name,) * par.dp for name in mapping.stages)
    return tuple(tuple(mapping.replicas or ()) for _ in range(par.pp))


def option_sets(problem: Problem, shape: Shape) -> list[tuple[tuple[str, Any], ...]]:
    """Every combination of the searched options, as (field, value) pairs in table order. An option
    that cannot change this shape's workload (`Dimension.inert`) takes only its first value."""
    values = []
    for dimension in active_dimensions():
        given = allowed(getattr(problem.settings, dimension.field, None))
        choices = list(given or dimension.values(problem.base))
        if dimension.by_work:  # least work first, so that a dominated plan meets its dominator first
            choices.sort(key=lambda v: dimension.by_work.index(v) if v in dimension.by_work else len(choices))
        if dimension.inert(shape):  # one value stands for all: the schema's default where allowed
            default = dimension.default
            choices = [default] if default in choices else choices[:1]
        values.append([(dimension.field, v) for v in choices])
    return [tuple(combo) for combo in itertools.product(*values)]
