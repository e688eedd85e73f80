"""The model's mixture-of-experts section: routed experts replacing the dense MLP of every layer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.types import ModelDim, real, whole

ExpertCount = whole(2, 100_000)
TopK = whole(1, 1_000)
SharedExperts = whole(0, 1_000)
CapacityFactor = real(1.0, 1e3)
Share = real(1e-9, 1.0)
Concentration = real(1e-3, 1e3)
Seed = whole(0, 2**32 - 1)


class ImbalanceDistribution(Strict):
    """Per-expert token shares drawn once from a distribution (seeded, so a spec means one run):
    `dirichlet` with a concentration (small = skewed, large = even), or `zipf` with an exponent whose
    ranks are assigned to experts in an order shuffled by the seed."""

    distribution: Literal["dirichlet", "zipf"]
    concentration: Concentration = Field(1.0, description="dirichlet: the concentration of every expert")
    exponent: Concentration = Field(1.0, description="zipf: share of the i-th busiest ∝ 1 / i^exponent")
    seed: Seed = 0


class MoeSpec(Strict):
    """Routed experts in every transformer layer (Megatron-core's MoE layer): a router picks `top_k`
    of `num_experts` expert MLPs per token; `shared_experts` dense experts see every token."""

    num_experts: ExpertCount
    top_k: TopK
    expert_ffn_size: ModelDim = Field(description="inner width of one expert MLP (moe_intermediate_size)")
    shared_experts: SharedExperts = Field(
        0, description="experts of expert_ffn_size every token passes through (DeepSeek's shared experts)"
    )
    capacity_factor: CapacityFactor | None = Field(
        None,
        description="tokens an expert takes at most, as a multiple of its even share (the rest are "
        "dropped); None = dropless (Megatron-core's default)",
    )
    router: Literal["softmax", "sigmoid"] = Field(
        "softmax",
        description="score function before the top-k (Mixtral, Qwen3: softmax; DeepSeek-V3: sigmoid)",
    )
    imbalance: Share | ImbalanceDistribution | None = Field(
        None,
        description="routing imbalance: the busiest expert's share of the routed tokens (1/num_experts "
        "= balanced, at most 1/top_k), or a seeded distribution of shares; None = balanced",
    )

    @model_validator(mode="after")
    def _sizes(self) -> MoeSpec:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k {self.top_k} exceeds num_experts {self.num_experts}")
        if isinstance(self.imbalance, float):
            low, high = 1 / self.num_experts, 1 / self.top_k
            if not low - 1e-12 <= self.imbalance <= high + 1e-12:
                raise ValueError(
                    f"imbalance {self.imbalance:g} is the busiest expert's share of the routed tokens: "
                    f"between 1/num_experts = {low:.4g} (balanced) and 1/top_k = {high:.4g} (every "
                    "token picks it)"
                )
        return self
