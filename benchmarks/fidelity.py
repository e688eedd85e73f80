"""Predicted vs published *measured* iteration times of Megatron-LM training runs: every row's error
and the mean absolute percentage error (MAPE).

    python benchmarks/fidelity.py [--runs benchmarks/fidelity_runs.yaml] [--max-gpus N] [--only ID ...]
                                  [--approximate] [--keep DIR] [--memory]

Each row of the runs file (data with its source, see that file) becomes a spec that goes through the
pipeline as a library (spec → run directory → embedded backend), with every default as shipped:
nothing here is tuned to a row. Rows marked `excluded` (published measurements of runs that are not
performance runs, with the reason in the file) are evaluated and printed apart, never inside the MAPE.
A row that names a parallelism field this version does not know is skipped and listed; `--approximate`
runs it without that field, also apart. Rows above `--max-gpus` are listed, not run: the embedded
engine takes minutes for the 280- and 512-GPU rows (run them with `--max-gpus 1024`). `--memory` prints,
instead, the generator's memory estimate of each row's fullest GPU beside the peak memory its source
published (`measured.memory_gib`, rows that have one; no simulation, so every GPU count).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path(__file__).with_name("fidelity_runs.yaml")


@dataclass(frozen=True)
class Outcome:
    row_id: str
    gpus: int
    measured_s: float
    predicted_s: float | None
    status: str  # "ok" | "excluded" | "approx" | "skipped" | "failed"
    detail: str = ""
    compute_s: float | None = None  # of the busiest rank
    exposed_comm_s: float | None = None

    @property
    def error(self) -> float | None:
        if self.predicted_s is None:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


def spec_data(row: dict[str, Any], approximate: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """The spec for a row, or None with the fields this version lacks (kept out unless `approximate`)."""
    from astra_hetero.spec.schema import ParallelismSpec

    parallelism = dict(row["parallelism"])
    unknown = []
    for key in [k for k in parallelism if k not in ParallelismSpec.model_fields]:
        unknown.append(f"parallelism.{key}={parallelism.pop(key)}")
    if unknown and not approximate:
        return None, unknown
    model = {"num_kv_heads": row["model"]["num_heads"], **row["model"]}
    cluster = row["cluster"]
    group = {
        "name": "nodes",
        "count": cluster["nodes"],
        "gpus_per_node": cluster["gpus_per_node"],
        "gpu": cluster["gpu"],
        "intra_node_fabric": cluster["intra_node_fabric"],
        "nic": {"gbps": cluster["nic_gbps"], "count": cluster["nics_per_node"]},
    }
    if "scale_up_gpus" in cluster:  # trays of one NVLink domain (GB200 NVL72)
        group["scale_up_domain"] = {"gpus": cluster["scale_up_gpus"]}
    topology = "rail_optimized" if cluster["nodes"] > 1 else "single_switch"
    data = {
        "name": row["id"],
        "model": model,
        "cluster": {"node_groups": [group]},
        "network": {"topology": topology},
        "parallelism": parallelism,
        "compute": row.get("compute", {}),
        "precision": row.get("precision", {}),
    }
    if "partition" in row:  # an uneven layer split the run used (Megatron's account_for_embedding/loss)
        data["partition"] = row["partition"]
    return data, unknown


def predict(data: dict[str, Any], workdir: Path) -> tuple[float, float, float]:
    """(iteration, compute, exposed communication) in seconds, the latter two of the busiest rank."""
    from astra_hetero.bounds import WorkLimits
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import parse_spec

    # the 1T rows' traces hold 7.3 M nodes, past the default work limit meant for interactive use
    limits = WorkLimits(max_nodes=50_000_000)
    run_dir = build_run_dir(parse_spec(data), workdir / data["name"], limits=limits)
    result = execute(run_dir.root, backend="embedded", timeline="none")
    busiest = max(result.ranks, key=lambda r: r.compute_us)
    return result.iteration_time_us / 1e6, busiest.compute_us / 1e6, busiest.exposed_comm_us / 1e6


def memory_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Published peak memory per GPU against the generator's estimate of the fullest GPU, GiB."""
    from astra_hetero.errors import AstraHeteroError
    from astra_hetero.spec import parse_spec
    from astra_hetero.workload.generate import plan_workload

    lines = [f"{'row':48} {'published GiB':>13} {'estimate GiB':>12} {'error':>7}"]
    for row in rows:
        published = row["measured"].get("memory_gib")
        data, unknown = spec_data(row, approximate=False)
        if published is None or data is None:
            continue
        try:
            estimate = max(gpu["peak_gib"] for gpu in plan_workload(parse_spec(data)).memory.values())
        except AstraHeteroError as exc:  # refused: the estimate exceeds a GPU's capacity
            lines.append(f"{row['id']:48} {published:13.1f} {'-':>12} {'-':>7}  refused: {exc}")
            continue
        error = 100 * (estimate - published) / published
        lines.append(f"{row['id']:48} {published:13.1f} {estimate:12.1f} {error:+6.1f}%")
    return lines


