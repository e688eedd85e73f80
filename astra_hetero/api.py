"""The Python API for notebooks and scripts: load a spec, simulate it, search its plan, and read the
result as tables — the same library calls the commands make, with no command line in between.

    import astra_hetero as ah

    spec = ah.load_spec("examples/gpt3_13b_16xh100.yaml")          # or a dict
    result = ah.simulate(spec.with_(parallelism={"tp": 4, "pp": 4}))
    result.iteration_time_us, result.throughput
    result.to_dataframe("ranks")                                    # pandas, the `[pandas]` extra
    best = ah.plan(spec, search={"tp": [2, 4, 8]}).best_spec

Errors are the commands' own: `SpecError` (a field and a reason) for a bad spec, `BackendFailed` for
a simulation that failed, and so on (`astra_hetero.errors`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero.errors import SpecError
from astra_hetero.results.compare import summarize
from astra_hetero.results.facts import RunFacts, read_facts
from astra_hetero.results.model import RunResult

if TYPE_CHECKING:
    import pandas

    from astra_hetero.planner.driver import PlanReport
    from astra_hetero.spec.schema import Spec
    from astra_hetero.spec.schema.jobs import SharedClusterSpec

TABLES = ("ranks", "collectives", "iterations", "jobs", "shared_links")


def load_spec(source: str | Path | dict[str, Any]) -> Spec | SharedClusterSpec:
    """A validated spec from a YAML file (includes and a relative calibration table resolved against
    its directory) or from a mapping of sections (relative paths against the working directory): of
    one job, or of several jobs sharing the cluster (`jobs:`)."""
    from astra_hetero.jobs import load
    from astra_hetero.spec.schema import Spec
    from astra_hetero.spec.schema.jobs import SharedClusterSpec

    if isinstance(source, Spec | SharedClusterSpec):
        return source
    if isinstance(source, dict):
        return load.parse_run_spec(source)
    if isinstance(source, str | Path):
        return load.load_run_spec(source)
    raise SpecError("", f"expected a spec file's path or a mapping of sections, not {type(source).__name__}")


@dataclass(frozen=True)
class Result:
    """One simulated run: `result.json`'s content (`run`) and what the run directory's manifest says
    was simulated (`facts`). `run_dir` is None when the run used a temporary directory, now gone."""

    run: RunResult
    facts: RunFacts = field(default_factory=RunFacts)
    run_dir: Path | None = None

    @property
    def iteration_time_us(self) -> float:
        return self.run.iteration_time_us

    @property
    def throughput(self) -> dict[str, Any] | None:
        """tokens_per_s, model_tflops_per_gpu, mfu, ... where the run can state them."""
        return self.run.throughput

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.run.warnings

    @property
    def jobs(self) -> tuple[dict[str, Any], ...]:
        """Several jobs sharing the cluster: each job's iterations, time together and alone, slowdown."""
        return self.run.jobs

    def summary(self, width: int = 80) -> str:
        """The text summary `astra-hetero run` prints."""
        from astra_hetero.results.jobs_report import run_summary_tables
        from astra_hetero.results.report import to_text

        label = self.run_dir.name if self.run_dir is not None else self.run.backend
        (summary,) = summarize([(label, self.run)])
        return to_text(run_summary_tables(summary, self.facts), width)

    def records(self, table: str = "ranks") -> list[dict[str, Any]]:
        """The rows of a table as plain dicts: `ranks` (one per GPU: times in µs, GPU type, stage,
        replica, node), `collectives` (one per collective or transfer as it ran), `iterations`, and
        with several jobs `jobs` (one per job: times together and alone) and `shared_links`."""
        if table == "ranks":
            return [dict(r.__dict__) for r in self.run.ranks]
        if table == "collectives":
            return [{**c.__dict__, "duration_us": c.duration_us} for c in self.run.collectives]
        if table == "iterations":
            return [dict(i) for i in self.run.iterations]
        if table == "jobs":
            return [{k: v for k, v in j.items() if "iterations" not in k} for j in self.run.jobs]
        if table == "shared_links":
            return [dict(link) for link in self.run.shared_links]
        raise ValueError(f"no table {table!r}; tables: {', '.join(TABLES)}")

    def to_dataframe(self, table: str = "ranks") -> pandas.DataFrame:
        """`records(table)` as a pandas DataFrame (install the extra: pip install 'astra-hetero[pandas]')."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "Result.to_dataframe needs pandas, an optional dependency: "
                "pip install 'astra-hetero[pandas]' (or use Result.records(), plain dicts)"
            ) from None
        rows = self.records(table)
        columns = None if rows else _columns(table)
        return pandas.DataFrame.from_records(rows, columns=columns)


def simulate(
    spec: Spec | SharedClusterSpec | str | Path | dict[str, Any],
    backend: str = "embedded",
    workdir: str | Path | None = None,
    *,
    timeline: str = "auto",
    force: bool = False,
    **options: Any,
) -> Result:
    """Build `spec` into a run directory and simulate it on `backend` (embedded, analytical,
    analytical-unaware, ns3), as `astra-hetero run SPEC -o DIR` does. `workdir` is the run directory
    to write (kept, with trace.json and the logs); without one the run uses a temporary directory
    that is removed afterwards. `options` go to the backend (e.g. iterations=3, fold=False,
    bin_dir=..., timeout_s=...)."""
    from astra_hetero.pipeline import run_spec

    spec = load_spec(spec)
    if workdir is not None:
        run_spec(spec, Path(workdir), backend, timeline, force=force, **options)
        return _read(Path(workdir), keep=True)
    with tempfile.TemporaryDirectory(prefix="astra-hetero-") as scratch:
        run_dir = Path(scratch) / "run"
        run_spec(spec, run_dir, backend, "none", **options)
        return _read(run_dir, keep=False)


def _read(run_dir: Path, keep: bool) -> Result:
    from astra_hetero.results.io import read_result

    return Result(read_result(run_dir), read_facts(run_dir), run_dir if keep else None)


@dataclass(frozen=True)
class Plan:
    """A plan search's answer: the fastest plan as a complete spec, every plan simulated (fastest
    first, as plans.csv lists them), and the search's own report."""

    best_spec: Spec | SharedClusterSpec  # with `search.job`: the whole shared cluster's
    plans: list[dict[str, Any]]
    report: PlanReport

    @property
    def best_time_us(self) -> float:
        return float(self.plans[0]["iteration_time_us"])

    def to_dataframe(self) -> pandas.DataFrame:
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "Plan.to_dataframe needs pandas, an optional dependency: pip install 'astra-hetero[pandas]'"
            ) from None
        return pandas.DataFrame.from_records(self.plans)


