"""The embedded engine's NCCL-like model against published nccl-tests bus bandwidths, and its cost.

Part 1 builds each cluster from a spec (the same topology builder `run` uses), asks the NCCL model
for one all-reduce of the published size alone on the network, and prints the model's bus bandwidth
next to the measured one (busbw = 2(n-1)/n · S / t, nccl-tests' definition). Every measured row names
its source; none of the model's constants were fitted to them (nccl.yaml cites NCCL's own tables,
RCCL, Calculon). Then every whole public sweep shipped in benchmarks/data/nccl_sweeps/ (Vidur's MIT
profiling tables, stas00/ml-engineering's sweeps) against the model: the MAPE of the time per size band
(< 64 KiB, 64 KiB-1 MiB, 1-16 MiB, >= 16 MiB) and its signed mean (negative: the model is too fast).
Three of nccl.yaml's measured corrections come from rows printed here (the A100 and H200 sweeps of
ml-engineering for the step latencies, Vidur's 8-rank A100 table for the intra-node floor): those rows
calibrate, the others validate. Part 2 times the embedded engine on a generated example with the ideal
model and with the NCCL model, one after the other in this process (figures are noisy on a shared
machine: compare the ratio).

    python benchmarks/nccl_model.py [--no-engine] [-v]
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import tempfile
import time
from pathlib import Path

from astra_hetero import rundir
from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.comm_inputs import CommInputs
from astra_hetero.backends.embedded.rundir.topology import read_topology
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.topology import write_topology

ROOT = Path(__file__).resolve().parents[1]
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
ML_ENG = "stas00/ml-engineering"
B200 = {
    "name": "B200",
    "bf16_tflops": 2250,
    "hbm_tbps": 8,
    "memory_gib": 180,
    "compute_efficiency": 0.7,
    "memory_efficiency": 0.85,
    "architecture": "blackwell",
}
NVLINK5 = {"name": "NVLink 5", "kind": "nvlink", "gbytes_per_s": 900, "latency_ns": 500}
EFA_16X200 = {"gbps": 200, "count": 16}  # 400 GB/s of network per node

# (label, gpu, fabric, nic, nodes, bytes, measured busbw GB/s, source)
PUBLISHED = [
    (
        "8x A100 all-reduce",
        "a100-80",
        "nvlink3",
        200,
        1,
        16 * GiB,
        235.0,
        f"{ML_ENG} network/README.md (nccl-tests, 'A100 node ... 235GBps')",
    ),
    *[
        (
            f"8x H200 all-reduce {label}",
            "h200",
            "nvlink4",
            400,
            1,
            size,
            busbw,
            f"{ML_ENG} network/benchmarks/README.md (nccl-tests column, NCCL 2.30.7)",
        )
        for label, size, busbw in (
            ("32 KiB", 32 * KiB, 3.20),
            ("1 MiB", MiB, 72.45),
            ("16 MiB", 16 * MiB, 242.45),
            ("256 MiB", 256 * MiB, 442.27),
            ("16 GiB", 16 * GiB, 480.70),
        )
    ],
    (
        "2x8 H200 all-reduce",
        "h200",
        "nvlink4",
        EFA_16X200,
        2,
        16 * GiB,
        486.80,
        f"{ML_ENG} TODO.md (2 nodes)",
    ),
    (
        "4x8 H200 all-reduce",
        "h200",
        "nvlink4",
        EFA_16X200,
        4,
        16 * GiB,
        369.06,
        f"{ML_ENG} TODO.md (4 nodes)",
    ),
    (
        "8x B200 all-reduce",
        B200,
        NVLINK5,
        EFA_16X200,
        1,
        16 * GiB,
        838.97,
        f"{ML_ENG} network/benchmarks/README.md (1 node)",
    ),
    (
        "4x8 B200 all-reduce",
        B200,
        NVLINK5,
        EFA_16X200,
        4,
        16 * GiB,
        376.71,
        f"{ML_ENG} network/benchmarks/README.md (4 nodes)",
    ),
]


def _spec(gpu, fabric, nic, nodes: int, per_node: int = 8):
    group = {
        "name": "g",
        "count": nodes,
        "gpus_per_node": per_node,
        "gpu": gpu,
        "intra_node_fabric": fabric,
        "nic": nic,
    }
    return parse_spec(
        {
            "model": "llama2-7b",
            "cluster": {"node_groups": [group]},
            "network": {"topology": "single_switch"},
            "parallelism": {"dp": per_node * nodes, "global_batch_size": per_node * nodes},
        }
    )


@functools.cache
def _planner(gpu, fabric, nic, nodes: int, per_node: int) -> tuple[NcclCommPlanner, int]:
    spec = _spec(_thaw(gpu), _thaw(fabric), _thaw(nic), nodes, per_node)
    with tempfile.TemporaryDirectory() as tmp:
        write_topology(spec, Path(tmp))
        topology = read_topology(Path(tmp) / rundir.NS3_TOPOLOGY)
        kinds = json.loads((Path(tmp) / rundir.NS3_LINK_KINDS).read_text())["kinds"]
    devices = enumerate_devices(spec.cluster)
    comm = CommInputs(
        "nccl",
        "auto",
        "auto",
        tuple(kinds),
        tuple(d.spec.gpu.architecture for d in devices),
        tuple(d.group_name for d in devices),
    )
    return NcclCommPlanner(Router(topology), [d.node for d in devices], comm), len(devices)


def _freeze(value):
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _thaw(value):
    return dict(value) if isinstance(value, tuple) else value


def model_time_us(gpu, fabric, nic, nodes: int, size: int, per_node: int = 8) -> tuple[float, str]:
    """The NCCL model's time for one all-reduce of `size` bytes over every GPU, and its choice."""
    planner, n = _planner(_freeze(gpu), _freeze(fabric), _freeze(nic), nodes, per_node)
    members = tuple(range(n))
    (phase,) = planner.collective(members, "all_reduce", size)
    time_ns = phase.latency_ns + size * phase.bytes_fraction / phase.solo_rate
    algorithm, protocol = planner.choice(members, "all_reduce", size)
    return time_ns / 1000, f"{algorithm}/{protocol}"


