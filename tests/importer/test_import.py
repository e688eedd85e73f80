"""`import`: a study's own files become a run directory that reproduces the study, or a clear error."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from astra_hetero.cli import main as cli
from astra_hetero.errors import RunDirError
from astra_hetero.importer.pipeline import import_study
from astra_hetero.pipeline import execute
from astra_hetero.rundir import file_sha256
from tests.embedded.rundirs import coll, comp, recv, send
from tests.importer.studies import STG_STDOUT, real_finish_ns, ring_network, stg_study, write_study


@pytest.fixture(scope="module")
def stg_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("stg")
    files = stg_study(root / "study")
    import_study(files, root / "run")
    return files, root / "run", execute(root / "run", timeline="none")


def test_stg_study_reproduces_real_astrasim_to_the_cycle(stg_run):
    """Real ASTRA-sim 518bd51 (congestion-unaware) on the study's own command line: stage 0 finishes
    at 12 029 010 cycles, stage 1 at 7 271 046 (astrasim_outputs/stg_gpt3_16npu_...)."""
    _, _, result = stg_run
    real = real_finish_ns(STG_STDOUT)
    assert [round(r.finish_us * 1000) for r in result.ranks] == [real[r] for r in range(16)]
    assert result.iteration_time_us == 12029.010
    assert result.ranks[14].compute_us == pytest.approx(4425.429)  # roofline, from the system file


def test_ranks_are_what_the_traces_show(stg_run):
    _, _, result = stg_run
    assert [r.stage for r in result.ranks] == [0] * 8 + [1] * 8  # the send/recv pattern: TP8 · PP2
    assert {r.replica for r in result.ranks} == {0}  # one comm group holds each stage: no DP
    assert {r.gpu for r in result.ranks} == {"npu (900 TFLOP/s, 3000 GB/s)"}


def test_files_are_copied_verbatim_and_recorded(stg_run):
    files, run, _ = stg_run
    record = json.loads((run / "import.json").read_text())
    assert record["files"]["system-configuration"]["sha256"] == file_sha256(files.system)
    for role, entry in record["files"].items():
        assert file_sha256(run / entry["copied_to"]) == entry["sha256"], role
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["collective_algorithm"] == "astrasim" and manifest["max_comm_in_flight_per_rank"] == 1
    assert manifest["workload_prefix"] == "workload/workload"


def test_any_trace_name_and_a_directory_prefix(tmp_path):
    traces = {r: [comp(0, 5), coll(1, "all_reduce", 1 << 20, deps=(0,))] for r in range(4)}
    files = write_study(tmp_path / "study", traces, ring_network(4), name="my_job")
    import_study(dataclasses.replace(files, workload=str(tmp_path / "study")), tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run/workload").iterdir())[0] == "my_job.0.et"
    result = execute(tmp_path / "run", timeline="none")
    # 5 µs of compute, then ASTRA-sim's 1 MiB ring all-reduce on Ring_4npus / Ring_4chunks: 43 µs
    assert result.iteration_time_us == pytest.approx(5 + 43.0)
    assert [r.stage for r in result.ranks] == [0] * 4  # no send or recv: one stage


TWO_DIMS = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50, 5 ]\nlatency: [ 5, 5 ]\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload": "nowhere/trace"}, r"trace: --workload-configuration matches no traces"),
        (
            {"network": "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n"},
            r"network\.yml: the network has 8 NPUs .* holds 4 traces",
        ),
        (
            {"network": "topology: [ Torus ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n"},
            r"network\.yml: topology\[0\] is 'Torus'",
        ),
        (
            {"network": TWO_DIMS.replace("[ 4, 2 ]", "[ 4, 1 ]")},
            r"network\.yml: npus_count\[1\] must be an integer > 1",
        ),
        (
            {"groups": {"1": [0, 1, 7]}},
            r"groups\.json: group 1 must list distinct ranks of the job \(0\.\.3\)",
        ),
        ({"groups": {"0": [0, 1]}}, r"groups\.json: group id '0' must be a positive integer"),
        # a rate rounded to 0 in the cluster graph: a ValueError (exit 1) before
        (
            {"network": "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1.0e-300 ]\nlatency: [ 5 ]\n"},
            r"network\.yml: bandwidth\[0\] 1e-300 GB/s is not a physical link rate",
        ),
        # imported, then refused by `run` naming ns3/topology.txt, before
        (
            {"network": "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 1.0e+18 ]\n"},
            r"network\.yml: latency\[0\] must be from 0 to 1e9 ns",
        ),
        # PyYAML's own message spans lines quoting the file; the error stays one line naming the place
        (
            {"network": "topology: [ Ring ]\nn"},
            r"network\.yml: not YAML \(line 2, column 2: could not find[^\n]*$",
        ),
        ({"groups": {"2": [0, 1]}}, r"trace\.0\.et: its collectives use pg_name '1', which .*groups\.json"),
        (
            {"system": {"all-reduce-implementation": ["ring", "ring"]}},
            r"system\.json: all-reduce-implementation lists 2 implementations for a network of 1",
        ),
    ],
)
def test_bad_studies_name_the_file_and_the_reason(tmp_path, change, message):
    from tests.importer.studies import SYSTEM

    traces = {r: [comp(0, 5), coll(1, "all_reduce", 4096, pg="1", deps=(0,))] for r in range(4)}
    groups = change.get("groups", {"1": [0, 1, 2, 3]})
    system = {**SYSTEM, **change.get("system", {})}
    files = write_study(tmp_path / "s", traces, change.get("network", ring_network(4)), system, groups)
    if "workload" in change:
        files = dataclasses.replace(files, workload=str(tmp_path / "s" / change["workload"]))
    with pytest.raises(RunDirError, match=message):
        import_study(files, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_roofline_nodes_without_a_roofline_system_name_the_system_file(tmp_path):
    files = stg_study(tmp_path / "study")
    plain = tmp_path / "study/system_plain.json"
    data = json.loads(files.system.read_text())
    plain.write_text(json.dumps({**data, "roofline-enabled": 0}))
    with pytest.raises(RunDirError, match=r"system_plain\.json: does not enable roofline"):
        import_study(dataclasses.replace(files, system=plain), tmp_path / "run")


def test_cli_takes_astrasims_own_command_line(tmp_path, capsys):
    files = stg_study(tmp_path / "study")
    argv = [
        "import",
        "-o",
        str(tmp_path / "run"),
        f"--workload-configuration={files.workload}",  # --opt=value ...
        "--system-configuration",  # ... and --opt value
        str(files.system),
        f"--network-configuration={files.network}",
        f"--remote-memory-configuration={files.remote_memory}",
        f"--comm-group-configuration={files.comm_groups}",
        "--num-queues-per-dim=1",
    ]
    assert cli.main(argv) == 0
    assert "imported 16 ranks" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["astrasim"]["options"] == {"num-queues-per-dim": 1}
    assert cli.main([*argv[:3], "--workload-configuration=nowhere", *argv[4:]]) == 2
    assert "nowhere: --workload-configuration matches no traces" in capsys.readouterr().err


def test_plain_astrasim_directory_points_at_import(tmp_path, capsys):
    files = stg_study(tmp_path / "study")
    assert cli.main(["run", str(tmp_path / "study")]) == 2
    err = capsys.readouterr().err
    assert "astra-hetero import -o RUN_DIR --workload-configuration" in err and "replaced" not in err
    assert not (tmp_path / "study/result.json").exists() and files.system.is_file()


def test_pipeline_stages_from_sends_and_recvs(tmp_path):
    """Three ranks in a pipeline with one micro-batch: forward 0 -> 1 -> 2, backward back. The last
    stage's gradient leaves after its forward and backward, later than the activations arrive."""
    size = 1 << 10
    traces = {
        0: [comp(0, 2), send(1, 0, 1, 1, size, (0,)), recv(2, 1, 0, 2, size), comp(3, 4, (2,))],
        1: [
            recv(0, 0, 1, 1, size),
            comp(1, 2, (0,)),
            send(2, 1, 2, 1, size, (1,)),
            recv(3, 2, 1, 2, size),
            comp(4, 4, (3,)),
            send(5, 1, 0, 2, size, (4,)),
        ],
        2: [recv(0, 1, 2, 1, size), comp(1, 6, (0,)), comp(3, 6, (1,)), send(2, 2, 1, 2, size, (3,))],
    }
    # list the ranks out of order in the network to show the stages come from the traces
    files = write_study(tmp_path / "s", {2: traces[0], 0: traces[1], 1: traces[2]}, ring_network(3))
    with pytest.raises(RunDirError, match=r"trace\.0\.et: receives 1024 bytes from rank 0 \(tag 1\) 1 time"):
        import_study(files, tmp_path / "bad")  # peers named by the original numbering no longer match
    files = write_study(tmp_path / "t", traces, ring_network(3))
    import_study(files, tmp_path / "run")
    ranks = json.loads((tmp_path / "run/manifest.json").read_text())["ranks"]
    assert [r["stage"] for r in ranks] == [0, 1, 2]
    assert [r["replica"] for r in ranks] == [0, 0, 0]


