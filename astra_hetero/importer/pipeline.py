"""Import a study as a library call: read and check it, label its ranks, lay an overlay over it, and
publish the run directory in one step (outputs.publish_output: a failure leaves the target as it was).

With an overlay the run directory holds the overlaid study and, in `original/`, the study as given
(a run directory of its own), which `run` simulates beside it and `report` compares it with.
`overlay_run_dir` lays an overlay over a directory imported earlier: that directory, result included,
becomes `original/` of the new one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.folding.shapes import read_shapes
from astra_hetero.errors import RunDirError
from astra_hetero.importer import overlay as lay
from astra_hetero.importer.checks import check_traces, rank_labels
from astra_hetero.importer.overlay_schema import Overlay, check_overlay, load_overlay
from astra_hetero.importer.process_groups import metadata_groups
from astra_hetero.importer.study import Study, StudyFiles, read_study
from astra_hetero.importer.write import (
    IMPORT_RECORD,
    import_record,
    inputs_digest,
    write_network,
    write_workload,
)
from astra_hetero.outputs import MARKER
from astra_hetero.pipeline import run_dir_staging
from astra_hetero.spec.catalog import gpu_catalog

ORIGINAL = "original"


@dataclass(frozen=True)
class OverlayFile:
    overlay: Overlay
    text: str
    path: Path


def import_study(
    files: StudyFiles,
    out: Path,
    *,
    force: bool = False,
    overlay: Path | None = None,
    workers: int | None = None,
) -> Study:
    """Write the study named by `files` as the run directory `out` (with `overlay` laid over it)."""
    study, labels = _read(files, workers)
    plan = _overlay(study, overlay) if overlay is not None else None
    _publish(study, labels, Path(out), force, plan, previous_record=None, original=None)
    return study


def overlay_run_dir(run_dir: Path, overlay: Path, out: Path | None = None, force: bool = False) -> Study:
    """Lay `overlay` over the imported study in `run_dir`; write the result to `out` (default: in
    place). `run_dir` as it is (its result too) becomes `original/` of the new directory."""
    run_dir = Path(run_dir)
    manifest = rundir.RunDir(run_dir).read_manifest()
    if manifest.get("source") != "astrasim-import":
        raise RunDirError(f"{run_dir}: --hetero applies to a study brought in with `astra-hetero import`")
    base = run_dir / ORIGINAL if (run_dir / ORIGINAL / rundir.MANIFEST).is_file() else run_dir
    files = study_files_of(base)
    study, labels = _read(files, None)
    plan = _overlay(study, overlay)
    record = rundir.read_json_object(base / IMPORT_RECORD, "it was not written by `astra-hetero import`")
    target = Path(out) if out is not None else run_dir
    _publish(study, labels, target, force, plan, previous_record=record, original=base)
    return study


def study_files_of(run_dir: Path) -> StudyFiles:
    """The study's files as an imported run directory holds them."""
    manifest = rundir.RunDir(run_dir).read_manifest()
    section = manifest["astrasim"]

    def inside(relative: str | None) -> Path | None:
        return None if relative is None else rundir.inside(run_dir, relative, "manifest.json")

    system, network = inside(manifest["system_configuration"]), inside(section["network_configuration"])
    assert system is not None and network is not None
    return StudyFiles(
        workload=str(run_dir / manifest["workload_prefix"]),
        system=system,
        network=network,
        remote_memory=inside(section.get("remote_memory_configuration")),
        comm_groups=inside(section.get("comm_group_configuration")),
        logical_topology=inside(section.get("logical_topology_configuration")),
        options=dict(section.get("options") or {}),
    )


def _read(files: StudyFiles, workers: int | None) -> tuple[Study, list[dict[str, Any]]]:
    study = read_study(files)
    if study.groups is None:  # PyTorch traces declare their process groups themselves
        declared = metadata_groups(list(study.trace_paths), study.num_ranks)
        if declared:
            study = dataclasses.replace(study, groups=declared)
    shapes = read_shapes(list(study.trace_paths), study.num_ranks, workers, study.system.roofline)
    check_traces(study, shapes)
    return study, rank_labels(study, shapes)


def _overlay(study: Study, path: Path) -> OverlayFile:
    overlay, text = load_overlay(Path(path))
    check_overlay(overlay, Path(path), study.num_ranks, len(study.dims))
    lay.check_links_supported(study, overlay, Path(path))
    return OverlayFile(overlay, text, Path(path))


