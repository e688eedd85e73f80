"""Trace decoding: dependency lists however they are encoded, names kept byte for byte."""

from __future__ import annotations

from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.trace.decode import read_rank_trace
from tests.embedded.rundirs import comp


def test_long_chains_decode_multi_byte_dependency_ids(tmp_path):
    # ids past 127 and 16383 take two and three varint bytes in the packed dependency lists
    nodes = [comp(0, 1)] + [comp(i, 1, (i - 1, 0) if i % 7 == 0 else (i - 1,)) for i in range(1, 20_000)]
    path = tmp_path / "t.0.et"
    chakra_io.write_trace(path, [chakra_io.metadata_record()] + [chakra_io.frame(n) for n in nodes])
    trace = read_rank_trace(path, 1)
    expected = [d for i in range(1, 20_000) for d in ((i - 1, 0) if i % 7 == 0 else (i - 1,))]
    assert trace.deps.tolist() == expected
    assert trace.dep_ends.tolist()[:9] == [0, 1, 2, 3, 4, 5, 6, 8, 9]
    assert trace.all_names()[19_999] == trace.name(19_999) == "comp19999"


def test_unpacked_dependency_lists_read_like_packed_ones(tmp_path):
    # proto3 writers pack repeated ids, but readers must accept one tagged varint per element
    data_dep_0, ctrl_dep_0 = b"\x28\x00", b"\x20\x00"  # field 5 / field 4, wire type 0 (varint), value 0
    unpacked = comp(1, 2, name="sé").SerializeToString() + data_dep_0 + ctrl_dep_0
    path = tmp_path / "t.0.et"
    records = [
        chakra_io.metadata_record(),
        chakra_io.frame(comp(0, 1)),
        _VarintBytes(len(unpacked)) + unpacked,
    ]
    chakra_io.write_trace(path, records)
    trace = read_rank_trace(path, 1)
    assert trace.deps.tolist() == [0, 0] and trace.dep_ends.tolist() == [0, 2]
    assert trace.all_names() == ["comp0", "sé"]
