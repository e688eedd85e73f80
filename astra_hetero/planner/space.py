"""The search space as lazy generators: shapes, cell compositions, grids, options and splits.

A grid is built from *columns* (the pipeline of one replica: a device class per stage). Replicas are
interchangeable — their micro-batch counts are split after the grid is chosen — so a grid is a
multiset of columns, generated once in canonical (sorted) order; node groups with identical hardware
form one device class, so they are never told apart either. Only then is a class grid turned into
node-group names (`materialize`), filling each class's groups in cluster order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from astra_hetero.planner.candidate import Grid, Shape
from astra_hetero.planner.dimensions import active_dimensions
from astra_hetero.planner.problem import DeviceClass, Problem
from astra_hetero.planner.settings import allowed
from astra_hetero.spec.schema import ParallelismSpec

Column = tuple[int, ...]  # device class per stage
ClassGrid = tuple[Column, ...]  # one column per replica, sorted


def shapes(problem: Problem) -> Iterator[Shape]:
    """(tp, pp, dp) whose cells fit the cluster: all of it, or (use_all_gpus: false) part of it."""
    settings, model = problem.settings, problem.base.model
    across = problem.base.parallelism.allow_tp_across_nodes
    n = problem.num_gpus
    tps = allowed(settings.tp) or range(1, n + 1)
    pps = allowed(settings.pp) or range(1, model.num_layers + 1)
    dps = allowed(settings.dp) or range(1, problem.base.parallelism.global_batch_size + 1)
    for tp in tps:
        capacity = sum(c.cells(tp, across) for c in problem.classes)
        for pp in pps:
            for dp in dps:
                cells = pp * dp
                if cells > capacity or (settings.use_all_gpus and tp * cells != n):
                    continue
                yield Shape(tp, pp, dp)


def compositions(problem: Problem, shape: Shape) -> Iterator[tuple[int, ...]]:
    """Cells per device class: every class full when all GPUs are used, else any counts that fit."""
    across = problem.base.parallelism.allow_tp_across_nodes
    caps = [c.cells(shape.tp, across) for c in problem.classes]
    if problem.settings.use_all_gpus:
        if all(cap * shape.tp == c.num_gpus for cap, c in zip(caps, problem.classes, strict=True)):
            if sum(caps) == shape.num_cells:
                yield tuple(caps)
        return
    for counts in itertools.product(*(range(cap + 1) for cap in caps)):
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


def materialize(problem: Problem, grid: ClassGrid, tp: int) -> Grid:
    """Node-group names per cell (grid[stage][replica]): each class's cells, stage by stage, go to its
    node groups in cluster order, as many as each group holds."""
    pp = len(grid[0])
    free = {c.index: _group_slots(c, tp) for c in problem.classes}
    rows = []
    for s in range(pp):
        row = []
        for column in grid:
            slots = free[column[s]]
            row.append(slots.pop(0))
        rows.append(tuple(row))
    return tuple(rows)


def _group_slots(device_class: DeviceClass, tp: int) -> list[str]:
    return [
        name
        for name, gpus in zip(device_class.groups, device_class.group_gpus, strict=True)
        for _ in range(gpus // tp)
    ]


def grids(problem: Problem, shape: Shape) -> Iterator[Grid | None]:
    """Every grid of the space for `shape` (None: the default cluster-order mapping)."""
    mode = problem.settings.mapping
    if mode == "default":
        yield None
        return
    if mode == "spec":
        written = spec_grid(problem)
        if len(written) == shape.pp and len(written[0]) == shape.dp:
            yield written
        return
    for composition in compositions(problem, shape):
        for grid in class_grids(problem, shape, composition):
            yield materialize(problem, grid, shape.tp)


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
            default = ParallelismSpec.model_fields[dimension.field].default
            choices = [default] if default in choices else choices[:1]
        values.append([(dimension.field, v) for v in choices])
    return [tuple(combo) for combo in itertools.product(*values)]
