"""Layers per stage and micro-batches per replica for one grid.

With `search` (the default) a grid gets every split when there are at most `max_splits` of them (small
models: the search stays exact) and otherwise the balanced split — the generator's own `auto`
greedy, which minimises the slowest stage (replica) within memory — that refinement then moves one
layer or micro-batch at a time. `uniform` and `spec` give the one split they name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator

from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.estimate import Cell
from astra_hetero.spec.schema import ParallelismSpec
from astra_hetero.workload.partition import (
    even_split,
    greedy_min_max,
    micro_batch_group,
    replicas_in_lockstep,
)

Split = tuple[int, ...]


def count_compositions(total: int, parts: int) -> int:
    """Ways to write `total` as an ordered sum of `parts` positive integers."""
    return math.comb(total - 1, parts - 1) if total >= parts >= 1 else 0


def compositions(total: int, parts: int) -> Iterator[Split]:
    """Every ordered split of `total` into `parts` positive integers (stars and bars)."""
    for bars in _combinations(total - 1, parts - 1):
        edges = (0, *(b + 1 for b in bars), total)
        yield tuple(b - a for a, b in zip(edges, edges[1:], strict=False))


def _combinations(n: int, k: int) -> Iterator[tuple[int, ...]]:
    return itertools.combinations(range(n), k)


def min_stage_layers(par: ParallelismSpec) -> int:
    """Every model chunk holds at least one layer, so a stage of `virtual_stages` chunks holds that many."""
    return par.virtual_stages


def layer_compositions(total: int, pp: int, floor: int) -> Iterator[Split]:
    """Every split of `total` layers over `pp` stages with at least `floor` each."""
    for split in compositions(total - pp * (floor - 1), pp):
        yield tuple(n + floor - 1 for n in split)


def batch_compositions(total: int, dp: int, unit: int) -> Iterator[Split]:
    """Every split of `total` micro-batches over `dp` replicas in whole multiples of `unit` (the
    interleaved schedule runs micro-batches in groups of pp)."""
    if total % unit:
        return
    for split in compositions(total // unit, dp):
        yield tuple(n * unit for n in split)


def uniform_batches(total: int, dp: int, unit: int) -> Split | None:
    share, rest = divmod(total, dp)
    return None if rest or share % unit else (share,) * dp


def splits(
    ctx: OptionContext, cells: list[list[Cell]], capacity_gib: dict[int, float]
) -> list[tuple[Split, Split]]:
    """(layers per stage, micro-batches per replica) pairs to try for this grid (none: no layer split
    fits in memory, or an uneven `uniform` micro-batch split)."""
    settings, partition = ctx.problem.settings, ctx.problem.base.partition
    layers_total, m_total = ctx.problem.base.model.num_layers, ctx.num_micro_batches
    pp, dp = ctx.shape.pp, ctx.shape.dp
    floor, unit = min_stage_layers(ctx.parallelism), micro_batch_group(ctx.parallelism)
    batches_mode = _batches_mode(ctx)
    n_layers = count_compositions(layers_total - pp * (floor - 1), pp) if settings.layers == "search" else 1
    n_batches = count_compositions(m_total // unit, dp) if batches_mode == "search" else 1
    # enumerate every split of as many dimensions as `max_splits` allows, layers first
    limit = settings.max_splits
    every_layer = n_layers * n_batches <= limit or n_layers <= limit
    every_batch = n_layers * n_batches <= limit or (n_layers > limit and n_batches <= limit)

    if settings.layers == "spec":
        layer_options = [tuple(partition.layers)]  # type: ignore[arg-type]
    elif settings.layers == "uniform":
        layer_options = [tuple(even_split(layers_total, pp))]
    elif every_layer:
        layer_options = list(layer_compositions(layers_total, pp, floor))
    else:
        balanced = balanced_layers(ctx, cells, capacity_gib)
        layer_options = [balanced] if balanced is not None else []

    results = []
    for layers in layer_options:
        if batches_mode == "spec":
            batch_options = [tuple(partition.micro_batches)]  # type: ignore[arg-type]
        elif batches_mode == "uniform":
            uniform = uniform_batches(m_total, dp, unit)
            batch_options = [uniform] if uniform else []
        elif every_batch:
            batch_options = list(batch_compositions(m_total, dp, unit))
        elif m_total % unit:
            batch_options = []
        else:
            balanced = balanced_micro_batches(ctx, cells, layers)
            batch_options = [balanced] if balanced else []
        if batches_mode == "search":
            batch_options = _distinct(canonical_batches(b, cells) for b in batch_options)
        results.extend((layers, batches) for batches in batch_options)
    return results


def _batches_mode(ctx: OptionContext) -> str:
    """The settings' micro-batch mode, but `uniform` where the replicas must run in lockstep."""
    mode = ctx.problem.settings.micro_batches
    return "uniform" if mode == "search" and replicas_in_lockstep(ctx.parallelism) else mode


