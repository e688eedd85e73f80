"""Experts placed on a subset of the cluster (`mapping.experts`): only the GPUs of the named node groups
hold routed experts; the other ranks of an expert group route their tokens there and hold none.

In a heterogeneous cluster this puts the experts (most of a MoE model's weights and of its FLOPs per
token) on the GPUs with the memory and speed for them, while attention and the dense parts stay
spread over every GPU. Each expert group then has h holders of num_experts / h experts each; a holder
processes the top-k copies of all ep ranks' tokens over h (ep/h times its own share), a non-holder
none. The all-to-all is uneven — holders receive, the others only send — and is written, like the
routing imbalance, as an even all-to-all of a holder's volume: the exchange then takes as long as a
holder's receiving does on a symmetric fabric (a named approximation in the results).

Restrictions (each a field error): a MoE model with the all-to-all dispatcher, ep > 1, etp = 1, and the
same holder positions in every expert group (so that the ranks holding the same experts line up for
the expert gradient reduction), num_experts divisible by the holders of a group.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.errors import SpecError
from astra_hetero.spec.devices import Device
from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.workload.layout import Layout


@dataclass(frozen=True)
class ExpertPlacement:
    hosts: int  # ranks of an expert group that hold experts
    holders: frozenset[int]  # every rank that holds experts

    def holds(self, rank: int) -> bool:
        return rank in self.holders


def expert_placement(spec: Spec, layout: Layout) -> ExpertPlacement | None:
    """Where `mapping.experts` puts the experts; None when every rank holds its share."""
    names = spec.mapping.experts
    if names is None:
        return None
    par, num_experts = spec.parallelism, _check_fields(spec, names)
    holders = frozenset(
        d.rank
        for d, place in zip(layout.devices, layout.placements, strict=True)
        if place and d.group_name in names
    )
    pattern: tuple[bool, ...] | None = None
    for stage in range(par.pp):
        for members in ep_groups(layout.stage_ranks(stage), par):
            mask = tuple(rank in holders for rank in members)
            if pattern is None:
                pattern = mask
            elif mask != pattern:
                raise SpecError(
                    "mapping.experts",
                    f"the expert groups hold experts at different positions ({_positions(pattern)} in one, "
                    f"{_positions(mask)} in another); map the node groups so that every expert group "
                    "draws its holders from the same replicas",
                )
    hosts = sum(pattern or ())
    if hosts == 0:
        raise SpecError("mapping.experts", f"no expert group has a GPU of {', '.join(names)}")
    if num_experts % hosts:
        raise SpecError(
            "mapping.experts",
            f"{num_experts} experts cannot be split evenly over the {hosts} GPUs of an expert group "
            f"in {', '.join(names)}",
        )
    return ExpertPlacement(hosts, holders)


def ep_groups(stage_ranks: list[int], par: ParallelismSpec) -> list[list[int]]:
    """A stage's EP groups with etp = 1: consecutive blocks of ep ranks in Megatron-core's order."""
    return [stage_ranks[i : i + par.ep] for i in range(0, len(stage_ranks), par.ep)]


def block_key(device: Device, placement: ExpertPlacement | None) -> str:
    """What a rank's timed blocks are keyed by: its GPU type, and whether it holds experts."""
    if placement is None or placement.holds(device.rank):
        return device.gpu_type
    return f"{device.gpu_type} without experts"


def _check_fields(spec: Spec, names: list[str]) -> int:
    """The model's expert count, once the fields allow placing experts."""
    par = spec.parallelism
    known = spec.cluster.group_names
    for i, name in enumerate(names):
        if name not in known:
            raise SpecError(
                f"mapping.experts[{i}]", f"unknown node group {name!r}; known: {', '.join(known)}"
            )
    if spec.model.moe is None:
        raise SpecError("mapping.experts", "needs a mixture-of-experts model (model.moe)")
    for field, ok, why in (
        ("ep", par.ep > 1, "needs ep > 1 (experts spread over an expert group)"),
        ("etp", par.expert_tp == 1, "placing experts is modelled for etp = 1"),
        ("moe_token_dispatcher", par.moe_token_dispatcher == "alltoall", "needs the all-to-all dispatcher"),
    ):
        if not ok:
            raise SpecError(f"parallelism.{field}", f"mapping.experts {why}")
    return spec.model.moe.num_experts


def _positions(mask: tuple[bool, ...] | None) -> str:
    return "positions " + ", ".join(str(i) for i, held in enumerate(mask or ()) if held)
