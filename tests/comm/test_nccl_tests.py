"""Reading nccl-tests output: columns by header name, collective from the output, interpolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero.comm.nccl_tests import NcclTestsError, collective_of, parse_nccl_tests

DATA = Path(__file__).parents[1] / "data" / "nccl_tests"
H100_ALL_REDUCE = DATA / "all_reduce_perf_8xh100.txt"  # nccl-tests 2.16 layout, one node of 8 H100
A100_ALL_GATHER = DATA / "all_gather_2x8xa100_hdr.log"  # older layout, launched by mpirun, -c 0 (N/A)


def _read(path: Path):
    return parse_nccl_tests(path.read_text(), path.name)


def test_all_reduce_output_gives_every_size_with_the_better_of_both_placements():
    table = _read(H100_ALL_REDUCE)
    assert table.collective == "all_reduce"
    assert table.sizes == tuple(8 << i for i in range(31))  # 8 B .. 8 GiB, -f 2
    assert (table.num_ranks, table.num_nodes) == (8, 1)
    # 1048576 B row: out-of-place 25.39 us, in-place 25.54 us
    assert table.time_us(1048576) == pytest.approx(25.39)


def test_bus_factor_is_the_runs_busbw_over_algbw():
    assert _read(H100_ALL_REDUCE).bus_factor == pytest.approx(2 * 7 / 8, rel=0.01)  # all-reduce, 8 ranks
    assert _read(A100_ALL_GATHER).bus_factor == pytest.approx(15 / 16, rel=0.01)  # all-gather, 16 ranks


def test_older_layout_with_na_error_column_and_command_line_echo():
    table = _read(A100_ALL_GATHER)
    assert table.collective == "all_gather"  # from "./build/all_gather_perf" on the mpirun line
    assert (table.num_ranks, table.num_nodes) == (16, 2)
    assert table.sizes[0] == 1024 and table.sizes[-1] == 1 << 30
    assert table.busbw_gbs(1 << 30) == pytest.approx(173.85, rel=0.01)  # out-of-place, the faster


def test_mpirun_tagged_multi_node_output_keeps_the_rank_that_printed_the_table():
    table = _read(DATA / "all_reduce_2x8xh100_mpirun_tagged.log")
    assert table.collective == "all_reduce"
    assert (table.num_ranks, table.num_nodes) == (16, 2)
    assert table.sizes == tuple(8 << i for i in range(31))  # the stderr line of rank 13 is not a row
    assert table.bus_factor == pytest.approx(2 * 15 / 16, rel=0.01)
    # 8 GiB row: out-of-place 44934 us, in-place 45383 us
    assert table.time_us(8 << 30) == pytest.approx(44934)


def test_srun_labelled_output():
    table = _read(DATA / "all_reduce_4x8xa100_srun_label.log")
    assert (table.collective, table.num_ranks, table.num_nodes) == ("all_reduce", 32, 4)
    assert table.sizes[-1] == 1 << 30 and table.times_us[0] == pytest.approx(55.0)


def test_an_older_release_without_root_column_and_group_in_its_rank_lines():
    path = DATA / "v100_8gpu_old_layout.txt"
    with pytest.raises(NcclTestsError, match="collective:"):
        parse_nccl_tests(path.read_text(), path.name)  # neither the output nor the name says
    table = parse_nccl_tests(path.read_text(), path.name, "all_reduce")
    assert (table.num_ranks, table.num_nodes) == (8, 1)
    assert table.sizes == tuple(8 << i for i in range(25))
    assert table.bus_factor == pytest.approx(2 * 7 / 8, rel=0.01)


def test_the_first_releases_bytes_header():
    text = (
        "#   bytes        N   type   op    time  algbw  busbw    res    time  algbw  busbw    res\n"
        "  1048576   262144  float  sum   90.12  11.64  20.37  0e+00   91.40  11.47  20.08  0e+00\n"
    )
    table = parse_nccl_tests(text, "allreduce.txt", "all_reduce")
    assert table.sizes == (1048576,) and table.time_us(1048576) == pytest.approx(90.12)


def test_a_spec_collective_that_contradicts_the_output_is_an_error():
    with pytest.raises(NcclTestsError, match="measured all_gather but the spec says collective: all_reduce"):
        parse_nccl_tests(A100_ALL_GATHER.read_text(), A100_ALL_GATHER.name, "all_reduce")


def test_time_is_linear_between_measured_sizes():
    table = _read(H100_ALL_REDUCE)
    s0, s1 = 4 << 20, 8 << 20
    midpoint = table.time_us((s0 + s1) / 2)
    assert midpoint == pytest.approx((table.time_us(s0) + table.time_us(s1)) / 2)
    assert table.time_us(s0) < table.time_us(5 << 20) < table.time_us(s1)


def test_below_the_smallest_size_time_stays_latency_bound_and_above_the_largest_busbw_holds():
    table = _read(A100_ALL_GATHER)
    assert table.time_us(1) == table.time_us(512) == table.times_us[0]
    largest = table.sizes[-1]
    assert table.busbw_gbs(4 * largest) == pytest.approx(table.busbw_gbs(largest))
    assert table.time_us(4 * largest) == pytest.approx(4 * table.time_us(largest))


def test_busbw_rises_with_size_in_a_real_sweep():
    table = _read(H100_ALL_REDUCE)
    assert table.busbw_gbs(1 << 20) < table.busbw_gbs(64 << 20) < table.busbw_gbs(1 << 30)


@pytest.mark.parametrize(
    ("text", "filename", "expected"),
    [
        ("# Collective test starting: reduce_scatter_perf\n", "", "reduce_scatter"),
        ("$ srun ./build/alltoall_perf -b 8 -e 1G\n", "", "all_to_all"),
        ("$ mpirun ./sendrecv_perf_mpi -b 8\n", "", "send_recv"),
        ("# no binary named here\n", "run3_all_gather.txt", "all_gather"),
        ("# no binary named here\n", "latest.txt", None),
    ],
)
def test_the_collective_is_read_from_the_output_then_the_file_name(text, filename, expected):
    assert collective_of(text, filename) == expected


def _minimal(rows: str, header: str = "#  size  count  type  redop  root  time  algbw  busbw  #wrong") -> str:
    return f"# Collective test starting: all_reduce_perf\n{header}\n{rows}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("# Collective test starting: broadcast_perf\n", "broadcast_perf is not used"),
        ("$ ./all_reduce_perf\n$ ./all_gather_perf\n", "several tests"),
        (
            "# Collective test starting: all_reduce_perf\n 8 2 float sum -1 10.0 0 0 0\n",
            "no nccl-tests header",
        ),
        (_minimal(""), "no result rows"),
        (
            _minimal("1024 256 float sum -1 10.0 0.10 0.18 0\n1024 256 float sum -1 11.0 0.09 0.16 0\n"),
            "twice",
        ),
        (_minimal("1024 256 float sum\n"), "columns"),
        (_minimal("1024 256 float sum -1 0.0 0.10 0.18 0\n"), "positive"),
        # a time of 1e308 us overflowed the collective model; nan and inf were taken as times
        (
            _minimal("1024 256 float sum -1 1e308 0.10 0.18 0\n"),
            r"line \d+: time '1e308' is not a measurement",
        ),
        (_minimal("1024 256 float sum -1 nan 0.10 0.18 0\n"), "time 'nan' is not a measurement"),
        (_minimal("1024 256 float sum -1 10.0 inf 0.18 0\n"), "algbw 'inf' is not a measurement"),
        (_minimal("1024 256 float sum -1 10.0 0.10 -0.18 0\n"), "busbw '-0.18' is not a measurement"),
        (_minimal("1024 256 float sum -1 10.0 1e308 0.18 0\n"), "algbw '1e308' is not a measurement"),
        (_minimal("1024 256 float sum -1 10.0 0.10 0.00 0\n"), r"bus factor in \(0, 2\]"),
        (_minimal("1024 256 float sum -1 10.0 0.10 0.50 0\n"), "busbw / algbw at the largest size 1024 is 5"),
    ],
)
def test_unusable_output_is_rejected_with_the_reason(text, reason):
    with pytest.raises(NcclTestsError, match=reason):
        parse_nccl_tests(text, "x.txt")


def test_an_unnamed_collective_can_be_given_explicitly():
    rows = _minimal("1024 256 float sum -1 10.0 0.10 0.18 0\n").split("\n", 1)[1]  # without the test's name
    with pytest.raises(NcclTestsError, match="collective:"):
        parse_nccl_tests(rows, "run.txt")
    assert parse_nccl_tests(rows, "run.txt", "all_reduce").bus_factor == pytest.approx(1.8)


# --- launcher prefixes, older layouts and placements on small synthetic snippets -------------------
_HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
    "   busbw #wrong"
)
_ROWS = (
    (
        "1048576",
        "262144",
        "float",
        "sum",
        "-1",
        "30.00",
        "34.95",
        "61.17",
        "0",
        "31.00",
        "33.83",
        "59.20",
        "0",
    ),
    (
        "2097152",
        "524288",
        "float",
        "sum",
        "-1",
        "45.00",
        "46.60",
        "81.55",
        "0",
        "44.00",
        "47.66",
        "83.41",
        "0",
    ),
)


def _snippet(
    prefix: str = "", rank_line: str = "#  Rank  0 Group  0 Pid 11 on node1 device  0 [0x07] H100"
) -> str:
    lines = ["# Using devices", rank_line, _HEADER, *("  ".join(row) for row in _ROWS)]
    return "\n".join(prefix + line for line in lines) + "\n"


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "0: ", " 0: ", "node1: "])
def test_a_launcher_prefix_before_every_line_is_removed(prefix):
    other = "[1,3]<stderr>:node2:77:77 [3] NCCL INFO 4194304 16 float\n" if "[" in prefix else ""
    table = parse_nccl_tests(other + _snippet(prefix), "x.log", "all_reduce")
    assert table.sizes == (1048576, 2097152)
    assert table.times_us == (30.0, 44.0)
    assert table.num_ranks == 1


@pytest.mark.parametrize(
    "rank_line",
    [
        "#  Rank  0 Group  0 Pid 11 on node1 device  0 [0x07] NVIDIA H100",  # 2.x with groups
        "#   Rank  0 Pid  12164 on   node1 device  0 [0x06] Tesla V100-SXM2-32GB",  # before groups
        "#   Rank  0 on   node1 device  0 [0x06] Tesla P100-SXM2-16GB",  # the first releases: no Pid
    ],
)
def test_rank_lines_of_every_layout_give_ranks_and_hosts(rank_line):
    table = parse_nccl_tests(_snippet(rank_line=rank_line), "x.log", "all_reduce")
    assert (table.num_ranks, table.num_nodes) == (1, 1)


def test_the_better_placement_per_size_is_kept_and_named():
    table = parse_nccl_tests(_snippet(), "x.log", "all_reduce")
    assert table.times_us == (30.0, 44.0)  # out-of-place at 1 MiB, in-place at 2 MiB
    assert table.placement == "mixed: out-of-place at 1 of 2 sizes, in-place at 1"
    assert _read(H100_ALL_REDUCE).placement.startswith(("out-of-place", "mixed"))


def test_a_placement_that_wins_everywhere_is_named_alone_and_na_times_are_skipped():
    text = _snippet().replace("30.00", "N/A").replace("45.00", "46.00")
    table = parse_nccl_tests(text, "x.log", "all_reduce")
    assert table.placement == "in-place" and table.times_us == (31.0, 44.0)