def _publish(
    study: Study,
    labels: list[dict[str, Any]],
    out: Path,
    force: bool,
    plan: OverlayFile | None,
    previous_record: dict[str, Any] | None,
    original: Path | None,
) -> None:
    digest = inputs_digest(study) + (lay.overlay_digest(plan.text) if plan else "")
    name = out.name
    with run_dir_staging(out, force) as run:

        def workload(path: Path) -> None:
            if plan is not None:
                _original(study, labels, path / ORIGINAL, original)
            manifest = write_workload(study, path, labels, name)
            record = previous_record or import_record(study, path)
            if plan is not None:
                _lay_workload(study, path, plan, manifest, record)
            rundir.write_json_atomic(path / rundir.MANIFEST, manifest)
            rundir.write_json_atomic(path / IMPORT_RECORD, record)

        def network(path: Path) -> None:
            write_network(study, path)
            if plan is not None:
                _lay_network(study, path, plan)

        run.write("workload", digest, workload)
        run.write("topology", digest, network)


def _original(study: Study, labels: list[dict[str, Any]], target: Path, source: Path | None) -> None:
    """The study as given: a copy of the directory it was imported into (`source`), or imported afresh."""
    if source is None:
        _publish(study, labels, target, False, None, None, None)
        return

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    ignore = shutil.ignore_patterns(ORIGINAL) if source.name != ORIGINAL else None
    shutil.copytree(source, target, copy_function=link, ignore=ignore, symlinks=True)
    if not (target / MARKER).is_file():
        raise RunDirError(f"{source}: not an astra-hetero run directory")


def _lay_workload(
    study: Study, root: Path, plan: OverlayFile, manifest: dict[str, Any], record: dict[str, Any]
) -> None:
    overlay = plan.overlay
    speeds = lay.npu_speeds(overlay, study.num_ranks)
    rewritten = lay.traces_to_rewrite(study, speeds)
    prefix = root / manifest["workload_prefix"]
    for rank in rewritten:
        lay.rewrite_trace(study, rank, speeds[rank], Path(f"{prefix}.{rank}.et"), plan.path)
    for entry, speed in zip(manifest["ranks"], speeds, strict=True):
        entry["gpu"] = lay.device_label(entry["gpu"], speed)
        if speed.gpu is not None:  # what the NCCL model tunes a communicator by
            entry["architecture"] = gpu_catalog()[speed.gpu].architecture
    if overlay.links:
        manifest["astrasim"]["npu_link_scales"] = lay.NPU_LINK_SCALES
    manifest["overlay"] = lay.OVERLAY_COPY
    manifest["original"] = ORIGINAL
    (root / lay.OVERLAY_COPY).write_text(plan.text)
    document = lay.dynamics_document(overlay, study.num_ranks)
    if document is not None:
        rundir.write_json_atomic(root / rundir.DYNAMICS, document)
    derived = dict(record.get("derived", {}))
    if rewritten:
        derived[f"{manifest['workload_prefix']}.<rank>.et"] = (
            f"durations of ranks {_ranges(rewritten)} written by the overlay"
            + (" (roofline nodes timed into durations for every rank)" if study.system.roofline else "")
        )
    if study.system.roofline is not None and rewritten:
        derived[rundir.ANALYTICAL_SYSTEM] = "the study's system file with roofline-enabled 0"
    if overlay.links:
        derived[rundir.ANALYTICAL_NETWORK] = "the study's network at each dimension's bottleneck"
        derived[lay.NPU_LINK_SCALES] = "each NPU's link factor per dimension"
    record.update(
        derived=derived,
        overlay={
            "given": str(plan.path),
            "copied_to": lay.OVERLAY_COPY,
            "sha256": rundir.file_sha256(plan.path),
            "rewritten_ranks": rewritten,
            "original": ORIGINAL,
        },
    )


def _lay_network(study: Study, root: Path, plan: OverlayFile) -> None:
    overlay = plan.overlay
    speeds = lay.npu_speeds(overlay, study.num_ranks)
    if study.system.roofline is not None and lay.traces_to_rewrite(study, speeds):
        path = root / rundir.ANALYTICAL_SYSTEM
        path.write_text(lay.roofline_off(path.read_text()))
    if study.analytical is not None:
        scales = lay.link_scales(overlay, study.analytical)
        if scales is not None:
            lay.write_network_overlay(study, root, scales)


def _ranges(ranks: list[int]) -> str:
    parts, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            parts.append(f"{start}" if start == rank else f"{start}-{rank}")
            start = None
    return ", ".join(parts)
