"""The workload's invariants as checked before anything is written: a generator bug that would pair a
send with no recv, or a recv of another size, is caught (and names ranks and tag)."""

from __future__ import annotations

import pytest

from astra_hetero.workload.encode import RankBinding
from astra_hetero.workload.invariants import ClassSummary, WorkloadInvariantError, check_bound

SENDER = ClassSummary(sends=(("next", 7, 100), ("next", 8, 50)), recvs=(), collectives={})
RECEIVER = ClassSummary(sends=(), recvs=(("prev", 7, 100), ("prev", 8, 50)), collectives={})


def _pair(sender_peer: int = 1, receiver_peer: int = 0, receiver: ClassSummary = RECEIVER):
    return [
        (RankBinding(0, {}, {"next": sender_peer}), SENDER),
        (RankBinding(1, {}, {"prev": receiver_peer}), receiver),
    ]


def test_matched_sends_and_recvs_pass():
    check_bound(_pair(), {})


@pytest.mark.parametrize(
    ("ranks", "message"),
    [
        (_pair(receiver=ClassSummary((), (("prev", 7, 100), ("prev", 8, 51)), {})), "0->1 tag 8"),
        (_pair(receiver=ClassSummary((), (("prev", 7, 100),), {})), "0->1 tag 8: sends [50], recvs None"),
        (_pair(receiver_peer=2), "0->1 tag 7"),
        (
            [
                (
                    RankBinding(0, {}, {"next": 1, "also": 1}),
                    ClassSummary((("next", 7, 1), ("also", 7, 1)), (), {}),
                )
            ]
            + [(RankBinding(1, {}, {"prev": 0}), ClassSummary((), (("prev", 7, 1), ("prev", 7, 1)), {}))],
            "tag 7: sends [1, 1]",
        ),
    ],
)
def test_a_send_without_its_recv_is_a_generator_bug_naming_ranks_and_tag(ranks, message):
    with pytest.raises(WorkloadInvariantError, match="send/recv mismatch") as err:
        check_bound(ranks, {})
    assert message in str(err.value)


def test_a_collective_on_a_group_the_rank_is_not_in_is_refused():
    summary = ClassSummary((), (), {"tp": (("all_reduce", 8),)})
    with pytest.raises(WorkloadInvariantError, match="not a member"):
        check_bound([(RankBinding(3, {"tp": "1"}, {}), summary)], {"1": (0, 1)})
