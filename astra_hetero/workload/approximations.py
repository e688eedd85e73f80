"""What a workload prices approximately, said once in the manifest and carried into every result.

Each line names the approximation and its size, so that a result built on it is never read as more
exact than it is (results turn them into `approximation: ` warnings)."""

from __future__ import annotations

from astra_hetero.spec.schema import Spec
from astra_hetero.workload.routing import busiest_load

# catalog presets that stand for a model the operator set cannot express exactly
SHAPED_PRESETS = {
    "deepseek-v3-shaped": "its multi-head latent attention is priced as grouped-query attention (128 heads "
    "of 128, 8 KV heads) and its three dense layers as MoE layers (see the model catalog)",
}


def workload_approximations(spec: Spec) -> list[str]:
    notes = []
    model, par = spec.model, spec.parallelism
    if model.preset in SHAPED_PRESETS:
        notes.append(f"model {model.preset}: {SHAPED_PRESETS[model.preset]}")
    if model.moe is not None and model.moe.imbalance is not None and par.ep > 1:
        load = busiest_load(model.moe, par.ep)
        notes.append(
            f"MoE routing imbalance: every rank of an expert group computes and exchanges as much as the "
            f"busiest one ({load:.3g}× its even share of the tokens), which paces the group"
        )
    if model.moe is not None and spec.mapping.experts:
        notes.append(
            "experts on " + ", ".join(spec.mapping.experts) + ": the uneven all-to-all (the other ranks "
            "only send to the holders) is written as an even one of a holder's receive volume"
        )
    return notes
