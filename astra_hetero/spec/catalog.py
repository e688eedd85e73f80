"""Hardware and model catalogs: YAML data loaded into frozen records (a new GPU needs no code)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class GpuRecord:
    key: str
    name: str
    bf16_tflops: float
    hbm_tbps: float
    memory_gib: float
    compute_efficiency: float
    memory_efficiency: float
    architecture: str
    num_sms: int
    boost_clock_mhz: float
    sustained_fraction: float
    kernel_overhead_us: float
    attention_fwd_efficiency: float
    attention_bwd_efficiency: float
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    tf32_tflops: float | None = None
    fp32_tflops: float | None = None
    fp8_efficiency: float | None = None
    tf32_efficiency: float | None = None
    fp32_efficiency: float | None = None
    tdp_w: float | None = None


@dataclass(frozen=True)
class FabricRecord:
    key: str
    name: str
    kind: str
    gbytes_per_s: float
    latency_ns: float


@dataclass(frozen=True)
class ModelRecord:
    key: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_size: int
    activation: str
    vocab_size: int
    seq_len: int
    norm: str
    tied_embeddings: bool
    learned_position_embeddings: bool
    rope: bool = False
    attention_window: Any = None  # validated by the model schema
    head_dim: int | None = None  # only where it differs from hidden_size / num_heads
    moe: dict[str, Any] | None = None  # the model's `moe` section, for mixture-of-experts models


def _load(name: str) -> dict[str, dict[str, Any]]:
    text = resources.files("astra_hetero.spec").joinpath("catalog", name).read_text()
    return yaml.safe_load(text)


@cache
def gpu_catalog() -> dict[str, GpuRecord]:
    return {k: GpuRecord(key=k, **v) for k, v in _load("gpus.yaml").items()}


@cache
def fabric_catalog() -> dict[str, FabricRecord]:
    return {k: FabricRecord(key=k, **v) for k, v in _load("fabrics.yaml").items()}


@cache
def model_catalog() -> dict[str, ModelRecord]:
    return {k: ModelRecord(key=k, **v) for k, v in _load("models.yaml").items()}


def normalize_key(name: str) -> str:
    """Preset names are matched case-insensitively, with '_' and ' ' treated as '-'."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")
