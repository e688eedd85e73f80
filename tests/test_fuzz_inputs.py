"""The house rule on bad input, at every input edge of the CLI, as properties over random mutations.

Any mutation of a valid input — a spec field, a spec file's bytes, a file of a run directory, a
finished run's result, an ASTRA-sim study's file, a heterogeneity overlay, a sweep or study file, a
calibration CSV or nccl-tests output — either runs (and then writes only finite, non-negative
numbers), or exits 2 with one line that names the field or file, leaving no output behind. The
checker is tests/fuzz/; `benchmarks/fuzz_inputs.py` runs thousands of these cases and prints a
summary.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import budget
from tests.fuzz.bases import Bases
from tests.fuzz.judge import Outcome, bad_numbers, judge
from tests.fuzz.targets import TARGETS, check


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> Bases:
    return Bases(tmp_path_factory.mktemp("fuzz"))


def _holds(target: str, bases: Bases, rng: random.Random) -> None:
    work = Path(tempfile.mkdtemp(dir=bases.root))
    try:
        case, outcome, broken = check(target, bases, work, rng)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert not broken, f"{case.what}: {broken}; exit {outcome.code}; {outcome.stderr.strip()[:300]}"


# (target, examples under the CI profile): each case takes 5-50 ms
CASES = [
    ("spec-build", 40),
    ("spec-run", 15),
    ("spec-topology", 15),
    ("spec-bytes", 25),
    ("run-dir", 25),
    ("report", 25),
    ("import", 25),
    ("overlay", 25),
    ("measured", 15),
    ("spec-plan", 3),  # a search of three simulations: a second each
]


@pytest.mark.parametrize(("target", "examples"), CASES, ids=[t for t, _ in CASES])
def test_any_mutation_runs_or_exits_2_naming_the_field_and_leaves_nothing(bases, target, examples):
    @settings(max_examples=budget(examples))
    @given(rng=st.randoms(use_true_random=False))
    def holds(rng: random.Random) -> None:
        _holds(target, bases, rng)

    holds()


@pytest.mark.parametrize("target", ["sweep", "study"])
def test_a_mutated_sweep_or_study_runs_fails_point_by_point_or_exits_2(bases, target):
    """Points whose spec the mutation made invalid fail alone, in the table (exit 1, as designed);
    anything else follows the rule."""

    @settings(max_examples=budget(15))
    @given(rng=st.randoms(use_true_random=False))
    def holds(rng: random.Random) -> None:
        _holds(target, bases, rng)

    holds()


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_rule_holds_over_many_more_mutations(bases, target):
    @settings(max_examples=budget(300))
    @given(rng=st.randoms(use_true_random=False))
    def holds(rng: random.Random) -> None:
        _holds(target, bases, rng)

    holds()


def test_every_input_edge_has_a_property():
    assert {t for t, _ in CASES} | {"sweep", "study"} == set(TARGETS)


# --- the checker itself: each rule it enforces can fail -----------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "broken"),
    [
        (Outcome(0, "", (), ()), []),
        (Outcome(2, "error: parallelism.tp: must be > 0\n", (), ()), []),
        (Outcome(2, "error: /tmp/x/spec.yaml: not UTF-8 text\n", (), ()), []),
        (Outcome(2, "error: 'nam:': unknown field\n", (), ()), []),
        (Outcome(1, "error: unexpected KeyError: 'x' (a bug)\n", (), ()), ["exit-1"]),
        (Outcome(2, "error: something is wrong\n", (), ()), ["unnamed"]),
        (Outcome(2, "error: a.b: no\n  detail\n", (), ()), ["multi-line"]),
        (Outcome(2, "error: a.b: no\n", ("/out/result.json",), ()), ["leftover"]),
        (Outcome(0, "", (), (".iteration_time_us=nan",)), ["bad-number"]),
    ],
)
def test_the_checker_tells_each_broken_rule(outcome, broken):
    assert judge(outcome, ("tp",)) == broken


def test_only_signed_quantities_may_be_negative():
    data = {"iteration_time_us": -1.0, "error_pct": -3.0, "ranks": [{"idle_us": float("inf")}]}
    assert list(bad_numbers(data)) == [".iteration_time_us=-1.0", ".ranks[0].idle_us=inf"]
