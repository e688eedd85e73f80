"""One case per input edge of the CLI: a valid input, one mutation, the command that reads it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.bases import DATA, Bases, import_options
from tests.fuzz.judge import Outcome, invoke, judge
from tests.fuzz.mutations import (
    Mutation,
    mutate,
    mutate_bytes,
    mutate_csv,
    mutate_file,
    mutate_nccl,
    mutate_yaml_text,
    write_yaml,
)


@dataclass(frozen=True)
class Case:
    """One CLI call on a mutated input, with what judging it needs."""

    argv: list[str]
    outputs: list[Path]
    results: list[Path]
    names: tuple[str, ...]
    what: str
    point_failures: bool = False  # a sweep or study (see `judge`)


def _copy(source: Path, work: Path, name: str) -> Path:
    import shutil

    target = work / name
    shutil.copytree(source, target, symlinks=True)
    return target


def spec_case(command: str, bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec with one field mutated (or two), given to `command` (build, run, topology)."""
    seed = rng.choice(sorted(bases.seeds))
    data, mutation = mutate(bases.seeds[seed], rng)
    if rng.random() < 0.25 and isinstance(data, dict):
        data, second = mutate(data, rng)
        mutation = Mutation(f"{mutation.what}; {second.what}", mutation.names + second.names)
    spec = work / "spec.yaml"
    write_yaml(spec, data)
    out = work / "out"
    argv = [command, str(spec), "-o", str(out)]
    if command != "plan" and command != "topology":
        argv.append("--quiet")
    names = (*mutation.names, "spec.yaml")
    return Case(argv, [out], [out / "result.json"], names, f"{seed}: {mutation.what}")


def spec_bytes_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec file damaged on disk (truncated, garbage bytes, not UTF-8, YAML that means something
    else), given to `build`."""
    import yaml

    seed = rng.choice(sorted(bases.seeds))
    text = yaml.safe_dump(bases.seeds[seed]).encode()
    if rng.random() < 0.5:
        changed, what = mutate_yaml_text(text.decode(), rng)
        damaged = changed.encode()
    else:
        damaged, what = mutate_bytes(text, rng)
    spec = work / "spec.yaml"
    spec.write_bytes(damaged)
    out = work / "out"
    return Case(["build", str(spec), "-o", str(out), "--quiet"], [out], [], ("spec.yaml",), f"{seed}: {what}")


def _pick_file(root: Path, rng: random.Random, skip: tuple[str, ...] = ()) -> Path:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not any(s in p.name for s in skip))
    return rng.choice(files)


def run_dir_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A built run directory with one of its files damaged, given to `run` (embedded backend)."""
    dcqcn = rng.random() < 0.3
    run_dir = _copy(bases.run_dir(finished=False, dcqcn=dcqcn), work, "run")
    if dcqcn and rng.random() < 0.5:  # what only this link model reads
        path = run_dir / "ns3" / "config.txt"
    else:
        path = _pick_file(run_dir, rng, skip=(".astra-hetero",))
    what = mutate_file(path, rng)
    rel = str(path.relative_to(run_dir))
    return Case(
        ["run", str(run_dir), "--quiet"],
        [run_dir],
        [run_dir / "result.json"],
        (rel, path.name, path.parent.name),
        f"{rel}: {what}",
    )


def report_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A finished run directory with its result damaged, given to `report`."""
    run_dir = _copy(bases.run_dir(finished=True), work, "run")
    path = run_dir / rng.choice(["result.json", "result.json", "manifest.json", "trace.json"])
    what = mutate_file(path, rng)
    out = work / "report"
    return Case(
        ["report", str(run_dir), "-o", str(out), "--no-plots"],
        [out],
        [out / "report.json"],
        (path.name, "run"),
        f"{path.name}: {what}",
    )


def import_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """An ASTRA-sim study with one input damaged, given to `import`."""
    study = _copy(bases.study(), work, "study")
    path = _pick_file(study, rng, skip=("README",))
    what = mutate_file(path, rng)
    out = work / "out"
    return Case(
        ["import", "-o", str(out), *import_options(study)],
        [out],
        [],
        (path.name, path.stem),
        f"{path.name}: {what}",
    )


def overlay_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A heterogeneity overlay with one field mutated, laid over an imported study by `run`."""
    imported = _copy(bases.imported(), work, "imported")
    overlay = {
        "npu_groups": [{"npus": "0-1", "gpu": "h100-sxm"}, {"npus": "2-3", "compute_factor": 0.5}],
        "links": [{"npus": "2-3", "bandwidth_factor": 0.25}, {"npus": 1, "dimension": 0, "gbps": 100}],
        "dynamics": [
            {"event": "device_slowdown", "npus": "0-1", "factor": 0.7, "start_ms": 0, "end_ms": 1},
            {"event": "jitter", "sigma": 0.05, "seed": 7},
        ],
        "iterations": 2,
    }
    data, mutation = mutate(overlay, rng)
    path = work / "hetero.yaml"
    write_yaml(path, data)
    out = work / "out"
    return Case(
        ["run", str(imported), "--hetero", str(path), "-o", str(out), "--quiet"],
        [out, imported],
        [out / "result.json"],
        (*mutation.names, "hetero.yaml"),
        mutation.what,
    )


