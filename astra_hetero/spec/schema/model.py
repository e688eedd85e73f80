"""The model section: a decoder-only transformer, from a catalog preset or spelled out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from astra_hetero.spec.catalog import model_catalog
from astra_hetero.spec.schema.base import Strict, _merge_preset
from astra_hetero.spec.types import (
    ModelDim,
    SmallCount,
)


class ModelSpec(Strict):
    """A decoder-only transformer; `preset` names one of the catalog's models."""

    preset: str | None = Field(None, description="catalog model, e.g. gpt3-175b, llama2-70b")
    num_layers: SmallCount
    hidden_size: ModelDim
    num_heads: ModelDim
    num_kv_heads: ModelDim
    ffn_size: ModelDim
    activation: Literal["gelu", "swiglu"]
    vocab_size: ModelDim
    seq_len: ModelDim
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    tied_embeddings: bool = False
    learned_position_embeddings: bool = False

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, model_catalog(), "model")

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads
