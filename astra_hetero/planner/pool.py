"""Walk the space: branches first, their candidates when the search asks for them.

A *branch* is a shape, a set of options and a cell composition (cells per device class): everything
of a candidate but its grid and splits. Checks run at the level they depend on, each once — the
options' parallelism section and the spec checks per (shape, options), a memory test no split can
pass per branch, then memory per split — and a branch gets a lower bound that holds for every grid
and split in it and a quick estimate from its most regular grids. Expanding a branch yields its
feasible candidates, each with its own estimate and bound.

Counting: a candidate is a (grid, options, splits) triple; one rejected or pruned before its splits
are chosen counts once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from astra_hetero.errors import SpecError
from astra_hetero.planner.base import Progress, Trial
from astra_hetero.planner.candidate import Grid, Plan
from astra_hetero.planner.context import Contexts, OptionContext
from astra_hetero.planner.dimensions import work_rank
from astra_hetero.planner.estimate import Cell, assess, branch_bound
from astra_hetero.planner.feasibility import (
    Infeasible,
    Reason,
    Tally,
    memory_headroom_gib,
    spec_check,
    spec_infeasible,
)
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.shape import Shape
from astra_hetero.planner.space import Family, families, option_sets, shapes
from astra_hetero.planner.splits import representative_split, splits
from astra_hetero.spec.schema import PartitionSpec
from astra_hetero.workload.layout import place_cells


@dataclass
class Branch:
    ctx: OptionContext
    family: Family
    estimate_ns: float  # the best quick estimate of its regular grids (its bound when none fits)
    bound_ns: float  # no candidate of the branch can be faster
    estimated: bool = True  # False: no regular grid fits, `estimate_ns` is the (optimistic) bound

    @property
    def rank(self) -> tuple[bool, float, float]:
        """Order of promise: estimated branches by estimate, then the others by bound."""
        return (not self.estimated, self.estimate_ns, self.bound_ns)

    @property
    def shape(self) -> Shape:
        return self.ctx.shape

    @property
    def size(self) -> int:
        return len(self.family)

    @property
    def estimate_us(self) -> float:
        return self.estimate_ns / 1000

    @property
    def bound_us(self) -> float:
        return self.bound_ns / 1000


class Walk:
    """One walk of a problem's space; `tally` and `num_candidates` count what it saw."""

    def __init__(self, problem: Problem, contexts: Contexts | None = None) -> None:
        self.problem = problem
        self.contexts = contexts or Contexts(problem)
        self.tally = Tally()
        self.num_candidates = 0
        self.num_collapsed = 0  # (grid, options) pairs left out as reorderings of identical replicas
        self.capacity_gib = {c.index: c.memory_gib for c in problem.classes}
        self._cells: dict[tuple[Shape, Grid | None], list[list[Cell]]] = {}
        self._fitting: dict[tuple[object, ...], int] = {}  # plan without work-ordered options -> least work

    # --- branches -------------------------------------------------------------------------------
    def branches(self, progress: Progress | None = None) -> list[Branch]:
        found = []
        for shape in shapes(self.problem):
            shape_families = families(self.problem, shape)
            if not shape_families:
                continue
            options = option_sets(self.problem, shape)
            self.num_collapsed += sum(f.replica_orderings() for f in shape_families) * len(options)
            probe = next(shape_families[0].grids(self.problem, shape.cell))
            for opts in options:
                try:
                    ctx = self.contexts.get(shape, opts)
                    plan = Plan(shape, opts, probe, (), (), shape.num_gpus < self.problem.num_gpus)
                    spec_check(ctx, plan, PartitionSpec(layers="auto", micro_batches="auto"))
                except SpecError as error:
                    self.reject(spec_infeasible(error), sum(len(f) for f in shape_families))
                    continue
                for family in shape_families:
                    branch = self._branch(ctx, family)
                    if branch is not None:
                        found.append(branch)
                if progress is not None:
                    progress.advance(0)
        return found

    def _branch(self, ctx: OptionContext, family: Family) -> Branch | None:
        per_class = self._cells_per_class(ctx.shape, family)
        heavy = self._heaviest_stage_does_not_fit(ctx, set(per_class))
        if heavy is not None:
            self.reject(heavy, len(family))
            return None
        bound = branch_bound(ctx, per_class)
        estimates = []
        for grid in family.grids(self.problem, ctx.shape.cell, family.representatives()):
            try:
                cells = self.cells(ctx.shape, grid)
            except SpecError:
                continue  # expanding the branch counts it
            split = representative_split(ctx, cells, self.capacity_gib)
            if split is None:
                continue
            plan = Plan(ctx.shape, ctx.options, grid, *split, ctx.shape.num_gpus < self.problem.num_gpus)
            found = self.trial(ctx, plan, cells, "search")
            if isinstance(found, Trial):
                estimates.append(found.assessment.estimate_ns)
        return Branch(ctx, family, min(estimates, default=bound), bound, bool(estimates))

    def _cells_per_class(self, shape: Shape, family: Family) -> dict[int, int]:
        if family.composition is not None:
            return {k: n for k, n in enumerate(family.composition) if n}
        counts: dict[int, int] = {}
        for grid in family.fixed:
            for row in self.cells(shape, grid):
                for cell in row:
                    counts[cell.device_class] = counts.get(cell.device_class, 0) + 1
        return counts

    def _heaviest_stage_does_not_fit(self, ctx: OptionContext, classes: set[int]) -> Infeasible | None:
        """Some stage holds at least ⌈layers / pp⌉ layers; if even the lightest stage with that many,
        one micro-batch in flight, needs more than the largest GPU in use has, no split fits."""
        pp = ctx.shape.pp
        layers = -(-self.problem.base.model.num_layers // pp)
        largest = max(self.capacity_gib[c] for c in classes)
        need = min(ctx.memory_need_gib(s, layers, 1) for s in range(pp))
        if need <= largest:
            return None
        return Infeasible(
            Reason.MEMORY,
            "",
            f"a stage of {layers} layers needs at least {need:.1f} GiB; the largest GPU has {largest:g}",
        )

    def reject(self, why: Infeasible, count: int = 1) -> None:
        self.num_candidates += count
        self.tally.add(why, count)

    # --- candidates -----------------------------------------------------------------------------
    def expand(
        self, branch: Branch, estimate: bool = True, cutoff_us: float = float("inf")
    ) -> Iterator[Trial]:
        """The branch's feasible candidates: every grid, every split the settings ask for; with
        `estimate=False` their bounds only (`estimated` works the estimate out later), each worked
        out only until it reaches `cutoff_us`."""
        ctx = branch.ctx
        for grid in branch.family.grids(self.problem, ctx.shape.cell):
            try:
                cells = self.cells(ctx.shape, grid)
            except SpecError as error:
                self.reject(spec_infeasible(error))
                continue
            yield from self._candidates(ctx, grid, cells, estimate, cutoff_us)

    def cells(self, shape: Shape, grid: Grid | None) -> list[list[Cell]]:
        """Device class and node of every cell, placed as the generator will place them."""
        key = (shape, grid)
        found = self._cells.get(key)
        if found is None:
            problem = self.problem
            groups = grid if grid is not None else [[None] * shape.dp for _ in range(shape.pp)]
            layout = place_cells(
                problem.devices,
                groups,
                shape.tp,
                allow_across_nodes=problem.base.parallelism.allow_tp_across_nodes,
                allow_idle=shape.num_gpus < problem.num_gpus,
                cp=shape.cp,
            )
            of_group = problem.class_of_group
            devices = problem.devices
            found = self._cells[key] = [
                [Cell(of_group[devices[ranks[0]].group_name].index, ranks) for ranks in row]
                for row in layout.cells
            ]
        return found

    def trial(
        self,
        ctx: OptionContext,
        plan: Plan,
        cells: list[list[Cell]],
        source: str,
        estimate: bool = True,
        cutoff_us: float = float("inf"),
    ) -> Trial | Infeasible:
        """Memory, then bound and estimate (`estimate.assess`), of one fully specified plan."""
        headroom, where = memory_headroom_gib(ctx, cells, plan.layers, plan.micro_batches, self.capacity_gib)
        if headroom < 0:
            return Infeasible(Reason.MEMORY, "", where)
        assessment = assess(ctx, cells, plan.layers, plan.micro_batches, estimate, cutoff_us)
        return Trial(plan, assessment, headroom, source)

    def estimated(self, trial: Trial) -> Trial:
        """The trial with its estimate worked out (a trial from `expand(..., estimate=False)`)."""
        if not trial.assessment.estimated:
            plan = trial.plan
            ctx = self.contexts.get(plan.shape, plan.options)
            cells = self.cells(plan.shape, plan.grid)
            trial.assessment = assess(ctx, cells, plan.layers, plan.micro_batches)
        return trial

    def _stage_room(self, ctx: OptionContext, s: int, row: list[Cell]) -> int:
        """Most layers every cell of stage s holds with one micro-batch."""
        classes = frozenset(cell.device_class for cell in row)
        key = ("room", s, classes)
        found = ctx.memo.get(key)
        if found is None:
            found = ctx.memo[key] = min(ctx.max_layers(s, 1, self.capacity_gib[k]) for k in classes)
        return found  # type: ignore[return-value]

    def _candidates(
        self, ctx: OptionContext, grid: Grid | None, cells: list[list[Cell]], estimate: bool, cutoff_us: float
    ) -> Iterator[Trial]:
        shape, opts = ctx.shape, ctx.options
        idle = shape.num_gpus < self.problem.num_gpus
        total = self.problem.base.model.num_layers
        room = sum(self._stage_room(ctx, s, row) for s, row in enumerate(cells))
        if room < total:
            self.reject(Infeasible(Reason.MEMORY, "", f"the stages hold at most {room} of {total} layers"))
            return
        options = splits(ctx, cells, self.capacity_gib)
        if not options:
            m = ctx.num_micro_batches
            uneven = self.problem.settings.micro_batches == "uniform" and m % shape.dp
            self.reject(
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
            plan = Plan(shape, opts, grid, layers, micro_batches, idle)
            found = self.trial(ctx, plan, cells, "search", estimate, cutoff_us)
            if isinstance(found, Infeasible):
                self.tally.add(found)
            else:
                self._fitting[key] = min(work, self._fitting.get(key, work))
                yield found
