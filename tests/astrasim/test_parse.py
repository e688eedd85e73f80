"""The parser on real ASTRA-sim output: a result only when every rank printed `finished`."""

from __future__ import annotations

import pytest

from astra_hetero.backends.astrasim.parse import parse_output
from astra_hetero.backends.astrasim.process import ProcessOutcome
from astra_hetero.errors import BackendFailed
from tests.astrasim.conftest import OUTPUTS

OK = ProcessOutcome(exit_status=0, timed_out=False, wall_time_s=0.1)


def read(name: str) -> str:
    return (OUTPUTS / name).read_text()


@pytest.mark.parametrize(
    ("name", "num_ranks", "finish", "exposed", "gpu"),
    [
        ("analytical_aware_allreduce8_stdout.txt", 8, [57426] * 8, [57426] * 8, [0] * 8),
        ("analytical_unaware_compute_plus_allreduce4_stdout.txt", 4, [53000] * 4, [43000] * 4, [10000] * 4),
        ("ns3_allgather16_stdout.txt", 16, [1850320] * 16, [1850320] * 16, [0] * 16),
        (
            "ns3_hetero_one100G_link_dcqcn_stdout.txt",
            4,
            [391248, 382986, 322851, 363811],
            [391248, 382986, 322851, 363811],
            [0] * 4,
        ),
        (
            "stg_gpt3_16npu_analytical_unaware_stdout.txt",
            16,
            [12029010] * 8 + [7271046] * 8,
            [7605677] * 8 + [2845617] * 8,
            [4423333] * 8 + [4425429] * 8,
        ),
    ],
)
def test_real_successful_runs_give_every_rank_in_rank_order(name, num_ranks, finish, exposed, gpu):
    parsed = parse_output(read(name), num_ranks, OK)
    assert [r.rank for r in parsed.ranks] == list(range(num_ranks))
    assert [r.finish for r in parsed.ranks] == finish
    assert [r.exposed_comm for r in parsed.ranks] == exposed
    assert [r.gpu for r in parsed.ranks] == gpu
    assert parsed.warnings == ()


@pytest.mark.parametrize(
    "name",
    [
        "analytical_unaware_compute_plus_allreduce4_stdout.txt",
        "stg_gpt3_16npu_analytical_unaware_stdout.txt",
        "ns3_hetero_one100G_link_dcqcn_stdout.txt",
    ],
)
def test_astrasim_counts_everything_but_compute_as_exposed_communication(name):
    # Pins our reading of ASTRA-sim's figures: finish = wall = GPU time + exposed communication.
    num_ranks = read(name).count(" finished, ")
    for rank in parse_output(read(name), num_ranks, OK).ranks:
        assert rank.finish == rank.wall == rank.gpu + rank.exposed_comm


def test_exit_0_without_finish_lines_is_an_error_not_a_result():
    with pytest.raises(BackendFailed, match="exited 0 but 0 of 4 ranks") as info:
        parse_output(read("FAIL_missing_comm_size_exit0_no_finish_stdout.txt"), 4, OK)
    assert "Attribute comm_size not found" in info.value.log_tail


@pytest.mark.parametrize(
    ("name", "exit_status", "says"),
    [
        ("FAIL_no_global_metadata_abort_stdout.txt", -6, "killed by SIGABRT"),
        ("FAIL_unknown_pg_name_abort_stdout.txt", 1, "exited with status 1"),
    ],
)
def test_crash_before_any_rank_finished_is_an_error_with_the_log_tail(name, exit_status, says):
    with pytest.raises(BackendFailed, match=says) as info:
        parse_output(read(name), 4, ProcessOutcome(exit_status, False, 0.1))
    assert info.value.log_tail.splitlines()[-1] == read(name).splitlines()[-1]
    assert "--- log tail ---" in str(info.value)


def test_crash_after_some_ranks_finished_names_the_missing_ones():
    text = read("ns3_hetero_one100G_link_dcqcn_stdout.txt")
    cut = text[: text.index("sys[1] finished")]  # ranks 2 and 3 finished, then a segfault
    with pytest.raises(BackendFailed, match=r"SIGSEGV before every rank finished; 2 of 4 .*missing: 0-1"):
        parse_output(cut, 4, ProcessOutcome(-11, False, 0.1))


def test_timed_out_run_is_an_error():
    text = read("ns3_allgather16_stdout.txt")
    cut = text[: text.index("sys[5] finished")]
    with pytest.raises(BackendFailed, match="timed out after 3.0 s"):
        parse_output(cut, 16, ProcessOutcome(None, True, 3.0))


def test_empty_output_is_an_error():
    with pytest.raises(BackendFailed, match="printed nothing and exited with status 0"):
        parse_output("", 4, OK)


@pytest.mark.parametrize("exit_status", [134, -6])
def test_abort_at_exit_after_every_rank_finished_is_a_result_with_a_warning(exit_status):
    # Large real runs print every rank's figures, then abort in a destructor.
    text = read("analytical_aware_allreduce8_stdout.txt") + "malloc_consolidate(): invalid chunk size\n"
    parsed = parse_output(text, 8, ProcessOutcome(exit_status, False, 12.0))
    assert [r.finish for r in parsed.ranks] == [57426] * 8
    (warning,) = parsed.warnings
    assert "after every rank had finished" in warning
    assert ("134" in warning) if exit_status > 0 else ("SIGABRT" in warning)


def test_more_ranks_in_the_output_than_in_the_run_directory_is_an_error():
    with pytest.raises(BackendFailed, match="rank 4, but the run directory has 4 ranks"):
        parse_output(read("analytical_aware_allreduce8_stdout.txt"), 4, OK)


def test_a_rank_reported_twice_is_an_error():
    text = read("analytical_unaware_compute_plus_allreduce4_stdout.txt")
    line = next(line for line in text.splitlines() if "sys[2] finished" in line)
    with pytest.raises(BackendFailed, match="rank 2 finished twice"):
        parse_output(text + line + "\n", 4, OK)
