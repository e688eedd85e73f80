"""Cost of simulating several jobs on one cluster (issue 21): the embedded engine on a shared cluster's
run directory, together with each job's solo run and without (`--no-solo`), folded and rank by rank,
against the single-job directories of the same jobs.

The cluster is examples/shared_cluster_three_jobs.yaml scaled up: `--racks` H100 racks of two 8-GPU
nodes and as many A100 racks, GPT-3 6.7B-class jobs; jobs a and b share every H100 rack (one node each
per rack, TP8 · DP = racks), job c fills the A100 racks. Each figure is the best wall time over
`--repeat` rounds of in-process runs (no trace.json). A run with solo runs simulates k + 1 times for k
jobs; folding keeps each job's classes apart, so a shared run costs about what its jobs cost alone.

    python benchmarks/shared_cluster.py [--racks 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path
from typing import Any

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.jobs.load import parse_run_spec
from astra_hetero.pipeline import build_run_dir

MODEL = {"preset": "gpt3-6.7b", "num_layers": 8, "seq_len": 4096}


def shared_data(racks: int) -> dict[str, Any]:
    group = {"count": 2, "gpus_per_node": 8, "intra_node_fabric": "nvlink4", "nic": 400}
    groups = [{**group, "name": f"h100_r{i}", "gpu": "h100-sxm"} for i in range(racks)]
    groups += [
        {**group, "name": f"a100_r{i}", "gpu": "a100-80", "intra_node_fabric": "nvlink3", "nic": 200}
        for i in range(racks)
    ]

    def job(name: str, pp: int, dp: int, nodes: dict[str, list[int]]) -> dict[str, Any]:
        par = {"tp": 8, "pp": pp, "dp": dp, "global_batch_size": 4 * dp}
        return {"name": name, "model": dict(MODEL), "parallelism": par, "nodes": nodes}

    return {
        "name": f"shared-{racks}-racks",
        "cluster": {"node_groups": groups},
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 2, "oversubscription": 2.0},
        "jobs": [
            job("a", 1, racks, {f"h100_r{i}": [0] for i in range(racks)}),
            job("b", 1, racks, {f"h100_r{i}": [1] for i in range(racks)}),
            job("c", 2, racks, {f"a100_r{i}": [0, 1] for i in range(racks)}),
        ],
    }


def alone_data(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The shared spec with only job `name` (the same GPUs of the same cluster)."""
    alone = copy.deepcopy(data)
    alone["jobs"] = [j for j in alone["jobs"] if j["name"] == name]
    return alone


def best_wall(run_dir: Path, repeat: int, **options: Any) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = EmbeddedBackend(timeline=False, **options).run(run_dir).result
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = shared_data(args.racks)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        shared = build_run_dir(parse_run_spec(data), root / "shared").root
        gpus = sum(g["count"] * g["gpus_per_node"] for g in data["cluster"]["node_groups"])
        print(f"{len(data['jobs'])} jobs on {gpus} GPUs ({args.racks} H100 racks, {args.racks} A100 racks)")
        rows = []
        for label, options in (
            ("together + each job alone (default)", {}),
            ("together only (--no-solo)", {"solo": False}),
            ("together only, rank by rank (--no-fold --no-solo)", {"solo": False, "fold": False}),
        ):
            wall, result = best_wall(shared, args.repeat, **options)
            classes = result.meta.get("folding", {}).get("rank_classes", gpus)
            rows.append((label, wall, classes))
        alone_total = 0.0
        for job in data["jobs"]:
            run = build_run_dir(parse_run_spec(alone_data(data, job["name"])), root / job["name"]).root
            wall, _ = best_wall(run, args.repeat, solo=False)
            alone_total += wall
            rows.append((f"job {job['name']} alone, its own directory", wall, None))
        print(f"{'run':<52} {'wall (s)':>9} {'rank classes':>13}")
        for label, wall, classes in rows:
            print(f"{label:<52} {wall:>9.3f} {'' if classes is None else classes:>13}")
        print(f"{'sum of the jobs alone':<52} {alone_total:>9.3f}")
        _, result = best_wall(shared, 1)
        for job in result.jobs:
            print(
                f"job {job['name']}: {job['iteration_time_us'] / 1e3:.2f} ms together, "
                f"{job['solo_iteration_time_us'] / 1e3:.2f} ms alone ({job['slowdown'] - 1:+.1%})"
            )


if __name__ == "__main__":
    main()
