"""The model section: a decoder-only transformer, from a catalog preset or spelled out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from astra_hetero.spec.catalog import model_catalog
from astra_hetero.spec.schema.base import Strict, _merge_preset
from astra_hetero.spec.schema.moe import MoeSpec
from astra_hetero.spec.types import (
    ModelDim,
    SmallCount,
)

LayerAttention = Literal["local", "global"]


class AttentionWindow(Strict):
    """Local (sliding-window) attention: a query attends the `tokens` most recent keys, itself
    included. `pattern` repeats over the layers, layer i taking pattern[i % len(pattern)]: ["local"]
    (the default) makes every layer local (Mistral 7B: 4096), ["global", "local"] alternates full and
    local layers from the first (GPT-Neo: 256). An integer is the every-layer shorthand."""

    tokens: ModelDim = Field(description="keys a query attends, itself included")
    pattern: list[LayerAttention] = Field(
        default_factory=lambda: ["local"], min_length=1, description="per-layer kinds, repeated"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError("expected a window size in tokens or {tokens, pattern}")
        return {"tokens": data} if isinstance(data, int) else data

    def is_local(self, layer: int) -> bool:
        return self.pattern[layer % len(self.pattern)] == "local"


class ModelSpec(Strict):
    """A decoder-only transformer; `preset` names one of the catalog's models."""

    preset: str | None = Field(None, description="catalog model, e.g. gpt3-175b, llama2-70b")
    num_layers: SmallCount
    hidden_size: ModelDim
    num_heads: ModelDim
    num_kv_heads: ModelDim
    ffn_size: ModelDim
    activation: Literal["gelu", "swiglu", "squared_relu"] = Field(
        description="MLP: gelu (GPT, with biases), swiglu (LLaMA, gated, three matrices) or "
        "squared_relu (Nemotron-4: relu(x)², two matrices, no biases)"
    )
    vocab_size: ModelDim
    seq_len: ModelDim
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    tied_embeddings: bool = False
    learned_position_embeddings: bool = False
    rope: bool = Field(False, description="rotary position embeddings applied to Q and K in every layer")
    attention_window: AttentionWindow | None = Field(
        None, description="sliding-window attention (None: every layer attends its whole causal past)"
    )
    head_dim: ModelDim | None = Field(
        None,
        description="width of one attention head (kv_channels); None = hidden_size / num_heads. Qwen3 "
        "and Gemma set it apart, so that num_heads · head_dim may differ from hidden_size",
    )
    moe: MoeSpec | None = Field(None, description="mixture of experts in place of every layer's MLP")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        merged = _merge_preset(data, model_catalog(), "model")
        if isinstance(data, dict) and data.get("preset") is not None and isinstance(data.get("moe"), dict):
            # a preset's MoE section is merged key by key: `moe: {imbalance: 0.3}` keeps its experts
            preset_moe = vars(model_catalog()[merged["preset"]]).get("moe") or {}
            merged = {**merged, "moe": {**preset_moe, **data["moe"]}}
        return merged

    @model_validator(mode="after")
    def _positions(self) -> ModelSpec:
        if self.rope and self.learned_position_embeddings:
            raise ValueError("give rope or learned_position_embeddings, not both")
        return self

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        if self.head_dim is None and self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        return self

    @property
    def head_width(self) -> int:
        """Width of one head: `head_dim`, or hidden_size / num_heads when the spec leaves it out."""
        return self.head_dim or self.hidden_size // self.num_heads

    def window_of(self, layer: int) -> int:
        """Keys a query of `layer` attends at most (0: its whole causal past)."""
        w = self.attention_window
        return w.tokens if w is not None and w.is_local(layer) else 0

    @property
    def layer_windows(self) -> tuple[int, ...]:
        """The distinct windows of the model's layers, in order of first appearance (0: global)."""
        return tuple(dict.fromkeys(self.window_of(i) for i in range(self.num_layers)))
