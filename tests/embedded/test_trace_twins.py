"""Twin traces: a file equal to a decoded one outside its rank-specific values yields those values;
anything else (a value that changes a length, a byte outside the values, another naming pattern) is
not a twin and gets decoded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.folding.shapes import read_shapes
from astra_hetero.backends.embedded.trace.decode import decode_rank_trace
from astra_hetero.backends.embedded.trace.twins import RankValues, rank_values, twin_values, value_spans
from tests.embedded.rundirs import coll, comp, recv, send


def _write(path: Path, nodes: list) -> Path:
    chakra_io.write_trace(path, [chakra_io.metadata_record()] + [chakra_io.frame(n) for n in nodes])
    return path


def _trace(me: int, peer: int, groups: tuple[str, str], duration: int = 10) -> list:
    return [
        comp(0, duration),
        coll(1, "all_reduce", 4096, groups[0], (0,)),
        coll(2, "all_gather", 512, groups[1], (1,)),
        send(3, me, peer, 9, 1024, (2,)),
        recv(4, peer, me, 9, 1024),
        coll(5, "all_reduce", 64, groups[0], (4,)),
    ]


def _compare(tmp_path: Path, reference: list, other: list, num_ranks: int = 64) -> RankValues | None:
    decoded = decode_rank_trace(_write(tmp_path / "a.0.et", reference), num_ranks)
    values, groups, peers = rank_values(decoded.trace)
    spans = value_spans(decoded, groups, peers)
    assert spans is not None
    data = np.fromfile(_write(tmp_path / "b.0.et", other), dtype=np.uint8)
    return twin_values(data, np.frombuffer(decoded.data, dtype=np.uint8), spans, values, num_ranks)


def test_a_twin_names_its_own_groups_and_peer(tmp_path):
    values = _compare(tmp_path, _trace(0, 1, ("t1", "d1")), _trace(2, 3, ("t2", "d2")))
    assert values == RankValues(("t2", "d2"), (3,))


def test_an_identical_file_is_its_own_twin(tmp_path):
    assert _compare(tmp_path, _trace(0, 1, ("t1", "d1")), _trace(0, 1, ("t1", "d1"))) == RankValues(
        ("t1", "d1"), (1,)
    )


def test_a_peer_whose_number_takes_more_bytes_is_not_a_twin(tmp_path):
    assert _compare(tmp_path, _trace(0, 1, ("t1", "d1")), _trace(0, 300, ("t1", "d1")), num_ranks=512) is None


def test_a_different_duration_is_not_a_twin(tmp_path):
    longer = _trace(0, 1, ("t1", "d1"), duration=11)
    assert _compare(tmp_path, _trace(0, 1, ("t1", "d1")), longer) is None


def test_one_group_where_the_decoded_file_names_two_is_not_a_twin(tmp_path):
    # same bytes layout, but both collectives name "t1": the rank's groups follow another pattern
    assert _compare(tmp_path, _trace(0, 1, ("t1", "d1")), _trace(0, 1, ("t1", "t1"))) is None


def test_groups_named_alike_in_one_role_but_not_another_are_not_twins(tmp_path):
    other = _trace(2, 3, ("t2", "d2"))
    other[5] = coll(5, "all_reduce", 64, "t3", (4,))  # the role's two collectives now disagree
    assert _compare(tmp_path, _trace(0, 1, ("t1", "d1")), other) is None


def test_shapes_group_twins_and_decode_only_one_file_per_shape(tmp_path):
    traces = [_trace(r, r ^ 1, (f"t{r // 2}", f"d{r % 2}")) for r in range(6)]
    traces[5] = _trace(5, 4, ("t2", "d1"), duration=99)
    paths = [_write(tmp_path / f"w.{r}.et", nodes) for r, nodes in enumerate(traces)]
    shapes = read_shapes(paths, 6, workers=1)
    assert shapes.shape_of == [0, 0, 0, 0, 0, 1]
    assert [s.rep for s in shapes.shapes] == [0, 5]
    assert shapes.groups[3] == ("t1", "d1") and shapes.peers[3] == (2,)
