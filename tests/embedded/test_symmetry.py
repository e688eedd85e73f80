"""Rank classes by colour refinement: derived from the files, split by any per-rank difference, and the
split reaches exactly the ranks whose timing depends on the different one."""

from __future__ import annotations

from astra_hetero.backends.embedded.folding.fold import fold
from astra_hetero.backends.embedded.folding.shapes import read_shapes
from astra_hetero.backends.embedded.folding.symmetry import rank_classes
from astra_hetero.backends.embedded.rundir.reader import read_run_dir
from tests.embedded.folding_checks import symmetric_job


def _job(root):
    """TP4 · PP2 · DP2 on four 4-GPU nodes on one switch: ranks 0-7 are stage 0 (replicas 0-3, 4-7)."""
    return read_run_dir(symmetric_job(root, topology="single_switch", micro_batches=2))


def test_a_symmetric_job_has_one_class_per_pipeline_stage(tmp_path):
    sim = _job(tmp_path)
    classes = rank_classes(read_shapes(sim.trace_paths, sim.num_ranks, workers=1), sim.groups)
    assert classes.members == [list(range(8)), list(range(8, 16))]
    assert classes.reps == [0, 8]


def test_a_per_rank_key_splits_its_class_and_the_ranks_that_meet_it(tmp_path):
    sim = _job(tmp_path)
    shapes = read_shapes(sim.trace_paths, sim.num_ranks, workers=1)
    keys = ["slow" if rank == 5 else None for rank in range(16)]
    classes = rank_classes(shapes, sim.groups, keys)
    by_rank = {rank: members for members in classes.members for rank in members}
    assert by_rank[5] == [5]
    assert by_rank[13] == [13]  # 5's pipeline partner meets it in every transfer
    assert by_rank[1] == [1]  # 5's data-parallel partner (same TP index, other replica)
    assert by_rank[4] == [4, 6, 7]  # 5's tensor-parallel peers, alike among themselves
    # every class stays equitable: members see the same classes in each comm group they use
    for members in classes.members:
        views = {
            tuple(tuple(sorted(classes.class_of[m] for m in sim.groups[g])) for g in shapes.groups[r])
            for r in members
        }
        assert len(views) == 1


def test_folding_takes_per_rank_keys_from_its_caller(tmp_path):
    sim = _job(tmp_path)
    assert fold(sim, workers=1).classes.num_classes == 2
    folding = fold(sim, workers=1, rank_keys=["slow" if rank == 5 else None for rank in range(16)])
    assert [5] in folding.classes.members
