"""Time the cost model's operators with PyTorch kernels (the `profile` extra).

Each operator becomes the kernels Megatron-LM launches for it, on tensors of the operator's shape:
GEMMs through `torch.matmul` (weight gradients accumulated into an FP32 buffer), fused attention through
`scaled_dot_product_attention(is_causal=True)`, the unfused attention as batched GEMMs, softmax and
dropout, norms, activations, the vocab-parallel cross-entropy as Megatron writes it, the embedding and
its dense gradient, and Adam (PyTorch's fused implementation on a GPU) per million parameters. Backward
passes are timed through autograd on the forward's graph, which is kept between repetitions.

On a GPU every repetition is timed with CUDA events around the kernels; on the CPU (tests only, with
`allow_cpu`) with the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from astra_hetero.errors import BackendUnavailable
from astra_hetero.profiling.timer import median_ns
from astra_hetero.spec.schema import ModelSpec
from astra_hetero.workload.costs import OPTIMIZER_UNIT_PARAMS
from astra_hetero.workload.ops import Op, Shape

DROPOUT = 0.1
# Adam and friends run on 2^20 parameters and are scaled to the per-million unit of calibration rows.
STEP_PARAMS = 1 << 20

Run = Callable[[], object]


def load_torch(device: str, allow_cpu: bool) -> Any:
    """Import PyTorch and check the device, failing at once with what is missing."""
    try:
        import torch
    except ImportError:
        raise BackendUnavailable(
            "profile needs PyTorch: install the extra with pip install 'astra-hetero[profile]'"
        ) from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackendUnavailable(
            f"profile needs a CUDA GPU: PyTorch {torch.__version__} sees none "
            "(torch.cuda.is_available() is False)"
        )
    if device == "cpu" and not allow_cpu:
        raise BackendUnavailable("profile times GPU kernels; the CPU is only for tests")
    return torch


class TorchTimer:
    def __init__(
        self,
        model: ModelSpec,
        device: str = "cuda",
        warmup: int = 5,
        repeats: int = 20,
        allow_cpu: bool = False,
    ) -> None:
        self.torch = load_torch(device, allow_cpu)
        self.device = self.torch.device(device)
        self.model = model
        self.warmup, self.repeats = warmup, repeats
        self.dtype = self.torch.bfloat16

    @property
    def device_name(self) -> str:
        if self.device.type == "cuda":
            return f"{self.torch.cuda.get_device_name(self.device)} (torch {self.torch.__version__})"
        return f"CPU (torch {self.torch.__version__})"

    def time_ns(self, op: Op, phase: str, x: Shape) -> float:
        run = self._workload(op, phase, x)
        scale = OPTIMIZER_UNIT_PARAMS / STEP_PARAMS if phase == "step" else 1.0
        return median_ns(run, self._clock, self.warmup, self.repeats) * scale

    def _clock(self, run: Run) -> float:
        torch = self.torch
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e6
        begin = time.perf_counter_ns()
        run()
        return float(time.perf_counter_ns() - begin)

    def _tensor(self, *shape: int, grad: bool = False, dtype: Any = None) -> Any:
        t = self.torch.randn(*shape, device=self.device, dtype=dtype or self.dtype)
        return t.requires_grad_(grad)

    # -- operators ---------------------------------------------------------------------------------

    def _workload(self, op: Op, phase: str, x: Shape) -> Run:
        if op.kind == "gemm":
            return self._gemms(op)
        if op.kind == "attention":
            return self._attention(x, op.attention_pass)
        if phase == "step":
            return self._step(op.name)
        name = op.name.removeprefix("recompute_")
        if name == "embedding_grad":
            return self._embedding_grad(x)
        if name == "cross_entropy" and phase == "bwd":
            return self._cross_entropy_backward(x)
        if name.endswith("_bias_grad") or name == "qkv_grad_concat":
            return self._gradient_kernel(name, x)
        forward, inputs = self._memory_op(name, x)
        # Recomputation runs forward kernels; other backward operators are the forward's autograd.
        backward = phase == "bwd" and not op.name.startswith("recompute_")
        return self._autograd(forward, inputs) if backward else lambda: forward(*inputs)

    def _gemms(self, op: Op) -> Run:
        runs = []
        for g in op.gemms:
            lead = (g.batch,) if g.batch > 1 else ()
            a, b = self._tensor(*lead, g.m, g.k), self._tensor(*lead, g.k, g.n)
            if g.c_read_bytes:  # weight gradient added into the FP32 main gradient
                c = self.torch.zeros(g.m, g.n, device=self.device, dtype=self.torch.float32)
                runs.append(lambda a=a, b=b, c=c: c.add_(a @ b))
            else:
                runs.append(lambda a=a, b=b: a @ b)
        return lambda: [r() for r in runs]

    def _attention(self, x: Shape, attention_pass: str) -> Run:
        sdpa = self.torch.nn.functional.scaled_dot_product_attention
        heads, kv_heads = x.a // x.t, x.kv // x.t
        grad = attention_pass == "bwd"
        q = self._tensor(x.b, heads, x.s, x.d, grad=grad)
        k, v = (self._tensor(x.b, kv_heads, x.s, x.d, grad=grad) for _ in range(2))
        gqa = {"enable_gqa": True} if kv_heads != heads else {}
        if not grad:
            return lambda: sdpa(q, k, v, is_causal=True, **gqa)
        return self._autograd(lambda q, k, v: sdpa(q, k, v, is_causal=True, **gqa), (q, k, v))

    def _autograd(self, forward: Callable[..., Any], inputs: tuple[Any, ...]) -> Run:
        leaves = tuple(t.detach().requires_grad_(t.is_floating_point()) for t in inputs)
        out = forward(*leaves)
        grad_out = self.torch.randn_like(out)
        wrt = tuple(t for t in leaves if t.requires_grad)
        return lambda: self.torch.autograd.grad(out, wrt, grad_out, retain_graph=True)

    def _memory_op(self, name: str, x: Shape) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        torch, F = self.torch, self.torch.nn.functional
        tokens, sharded = x.tokens, int(x.elementwise_tokens)
        f = x.f // x.t
        if name in ("norm_attn", "norm_mlp", "final_norm"):
            weight = self._tensor(x.h)
            if self.model.norm == "rmsnorm":
                return (lambda a: F.rms_norm(a, (x.h,), weight)), (self._tensor(sharded, x.h),)
            return (lambda a: F.layer_norm(a, (x.h,), weight)), (self._tensor(sharded, x.h),)
        if name in ("residual_attn", "residual_mlp", "embedding_dropout"):
            residual = self._tensor(sharded, x.h)
            return (lambda a: F.dropout(a, DROPOUT) + residual), (self._tensor(sharded, x.h),)
        if name == "qkv_bias":
            bias = self._tensor(x.qkv_width // x.t)
            return (lambda a: a + bias), (self._tensor(tokens, x.qkv_width // x.t),)
        if name == "attn_context_copy":  # [b·heads, s, d] → [s, b, heads·d]
            heads = x.a // x.t
            return (lambda c: c.view(x.b, heads, x.s, x.d).permute(2, 0, 1, 3).contiguous()), (
                self._tensor(x.b * heads, x.s, x.d),
            )
        if name == "gelu":
            return (lambda a: F.gelu(a, approximate="tanh")), (self._tensor(tokens, f),)
        if name == "swiglu":
            return (lambda a, b: F.silu(a) * b), (self._tensor(tokens, f), self._tensor(tokens, f))
        if name in ("softmax", "attn_dropout"):
            scores = (x.b * x.a // x.t, x.s, x.s)
            if name == "attn_dropout":
                return (lambda p: F.dropout(p, DROPOUT)), (self._tensor(*scores),)
            mask = torch.ones(x.s, x.s, dtype=torch.bool, device=self.device).triu(1)
            return (lambda a: torch.softmax(a.masked_fill(mask, float("-inf")), dim=-1)), (
                self._tensor(*scores),
            )
        if name == "embedding":
            ids = torch.randint(0, x.v // x.t, (tokens,), device=self.device)
            return (lambda w: F.embedding(ids, w)), (self._tensor(x.v // x.t, x.h),)
        if name in ("cross_entropy_max", "cross_entropy"):
            return self._cross_entropy(name, x)
        raise ValueError(f"no PyTorch workload for operator {name!r}")

    def _gradient_kernel(self, name: str, x: Shape) -> Run:
        """Backward-only kernels of Megatron's own layer: a bias gradient is the sum of the output
        gradient over tokens; the Q, K, V gradients are concatenated into the QKV output's gradient."""
        sharded, qkv = int(x.elementwise_tokens), x.qkv_width // x.t
        if name == "qkv_grad_concat":
            parts = [self._tensor(x.tokens, x.h // x.t)] + [
                self._tensor(x.tokens, (qkv - x.h // x.t) // 2)
            ] * 2
            return lambda: self.torch.cat(parts, dim=-1)
        rows, width = {
            "qkv_bias_grad": (x.tokens, qkv),
            "mlp_up_bias_grad": (x.tokens, x.f // x.t),
            "mlp_down_bias_grad": (sharded, x.h),
            "attn_out_bias_grad": (sharded, x.h),
        }[name]
        grad = self._tensor(rows, width)
        return lambda: grad.sum(dim=0)

    def _embedding_grad(self, x: Shape) -> Run:
        """The dense gradient of the vocabulary shard, added into the FP32 main gradient."""
        torch = self.torch
        ids = torch.randint(0, x.v // x.t, (x.tokens,), device=self.device)
        table = self._tensor(x.v // x.t, x.h, grad=True)
        out = torch.nn.functional.embedding(ids, table)
        grad_out = torch.randn_like(out)
        main_grad = torch.zeros(x.v // x.t, x.h, device=self.device, dtype=torch.float32)
        return lambda: main_grad.add_(torch.autograd.grad(out, table, grad_out, retain_graph=True)[0])

    def _cross_entropy_backward(self, x: Shape) -> Run:
        """Megatron's backward: the saved FP32 softmax, less one at the target, scaled, cast to BF16."""
        probs = self._tensor(x.tokens, x.v // x.t, dtype=self.torch.float32)
        scale = self._tensor(x.tokens, 1, dtype=self.torch.float32)
        return lambda: (probs * scale).to(self.dtype)

    def _cross_entropy(self, name: str, x: Shape) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Megatron's vocab-parallel cross-entropy: FP32 cast and max, then shift, exp, sum, normalise."""
        logits = self._tensor(x.tokens, x.v // x.t)
        if name == "cross_entropy_max":
            return (lambda a: a.float().max(dim=-1)[0]), (logits,)

        def softmax_in_place(a: Any) -> Any:
            z = a.float()
            z = z - z.max(dim=-1, keepdim=True)[0]
            z = z.exp()
            return z / z.sum(dim=-1, keepdim=True)

        return softmax_in_place, (logits,)

    def _step(self, name: str) -> Run:
        torch = self.torch
        param = torch.zeros(STEP_PARAMS, device=self.device, dtype=torch.float32, requires_grad=True)
        param.grad = torch.randn_like(param)
        if name == "grad_norm":
            return lambda: torch.linalg.vector_norm(param.grad)
        if name == "zero_grad":
            return lambda: param.grad.zero_()
        fused = {"fused": True} if self.device.type == "cuda" else {"foreach": True}
        optimizer = torch.optim.Adam([param], lr=1e-4, **fused)
        weights = torch.zeros(STEP_PARAMS, device=self.device, dtype=self.dtype)
        return lambda: (optimizer.step(), weights.copy_(param.detach()))
