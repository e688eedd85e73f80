"""`astra-hetero topology`: writes whole directories, prints figures, and writes nothing on bad input."""

from __future__ import annotations

import yaml

from astra_hetero import rundir
from astra_hetero.cli.main import main
from tests.conftest import make_spec_data


def write_spec(tmp_path, data) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_writes_ns3_and_analytical_files_and_prints_figures(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["topology", write_spec(tmp_path, make_spec_data()), "-o", str(run), "--draw"]) == 0
    for relative in (
        rundir.NS3_TOPOLOGY,
        rundir.NS3_CONFIG,
        rundir.NS3_LOGICAL_TOPOLOGY,
        "ns3/flow.txt",
        "ns3/trace.txt",
        rundir.ANALYTICAL_NETWORK,
        rundir.ANALYTICAL_SYSTEM,
        rundir.ANALYTICAL_NETWORK_1D,
        rundir.ANALYTICAL_SYSTEM_1D,
        rundir.REMOTE_MEMORY,
    ):
        assert (run / relative).is_file(), relative
    assert (run / "topology.png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "16 GPUs" in out and "bisection" in out and "injection" in out
    assert f"wrote {run / 'topology.png'}" in out.splitlines()  # where the drawing went
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left over


def test_rerun_replaces_the_ns3_directory_whole(tmp_path):
    run = tmp_path / "run"
    spec = write_spec(tmp_path, make_spec_data())
    assert main(["topology", spec, "-o", str(run)]) == 0
    (run / "ns3/fct.txt").write_text("stale output of an earlier run\n")
    assert main(["topology", spec, "-o", str(run)]) == 0
    assert not (run / "ns3/fct.txt").exists()


def bad_cluster_specs():
    zero_gpus = make_spec_data()
    zero_gpus["cluster"]["node_groups"][0]["gpus_per_node"] = 0
    unknown_fabric = make_spec_data()
    unknown_fabric["cluster"]["node_groups"][1]["intra_node_fabric"] = "warp-drive"
    tp_across_nodes = make_spec_data(parallelism={"tp": 8, "pp": 1, "dp": 2, "global_batch_size": 16})
    return [(zero_gpus, "gpus_per_node"), (unknown_fabric, "warp-drive"), (tp_across_nodes, "tp=8")]


def test_bad_cluster_specs_give_clear_errors_and_no_files(tmp_path, capsys):
    for index, (data, expected) in enumerate(bad_cluster_specs()):
        case = tmp_path / f"case{index}"
        case.mkdir()
        run = case / "run"
        assert main(["topology", write_spec(case, data), "-o", str(run)]) == 2
        assert expected in capsys.readouterr().err
        assert sorted(p.name for p in case.iterdir()) == ["spec.yaml"]


def test_missing_spec_file_is_an_input_error(tmp_path, capsys):
    assert main(["topology", str(tmp_path / "absent.yaml"), "-o", str(tmp_path / "run")]) == 2
    assert "not found" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