def model_busbw(gpu, fabric, nic, nodes: int, size: int, per_node: int = 8) -> tuple[float, str]:
    """The NCCL model's bus bandwidth for one all-reduce of `size` bytes over every GPU, and its choice."""
    n = nodes * per_node
    time_us, choice = model_time_us(gpu, fabric, nic, nodes, size, per_node)
    return 2 * (n - 1) / n * size / (1000 * time_us), choice


def accuracy() -> None:
    print(f"{'case':<28} {'bytes':>12} {'measured':>9} {'model':>9} {'error':>7}  choice          source")
    errors = []
    for label, gpu, fabric, nic, nodes, size, measured, source in PUBLISHED:
        busbw, choice = model_busbw(gpu, fabric, nic, nodes, size)
        errors.append(busbw / measured - 1)
        row = f"{label:<28} {size:>12} {measured:>9.2f} {busbw:>9.2f} {errors[-1]:>+7.1%}"
        print(f"{row}  {choice:<15} {source}")
    mape = sum(abs(e) for e in errors) / len(errors)
    large = [abs(e) for e, row in zip(errors, PUBLISHED, strict=True) if row[5] >= 16 * MiB]
    print(
        f"bus bandwidth MAPE: {mape:.1%} over {len(errors)} rows; {sum(large) / len(large):.1%} at >= 16 MiB"
    )


# --- whole public sweeps, per size band -------------------------------------------------------------
SWEEPS = ROOT / "benchmarks" / "data" / "nccl_sweeps"
BANDS = (
    (0, 64 * KiB, "< 64 KiB"),
    (64 * KiB, MiB, "64 KiB-1 MiB"),
    (MiB, 16 * MiB, "1-16 MiB"),
    (16 * MiB, 1 << 62, ">= 16 MiB"),
)
# system in the sweep files -> (gpu, intra-node fabric, NIC per GPU), as the spec names them
SYSTEMS = {
    "a100_dgx": ("a100-80", "nvlink3", 200),
    "a100_node": ("a100-80", "nvlink3", 200),
    "h100_dgx": ("h100-sxm", "nvlink4", 400),
    "h200_node": ("h200", "nvlink4", EFA_16X200),
    "b200_node": (B200, NVLINK5, {"gbps": 400, "count": 8}),
    "b200_4nodes": (B200, NVLINK5, {"gbps": 400, "count": 8}),
}