def plan(
    spec: Spec | SharedClusterSpec | str | Path | dict[str, Any],
    search: dict[str, Any] | None = None,
    *,
    jobs: int = 1,
    time_budget_s: float | None = None,
    cache: str | Path | None = None,
    out: str | Path | None = None,
) -> Plan:
    """Search the parallel plan and device mapping, as `astra-hetero plan` does. `search` is the
    `search:` section (a spec file's own is used when this is None); `cache` a directory of simulated
    plans to reuse (default: none); `out` also writes best.yaml, plans.csv, report.md and figures."""
    from astra_hetero.jobs.load import parse_run_spec
    from astra_hetero.planner.cache import PlanCache
    from astra_hetero.planner.driver import find_plans
    from astra_hetero.planner.outputs import best_spec_data, write_outputs
    from astra_hetero.planner.problem import problem_from_data
    from astra_hetero.planner.table import plan_rows
    from astra_hetero.spec.load import read_spec_data

    source = Path(spec) if isinstance(spec, str | Path) else None
    data = read_spec_data(source) if source is not None else _spec_data(spec)
    if search is not None:
        data = {**data, "search": search}
    problem = problem_from_data(data, source)
    report = find_plans(problem, jobs=jobs, time_budget_s=time_budget_s, cache=PlanCache(cache))
    best = parse_run_spec(best_spec_data(report))  # raises InfeasiblePlan when nothing ran
    if out is not None:
        write_outputs(report, Path(out))
    return Plan(best, [dict(row.values) for row in plan_rows(report)], report)


def _spec_data(spec: Any) -> dict[str, Any]:
    from astra_hetero.spec.schema import Spec
    from astra_hetero.spec.schema.jobs import SharedClusterSpec

    if isinstance(spec, Spec | SharedClusterSpec):
        return spec.model_dump(mode="json")
    if isinstance(spec, dict):
        return dict(spec)
    raise SpecError("", f"expected a spec, a spec file's path or a mapping, not {type(spec).__name__}")


def _columns(table: str) -> list[str] | None:
    from dataclasses import fields

    from astra_hetero.results.model import CollectiveStat, RankResult

    if table == "ranks":
        return [f.name for f in fields(RankResult)]
    if table == "collectives":
        return [*(f.name for f in fields(CollectiveStat)), "duration_us"]
    return None
