"""Derive the kernel catalog's memory-bound figures (astra_hetero/spec/catalog/kernels.yaml) from the
calibration rows of benchmarks/data/operators/vidur_ops.csv — Llama-2-7B's only; the other models' rows
are the validation set of benchmarks/operators.py and are never read here.

Per GPU and kernel kind the model is `fixed + max(bytes / rate(bytes), waves × ceil(row / 1024) × row_us)`
(waves: of the row kernel's blocks, as many at once as the SMs hold) with
rate = l2_fraction × streaming rate for bytes within the architecture's L2-resident size and
dram_fraction × streaming rate above it (workload/kernels.py). The figures are chosen together,
exhaustively on a grid, to minimise the mean absolute relative error over the kind's calibration rows
(the row kinds share the activation's fixed cost: see below); the L2-resident size is the candidate
(MiB, up to the datasheet L2: A100 40, H100 50) with the least error over all kinds.

    python benchmarks/kernel_catalog_fit.py [--calibration MODEL]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operators import GPUS, _memory_ops, _rows  # noqa: E402

from astra_hetero.spec.schema import GpuSpec  # noqa: E402
from astra_hetero.workload.kernels import KIND_OF, KernelKind  # noqa: E402

L2_CANDIDATES_MIB = {"a100": (8, 12, 16, 20, 24, 28, 32, 40), "h100": (8, 16, 20, 24, 28, 32, 40, 50)}
ROW_KINDS = {"norm", "activation", "rope"}
GRIDS = {
    "fixed": [x / 4 for x in range(0, 33)],
    "dram": [x / 100 for x in range(5, 131)],
    "l2": [x / 100 for x in range(5, 251)],
    "row": [x / 50 for x in range(0, 76)],
}


STREAM = [0.0]  # bytes per microsecond of the GPU being fitted
DRAM_CAP = [1.0]  # the largest DRAM fraction of the streaming rate: 1 / memory_efficiency


def fit(samples, l2_bytes: float, row: bool, fixed: float | None = None) -> tuple[dict[str, float], float]:
    """Exhaustive over (fixed, row_us); for each, the L2 and DRAM rates are separable (each row is
    one or the other by its bytes) and chosen exactly on their grids with l2 >= dram (data found in
    L2 is never slower than from DRAM)."""
    nbytes = np.array([b for b, _, _ in samples])
    steps = np.array([s for _, s, _ in samples], dtype=float)
    measured = np.array([m for _, _, m in samples])
    in_l2 = nbytes <= l2_bytes
    dram_grid, l2_grid = np.array(GRIDS["dram"]), np.array(GRIDS["l2"])
    # nothing streams from DRAM faster than the datasheet's rate: hbm_tbps = streaming / memory_efficiency
    dram_grid = dram_grid[dram_grid <= DRAM_CAP[0] + 1e-9]
    best: tuple[float, dict[str, float]] = (np.inf, {})
    for f in GRIDS["fixed"] if fixed is None else [fixed]:
        for r in GRIDS["row"] if row else [0.0]:
            chain = steps * r

            def errors(
                grid: np.ndarray, mask: np.ndarray, f: float = f, chain: np.ndarray = chain
            ) -> np.ndarray:
                stream = nbytes[mask][None, :] / (grid[:, None] * STREAM[0])
                time = f + np.maximum(stream, chain[mask][None, :])
                return np.abs(time / measured[mask][None, :] - 1).sum(axis=1)

            e_dram, e_l2 = errors(dram_grid, ~in_l2), errors(l2_grid, in_l2)
            # for each DRAM rate, the best L2 rate at least as fast
            for i, d in enumerate(dram_grid):
                allowed = l2_grid >= d - 1e-12
                j = int(np.argmin(np.where(allowed, e_l2, np.inf)))
                total = (e_dram[i] + e_l2[j]) / len(samples)
                if total < best[0] - 1e-12:
                    best = (total, {"fixed": f, "dram": float(d), "l2": float(l2_grid[j]), "row": r})
    return best[1], best[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", default="Llama-2-7b-hf")
    args = parser.parse_args()
    for gpu_key, preset in GPUS.items():
        gpu = GpuSpec.model_validate({"preset": preset})
        STREAM[0] = gpu.effective_bytes_per_ns * 1e3
        DRAM_CAP[0] = 1.0 / gpu.memory_efficiency
        samples: dict[str, list[tuple[float, int, float]]] = {}
        for r in _rows():
            if r["gpu"] != gpu_key or r["model"] != args.calibration:
                continue
            for column, name, op in _memory_ops(r):
                if r[column]:
                    # the chain in units of row_us: steps per row times waves of blocks
                    kind = KernelKind(None, 0.0, row_us=1.0)
                    steps = kind.row_chain_us(op.row_elements, op.rows, gpu.num_sms)
                    samples.setdefault(KIND_OF[name], []).append((op.bytes, steps, float(r[column])))
        results = {}
        for l2_mib in L2_CANDIDATES_MIB[gpu_key]:
            # the activation's rows vary the row length (TP shards the FFN), so they separate the
            # fixed cost from the row chain; a norm's row (the hidden size) is one length in the
            # calibration rows, so the norm and the rotary embedding — launched the same way,
            # one block per token — take the activation's fixed cost and fit only their chain
            fits = {"activation": fit(samples["activation"], l2_mib * 2**20, True)}
            shared = fits["activation"][0]["fixed"]
            for k, s in samples.items():
                if k != "activation":
                    fits[k] = fit(s, l2_mib * 2**20, k in ROW_KINDS, shared if k in ROW_KINDS else None)
            rows = sum(len(s) for s in samples.values())
            results[l2_mib] = (sum(err * len(samples[k]) for k, (_, err) in fits.items()) / rows, fits)
        l2_mib = min(results, key=lambda m: results[m][0])
        print(f"{gpu_key} ({gpu.architecture}): streaming rate {STREAM[0] / 1e6:.2f} TB/s")
        for m, (err, _) in sorted(results.items()):
            print(
                f"  l2_resident_mib {m:>3}: calibration MAPE {err:.1%}"
                + ("  <- chosen" if m == l2_mib else "")
            )
        for kind, (p, err) in sorted(results[l2_mib][1].items()):
            print(
                f"  {kind:<12} fixed_us {p['fixed']:.2f}  bandwidth_fraction {p['dram']:.2f}  "
                f"l2_bandwidth_fraction {p['l2']:.2f}  row_us {p['row']:.2f}   MAPE {err:.1%}"
            )


if __name__ == "__main__":
    main()
