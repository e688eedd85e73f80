"""`astra-hetero profile SPEC.yaml -o calibration.csv`: time the spec's operators on this machine's GPU
and write the calibration table the generator reads (needs the `profile` extra: PyTorch with CUDA)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile", help="time the spec's operators on this GPU and write a calibration CSV (needs PyTorch)"
    )
    parser.add_argument("spec", type=Path, help="experiment spec (YAML)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="calibration CSV to write")
    parser.add_argument(
        "--gpu", help="label for the rows: a GPU of the spec (default: its only one) or a preset"
    )
    parser.add_argument("--device", default="cuda", help="PyTorch device (default: cuda)")
    parser.add_argument(
        "--seq-lens", type=_sizes, default=(), help="also time at these sequence lengths, e.g. 1024,4096"
    )
    parser.add_argument(
        "--micro-batch-sizes",
        type=_sizes,
        default=(),
        help="also time at these micro-batch sizes, e.g. 1,2,4",
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per operator (default 5)")
    parser.add_argument(
        "--repeats", type=int, default=20, help="timed calls per operator; the median is kept"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.set_defaults(func=run)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if any(s <= 0 or s > 10_000_000 for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must lie in 1..10000000, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    # here, not at the top: every command imports this module when parsing
    from astra_hetero.profiling.run import gpu_label, profile, write_calibration
    from astra_hetero.profiling.torch_timer import TorchTimer, load_torch
    from astra_hetero.spec import load_spec

    load_torch(args.device, allow_cpu=False)  # no GPU or no PyTorch: fail before any other work
    spec = load_spec(args.spec)
    label = gpu_label(spec, args.gpu)
    timer = TorchTimer(spec.model, args.device, max(args.warmup, 0), max(args.repeats, 1))

    def report(point) -> None:
        if not args.quiet:
            print(f"  {point.op.name}.{point.phase} (seq {point.shape.s}, micro-batch {point.shape.b})")

    rows = profile(spec, timer, label, args.seq_lens, args.micro_batch_sizes, report)
    write_calibration(args.output, rows)
    print(f"{len(rows)} operator times for {label} on {timer.device_name} written to {args.output}")
    return 0
