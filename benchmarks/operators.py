"""The operator model against public per-kernel measurements: GEMMs and memory-bound kernels.

Every row of benchmarks/data/operators/vidur_ops.csv (Microsoft Vidur's MIT-licensed profiling tables:
one decoder layer's kernels as vLLM runs them, A100-SXM4-80GB and H100 SXM, fp16, 1 to 4096 tokens,
TP 1 to 8) becomes the operators astra-hetero times — the four linear layers as GEMMs of their
(tokens, TP-sharded) shapes, norms, the MLP activation, rotary embeddings, the residual add and the
embedding lookup as memory-bound kernels of their bytes — and the model's time is printed against the
measured one: MAPE and signed mean per kind and GPU, over all rows and per token band.

Rows of the model named by `--calibration` (Llama-2-7b-hf by default) are the ones the kernel catalog's
memory-bound figures were derived from (astra_hetero/spec/catalog/kernels.yaml cites them): they are
printed apart; the MAPE that counts is over the other models' rows.

    python benchmarks/operators.py [--calibration MODEL] [-v]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.gemm import gemm_time_ns
from astra_hetero.workload.ops import Gemm, memory_op
from astra_hetero.workload.timing import OperatorModel

DATA = Path(__file__).resolve().parent / "data" / "operators" / "vidur_ops.csv"
GPUS = {"a100": "a100-80", "h100": "h100-sxm"}
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
# memory-bound kernels: (kind in the kernel catalog, bytes per element, elements)
TOKEN_BANDS = ((1, 32, "1-32 tokens"), (33, 512, "33-512"), (513, 1 << 30, "> 512"))


def _rows() -> list[dict[str, str]]:
    with open(DATA) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _memory_ops(r: dict[str, str]):
    """(vidur column, astra-hetero op name, op) of the row's memory-bound kernels."""
    t, h, f, tp = int(r["tokens"]), int(r["hidden"]), int(r["ffn"]), int(r["tp"])
    heads, kv = int(r["heads"]), int(r["kv_heads"])
    d = h // heads
    gated = r["gated"] == "True"
    rope = (heads + kv) // tp * d
    # Vidur's layer (vidur/profiling/mlp/mlp_impl.py): a gated MLP's activation is sarathi's (vLLM's)
    # SiluAndMul, one thread block per token; a plain one is torch.nn.GELU, an element-wise kernel of
    # many blocks (no row walk). A block without a post-attention norm (phi-2) adds attention output,
    # MLP output and residual in one timed expression: two element-wise adds.
    if gated:
        act = memory_op("swiglu", t * f // tp, 6, row_elements=f // tp)
    else:
        act = memory_op("gelu", t * f // tp, 4)
    adds = 1 if r["post_attention_layernorm"] else 2
    return [
        ("input_layernorm", "norm_attn", memory_op("norm_attn", t * h, 4, row_elements=h)),
        ("post_attention_layernorm", "norm_mlp", memory_op("norm_mlp", t * h, 4, row_elements=h)),
        ("mlp_act", act.name, act),
        ("attn_rope", "rope", memory_op("rope", t * rope, 4, row_elements=rope)),
        ("add", "residual_mlp", memory_op("residual_mlp", adds * t * h, 6, kernels=adds)),
        ("emb", "embedding", memory_op("embedding", t * h, 4)),
    ]


def _gemms(r: dict[str, str]) -> list[tuple[str, Gemm]]:
    t, h, f, tp = int(r["tokens"]), int(r["hidden"]), int(r["ffn"]), int(r["tp"])
    heads, kv = int(r["heads"]), int(r["kv_heads"])
    d = h // heads
    up = (2 if r["gated"] == "True" else 1) * f // tp
    return [
        ("attn_pre_proj", Gemm(t, (heads + 2 * kv) * d // tp, h)),
        ("attn_post_proj", Gemm(t, h, heads * d // tp)),
        ("mlp_up_proj", Gemm(t, up, h)),
        ("mlp_down_proj", Gemm(t, h, f // tp)),
    ]


def compare(calibration: str, verbose: bool) -> None:
    models = {key: OperatorModel(GpuSpec.model_validate({"preset": preset})) for key, preset in GPUS.items()}
    errors: dict[tuple[str, str, str], list[float]] = {}
    for r in _rows():
        model = models[r["gpu"]]
        role = "calibration" if r["model"] == calibration else "validation"
        band = next(label for low, high, label in TOKEN_BANDS if low <= int(r["tokens"]) <= high)
        timed = [(col, "gemm", gemm_time_ns(g, model.rates_for("bf16")) / 1000) for col, g in _gemms(r)]
        timed += [(col, "memory-bound", model.time_ns(op) / 1000) for col, _, op in _memory_ops(r)]
        for column, kind, predicted in timed:
            if not r[column]:
                continue
            measured = float(r[column])
            error = predicted / measured - 1
            for key in ((role, r["gpu"], kind), (role, r["gpu"], f"{kind} {band}"), (role, r["gpu"], column)):
                errors.setdefault(key, []).append(error)
            if verbose and role == "validation":
                print(
                    f"  {r['gpu']} {r['model']:<28} tp{r['tp']} t{r['tokens']:>5} {column:<24} "
                    f"{measured:>8.1f} {predicted:>8.1f} {error:>+7.1%}"
                )
    print(f"{'set':<12} {'gpu':<5} {'kernels':<34} {'rows':>5} {'MAPE':>7} {'signed':>7} {'worst':>7}")
    for (role, gpu, kind), values in sorted(errors.items()):
        mape = sum(abs(v) for v in values) / len(values)
        worst = max(values, key=abs)
        signed = sum(values) / len(values)
        print(f"{role:<12} {gpu:<5} {kind:<34} {len(values):>5} {mape:>7.1%} {signed:>+7.1%} {worst:>+7.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", default="Llama-2-7b-hf", help="the model whose rows calibrated")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every validation row")
    args = parser.parse_args()
    compare(args.calibration, args.verbose)


if __name__ == "__main__":
    main()