def evaluate(row: dict[str, Any], workdir: Path, approximate: bool) -> Outcome:
    from astra_hetero.errors import AstraHeteroError

    gpus = row["cluster"]["nodes"] * row["cluster"]["gpus_per_node"]
    measured = float(row["measured"]["iteration_time_s"])
    data, unknown = spec_data(row, approximate)
    if data is None:
        return Outcome(row["id"], gpus, measured, None, "skipped", "needs " + ", ".join(unknown))
    try:
        predicted, compute, comm = predict(data, workdir)
    except AstraHeteroError as exc:
        return Outcome(row["id"], gpus, measured, None, "failed", str(exc))
    status, detail = "ok", ""
    if unknown:
        status, detail = "approx", "without " + ", ".join(unknown)
    elif row.get("excluded"):
        status, detail = "excluded", row["excluded"]
    return Outcome(row["id"], gpus, measured, predicted, status, detail, compute, comm)


def mape(outcomes: list[Outcome]) -> float | None:
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    return 100 * sum(errors) / len(errors) if errors else None


def max_error(outcomes: list[Outcome]) -> Outcome | None:
    evaluated = [o for o in outcomes if o.error is not None]
    return max(evaluated, key=lambda o: abs(o.error or 0.0)) if evaluated else None


def summary(label: str, outcomes: list[Outcome]) -> str:
    value, worst = mape(outcomes), max_error(outcomes)
    if value is None or worst is None:
        return f"{label}: no row evaluated"
    slow = sum(1 for o in outcomes if (o.error or 0.0) > 0)
    fast = sum(1 for o in outcomes if (o.error or 0.0) < 0)
    within = sum(1 for o in outcomes if abs(o.error or 0.0) <= 0.10)
    return (
        f"{label}: MAPE {value:.1f}% over {len(outcomes)} row(s), max |error| "
        f"{100 * abs(worst.error or 0.0):.1f}% ({worst.row_id}), mean error "
        f"{100 * sum(o.error or 0.0 for o in outcomes) / len(outcomes):+.1f}%; sign balance {slow} too "
        f"slow / {fast} too fast; {within} of {len(outcomes)} within 10 %"
    )


