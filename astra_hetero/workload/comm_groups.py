"""The comm groups of a job, as Megatron-core's parallel_state forms its process groups.

TP within a CP rank of a cell; CP across a cell's CP ranks of one TP index; the data-parallel gradient
group over every replica's CP ranks of one TP index (DP×CP); the tied-embedding pairs of the first and
last stage; and a MoE model's expert groups, formed per stage over its ranks in Megatron-core's order
(replica, CP index, TP index): expert TP innermost, then EP, then expert data parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.workload.layout import Layout


@dataclass(frozen=True)
class CommGroup:
    id: str
    kind: str  # "tp" | "dp" | "embedding" | "cp" | "ep" | "etp" | "edp" | "moe"
    ranks: tuple[int, ...]
    stage: int | None = None
    replica: int | None = None
    tp_index: int | None = None
    cp_index: int | None = None


def comm_groups(spec: Spec, layout: Layout) -> list[CommGroup]:
    """Megatron-core's process groups: TP within a CP rank of a cell, CP across a cell's CP ranks, the
    data-parallel gradient group over replicas and CP ranks (DP×CP), and the expert groups."""
    par = spec.parallelism
    groups: list[CommGroup] = []

    def add(kind: str, ranks: list[int], **where: int) -> None:
        if len(ranks) > 1:
            groups.append(CommGroup(str(len(groups) + 1), kind, tuple(ranks), **where))

    for stage in range(par.pp):
        for replica in range(par.dp):
            for cp_index in range(par.cp):
                tp_ranks = [layout.rank_of(stage, replica, t, cp_index) for t in range(par.tp)]
                add(
                    "tp",
                    tp_ranks,
                    stage=stage,
                    replica=replica,
                    **({"cp_index": cp_index} if par.cp > 1 else {}),
                )
    for stage in range(par.pp):
        for replica in range(par.dp):
            for tp_index in range(par.tp):
                cp_ranks = [layout.rank_of(stage, replica, tp_index, c) for c in range(par.cp)]
                add("cp", cp_ranks, stage=stage, replica=replica, tp_index=tp_index)
    for stage in range(par.pp):
        for tp_index in range(par.tp):
            add(
                "dp",
                [layout.rank_of(stage, r, tp_index, c) for r in range(par.dp) for c in range(par.cp)],
                stage=stage,
                tp_index=tp_index,
            )
    if spec.model.moe is not None:
        for stage in range(par.pp):
            for kind, members in expert_groups(layout.stage_ranks(stage), par):
                add(kind, members, stage=stage)
    if spec.model.tied_embeddings and par.pp > 1:
        for replica in range(par.dp):
            for cp_index in range(par.cp):
                for tp_index in range(par.tp):
                    add(
                        "embedding",
                        [
                            layout.rank_of(0, replica, tp_index, cp_index),
                            layout.rank_of(par.pp - 1, replica, tp_index, cp_index),
                        ],
                        replica=replica,
                        tp_index=tp_index,
                    )
    return groups


def expert_groups(stage_ranks: list[int], par: ParallelismSpec) -> list[tuple[str, list[int]]]:
    """The expert groups of one stage, from its ranks in Megatron-core's order (replica, CP, TP):
    expert TP innermost, then EP, then expert data parallelism (megatron/core/parallel_state.py's
    expert rank generator). "moe" is the ep·etp group the all-gather dispatcher gathers over."""
    etp, ep = par.expert_tp, par.ep
    edp = len(stage_ranks) // (etp * ep)

    def at(t: int, e: int, d: int) -> int:
        return stage_ranks[(d * ep + e) * etp + t]

    found: list[tuple[str, list[int]]] = []
    found += [("etp", [at(t, e, d) for t in range(etp)]) for d in range(edp) for e in range(ep)]
    found += [("ep", [at(t, e, d) for e in range(ep)]) for d in range(edp) for t in range(etp)]
    found += [("edp", [at(t, e, d) for d in range(edp)]) for e in range(ep) for t in range(etp)]
    if par.moe_token_dispatcher == "allgather":
        found += [("moe", [at(t, e, d) for e in range(ep) for t in range(etp)]) for d in range(edp)]
    return found
