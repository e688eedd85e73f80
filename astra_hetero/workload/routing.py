"""How unevenly a MoE router spreads tokens over the expert-parallel ranks.

Every EP rank holds num_experts / ep consecutive experts (Megatron-core's placement). The combine
all-to-all waits for every rank's experts, so a layer goes at the pace of the *busiest* rank; the
generator therefore gives every rank the busiest rank's expert work and all-to-all volume, which keeps
the ranks alike (their traces fold) and the layer's time right where the fabric is symmetric. This is
an approximation, named as such in the run's warnings: the other ranks idle in reality where here they
compute, and an uneven all-to-all is charged as an even one of the busiest rank's volume.

- `imbalance: <share>`: the busiest expert gets that share of the routed tokens, the others share the
  rest evenly;
- `imbalance: {distribution: dirichlet | zipf, ...}`: per-expert shares drawn once (seeded);
- `capacity_factor`: no expert takes more than that multiple of its even share (the rest are dropped),
  and no expert more than one copy of every token (a share of 1/top_k).
"""

from __future__ import annotations

import numpy as np

from astra_hetero.spec.schema.moe import ImbalanceDistribution, MoeSpec


def expert_shares(moe: MoeSpec) -> np.ndarray:
    """Each expert's share of the routed tokens (summing to 1 before capacity drops)."""
    n = moe.num_experts
    if moe.imbalance is None:
        shares = np.full(n, 1.0 / n)
    elif isinstance(moe.imbalance, ImbalanceDistribution):
        shares = _drawn(moe.imbalance, n)
    else:
        busiest = moe.imbalance
        shares = np.full(n, (1.0 - busiest) / (n - 1))
        shares[0] = busiest
    return _capped(shares, 1.0 / moe.top_k)


def _drawn(spec: ImbalanceDistribution, n: int) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    if spec.distribution == "dirichlet":
        return rng.dirichlet(np.full(n, spec.concentration))
    weights = 1.0 / np.arange(1, n + 1) ** spec.exponent
    return rng.permutation(weights / weights.sum())


def _capped(shares: np.ndarray, cap: float) -> np.ndarray:
    """No expert above `cap`: the excess goes to the others in proportion to their shares (a token
    picks top_k distinct experts, so one expert sees at most every token once)."""
    shares = shares.copy()
    for _ in range(len(shares)):
        over = shares > cap + 1e-15
        if not over.any():
            break
        excess = float((shares[over] - cap).sum())
        shares[over] = cap
        room = ~over & (shares < cap)
        shares[room] += excess * shares[room] / shares[room].sum()
    return shares


def busiest_load(moe: MoeSpec, ep: int) -> float:
    """The busiest EP rank's routed tokens over the even share 1/ep (1 = balanced), after capacity
    drops (which can take it below 1: dropped tokens are work not done)."""
    shares = expert_shares(moe)
    if moe.capacity_factor is not None:
        shares = np.minimum(shares, moe.capacity_factor / moe.num_experts)
    per_rank = shares.reshape(ep, moe.num_experts // ep).sum(axis=1)
    return round(float(per_rank.max()) * ep, 12)  # below 1 only where capacity drops tokens
