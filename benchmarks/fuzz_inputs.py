"""Fuzz every input edge of the CLI against the house rule on bad input, and print a summary.

Each case mutates one valid input (a spec field, a spec file's bytes, a run directory's file, a
finished run's result, an ASTRA-sim study's file, an overlay, a sweep or study file, a calibration CSV
or nccl-tests output), runs the CLI in-process and judges the outcome (tests/fuzz/): exit code 0
or 2, one line naming the field or file, nothing left behind on failure, no NaN/inf/negative number
written on success. CI runs a few hundred of these through hypothesis (tests/test_fuzz_inputs.py);
this runs thousands.

    python benchmarks/fuzz_inputs.py [--cases 2000] [--seed 0] [--target spec-build ...] [--examples]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.bases import Bases, example_seeds, small_seeds  # noqa: E402
from tests.fuzz.targets import TARGETS, check  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="cases in all, spread over the targets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="only these targets")
    parser.add_argument("--examples", action="store_true", help="also mutate the shipped example specs")
    parser.add_argument("--show", type=int, default=3, help="failing cases printed per kind and target")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (with a summary)")
    args = parser.parse_args()
    targets = args.target or sorted(TARGETS)
    rng = random.Random(args.seed)
    seeds = small_seeds() | (example_seeds() if args.examples else {})
    failures: Counter[tuple[str, str]] = Counter()
    codes: Counter[tuple[str, int]] = Counter()
    shown: Counter[tuple[str, str]] = Counter()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        bases = Bases(Path(tmp), seeds)
        for i in range(args.cases):
            if args.seconds is not None and time.perf_counter() - start > args.seconds:
                break
            target = targets[i % len(targets)]
            work = Path(tmp) / "case"
            work.mkdir()
            try:
                case, outcome, broken = check(target, bases, work, random.Random(rng.getrandbits(64)))
            finally:
                shutil.rmtree(work, ignore_errors=True)
            codes[target, outcome.code] += 1
            for kind in broken:
                failures[target, kind] += 1
                if shown[target, kind] < args.show:
                    shown[target, kind] += 1
                    print(f"[{target}] {kind}: {case.what}", flush=True)
                    print(f"    argv: {' '.join(case.argv[:1])} ...; exit {outcome.code}")
                    print(f"    stderr: {outcome.stderr.strip()[:400]}")
                    if outcome.changed:
                        print(f"    left behind: {list(outcome.changed)[:3]}")
                    if outcome.bad_numbers:
                        print(f"    numbers: {list(outcome.bad_numbers)[:3]}")
    elapsed = time.perf_counter() - start
    print(f"\n{sum(codes.values())} cases in {elapsed:.0f} s over {len(targets)} targets")
    print(f"{'target':<14} {'cases':>6} {'exit 0':>7} {'exit 2':>7} {'other':>6}  failures")
    for target in targets:
        total = sum(n for (t, _), n in codes.items() if t == target)
        ok, bad = codes[target, 0], codes[target, 2]
        kinds = ", ".join(f"{k} {n}" for (t, k), n in sorted(failures.items()) if t == target) or "none"
        print(f"{target:<14} {total:>6} {ok:>7} {bad:>7} {total - ok - bad:>6}  {kinds}")
    cases_failing = sum(failures.values())
    print(f"failures: {cases_failing}")
    return 1 if cases_failing else 0


if __name__ == "__main__":
    sys.exit(main())
