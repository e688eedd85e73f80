"""Results built in code: every test states the ranks, times and GPU types it reasons about."""

from __future__ import annotations

from collections.abc import Sequence

from astra_hetero.results.model import CollectiveStat, RankResult, RunResult


def rank_result(
    rank: int,
    gpu: str,
    stage: int,
    compute_us: float,
    exposed_comm_us: float,
    iteration_us: float,
    replica: int = 0,
) -> RankResult:
    """A rank that finishes with the iteration; idle is whatever compute and exposed comm leave."""
    return RankResult(
        rank=rank,
        gpu=gpu,
        stage=stage,
        replica=replica,
        finish_us=iteration_us,
        compute_us=compute_us,
        exposed_comm_us=exposed_comm_us,
        idle_us=iteration_us - compute_us - exposed_comm_us,
    )


def pipeline_result(
    stage_gpus: Sequence[str],
    stage_compute_us: Sequence[float],
    dp: int = 2,
    exposed_comm_us: float = 5.0,
    backend: str = "embedded",
) -> RunResult:
    """`len(stage_gpus)` stages × `dp` replicas; the iteration is bound by the slowest stage."""
    iteration_us = max(stage_compute_us) + exposed_comm_us
    ranks = [
        rank_result(stage * dp + replica, gpu, stage, compute, exposed_comm_us, iteration_us, replica)
        for stage, (gpu, compute) in enumerate(zip(stage_gpus, stage_compute_us, strict=True))
        for replica in range(dp)
    ]
    collectives = (
        CollectiveStat(
            group="1",
            type="ALL_REDUCE",
            bytes=1 << 20,
            start_us=10.0,
            end_us=12.5,
            name="dp grads",
            num_ranks=dp,
        ),
    )
    return RunResult(
        backend=backend, iteration_time_us=iteration_us, ranks=tuple(ranks), collectives=collectives
    )


def mixed_result() -> RunResult:
    """Stage 0 on H100 (60 µs of compute), stage 1 on A100 (90 µs): iteration 95 µs."""
    return pipeline_result(["h100-sxm", "a100-80"], [60.0, 90.0])


def homogeneous_result() -> RunResult:
    """The all-H100 twin of `mixed_result`: iteration 65 µs."""
    return pipeline_result(["h100-sxm", "h100-sxm"], [60.0, 60.0])
