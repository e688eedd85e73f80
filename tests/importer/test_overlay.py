"""The heterogeneity overlay: per-rank durations in the traces, per-NPU link rates, events; the study
as given kept beside it; errors naming the overlay's field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from astra_hetero import chakra_io
from astra_hetero.astrasim_inputs.system import Roofline
from astra_hetero.backends.embedded.trace.decode import read_rank_trace
from astra_hetero.chakra_io import pb
from astra_hetero.cli import main as cli
from astra_hetero.errors import RunDirError, SpecError
from astra_hetero.importer.overlay import gpu_roofline
from astra_hetero.importer.pipeline import import_study, overlay_run_dir
from astra_hetero.pipeline import execute
from astra_hetero.results.io import read_result
from tests.embedded.rundirs import coll, comp
from tests.importer.studies import ring_network, stg_study, write_study


def overlay(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def stg(tmp_path_factory):
    root = tmp_path_factory.mktemp("stg")
    files = stg_study(root / "study")
    import_study(files, root / "plain")
    return files, root, execute(root / "plain", timeline="none")


def test_compute_factor_doubles_those_ranks_compute_time(stg, tmp_path):
    files, _, plain = stg
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "8-15", compute_factor: 0.5}\n')
    import_study(files, tmp_path / "run", overlay=path)
    result = execute(tmp_path / "run", timeline="none")
    for before, after in zip(plain.ranks, result.ranks, strict=True):
        factor = 2 if before.rank >= 8 else 1
        # durations are whole microseconds whose running sum tracks the exact one: within 0.5 µs
        assert after.compute_us == pytest.approx(factor * before.compute_us, abs=0.5 * factor + 1e-9)
    assert result.iteration_time_us > plain.iteration_time_us
    # the real ASTRA-sim backends read the same durations: the system file's roofline is off now
    system = json.loads((tmp_path / "run/analytical/system.json").read_text())
    assert system["roofline-enabled"] == 0 and system["peak-perf"] == 900
    assert {r.gpu for r in result.ranks[8:]} == {"npu (900 TFLOP/s, 3000 GB/s) x0.5 speed"}


def test_the_study_as_given_is_kept_and_recorded(stg, tmp_path):
    files, root, plain = stg
    path = overlay(tmp_path, "npu_groups:\n  - {npus: 3, compute_factor: 2}\n")
    import_study(files, tmp_path / "run", overlay=path)
    original = tmp_path / "run/original"
    assert (original / "workload/workload.3.et").read_bytes() == Path(f"{files.workload}.3.et").read_bytes()
    assert execute(original, timeline="none").iteration_time_us == plain.iteration_time_us
    record = json.loads((tmp_path / "run/import.json").read_text())
    assert record["overlay"]["rewritten_ranks"] == list(range(16))  # roofline traces: every rank timed
    assert (tmp_path / "run/overlay.yaml").read_text() == path.read_text()


def test_gpu_preset_on_roofline_traces_takes_its_roofline(stg, tmp_path):
    files, _, _ = stg
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "0-7", gpu: h100-sxm}\n')
    import_study(files, tmp_path / "run", overlay=path)
    h100 = gpu_roofline("h100-sxm")
    expected = 0
    for record in list(chakra_io.iter_records(Path(f"{files.workload}.0.et").read_bytes()))[1:]:
        node = pb.Node()
        node.ParseFromString(record)
        if node.type == pb.COMP_NODE:
            attrs = {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}
            expected += h100.time_ns(attrs["num_ops"], attrs["tensor_size"])
    trace = read_rank_trace(tmp_path / "run/workload/workload.0.et", 16)
    assert trace.durations_ns.sum() == pytest.approx(expected, abs=500)
    assert h100 == Roofline(989.4e12, 3.35e12)  # the catalog's BF16 peak and HBM bandwidth


def measured_study(tmp_path: Path, with_work: bool = True):
    def node(node_id: int, duration_us: int, deps=()) -> pb.Node:
        n = comp(node_id, duration_us, deps)
        if with_work:
            n.attr.add(name="num_ops", int64_val=10**12)
            n.attr.add(name="tensor_size", int64_val=10**8)
        return n

    traces = {r: [node(0, 1000), coll(1, "all_reduce", 1 << 20, deps=(0,))] for r in range(4)}
    return write_study(tmp_path / "study", traces, ring_network(4))


def test_gpu_preset_on_measured_durations_scales_by_modelled_time(tmp_path):
    files = measured_study(tmp_path)
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "2-3", gpu: h100-sxm, source_gpu: a100-80}\n')
    import_study(files, tmp_path / "run", overlay=path)
    ratio = gpu_roofline("h100-sxm").time_ns(10**12, 10**8) / gpu_roofline("a100-80").time_ns(10**12, 10**8)
    trace = read_rank_trace(tmp_path / "run/workload/trace.2.et", 4)
    assert trace.durations_ns[0] == round(1000 * ratio) * 1000
    assert read_rank_trace(tmp_path / "run/workload/trace.0.et", 4).durations_ns[0] == 1_000_000  # untouched


def test_measured_durations_need_source_gpu_and_work(tmp_path):
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "2-3", gpu: h100-sxm}\n')
    with pytest.raises(SpecError, match=r"overlay\.yaml: npu_groups\[0\]\.source_gpu"):
        import_study(measured_study(tmp_path), tmp_path / "run", overlay=path)
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "2-3", gpu: h100-sxm, source_gpu: a100-80}\n')
    with pytest.raises(RunDirError, match=r"trace\.2\.et: node 0 .*carries no num_ops and tensor_size"):
        import_study(measured_study(tmp_path / "bare", with_work=False), tmp_path / "run", overlay=path)


def test_link_rates_per_npu_and_astrasims_bottleneck(stg, tmp_path):
    files, _, plain = stg
    path = overlay(tmp_path, 'links:\n  - {npus: "12-15", dimension: 1, gbps: 100}\n')
    import_study(files, tmp_path / "run", overlay=path)
    scales = json.loads((tmp_path / "run/analytical/npu_link_scales.json").read_text())["scales"]
    # 100 Gbit/s of the file's 50 GB/s: ASTRA-sim's file gets that bottleneck for every NPU, the
    # embedded engine the others' rate back, relative to it
    network = (tmp_path / "run/analytical/network.yml").read_text()
    assert "bandwidth: [ 450.0, 12.5 ]" in network
    assert scales[12] == [1.0, 1.0] and scales[0] == [1.0, 4.0]
    notes = json.loads((tmp_path / "run/analytical/approximations.json").read_text())
    assert "dimension 1: 12.5 GB/s for every NPU" in notes["analytical/network.yml"]
    result = execute(tmp_path / "run", timeline="none")
    assert result.iteration_time_us > plain.iteration_time_us
    assert result.warnings[0].startswith("approximation: ")


def test_events_and_iterations(stg, tmp_path):
    files, _, plain = stg
    text = 'dynamics:\n  - {event: device_slowdown, npus: "8-15", factor: 0.5, start_ms: 0}\niterations: 2\n'
    import_study(files, tmp_path / "run", overlay=overlay(tmp_path, text))
    result = execute(tmp_path / "run", timeline="none")
    assert len(result.iterations) == 2 and result.events[0]["ranks"] == list(range(8, 16))
    assert result.iteration_time_us > plain.iteration_time_us


def test_a_timeline_of_several_iterations_names_astrasims_algorithms(stg, tmp_path):
    """Iterations run the dynamic engine, whose trace spans name each collective's algorithm: on an
    imported study the system file's (this crashed with an AttributeError before)."""
    files, _, _ = stg
    import_study(files, tmp_path / "run", overlay=overlay(tmp_path, "iterations: 2\n"))
    execute(tmp_path / "run", timeline="all")
    events = json.loads((tmp_path / "run/trace.json").read_text())["traceEvents"]
    algorithms = {e["args"]["algorithm"] for e in events if "algorithm" in e.get("args", {})}
    system = json.loads(files.system.read_text())
    assert algorithms and algorithms <= {"direct", "+".join(system["all-reduce-implementation"][:2]), "ring"}


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        (
            'npu_groups:\n  - {npus: "12-19", compute_factor: 0.5}\n',
            "npu_groups[0].npus",
            "NPU 16 is outside",
        ),
        ("links:\n  - {npus: 1, dimension: 2, gbps: 10}\n", "links[0].dimension", "2 dimension(s)"),
        ("npu_groups:\n  - {npus: 1, compute_factr: 0.5}\n", "npu_groups[0].compute_factr", "unknown field"),
        ("npu_groups:\n  - {npus: 1, gpu: h900}\n", "npu_groups[0].gpu", "unknown GPU preset"),
        ('npu_groups:\n  - {npus: "7-3", compute_factor: 2}\n', "npu_groups[0].npus", "runs backwards"),
        ("links:\n  - {npus: 1, bandwidth_factor: 0.5, gbps: 10}\n", "links[0]", "bandwidth_factor"),
        ("dynamics:\n  - {event: link_rate, factor: 0.5}\n", "dynamics[0].event", "links shared by flows"),
        ("dynamics: 5\n", "dynamics", "valid list"),  # a TypeError before
        (
            "dynamics:\n  - {event: device_slowdown, npus: 0, factor: 0.5, start_ms: 1, end_ms: 1.0000000001}"
            "\n",
            "dynamics[0]",
            "by at least 1 ns",
        ),  # the run directory's reader refused it, after the overlaid directory was written
        (
            'npu_groups:\n  - {npus: 1, compute_factor: 2}\n  - {npus: "0-3", compute_factor: 3}\n',
            "npu_groups[1].npus",
            "also in npu_groups[0]",
        ),
    ],
)
def test_bad_overlays_name_the_field(stg, tmp_path, capsys, text, field, reason):
    files, _, _ = stg
    path = overlay(tmp_path, text)
    with pytest.raises(SpecError) as error:
        import_study(files, tmp_path / "run", overlay=path)
    assert error.value.field == f"{path}: {field}" and reason in error.value.reason
    assert not (tmp_path / "run").exists()


