"""Properties over generated specs and run directories (hypothesis).

For any plausible spec, and any spec with one number or value replaced by an extreme one, the CLI
either exits 0 with a sane result (finite, non-negative times that add up) or exits 2 with one line
naming the field, never a traceback and never an output directory without a result. Metamorphic
checks: a slower GPU, NIC, fabric or more latency never makes the iteration faster; two node groups
with different overrides never compute alike.

Example counts are modest and derandomized (see tests/conftest.py) so the suite stays fast and
deterministic; HYPOTHESIS_PROFILE=explore searches far more widely.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from astra_hetero.bounds import WorkLimits, check_work
from astra_hetero.cli.main import main
from astra_hetero.errors import AstraHeteroError, FieldError
from astra_hetero.pipeline import run_spec
from astra_hetero.results.io import read_result
from astra_hetero.spec import parse_spec
from astra_hetero.topology import checked_graph
from astra_hetero.workload.generate import plan_workload
from tests.conftest import budget

GPUS = ["h100-sxm", "a100-80", "a100-40", "l40s", "v100", "mi300x"]
FABRICS = ["nvlink4", "nvlink3", "pcie4", "pcie5"]
EXTREMES: list[Any] = [
    math.inf,
    -math.inf,
    math.nan,
    1e300,
    1e-300,
    -1,
    0,
    True,
    False,
    "fast",
    10**30,
    2**63,
    [],
    {},
    None,
    "1" * 500,
]
# A field path is letters, digits, dots and [indices]; a file's message names the file instead.
FIELD_MESSAGE = re.compile(r"^error: ([A-Za-z_][\w.\[\]]*|[^:]*\.(yaml|json|csv|txt|et)[^:]*): \S")


@st.composite
def gpu_specs(draw: st.DrawFn) -> Any:
    preset = draw(st.sampled_from(GPUS))
    if draw(st.booleans()):
        return preset
    overrides = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "compute_multiplier": st.floats(0.1, 4.0),
                "compute_efficiency": st.floats(0.05, 1.0),
                "memory_efficiency": st.floats(0.05, 1.0),
                "bf16_tflops": st.floats(10.0, 3000.0),
            },
        )
    )
    return {"preset": preset, **({"name": f"custom-{preset}"} if overrides else {}), **overrides}


@st.composite
def plausible_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Small specs of every shape the schema allows, mostly consistent, sometimes not."""
    gpus_per_node = draw(st.sampled_from([1, 2, 4]))
    groups = [
        {
            "name": f"g{i}",
            "count": draw(st.integers(1, 2)),
            "gpus_per_node": gpus_per_node,
            "gpu": draw(gpu_specs()),
            "intra_node_fabric": draw(st.sampled_from(FABRICS)),
            "nic": draw(st.sampled_from([100, 200, 400, "400G", {"gbps": 200, "count": 1}, {"gbps": 50.5}])),
        }
        for i in range(draw(st.integers(1, 2)))
    ]
    world = sum(g["count"] * gpus_per_node for g in groups)
    tp = draw(st.sampled_from([d for d in (1, 2, 4) if gpus_per_node % d == 0]))
    pp = draw(st.sampled_from([d for d in (1, 2, 4) if (world // tp) % d == 0]))
    dp = world // (tp * pp)
    micro_batches = dp * draw(st.integers(1, 3))
    parallelism = {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "global_batch_size": micro_batches,
        "schedule": draw(st.sampled_from(["1f1b", "gpipe"])),
        "sequence_parallel": tp > 1 and draw(st.booleans()),
        "recompute": draw(st.sampled_from(["none", "selective", "full", "selective_op"])),
        "distributed_optimizer": draw(st.booleans()),
    }
    heads = draw(st.sampled_from([4, 8]))
    model = {
        "num_layers": draw(st.integers(pp, pp + 3)),
        "hidden_size": heads * 32,
        "num_heads": heads,
        "num_kv_heads": heads,
        "ffn_size": heads * 128,
        "activation": draw(st.sampled_from(["gelu", "swiglu"])),
        "vocab_size": 1024,
        "seq_len": draw(st.sampled_from([64, 128])),
    }
    network = {
        "topology": draw(st.sampled_from(["single_switch", "spine_leaf", "rail_optimized"])),
        "nodes_per_leaf": draw(st.integers(1, 2)),
        "link_latency_ns": draw(st.floats(0, 5000)),
    }
    collectives = {"algorithm": draw(st.sampled_from(["ring", "hierarchical"]))}
    return {
        "name": "prop",
        "model": model,
        "cluster": {"node_groups": groups},
        "network": network,
        "parallelism": parallelism,
        "collectives": collectives,
    }


def paths_of(data: Any, prefix: str = "") -> list[str]:
    """Every leaf path in the spec data, as `a.b[1].c`."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in paths_of(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in paths_of(v, f"{prefix}[{i}]")]
    return [prefix]


def set_leaf(data: dict[str, Any], path: str, value: Any) -> None:
    steps = [int(s) if s.isdigit() else s for s in re.findall(r"[^.\[\]]+", path)]
    node: Any = data
    for step in steps[:-1]:
        node = node[step]
    node[steps[-1]] = value


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(plausible_specs())
    if draw(st.booleans()):
        set_leaf(data, draw(st.sampled_from(paths_of(data))), draw(st.sampled_from(EXTREMES)))
    return data


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def assert_sane(result) -> None:
    assert math.isfinite(result.iteration_time_us) and result.iteration_time_us > 0
    for rank in result.ranks:
        times = (rank.finish_us, rank.compute_us, rank.exposed_comm_us, rank.idle_us)
        assert all(math.isfinite(t) and t >= 0 for t in times), rank
        assert rank.finish_us <= result.iteration_time_us + 1e-6
        assert rank.compute_us + rank.exposed_comm_us + rank.idle_us == pytest.approx(
            result.iteration_time_us, abs=1e-3
        )


def assert_one_line_naming_a_field(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert FIELD_MESSAGE.match(err), err


@settings(max_examples=budget(60))
@given(mutated_specs())
def test_every_spec_is_built_or_refused_with_a_field(data):
    """The library path: validation, work bounds, workload plan and network graph."""
    try:
        spec = parse_spec(data)
        check_work(spec, WorkLimits())
        plan_workload(spec)
        checked_graph(spec)
    except AstraHeteroError as exc:
        assert exc.exit_code == 2
        assert not isinstance(exc, FieldError) or exc.field or "spec" in str(exc)


@settings(max_examples=budget(15), suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
def test_the_cli_runs_a_spec_to_a_sane_result_or_refuses_it_in_one_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        spec, out = Path(tmp) / "spec.yaml", Path(tmp) / "run"
        spec.write_text(yaml.safe_dump(data))
        code, err = run_cli(["run", str(spec), "-o", str(out), "--quiet", "--timeline", "none"])
        if code == 0:
            assert_sane(read_result(out))
        else:
            assert_one_line_naming_a_field(code, err)
            assert not out.exists()


def base_spec(gpu: Any, nic: float, latency: float) -> dict[str, Any]:
    """Two nodes of four GPUs, TP2·PP2·DP2: small but with every kind of communication."""
    group = {
        "name": "g0",
        "count": 2,
        "gpus_per_node": 4,
        "gpu": gpu,
        "intra_node_fabric": "nvlink4",
        "nic": nic,
    }
    return {
        "model": {
            "num_layers": 4,
            "hidden_size": 256,
            "num_heads": 8,
            "num_kv_heads": 8,
            "ffn_size": 1024,
            "activation": "gelu",
            "vocab_size": 1024,
            "seq_len": 128,
        },
        "cluster": {"node_groups": [group]},
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 1, "link_latency_ns": latency},
        "parallelism": {"tp": 2, "pp": 2, "dp": 2, "global_batch_size": 4},
    }


def iteration_us(data: dict[str, Any], out: Path) -> float:
    return run_spec(parse_spec(data), out, timeline="none").iteration_time_us


@settings(max_examples=budget(12), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    gpu=st.sampled_from(["h100-sxm", "a100-80"]),
    nic=st.sampled_from([25, 100, 400]),
    latency=st.floats(0, 2000),
    slower=st.sampled_from(["compute_multiplier", "nic", "latency", "fabric"]),
    factor=st.floats(1.1, 8.0),
)
def test_slower_hardware_never_makes_the_iteration_faster(
    tmp_path_factory, gpu, nic, latency, slower, factor
):
    base = base_spec(gpu, nic, latency)
    slow = base_spec(gpu, nic, latency)
    group = slow["cluster"]["node_groups"][0]
    if slower == "compute_multiplier":
        group["gpu"] = {"preset": gpu, "name": "slower", "compute_multiplier": 1 / factor}
    elif slower == "nic":
        group["nic"] = nic / factor
    elif slower == "latency":
        slow["network"]["link_latency_ns"] = latency + 1000 * factor
    else:
        group["intra_node_fabric"] = {"preset": "nvlink4", "gbytes_per_s": 450 / factor}
    tmp = tmp_path_factory.mktemp("metamorphic")
    assert iteration_us(slow, tmp / "slow") >= iteration_us(base, tmp / "base") * (1 - 1e-9)


@settings(max_examples=budget(4), phases=[Phase.explicit, Phase.generate])
@given(
    field=st.sampled_from(["compute_multiplier", "compute_efficiency", "memory_efficiency", "bf16_tflops"]),
    scale=st.floats(0.2, 0.7),
)
def test_two_groups_with_different_overrides_never_compute_alike(tmp_path_factory, field, scale):
    data = base_spec("h100-sxm", 400, 500)
    # kernels long next to their launches: a model as tiny as base_spec's is bound by the host's kernel
    # launches (compute.framework), on which a GPU's own numbers have no say
    data["model"] = {**data["model"], "hidden_size": 2048, "ffn_size": 8192, "seq_len": 2048}
    fast = data["cluster"]["node_groups"][0]
    fast["count"] = 1
    slow_gpu = {
        "preset": "h100-sxm",
        "name": "tuned-h100",
        field: scale * (989.0 if field == "bf16_tflops" else 1),
    }
    data["cluster"]["node_groups"].append({**fast, "name": "g1", "gpu": slow_gpu})
    data["mapping"] = {"replicas": ["g0", "g1"]}
    tmp = tmp_path_factory.mktemp("overrides")
    run_spec(parse_spec(data), tmp / "run", timeline="none")
    result = read_result(tmp / "run")
    by_replica = {r: [x.compute_us for x in result.ranks if x.replica == r] for r in (0, 1)}
    assert min(by_replica[1]) > max(by_replica[0])


# --- run directories: what this package reads and writes around the engine ---------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    run_spec(parse_spec(base_spec("h100-sxm", 400, 500)), out)
    return out


def copy_of(run: Path, into: Path) -> Path:
    import shutil

    shutil.copytree(run, into, symlinks=True)
    return into


@settings(max_examples=budget(25))
@given(
    key=st.sampled_from(["iteration_time_us", "ranks", "collectives", "backend", "meta", "warnings"]),
    rank_key=st.sampled_from(["rank", "gpu", "stage", "finish_us", "compute_us", "idle_us", None]),
    value=JSON_VALUES,
)
def test_report_reads_any_result_file_to_a_report_or_one_line(finished_run, key, rank_key, value):
    with tempfile.TemporaryDirectory() as tmp:
        run = copy_of(finished_run, Path(tmp) / "run")
        data = json.loads((run / "result.json").read_text())
        if rank_key is None:
            data[key] = value
        else:
            data["ranks"][0][rank_key] = value
        (run / "result.json").write_text(json.dumps(data))
        code, err = run_cli(["report", str(run), "--no-plots"])
        if code != 0:
            assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
            assert not (run / "report").exists()


@settings(max_examples=budget(15))
@given(
    prefix=st.one_of(
        st.sampled_from(
            ["../..", "../workload/workload", "/etc/passwd", "workload/../../x", "", ".", "workload"]
        ),
        st.text(alphabet="./abw", max_size=12),
    ),
    marker=st.one_of(st.none(), JSON_VALUES),
)
def test_a_tampered_manifest_or_marker_never_leads_reads_or_writes_outside(finished_run, prefix, marker):
    with tempfile.TemporaryDirectory() as tmp:
        outside = Path(tmp) / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("untouched")
        run = copy_of(finished_run, outside / "nested" / "run")
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["workload_prefix"] = prefix
        (run / "manifest.json").write_text(json.dumps(manifest))
        if marker is not None:
            (run / ".astra-hetero.json").write_text(
                json.dumps({"format": "astra-hetero/output@1", "parts": marker})
            )
        code, err = run_cli(["run", str(run), "--quiet", "--timeline", "none"])
        assert (outside / "keep.txt").read_text() == "untouched"
        if code == 0:
            resolved = (run / prefix).resolve()
            assert resolved == run.resolve() or run.resolve() in resolved.parents
            assert_sane(read_result(run))
        else:
            assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
