"""Simulate one spec, edit it, and compare: the Python API as a notebook would use it.

Run it as a script (`python examples/notebooks/simulate_and_compare.py`) or paste the cells into a
notebook. It takes a few seconds: a 16-GPU mixed H100/A100 cluster, one training iteration.
"""

# %% Load a spec and simulate it (a temporary run directory, removed afterwards)
from pathlib import Path

import astra_hetero as ah

HERE = Path(__file__).resolve().parent
spec = ah.load_spec(HERE.parent / "dynamics_nic_flap.yaml").with_(dynamics=[], iterations=1)
result = ah.simulate(spec)
print(result.summary())

# %% The same cluster with the data-parallel gradients reduced in FP32 or not, side by side
variants = {
    "fp32 grads": spec,
    "bf16 grads": spec.with_(parallelism={"grad_reduce_in_fp32": False}),
}
for name, variant in variants.items():
    run = ah.simulate(variant)
    tokens = run.throughput["tokens_per_s"] if run.throughput else float("nan")
    print(f"{name:>11}: {run.iteration_time_us / 1e3:8.2f} ms per iteration, {tokens:,.0f} tokens/s")

# %% Per-rank figures as a table: a pandas DataFrame with the `[pandas]` extra, else plain records
try:
    ranks = result.to_dataframe("ranks")
    print(ranks.groupby("gpu")[["compute_us", "exposed_comm_us", "idle_us"]].mean().round(1))
except ImportError as missing:
    print(missing)
    for row in result.records("ranks")[:4]:
        print(row)
