"""Search the parallel plan of a small mixed cluster and check the answer by simulating it.

Run it as a script (`python examples/notebooks/search_a_plan.py`); it takes a few seconds: the search
is narrowed to TP 4 and one set of options, so only the pipeline depth, the mapping of node groups to
pipeline stages and the layer and micro-batch splits are searched.
"""

# %% The spec: its cluster, model and global batch; the planner chooses the rest
from pathlib import Path

import astra_hetero as ah

HERE = Path(__file__).resolve().parent
spec = ah.load_spec(HERE.parent / "dynamics_nic_flap.yaml").with_(dynamics=[], iterations=1)
search = {
    "tp": 4,
    "micro_batch_size": 1,
    "schedule": "1f1b",
    "sequence_parallel": False,
    "recompute": "none",
    "distributed_optimizer": False,
    "max_simulations": 12,
    "baseline": False,
    "refine_top": 0,
}

# %% Search, then list the plans it simulated, fastest first
found = ah.plan(spec, search=search)
for row in found.plans[:5]:
    print(
        f"#{row['rank']} tp{row['tp']}·pp{row['pp']}·dp{row['dp']}  {row['mapping']:<32} "
        f"{row['iteration_time_us'] / 1e3:8.2f} ms"
    )

# %% The best plan is a complete spec: simulate it again and compare with the spec as written
best = ah.simulate(found.best_spec)
written = ah.simulate(spec)
print(f"best plan {best.iteration_time_us / 1e3:.2f} ms;", end=" ")
print(f"the spec's own plan {written.iteration_time_us / 1e3:.2f} ms")
