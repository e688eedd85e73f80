"""Model FLOPs of one training iteration and the peak they are measured against: the inputs of the
throughput figures (tokens/s, model TFLOP/s per GPU, MFU) every result states.

Model FLOPs are the FLOPs the model needs, not those the GPUs run: recomputation is not counted, so
a run with full recomputation has the same model FLOPs as one without. The count is Megatron-LM's
`num_floating_point_operations` (megatron/training/training.py, 2024; Narayanan et al., SC'21,
appendix "Floating-point operations"), the figure Megatron-LM and NeMo print as "TFLOP/s/GPU":
per token,

    12 · l · h² · [ (1 + g/a + s/h) · (a·d/h) + (f/h) · m ] + 6 · h · V

with l layers, hidden size h, a query heads of size d, g key/value heads, sequence length s, FFN
size f (m = 3/2 for a gated SwiGLU MLP, 1 otherwise) and vocabulary V; with mixture-of-experts, f is
the FFN width a token passes through, (top_k + shared_experts) · expert_ffn_size, as Megatron-LM counts
the experts a token is routed to (the router's own GEMM is left out, as there): every GEMM three times
(forward, input gradient, weight gradient) at 2 FLOPs per multiply-add, attention scores over the
full s × s matrix (PaLM, Chowdhury et al. 2022, appendix B, counts them the same way), the LM head,
no norms, activations or embedding lookups.

MFU = model FLOPs / (iteration time × Σ over the cluster's GPUs of each GPU's dense peak at the
compute precision): a heterogeneous cluster is measured against the sum of its peaks, and GPUs the
plan leaves idle count (they are part of the cluster the job holds).
"""

from __future__ import annotations

from typing import Any

from astra_hetero.spec.schema import GpuSpec, ModelSpec, Spec

FORMULA = "megatron-lm num_floating_point_operations (full s x s attention, no recomputation)"


def model_flops_per_token(model: ModelSpec) -> float:
    h, a, g, s = model.hidden_size, model.num_heads, model.num_kv_heads, model.seq_len
    query_ratio = a * model.head_width / h
    gated = 1.5 if model.activation == "swiglu" else 1.0
    attention = (1 + g / a + s / h) * query_ratio
    moe = model.moe
    ffn = model.ffn_size if moe is None else (moe.top_k + moe.shared_experts) * moe.expert_ffn_size
    mlp = ffn / h * gated
    return 12.0 * model.num_layers * h * h * (attention + mlp) + 6.0 * h * model.vocab_size


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """The GPU's dense peak at the compute precision (its datasheet figure, not an achievable rate)."""
    peak = gpu.matmul_tflops(precision)
    return peak if peak is not None else gpu.bf16_tflops  # the spec refuses a format the GPU lacks


def throughput_record(spec: Spec) -> dict[str, Any]:
    """manifest.json's `throughput` entry: what a result needs to state tokens/s, TFLOP/s and MFU, or
    the reason it cannot."""
    if spec.scope is not None:
        return {"unavailable": "the run directory simulates a cut-down iteration (`scope`)"}
    tokens = spec.parallelism.global_batch_size * spec.model.seq_len
    precision = spec.precision.compute
    gpus: dict[str, dict[str, float]] = {}
    for group in spec.cluster.node_groups:
        peak = peak_tflops(group.gpu, precision)
        entry = gpus.setdefault(group.gpu.type_key, {"count": 0, "peak_tflops": peak})
        entry["count"] += group.num_gpus
    return {
        "formula": FORMULA,
        "compute_precision": precision,
        "model_flops_per_iteration": model_flops_per_token(spec.model) * tokens,
        "tokens_per_iteration": tokens,
        "gpus": gpus,
    }