def _tiny_base() -> dict[str, Any]:
    from tests.test_pipeline import small_spec

    return {**small_spec(), "scope": {"layers_per_stage": 1, "micro_batches_per_replica": 1}}


def sweep_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A sweep file with one field mutated, given to `sweep`."""
    sweep = {
        "name": "fuzz",
        "base": _tiny_base(),
        "grid": {"cluster.node_groups[0].nic.gbps": [100, 400], "parallelism.tp": [1, 2]},
    }
    return _mutated_batch_case("sweep", sweep, work, rng)


def study_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A study file with one field mutated, given to `study`."""
    study = {
        "name": "fuzz",
        "title": "NIC speed",
        "base": _tiny_base(),
        "axes": {"nic": {"path": "cluster.node_groups[0].nic.gbps", "values": [100, 400]}},
        "derived": [
            {"name": "speedup", "of": "iteration_time_us", "kind": "ratio", "relative_to": {"nic": 100}}
        ],
        "tables": [{"title": "iteration", "rows": ["nic"], "values": ["iteration_time_us", "speedup"]}],
        "figures": [{"name": "it", "title": "t", "kind": "line", "x": "nic", "y": ["iteration_time_us"]}],
    }
    return _mutated_batch_case("study", study, work, rng)


def _mutated_batch_case(command: str, document: dict, work: Path, rng: random.Random) -> Case:
    """`document` (a sweep or study file) with one field mutated, written as <command>.yaml and given to
    `command`; a point that fails alone is allowed (exit 1), as sweeps and studies document."""
    data, mutation = mutate(document, rng)
    name = f"{command}.yaml"
    path = work / name
    write_yaml(path, data)
    out = work / "out"
    return Case(
        [command, str(path), "-o", str(out), "--quiet"],
        [out],
        [],
        (*mutation.names, name),
        mutation.what,
        point_failures=True,
    )


def measured_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec whose calibration CSV or nccl-tests output is damaged, given to `run`."""
    import shutil

    data = {**bases.seeds["small"]}
    if rng.random() < 0.5:
        table = work / "cal.csv"
        table.write_text(
            "gpu,op,time_us,tp,seq_len\nh100-sxm,qkv_proj.fwd,12,2,256\nh100-sxm,mlp_up.fwd,30,2,256\n"
        )
        data["calibration"] = "cal.csv"
        what = mutate_csv(table, rng)
    else:
        table = work / "nccl.txt"
        shutil.copy(DATA / "nccl_tests" / "all_reduce_perf_8xh100.txt", table)
        data["collectives"] = {"nccl_tests": {"intra_node": "nccl.txt"}}
        what = mutate_nccl(table, rng)
    spec = work / "spec.yaml"
    write_yaml(spec, data)
    out = work / "out"
    return Case(
        ["run", str(spec), "-o", str(out), "--quiet"],
        [out],
        [out / "result.json"],
        (table.name,),
        f"{table.name}: {what}",
    )


def plan_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A plan-search spec (`search:`) with one field mutated, given to `plan` (a few simulations)."""
    from tests.test_pipeline import small_spec

    data = {**small_spec(), "scope": {"layers_per_stage": 1, "micro_batches_per_replica": 1}}
    data["parallelism"] = {"global_batch_size": 4}
    data["search"] = {"tp": [1, 2], "micro_batch_size": [1], "max_simulations": 3}
    data, mutation = mutate(data, rng)
    spec = work / "spec.yaml"
    write_yaml(spec, data)
    out = work / "out"
    return Case(
        ["plan", str(spec), "-o", str(out), "--no-plots", "--no-cache", "--jobs", "1", "--quiet"],
        [out],
        [out / "search.json"],
        (*mutation.names, "spec.yaml"),
        mutation.what,
    )


TARGETS: dict[str, Any] = {
    "spec-build": lambda b, w, r: spec_case("build", b, w, r),
    "spec-run": lambda b, w, r: spec_case("run", b, w, r),
    "spec-topology": lambda b, w, r: spec_case("topology", b, w, r),
    "spec-bytes": spec_bytes_case,
    "spec-plan": plan_case,
    "run-dir": run_dir_case,
    "report": report_case,
    "import": import_case,
    "overlay": overlay_case,
    "sweep": sweep_case,
    "study": study_case,
    "measured": measured_case,
}


def check(target: str, bases: Bases, work: Path, rng: random.Random) -> tuple[Case, Outcome, list[str]]:
    """Make one case of `target` in the empty directory `work`, run it, and judge it."""
    case = TARGETS[target](bases, work, rng)
    outcome = invoke(case.argv, case.outputs, case.results)
    return case, outcome, judge(outcome, case.names, case.point_failures)
