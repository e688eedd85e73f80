"""What "the folded simulation equals the plain one" means, as one assertion used by the folding tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.results.model import RunResult


def simulate_both(run_dir: Path) -> tuple[RunResult, RunResult]:
    folded = EmbeddedBackend(timeline=False).run(run_dir).result
    plain = EmbeddedBackend(timeline=False, fold=False).run(run_dir).result
    return folded, plain


def assert_same_simulation(folded: RunResult, plain: RunResult) -> None:
    """Iteration time, every rank's breakdown, and the collectives (each folded record counted
    `instances` times) agree; the folded result still lists every rank."""
    assert folded.iteration_time_us == pytest.approx(plain.iteration_time_us, rel=1e-9)
    assert [r.rank for r in folded.ranks] == [r.rank for r in plain.ranks] == list(range(plain.num_ranks))
    for mine, theirs in zip(folded.ranks, plain.ranks, strict=True):
        for field in ("finish_us", "compute_us", "exposed_comm_us", "idle_us"):
            assert getattr(mine, field) == pytest.approx(getattr(theirs, field), rel=1e-9, abs=1e-3), (
                f"rank {mine.rank} {field}"
            )
        assert (mine.gpu, mine.stage, mine.replica, mine.node) == (
            theirs.gpu,
            theirs.stage,
            theirs.replica,
            theirs.node,
        )
    assert _records(folded) == _records(plain)


def _records(result: RunResult) -> Counter:
    counts: Counter = Counter()
    for c in result.collectives:
        counts[(c.type, c.bytes, c.name, round(c.start_us, 3), round(c.end_us, 3), c.num_ranks)] += (
            c.instances
        )
    return counts