def test_stages_stay_unknown_where_the_pattern_cannot_tell(tmp_path):
    size = 1 << 10
    # 0 and 1 only ever send to each other at the same depth: no forward direction to read
    traces = {
        0: [comp(0, 1), send(1, 0, 1, 1, size, (0,)), recv(2, 1, 0, 2, size)],
        1: [comp(0, 1), send(1, 1, 0, 2, size, (0,)), recv(2, 0, 1, 1, size)],
    }
    files = write_study(tmp_path / "s", traces, ring_network(2))
    import_study(files, tmp_path / "run")
    ranks = json.loads((tmp_path / "run/manifest.json").read_text())["ranks"]
    assert [r["stage"] for r in ranks] == [None, None]
    result = execute(tmp_path / "run", timeline="none")
    assert [r.stage for r in result.ranks] == [None, None]


def test_import_path_is_recorded_relative_to_nothing_outside(tmp_path):
    files = stg_study(tmp_path / "study")
    import_study(files, tmp_path / "run")
    moved = tmp_path / "elsewhere"
    (tmp_path / "run").rename(moved)
    (tmp_path / "study").rename(tmp_path / "gone")  # the study's own files are no longer needed
    assert execute(moved, timeline="none").iteration_time_us == 12029.010


def test_reimporting_over_an_import_replaces_it(tmp_path):
    files = stg_study(tmp_path / "study")
    import_study(files, tmp_path / "run")
    execute(tmp_path / "run", timeline="none")
    import_study(files, tmp_path / "run")  # ours: no --force needed; the old result goes
    assert not (tmp_path / "run/result.json").exists()
    assert Path(tmp_path / "run/import.json").is_file()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "memory.json: remote-memory file missing"),  # a FileNotFoundError (exit 1) before
        ("{", "memory.json: not a JSON remote-memory file"),
        ('{"memory-type": "DISK"}', "memory-type must be one of NO_MEMORY_EXPANSION"),
        ('{"remote-mem-bw": "fast"}', "remote-mem-bw must be a number >= 0"),
    ],
)
def test_a_remote_memory_file_astrasim_would_exit_on_is_refused_by_name(tmp_path, text, says):
    traces = {r: [comp(0, 5), coll(1, "all_reduce", 4096, pg="1", deps=(0,))] for r in range(4)}
    files = write_study(tmp_path / "s", traces, ring_network(4), groups={"1": [0, 1, 2, 3]})
    memory = tmp_path / "s" / "memory.json"
    if text is not None:
        memory.write_text(text)
    with pytest.raises(RunDirError, match=says):
        import_study(dataclasses.replace(files, remote_memory=memory), tmp_path / "run")
    assert not (tmp_path / "run").exists()
