"""Plan search on the shipped heterogeneous examples, and against exhaustive search where it is feasible.

    python benchmarks/planner.py [--jobs 2] [--only NAME] [--exhaustive] [--time-budget S]

For each example in examples/planner/ it prints the space (candidates, branches), what was pruned and
why, how many plans were simulated, the search's wall time, the best plan's iteration time, the
homogeneous-assumption baseline's and the speed-up. With --exhaustive it also runs small mixed
clusters (8-16 GPUs, two GPU types) through both the planner and an exhaustive simulation of the
whole space and prints the gap. Every run starts with an empty plan cache, so the times are real.
Targets (issue 8): >= 15 % faster than the baseline on the mixed 128-GPU cluster; search <= 5 min on
2 cores; within 1 % of the exhaustive optimum where exhaustive search is feasible.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astra_hetero.planner.base import Budget  # noqa: E402
from astra_hetero.planner.cache import PlanCache  # noqa: E402
from astra_hetero.planner.driver import find_plans  # noqa: E402
from astra_hetero.planner.evaluate import Evaluator  # noqa: E402
from astra_hetero.planner.problem import load_problem, problem_from_data  # noqa: E402
from astra_hetero.planner.search import BranchAndBound, Exhaustive  # noqa: E402

EXAMPLES = sorted((ROOT / "examples" / "planner").glob("*.yaml"))


def plan_example(path: Path, jobs: int, time_budget: float | None) -> None:
    problem = load_problem(path)
    own_before, workers_before = _cpu_seconds()
    with tempfile.TemporaryDirectory() as cache:
        started = time.monotonic()
        report = find_plans(problem, jobs=jobs, time_budget_s=time_budget, cache=PlanCache(Path(cache)))
        total = time.monotonic() - started
    own_after, workers_after = _cpu_seconds()
    own, workers = own_after - own_before, workers_after - workers_before
    search, best, baseline = report.search, report.best, report.baseline_best
    print(f"\n== {path.name}: {problem.num_gpus} GPUs, {len(problem.classes)} device classes")
    print(
        f"   space: {search.num_candidates} candidates ({search.num_collapsed} replica reorderings "
        f"collapsed), {search.num_feasible} expanded and feasible"
    )
    pruned = ", ".join(f"{k} {n}" for k, n in sorted(search.tally.counts.items(), key=lambda kv: -kv[1]))
    print(f"   pruned by reason: {pruned or 'none'}")
    print(
        f"   simulated: {len(search.trials)} (search) + {report.num_simulated - len(search.trials)} "
        f"(baseline, spec); stopped: {search.stopped}"
    )
    print(
        f"   search wall time: {search.wall_time_s:.1f} s; with the baseline: {total:.1f} s (jobs={jobs}); "
        f"CPU time: {own:.0f} s searching (one core) + {workers:.0f} s simulating (on {jobs} workers) "
        f"= {own + workers / jobs:.0f} s on {jobs} idle cores"
    )
    if best is not None:
        print(f"   best: {best.time_us / 1e3:,.1f} ms  {best.plan.label}")
    if baseline is not None and report.speedup is not None:
        speedup = report.speedup
        print(f"   homogeneous-assumption baseline: {baseline.time_us / 1e3:,.1f} ms  {baseline.plan.label}")
        print(f"   speed-up over the baseline: {speedup:.3f}x ({(speedup - 1) * 100:.1f} % faster)")


def _cpu_seconds() -> tuple[float, float]:
    """CPU time of this process, and of its finished children (the simulation workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def small_cases() -> dict[str, dict]:
    from tests.conftest import node_group
    from tests.planner.specs import NARROW, plan_data

    l40s = plan_data({**NARROW, "tp": [4], "micro_batch_size": [1, 2]})
    l40s["cluster"]["node_groups"] = [
        node_group("h100", "h100-sxm", count=1, gpus_per_node=8),
        node_group("l40s", "l40s", count=2, gpus_per_node=4, fabric="pcie4", nic={"gbps": 200, "count": 2}),
    ]
    wide = plan_data(
        {
            "tp": [2, 4],
            "micro_batch_size": [1, 2],
            "recompute": "none",
            "distributed_optimizer": [False, True],
            "stage_order": "any",
        }
    )
    return {
        "8 GPUs H100+A100, narrow": plan_data({**NARROW, "stage_order": "any", "max_splits": 64}),
        "8 GPUs H100+A100, SP/schedule/dist-opt/mbs searched": wide,
        "16 GPUs H100+L40S": l40s,
    }


def against_exhaustive(jobs: int) -> None:
    print("\n== planner vs exhaustive simulation (small clusters)")
    for name, data in small_cases().items():
        problem = problem_from_data(data)
        with Evaluator(PlanCache(None), jobs) as evaluator:
            started = time.monotonic()
            every = Exhaustive().search(problem, evaluator, Budget.of(100_000, None))
            exhaustive_s = time.monotonic() - started
            started = time.monotonic()
            planned = BranchAndBound().search(problem, evaluator, Budget.of(120, None))
            planned_s = time.monotonic() - started
        assert every.best is not None and planned.best is not None
        gap = planned.best.time_us / every.best.time_us - 1
        print(
            f"   {name}: exhaustive {len(every.trials)} simulations in {exhaustive_s:.1f} s, best "
            f"{every.best.time_us / 1e3:.3f} ms; planner {len(planned.trials)} simulations in "
            f"{planned_s:.1f} s, best {planned.best.time_us / 1e3:.3f} ms; gap {gap * 100:+.2f} %"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", help="example file name (repeatable)")
    parser.add_argument("--exhaustive", action="store_true", help="also compare with exhaustive search")
    parser.add_argument("--no-examples", action="store_true")
    parser.add_argument("--time-budget", type=float)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (timings scale with it)")
    if not args.no_examples:
        for path in EXAMPLES:
            if args.only and path.name not in args.only:
                continue
            plan_example(path, args.jobs, args.time_budget)
    if args.exhaustive:
        against_exhaustive(args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
