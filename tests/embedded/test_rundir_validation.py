"""A run directory is an input like a spec: every malformed value is a RunDirError naming the file (and
the node or field), exit code 2 through the CLI, never a traceback and never a silently wrong number."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.chakra_io import pb
from astra_hetero.cli.main import main
from astra_hetero.errors import AstraHeteroError, RunDirError
from tests.embedded.rundirs import coll, comp, recv, send, single_switch, write_run_dir

RANKS = [
    {"rank": r, "node": r, "gpu": "h100-sxm", "stage": r, "replica": 0, "hbm_gbytes_per_s": 3350.0}
    for r in range(2)
]


def _run_dir(root: Path, manifest: dict | None = None, traces: dict | None = None) -> Path:
    traces = traces or {
        0: [comp(0, 10), coll(1, "all_reduce", 1 << 20, deps=(0,)), send(2, 0, 1, 7, 4096, (1,))],
        1: [comp(0, 10), coll(1, "all_reduce", 1 << 20, deps=(0,)), recv(2, 0, 1, 7, 4096)],
    }
    manifest = {"workload_prefix": "workload/workload", "ranks": RANKS} if manifest is None else manifest
    return write_run_dir(root, traces, single_switch(2), {"1": [0, 1]}, manifest)


def _fails(root: Path, capsys, *expected: str) -> str:
    """The CLI exits 2 with one error line holding every `expected` fragment and no traceback.
    (`--force`: these hand-written directories lack the marker of the ones astra-hetero writes.)"""
    assert main(["run", str(root), "--quiet", "--timeline", "none", "--force"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for fragment in expected:
        assert fragment in err
    assert not (root / "result.json").exists()
    return err


def test_a_valid_directory_runs(tmp_path):
    assert EmbeddedBackend().run(_run_dir(tmp_path)).result.iteration_time_us > 0


@pytest.mark.parametrize("value", [0, -3350.0, "fast", None, True, float("inf")])
def test_device_memory_bandwidth_must_be_a_positive_number(tmp_path, capsys, value):
    ranks = [dict(r) for r in RANKS]
    ranks[1]["hbm_gbytes_per_s"] = value
    root = _run_dir(tmp_path, {"ranks": ranks})
    _fails(root, capsys, "manifest.json", "ranks[1].hbm_gbytes_per_s")


def test_nan_bandwidth_in_the_json_is_refused(tmp_path, capsys):
    root = _run_dir(tmp_path)
    path = root / "manifest.json"
    path.write_text(path.read_text().replace("3350.0", "NaN", 1))
    _fails(root, capsys, "ranks[0].hbm_gbytes_per_s")


def test_a_truncated_rank_list_is_refused_rather_than_dropping_the_reduction_cost(tmp_path, capsys):
    root = _run_dir(tmp_path, {"ranks": RANKS[:1]})
    _fails(root, capsys, "manifest.json", "1 entries for num_ranks 2")


def test_bandwidth_given_for_some_ranks_only_is_refused(tmp_path, capsys):
    ranks = [dict(r) for r in RANKS]
    del ranks[1]["hbm_gbytes_per_s"]
    _fails(_run_dir(tmp_path, {"ranks": ranks}), capsys, "ranks[1].hbm_gbytes_per_s is missing")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"num_ranks": "two"}, "num_ranks"),
        ({"num_ranks": 2.0}, "num_ranks"),
        ({"num_ranks": 10**9}, "num_ranks"),
        ({"max_comm_in_flight_per_rank": "one"}, "max_comm_in_flight_per_rank"),
        ({"collective_algorithm": 7}, "collective_algorithm"),
        ({"workload_prefix": "../../etc/workload"}, "workload_prefix"),
        ({"workload_prefix": "/abs/workload"}, "workload_prefix"),
        ({"ranks": "all"}, "ranks"),
        ({"ranks": [{"rank": 0, "stage": "first"}, RANKS[1]]}, "ranks[0].stage"),
        ({"ranks": [RANKS[1], RANKS[0]]}, "ranks[0].rank"),
        ({"ranks": [{"rank": 0, "node": True}, RANKS[1]]}, "ranks[0].node"),
    ],
)
def test_manifest_fields_of_the_wrong_type_or_range_are_named(tmp_path, capsys, edit, field):
    root = _run_dir(tmp_path)
    path = root / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | edit))
    _fails(root, capsys, "manifest.json", field)


def test_a_manifest_without_num_ranks_is_refused(tmp_path, capsys):
    root = _run_dir(tmp_path)
    path = root / "manifest.json"
    data = json.loads(path.read_text())
    del data["num_ranks"]
    path.write_text(json.dumps(data))
    _fails(root, capsys, "manifest.json", "num_ranks is missing")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("manifest.json", "not valid JSON"),
        ("workload/comm_groups.json", "not valid JSON"),
        ("ns3/topology.txt", "not a text file"),
    ],
)
def test_binary_files_are_refused_by_name(tmp_path, capsys, name, reason):
    root = _run_dir(tmp_path)
    (root / name).write_bytes(b"\xff\xfe\x00\x81" * 64)
    _fails(root, capsys, name, reason)


def test_deeply_nested_comm_groups_are_refused(tmp_path, capsys):
    root = _run_dir(tmp_path)
    (root / "workload/comm_groups.json").write_text('{"1": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _fails(root, capsys, "comm_groups.json", "nested too deeply")


@pytest.mark.parametrize("members", [[True, False], [0, 1.0], [0, "1"], [[0], [1]], [0, 5]])
def test_comm_group_members_must_be_ranks(tmp_path, capsys, members):
    root = _run_dir(tmp_path)
    (root / "workload/comm_groups.json").write_text(json.dumps({"1": members}))
    _fails(root, capsys, "comm_groups.json", "group '1'")


@pytest.mark.parametrize(
    ("rate", "delay", "reason"),
    [
        ("nanGbps", "0.0005ms", "rate"),
        ("infGbps", "0.0005ms", "rate"),
        ("1e400Gbps", "0.0005ms", "rate"),
        ("-5Gbps", "0.0005ms", "rate"),
        ("fastGbps", "0.0005ms", "not a link rate"),
        ("400Gbps", "infms", "delay"),
        ("400Gbps", "nanms", "delay"),
        ("400Gbps", "-1ms", "delay"),
        ("400Gbps", "5s", "delay"),
        ("1e30Gbps", "0.0005ms", "at most 1e+06 Gbps"),
        ("2000Tbps", "0.0005ms", "at most 1e+06 Gbps"),
        ("0.0001Gbps", "0.0005ms", "at least 0.001 Gbps"),
    ],
)
def test_malformed_link_rates_and_delays_name_the_line(tmp_path, capsys, rate, delay, reason):
    root = _run_dir(tmp_path)
    (root / "ns3/topology.txt").write_text(f"3 1 2\n2\n0 2 {rate} {delay} 0\n1 2 400Gbps 0.0005ms 0\n")
    _fails(root, capsys, "topology.txt:3", reason)


def test_a_topology_header_announcing_a_billion_nodes_is_refused_before_allocating(tmp_path, capsys):
    root = _run_dir(tmp_path)
    (root / "ns3/topology.txt").write_text(
        "1000000000 1 2\n2\n0 2 400Gbps 0.0005ms 0\n1 2 400Gbps 0.0005ms 0\n"
    )
    _fails(root, capsys, "topology.txt", "declares 1000000000 nodes")


def _edit_node(path: Path, index: int, change) -> None:  # noqa: ANN001 - a node -> None callback
    records = list(chakra_io.iter_records(path.read_bytes()))
    nodes = [pb.Node.FromString(r) for r in records[1:]]
    change(nodes[index])
    chakra_io.write_trace(
        path,
        [chakra_io.frame(pb.GlobalMetadata.FromString(records[0]))] + [chakra_io.frame(n) for n in nodes],
    )


def test_a_compute_duration_that_would_overflow_is_refused_naming_the_node(tmp_path, capsys):
    root = _run_dir(tmp_path)
    _edit_node(root / "workload/workload.1.et", 0, lambda n: setattr(n, "duration_micros", 2**63 + 5))
    _fails(root, capsys, "workload.1.et", "node 0 ('comp0')", "duration_micros")


@pytest.mark.parametrize(("attr", "value"), [("comm_size", -4096), ("comm_size", 2**60)])
def test_out_of_range_message_sizes_are_refused_naming_the_node(tmp_path, capsys, attr, value):
    root = _run_dir(tmp_path)

    def change(node):
        for a in node.attr:
            if a.name == attr:
                a.int64_val = value

    _edit_node(root / "workload/workload.0.et", 1, change)
    _fails(root, capsys, "workload.0.et", "node 1", attr)


def test_a_peer_given_as_a_float_is_refused(tmp_path, capsys):
    root = _run_dir(tmp_path)

    def change(node):
        for a in node.attr:
            if a.name == "comm_dst":
                a.double_val = 1.0

    _edit_node(root / "workload/workload.0.et", 2, change)
    _fails(root, capsys, "workload.0.et", "node 2", "comm_dst", "must be an integer")


def test_a_corrupt_attribute_is_a_decode_error_naming_the_node(tmp_path, capsys):
    root = _run_dir(tmp_path)
    path = root / "workload/workload.0.et"
    data = bytearray(path.read_bytes())
    marker = data.find(b"comm_size")
    data[marker - 2] = 0xFF  # the attribute's name tag becomes an invalid field header
    path.write_bytes(bytes(data))
    err = _fails(root, capsys, "workload.0.et")
    assert "node" in err or "record" in err


@pytest.mark.parametrize("seed", range(12))
def test_random_byte_corruption_never_escapes_as_a_traceback(tmp_path, seed):
    root = _run_dir(tmp_path)
    rng = random.Random(seed)
    path = root / f"workload/workload.{seed % 2}.et"
    data = bytearray(path.read_bytes())
    for _ in range(3):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    for fold in (True, False):
        try:
            result = EmbeddedBackend(fold=fold).run(root).result
        except AstraHeteroError:
            continue
        assert result.iteration_time_us >= 0
        assert all(r.compute_us >= 0 and r.idle_us >= -1e-6 for r in result.ranks)


def test_errors_are_run_directory_errors(tmp_path):
    root = _run_dir(tmp_path, {"ranks": RANKS[:1]})
    with pytest.raises(RunDirError):
        EmbeddedBackend().run(root)


def _nccl_run_dir(root: Path) -> Path:
    """A generated run directory of the NCCL-like model (link kinds, architectures in the manifest)."""
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import parse_spec
    from tests.test_pipeline import small_spec

    build_run_dir(parse_spec(small_spec()), root)
    assert json.loads((root / "manifest.json").read_text())["collective_model"] == "nccl"
    return root


def test_a_binary_link_kinds_file_is_refused_by_name(tmp_path, capsys):
    root = _nccl_run_dir(tmp_path / "run")
    (root / "ns3/link_kinds.json").write_bytes(b"\xff\xfe\x00\x81" * 64)
    _fails(root, capsys, "link_kinds.json", "not valid JSON")


def test_a_link_kind_that_is_not_a_name_is_refused_by_name(tmp_path, capsys):
    root = _nccl_run_dir(tmp_path / "run")
    kinds = json.loads((root / "ns3/link_kinds.json").read_text())
    kinds["kinds"][0] = []  # unhashable: a TypeError before
    (root / "ns3/link_kinds.json").write_text(json.dumps(kinds))
    _fails(root, capsys, "link_kinds.json", "unknown link kind(s) []")


def test_an_nccl_tests_table_outside_the_run_directory_is_never_read(tmp_path, capsys):
    root = _nccl_run_dir(tmp_path / "run")
    table = Path(__file__).parents[1] / "data/nccl_tests/all_reduce_perf_8xh100.txt"
    (tmp_path / "outside.txt").write_text(table.read_text())  # a valid table: only its place is wrong
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["nccl_tests"] = [{"scope": "intra_node", "path": "../outside.txt"}]
    (root / "manifest.json").write_text(json.dumps(manifest))
    _fails(root, capsys, "nccl_tests[0] path", "leads outside the run directory")
