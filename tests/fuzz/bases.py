"""The valid inputs every fuzz target starts from, made once per session and copied for each case."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

from astra_hetero.cli.main import main

DATA = Path(__file__).parents[1] / "data"
REPO = Path(__file__).parents[2]


def small_seeds() -> dict[str, dict[str, Any]]:
    """Valid specs that build and run in a fraction of a second, each with a feature switched on."""
    from tests.conftest import node_group
    from tests.test_pipeline import small_spec

    base = small_spec()
    scope = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
    mixed = small_spec()
    mixed["cluster"] = {
        "node_groups": [
            node_group("h100", "h100-sxm", count=1, nic=400),
            node_group("a100", "a100-80", count=1, fabric="nvlink3", nic={"gbps": 200}),
        ]
    }
    mixed["mapping"] = {"stages": ["h100", "a100"]}
    mixed["partition"] = {"layers": [3, 1], "micro_batches": "uniform"}
    moe = small_spec()
    moe["model"] = {**moe["model"], "moe": {"num_experts": 4, "top_k": 2, "expert_ffn_size": 1024}}
    moe["parallelism"] = {"tp": 1, "pp": 2, "dp": 4, "ep": 2, "global_batch_size": 8}
    cp = small_spec()
    cp["parallelism"] = {"tp": 2, "cp": 2, "pp": 1, "dp": 2, "global_batch_size": 4}
    dynamics = {
        **small_spec(),
        "iterations": 2,
        "dynamics": [
            {
                "event": "link_rate",
                "node_group": "h100",
                "node": 0,
                "kind": "nic",
                "factor": 0.5,
                "start_ms": 1,
                "end_ms": 3,
            },
            {
                "event": "device_slowdown",
                "node_group": "h100",
                "node": 1,
                "factor": 0.7,
                "start_ms": 0,
                "end_ms": 2,
            },
            {"event": "jitter", "sigma": 0.05, "seed": 7},
        ],
    }
    precision = {**small_spec(), "precision": {"compute": "fp8"}, "compute": {"framework": "fsdp"}}
    return {
        "small": base,
        "mixed": {**mixed, "scope": scope},
        "moe": moe,
        "cp": cp,
        "dynamics": dynamics,
        "precision": precision,
    }


def example_seeds() -> dict[str, dict[str, Any]]:
    """The shipped example specs (with their includes made absolute), for the standalone fuzzer."""
    import yaml

    seeds = {}
    for path in sorted((REPO / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or "model" not in data and "jobs" not in data:
            continue
        if isinstance(data.get("include"), str):
            data["include"] = str((path.parent / data["include"]).resolve())
        seeds[path.stem] = data
    return seeds


class Bases:
    """Valid inputs the targets start from, made once under `root` and copied for each case."""

    def __init__(self, root: Path, seeds: dict[str, dict[str, Any]] | None = None) -> None:
        self.root = root
        self.seeds = seeds if seeds is not None else small_seeds()
        self._made: dict[str, Path] = {}

    def _once(self, name: str, make: Any) -> Path:
        if name not in self._made:
            path = self.root / "bases" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.redirect_stdout(io.StringIO()):  # the summary of a run: not the fuzzer's
                make(path)
            self._made[name] = path
        return self._made[name]

    def run_dir(self, finished: bool, dcqcn: bool = False) -> Path:
        """The small spec built (or also run) into a run directory; `dcqcn`: under the DCQCN link
        model, which reads ns3/config.txt."""
        import yaml

        def make(path: Path) -> None:
            data = copy.deepcopy(self.seeds["small"])
            if dcqcn:
                data["network"]["link_model"] = "dcqcn"
                data["scope"] = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
            spec = path.parent / f"{path.name}.yaml"
            spec.write_text(yaml.safe_dump(data))
            command = "run" if finished else "build"
            assert main([command, str(spec), "-o", str(path), "--quiet"]) == 0

        name = ("finished" if finished else "built") + ("-dcqcn" if dcqcn else "")
        return self._once(name, make)

    def study(self) -> Path:
        """ASTRA-sim's 4-NPU all-reduce traces with a ring network and a system file."""

        def make(path: Path) -> None:
            import shutil

            from tests.importer.studies import SYSTEM, ring_network

            shutil.copytree(DATA / "astrasim_studies" / "all_reduce_4npus_1MB", path)
            (path / "system.json").write_text(json.dumps(SYSTEM))
            (path / "network.yml").write_text(ring_network(4))
            (path / "groups.json").write_text(json.dumps({"1": [0, 1, 2, 3]}))
            (path / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))

        return self._once("study", make)

    def imported(self) -> Path:
        def make(path: Path) -> None:
            study = self.study()
            assert main(["import", "-o", str(path), *import_options(study)]) == 0

        return self._once("imported", make)


def import_options(study: Path) -> list[str]:
    return [
        "--workload-configuration", str(study / "all_reduce"),
        "--system-configuration", str(study / "system.json"),
        "--network-configuration", str(study / "network.yml"),
        "--remote-memory-configuration", str(study / "memory.json"),
        "--comm-group-configuration", str(study / "groups.json"),
    ]  # fmt: skip
