"""Walk the space and keep the feasible candidates, each with its estimate and lower bound.

Order of the walk: shape → grid → options → splits. Checks run at the level they depend on, each
once: the options' parallelism section and the spec checks per (grid, options) — a candidate rejected
there counts once, before its splits exist — then memory per split.
"""

from __future__ import annotations

from collections.abc import Iterator

from astra_hetero.errors import SpecError
from astra_hetero.planner.base import Progress, Trial
from astra_hetero.planner.candidate import Grid, Plan, Shape
from astra_hetero.planner.context import Contexts, OptionContext, Options
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


class Walk:
    """One walk of a problem's space; `tally` and `num_candidates` count what it saw."""

    def __init__(self, problem: Problem, contexts: Contexts | None = None) -> None:
        self.problem = problem
        self.contexts = contexts or Contexts(problem)
        self.tally = Tally()
        self.num_candidates = 0
        self.capacity_gib = {c.index: c.memory_gib for c in problem.classes}

    def candidates(self, progress: Progress | None = None) -> Iterator[Trial]:
        options = option_sets(self.problem)
        for shape in shapes(self.problem):
            for grid in grids(self.problem, shape):
                try:
                    cells = self.cells(shape, grid)
                except SpecError as error:
                    self._reject(spec_infeasible(error), len(options))
                    continue
                for opts in options:
                    yield from self._candidates(shape, grid, cells, opts)
                if progress is not None:
                    progress.advance(0)

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

    def _candidates(
        self, shape: Shape, grid: Grid | None, cells: list[list[Cell]], opts: Options
    ) -> Iterator[Trial]:
        idle = shape.num_gpus < self.problem.num_gpus
        try:
            ctx = self.contexts.get(shape, opts)
            probe = Plan(shape, opts, grid, (), (), idle)
            spec_check(ctx, probe, PartitionSpec(layers="uniform", micro_batches="auto"))
        except SpecError as error:
            self._reject(spec_infeasible(error))
            return
        options = splits(ctx, cells, self.capacity_gib)
        if not options:
            self._reject(Infeasible(Reason.SPEC, "partition.micro_batches", "uniform split is uneven"))
            return
        for layers, micro_batches in options:
            self.num_candidates += 1
            found = self.trial(ctx, Plan(shape, opts, grid, layers, micro_batches, idle), cells, "search")
            if isinstance(found, Infeasible):
                self.tally.add(found)
            else:
                yield found

    def _reject(self, why: Infeasible, count: int = 1) -> None:
        self.num_candidates += count
        self.tally.add(why, count)
