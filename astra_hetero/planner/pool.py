"""Walk the space and keep the feasible candidates, each with its estimate and lower bound.

Order of the walk: shape → grid → options → splits. Checks run at the level they depend on, each
once: the options' parallelism section and the spec checks per (grid, options) — a candidate rejected
there counts once, before its splits exist — then memory per split.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

from astra_hetero.errors import SpecError
from astra_hetero.planner.base import Progress, Trial
from astra_hetero.planner.candidate import Grid, Plan, Shape
from astra_hetero.planner.context import Contexts, OptionContext, Options
from astra_hetero.planner.dimensions import work_rank
from astra_hetero.planner.estimate import Cell, assess
from astra_hetero.planner.feasibility import (
    Infeasible,
    Reason,
    Tally,
    memory_headroom_gib,
    spec_check,
    spec_infeasible,
)
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.space import grids, option_sets, shapes
from astra_hetero.planner.splits import splits
from astra_hetero.spec.schema import PartitionSpec
from astra_hetero.workload.layout import place_cells


def replica_orderings(cells: list[list[Cell]]) -> int:
    """Distinct orders of the grid's columns (replicas): dp! / Π (copies of each column)!."""
    columns = Counter(tuple(row[r].device_class for row in cells) for r in range(len(cells[0])))
    count = math.factorial(len(cells[0]))
    for copies in columns.values():
        count //= math.factorial(copies)
    return count


class Walk:
    """One walk of a problem's space; `tally` and `num_candidates` count what it saw."""

    def __init__(self, problem: Problem, contexts: Contexts | None = None) -> None:
        self.problem = problem
        self.contexts = contexts or Contexts(problem)
        self.tally = Tally()
        self.num_candidates = 0
        self.num_collapsed = 0  # (grid, options) pairs left out as reorderings of identical replicas
        self.capacity_gib = {c.index: c.memory_gib for c in problem.classes}
        self._fitting: dict[tuple[object, ...], int] = {}  # plan without work-ordered options -> least work

    def candidates(self, progress: Progress | None = None) -> Iterator[Trial]:
        for shape in shapes(self.problem):
            options = option_sets(self.problem, shape)
            placed = []
            for grid in grids(self.problem, shape):
                try:
                    placed.append((grid, self.cells(shape, grid)))
                except SpecError as error:
                    self._reject(spec_infeasible(error), len(options))
            for _, cells in placed:
                self.num_collapsed += (replica_orderings(cells) - 1) * len(options)
            for opts in options:
                if placed:
                    yield from self._branch(shape, opts, placed)
                if progress is not None:
                    progress.advance(0)

    def _branch(
        self, shape: Shape, opts: Options, placed: list[tuple[Grid | None, list[list[Cell]]]]
    ) -> Iterator[Trial]:
        """Every grid of one shape under one set of options. The spec checks run once, on the first
        grid: the grids are built so that what the checks read of a mapping holds for all of them."""
        try:
            ctx = self.contexts.get(shape, opts)
            probe = Plan(shape, opts, placed[0][0], (), (), shape.num_gpus < self.problem.num_gpus)
            spec_check(ctx, probe, PartitionSpec(layers="uniform", micro_batches="auto"))
        except SpecError as error:
            self._reject(spec_infeasible(error), len(placed))
            return
        heaviest = self._heaviest_stage_does_not_fit(ctx, placed)
        if heaviest is not None:
            self._reject(heaviest, len(placed))
            return
        for grid, cells in placed:
            yield from self._candidates(ctx, grid, cells)

    def _heaviest_stage_does_not_fit(
        self, ctx: OptionContext, placed: list[tuple[Grid | None, list[list[Cell]]]]
    ) -> Infeasible | None:
        """Some stage holds at least ⌈layers / pp⌉ layers; if even the lightest stage with that many,
        one micro-batch in flight, needs more than the largest GPU in use has, no split fits."""
        pp = ctx.shape.pp
        layers = -(-self.problem.base.model.num_layers // pp)
        used = {cell.device_class for _, cells in placed for row in cells for cell in row}
        largest = max(self.capacity_gib[c] for c in used)
        need = min(ctx.memory_need_gib(s, layers, 1) for s in range(pp))
        if need <= largest:
            return None
        return Infeasible(
            Reason.MEMORY,
            "",
            f"a stage of {layers} layers needs at least {need:.1f} GiB; the largest GPU has {largest:g}",
        )

    def cells(self, shape: Shape, grid: Grid | None) -> list[list[Cell]]:
        """Device class and node of every cell, placed as the generator will place them."""
        problem = self.problem
        groups = grid if grid is not None else [[None] * shape.dp for _ in range(shape.pp)]
        layout = place_cells(
            problem.devices,
            groups,
            shape.tp,
            allow_across_nodes=problem.base.parallelism.allow_tp_across_nodes,
            allow_idle=shape.num_gpus < problem.num_gpus,
        )
        of_group = problem.class_of_group
        return [
            [
                Cell(of_group[problem.devices[ranks[0]].group_name].index, problem.devices[ranks[0]].node)
                for ranks in row
            ]
            for row in layout.cells
        ]

    def trial(
        self, ctx: OptionContext, plan: Plan, cells: list[list[Cell]], source: str
    ) -> Trial | Infeasible:
        """Memory, then estimate and bound, of one fully specified plan."""
        headroom, where = memory_headroom_gib(ctx, cells, plan.layers, plan.micro_batches, self.capacity_gib)
        if headroom < 0:
            return Infeasible(Reason.MEMORY, "", where)
        return Trial(plan, assess(ctx, cells, plan.layers, plan.micro_batches), headroom, source)

    def _candidates(self, ctx: OptionContext, grid: Grid | None, cells: list[list[Cell]]) -> Iterator[Trial]:
        shape, opts = ctx.shape, ctx.options
        idle = shape.num_gpus < self.problem.num_gpus
        total = self.problem.base.model.num_layers
        room = sum(
            min(ctx.max_layers(s, 1, self.capacity_gib[cell.device_class]) for cell in row)
            for s, row in enumerate(cells)
        )
        if room < total:
            self._reject(Infeasible(Reason.MEMORY, "", f"the stages hold at most {room} of {total} layers"))
            return
        options = splits(ctx, cells, self.capacity_gib)
        if not options:
            m = ctx.num_micro_batches
            uneven = self.problem.settings.micro_batches == "uniform" and m % shape.dp
            self._reject(
                Infeasible(Reason.SPEC, "partition.micro_batches", f"uniform split of {m} over dp={shape.dp}")
                if uneven
                else Infeasible(Reason.MEMORY, "", "no layer split fits every stage's memory")
            )
            return
        rest, work = work_rank(opts)
        for layers, micro_batches in options:
            self.num_candidates += 1
            key = (shape, grid, rest, layers, micro_batches)
            if self._fitting.get(key, work) < work:
                self.tally.add(Infeasible(Reason.DOMINATED))
                continue
            found = self.trial(ctx, Plan(shape, opts, grid, layers, micro_batches, idle), cells, "search")
            if isinstance(found, Infeasible):
                self.tally.add(found)
            else:
                self._fitting[key] = min(work, self._fitting.get(key, work))
                yield found

    def _reject(self, why: Infeasible, count: int = 1) -> None:
        self.num_candidates += count
        self.tally.add(why, count)