def report(outcomes: list[Outcome]) -> str:
    header = f"{'row':26} {'GPUs':>5} {'measured s':>10} {'predicted s':>11} {'error':>7}"
    lines = [header + f" {'compute':>8} {'comm':>7}  status (compute, comm: busiest rank, s)"]
    for o in outcomes:
        cells = [f"{o.row_id:26}", f"{o.gpus:5d}", f"{o.measured_s:10.3f}"]
        cells.append(f"{o.predicted_s:11.3f}" if o.predicted_s is not None else f"{'-':>11}")
        cells.append(f"{100 * o.error:+6.1f}%" if o.error is not None else f"{'-':>7}")
        cells.append(f"{o.compute_s:8.3f}" if o.compute_s is not None else f"{'-':>8}")
        cells.append(f"{o.exposed_comm_s:7.3f}" if o.exposed_comm_s is not None else f"{'-':>7}")
        lines.append((" ".join(cells) + f"  {o.status} {o.detail}").rstrip())
    exact = [o for o in outcomes if o.status == "ok"]
    lines.append(summary("published performance runs", exact))
    for label, keep in (
        ("  A100 rows", lambda o: "a100" in o.row_id or o.row_id.startswith(("k22", "mlm20"))),
        ("  H100 rows", lambda o: "h100" in o.row_id),
        (
            "  other GPUs",
            lambda o: not ("a100" in o.row_id or "h100" in o.row_id or o.row_id.startswith(("k22", "mlm20"))),
        ),
    ):
        subset = [o for o in exact if keep(o)]
        if subset:
            lines.append(summary(label, subset))
    for status, label in (("excluded", "excluded rows, not in the MAPE"), ("approx", "approximate rows")):
        apart = [o for o in outcomes if o.status == status]
        if apart:
            lines.append(f"({summary(label, apart)})")
    skipped = [o.row_id for o in outcomes if o.status in ("skipped", "failed")]
    if skipped:
        lines.append(f"not evaluated: {', '.join(skipped)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS, help="runs file (default: fidelity_runs.yaml)")
    parser.add_argument(
        "--max-gpus",
        type=int,
        default=64,
        help="skip rows with more GPUs than this (default 64; 512 runs all)",
    )
    parser.add_argument("--only", nargs="+", metavar="ID", help="evaluate only these rows")
    parser.add_argument("--approximate", action="store_true", help="run rows without fields unknown here")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="print the memory estimate beside each row's published peak memory (no simulation)",
    )
    parser.add_argument(
        "--check",
        nargs="?",
        const=ROOT / "examples/experiments.yaml",
        type=Path,
        metavar="EXPERIMENTS",
        help="compare with experiment F1 of the experiments list (default examples/experiments.yaml): "
        "PASS/FAIL per number, exit 1 on a failure",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = yaml.safe_load(args.runs.read_text())["runs"]
    rows = [r for r in rows if not args.only or r["id"] in args.only]
    if args.memory:
        print("\n".join(memory_lines(rows)))
        return 0
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
        workdir = args.keep or Path(tmp)
        for row in rows:
            gpus = row["cluster"]["nodes"] * row["cluster"]["gpus_per_node"]
            if gpus > args.max_gpus:
                outcomes.append(
                    Outcome(
                        row["id"],
                        gpus,
                        row["measured"]["iteration_time_s"],
                        None,
                        "skipped",
                        f"more than --max-gpus {args.max_gpus}",
                    )
                )
                continue
            start = time.perf_counter()
            outcome = evaluate(row, workdir, args.approximate)
            print(f"  {row['id']}: {outcome.status} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
            outcomes.append(outcome)
    print(report(outcomes))
    return check(outcomes, args.check) if args.check else 0


CHECK_ID = "F1"  # this benchmark's entry in examples/experiments.yaml
MAPE_POINT = "published performance runs"  # the row name its MAPE is listed under


def check(outcomes: list[Outcome], experiments: Path) -> int:
    """Each number experiment F1 lists (a row's predicted_s / error_pct, or the MAPE) against this run."""
    from astra_hetero.studies.expectations import check_lines, check_values, load_experiments

    entry = next((e for e in load_experiments(experiments).experiments if e.id == CHECK_ID), None)
    if entry is None:
        print(f"{experiments}: no experiment {CHECK_ID}", file=sys.stderr)
        return 2
    actual: dict[tuple[str, str], float | None] = {}
    for o in outcomes:
        actual[(o.row_id, "predicted_s")] = o.predicted_s
        actual[(o.row_id, "error_pct")] = None if o.error is None else 100 * o.error
    actual[(MAPE_POINT, "mape_pct")] = mape([o for o in outcomes if o.status == "ok"])
    checks = check_values(entry.expected, actual)
    print("\n".join(check_lines(CHECK_ID, "full", checks)))
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