def representative_split(
    ctx: OptionContext, cells: list[list[Cell]], capacity_gib: dict[int, float]
) -> tuple[Split, Split] | None:
    """The one split a quick estimate of this grid uses: the balanced one (or the one the settings fix)."""
    settings, partition = ctx.problem.settings, ctx.problem.base.partition
    total, m_total, pp, dp = (
        ctx.problem.base.model.num_layers,
        ctx.num_micro_batches,
        ctx.shape.pp,
        ctx.shape.dp,
    )
    if settings.layers == "spec":
        layers: Split | None = tuple(partition.layers)  # type: ignore[arg-type]
    elif settings.layers == "uniform":
        layers = tuple(even_split(total, pp))
    else:
        layers = balanced_layers(ctx, cells, capacity_gib)
    if layers is None:
        return None
    if _batches_mode(ctx) == "spec":
        return layers, tuple(partition.micro_batches)  # type: ignore[arg-type]
    if _batches_mode(ctx) == "uniform":
        uniform = uniform_batches(m_total, dp, micro_batch_group(ctx.parallelism))
        return (layers, uniform) if uniform else None
    balanced = balanced_micro_batches(ctx, cells, layers)
    return (layers, canonical_batches(balanced, cells)) if balanced else None


def canonical_batches(batches: Split, cells: list[list[Cell]]) -> Split:
    """Replicas whose pipelines hold the same device classes stage by stage are interchangeable:
    of the splits that differ only by swapping their counts, keep the one ascending along them."""
    signature = [tuple(row[r].device_class for row in cells) for r in range(len(batches))]
    out = list(batches)
    start = 0
    for end in range(1, len(out) + 1):
        if end == len(out) or signature[end] != signature[start]:
            out[start:end] = sorted(out[start:end])
            start = end
    return tuple(out)


def _distinct(items: Iterable[Split]) -> list[Split]:
    return list(dict.fromkeys(items))


def stage_cost(ctx: OptionContext, cell: Cell, stage: int) -> tuple[float, float]:
    """(time per layer, fixed time) of one micro-batch on a cell, as the generator's `auto` sees it."""
    t = ctx.times[cell.device_class]
    fixed = 0.0
    if stage == 0:
        fixed += t.first_fwd.total + t.first_bwd.total
    if stage == ctx.shape.pp - 1:
        fixed += t.last_fwd.total + t.last_bwd.total
    return t.layer, fixed


def balanced_layers(
    ctx: OptionContext, cells: list[list[Cell]], capacity_gib: dict[int, float]
) -> Split | None:
    """Minimise the slowest stage (its slowest cell) with each stage within its cells' memory, with
    as many micro-batches per replica as an even split gives; None when no split fits that way."""
    pp, dp = ctx.shape.pp, ctx.shape.dp
    rows = tuple(frozenset(cell.device_class for cell in row) for row in cells)
    key = ("balanced_layers", rows)  # grids with the same classes per stage share their split
    found = ctx.memo.get(key)
    if found is None:
        typical = math.ceil(ctx.num_micro_batches / dp)
        limits = [_stage_limits(ctx, s, cells[s], typical, capacity_gib) for s in range(pp)]
        per_stage, caps = [lim[0] for lim in limits], [lim[1] for lim in limits]
        total = ctx.problem.base.model.num_layers
        split = greedy_min_max(
            total,
            [c[0] for c in per_stage],
            [c[1] for c in per_stage],
            cap=caps,
            floor=min_stage_layers(ctx.parallelism),
        )
        found = ctx.memo[key] = tuple(split) if split else None
    return found  # type: ignore[return-value]


def _stage_limits(
    ctx: OptionContext, s: int, row: list[Cell], num_micro_batches: int, capacity_gib: dict[int, float]
) -> tuple[tuple[float, float], int]:
    """Stage s's cost on its slowest cell (`stage_cost`), and the most layers all its cells hold."""
    classes = tuple(cell.device_class for cell in row)
    key = ("stage_limits", s, classes, num_micro_batches)
    found = ctx.memo.get(key)
    if found is None:
        cost = max((stage_cost(ctx, cell, s) for cell in row), key=sum)
        cap = min(ctx.max_layers(s, num_micro_batches, capacity_gib[k]) for k in set(classes))
        found = ctx.memo[key] = (cost, cap)
    return found  # type: ignore[return-value]


def balanced_micro_batches(ctx: OptionContext, cells: list[list[Cell]], layers: Split) -> Split | None:
    """Minimise the slowest replica: each costs its bottleneck stage per micro-batch, plus the fill.
    Counts come in whole groups of `micro_batch_group` (None: the total is not a multiple of it)."""
    pp, dp, unit = ctx.shape.pp, ctx.shape.dp, micro_batch_group(ctx.parallelism)
    if ctx.num_micro_batches % unit:
        return None
    bottleneck = []
    for r in range(dp):
        costs = [stage_cost(ctx, cells[s][r], s) for s in range(pp)]
        bottleneck.append(max(n * c[0] + c[1] for n, c in zip(layers, costs, strict=True)) * unit)
    groups = ctx.num_micro_batches // unit
    # the fill takes (pp − 1) micro-batches' time, (pp − 1)/v with v chunks (as the generator's auto)
    fill = (pp - 1) / ctx.virtual_stages / unit
    found = greedy_min_max(groups, bottleneck, [0.0] * dp, [fill] * dp)
    return tuple(n * unit for n in (found or even_split(groups, dp)))