def test_run_hetero_moves_the_study_with_its_result_to_original(stg, tmp_path, capsys):
    files, _, plain = stg
    import_study(files, tmp_path / "run")
    execute(tmp_path / "run", timeline="none")
    path = overlay(tmp_path, 'npu_groups:\n  - {npus: "8-15", compute_factor: 0.5}\n')
    assert cli.main(["run", str(tmp_path / "run"), "--hetero", str(path), "--timeline", "none"]) == 0
    out = capsys.readouterr().out
    assert "the study without its overlay (original/): 12.03 ms" in out
    assert read_result(tmp_path / "run/original").iteration_time_us == plain.iteration_time_us
    assert cli.main(["report", str(tmp_path / "run"), "--no-plots"]) == 0
    report = capsys.readouterr().out
    assert "per rank, original → run" in report and "4.425 → 8.851" in report
    # laying another overlay replaces the first; original/ stays the study as given
    overlay_run_dir(tmp_path / "run", overlay(tmp_path, "npu_groups:\n  - {npus: 0, compute_factor: 2}\n"))
    assert read_result(tmp_path / "run/original").iteration_time_us == plain.iteration_time_us
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["ranks"][8]["gpu"] == "npu (900 TFLOP/s, 3000 GB/s)"


def test_link_overlay_that_every_message_meets_equals_a_slower_network_file(stg, tmp_path):
    """Every dimension-1 line pairs an NPU of 0-7 with one of 8-15, so slowing 8-15's dimension-1 links
    slows every dimension-1 message: the same as the study with that dimension's bandwidth in its file."""
    files, _, _ = stg
    path = overlay(tmp_path, 'links:\n  - {npus: "8-15", dimension: 1, gbps: 100}\n')
    import_study(files, tmp_path / "run", overlay=path)
    slower = tmp_path / "net.yml"
    slower.write_text(files.network.read_text().replace("[ 450.0, 50.0 ]", "[ 450.0, 12.5 ]"))
    import_study(dataclasses.replace(files, network=slower), tmp_path / "file")
    overlaid = execute(tmp_path / "run", timeline="none")
    assert [r.finish_us for r in overlaid.ranks] == [
        r.finish_us for r in execute(tmp_path / "file", timeline="none").ranks
    ]


def test_nccl_model_on_an_import_needs_the_gpus(stg, tmp_path, capsys):
    files, root, plain = stg
    assert cli.main(["run", str(root / "plain"), "--collective-model", "nccl", "--timeline", "none"]) == 2
    assert "the NCCL model needs each rank's GPU architecture" in capsys.readouterr().err
    text = 'npu_groups:\n  - {npus: "0-7", gpu: h100-sxm}\n  - {npus: "8-15", gpu: a100-80}\n'
    import_study(files, tmp_path / "run", overlay=overlay(tmp_path, text))
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    result = EmbeddedBackend(timeline=False, collective_model="nccl").run(tmp_path / "run").result
    assert result.meta["collective_model"] == "nccl" and result.iteration_time_us > 0
    assert "link's kind taken from its dimension" in result.warnings[0]