def sweep_rows() -> list[tuple[str, str, int, int, int, float]]:
    """(set, system, nodes, ranks per node, bytes, measured time us) of every public sweep we ship."""
    rows = []
    with open(SWEEPS / "vidur_allreduce.csv") as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            per_node = int(r["ranks_per_node"])
            nodes = int(r["num_ranks"]) // per_node
            rows.append(("vidur", r["system"], nodes, per_node, int(r["bytes"]), float(r["time_us"])))
    with open(SWEEPS / "ml_engineering_allreduce.csv") as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            nodes, per_node, size = int(r["num_nodes"]), int(r["ranks_per_node"]), int(r["bytes"])
            n = nodes * per_node
            time_us = 2 * (n - 1) / n * size / (1000 * float(r["busbw_gbs"]))
            rows.append(("ml-engineering", r["system"], nodes, per_node, size, time_us))
    return rows


def sweeps(verbose: bool) -> None:
    """Every shipped sweep against the model: MAPE of the time per size band and sweep."""
    errors: dict[tuple[str, str], dict[str, list[float]]] = {}
    for source, system, nodes, per_node, size, measured in sweep_rows():
        gpu, fabric, nic = SYSTEMS[system]
        model, choice = model_time_us(gpu, fabric, nic, nodes, size, per_node)
        error = model / measured - 1
        band = next(label for low, high, label in BANDS if low <= size < high)
        key = (source, f"{system} {nodes}x{per_node}")
        errors.setdefault(key, {}).setdefault(band, []).append(error)
        if verbose:
            print(f"  {key[1]:<18} {size:>12} {measured:>10.1f} {model:>10.1f} {error:>+7.1%} {choice}")
    labels = [label for _, _, label in BANDS]
    print(
        f"{'source':<15} {'sweep':<18} "
        + " ".join(f"{b:>14}" for b in labels)
        + "   (time MAPE, signed mean)"
    )
    everything: dict[str, list[float]] = {}
    for (source, sweep), bands in errors.items():
        cells = []
        for band in labels:
            values = bands.get(band, [])
            everything.setdefault(band, []).extend(values)
            cells.append(_cell(values))
        print(f"{source:<15} {sweep:<18} " + " ".join(cells))
    print(f"{'all sweeps':<34} " + " ".join(_cell(everything.get(b, [])) for b in labels))


def _cell(values: list[float]) -> str:
    if not values:
        return f"{'-':>14}"
    mape = sum(abs(v) for v in values) / len(values)
    return f"{mape:>6.1%} ({sum(values) / len(values):>+5.0%})"


def engine_cost(example: str) -> None:
    from astra_hetero.backends.embedded.backend import EmbeddedBackend
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import load_spec

    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("ideal", "nccl"):
            collectives = spec.collectives.model_copy(update={"model": model})
            run = build_run_dir(spec.model_copy(update={"collectives": collectives}), Path(tmp) / model).root
            start = time.perf_counter()
            result = EmbeddedBackend(timeline=False).run(run).result
            figures[model] = (time.perf_counter() - start, result.iteration_time_us / 1000)
    (ideal_s, ideal_ms), (nccl_s, nccl_ms) = figures["ideal"], figures["nccl"]
    print(
        f"{example}: ideal {ideal_s:.2f} s wall ({ideal_ms:.1f} ms iteration), nccl {nccl_s:.2f} s wall "
        f"({nccl_ms:.1f} ms iteration); wall ratio nccl/ideal {nccl_s / ideal_s:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-engine", action="store_true", help="skip the engine timing")
    parser.add_argument("--example", default="gpt3_175b_128gpu_h100")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every sweep row")
    args = parser.parse_args()
    accuracy()
    print()
    sweeps(args.verbose)
    if not args.no_engine:
        engine_cost(args.example)


if __name__ == "__main__":
    main()
