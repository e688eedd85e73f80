"""Malformed run directories give errors naming the file and node; deadlocks are reported, never hang."""

from __future__ import annotations

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.errors import RunDirError, SimulationDeadlock
from tests.embedded.rundirs import coll, comp, recv, send, single_switch, write_run_dir


def _pair(tmp_path, traces, groups=None):
    return write_run_dir(
        tmp_path,
        traces,
        single_switch(len(traces)),
        groups,
        manifest={"workload_prefix": "workload/workload"},
    )


def test_missing_rank_file_is_named(tmp_path):
    root = _pair(tmp_path, {0: [comp(0, 1)], 1: [comp(0, 1)]})
    (root / "workload/workload.1.et").unlink()
    with pytest.raises(RunDirError, match=r"workload\.1\.et: trace file missing"):
        EmbeddedBackend().run(root)


def test_truncated_trace_is_named(tmp_path):
    root = _pair(tmp_path, {0: [comp(0, 1), comp(1, 1, (0,))], 1: [comp(0, 1)]})
    path = root / "workload/workload.0.et"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(RunDirError, match=r"workload\.0\.et: truncated"):
        EmbeddedBackend().run(root)


def test_unknown_pg_name_names_file_and_node(tmp_path):
    traces = {r: [coll(0, "all_reduce", 64, pg="9", name="ar")] for r in range(2)}
    root = _pair(tmp_path, traces, {"1": [0, 1]})
    with pytest.raises(RunDirError, match=r"workload\.0\.et: node 0 \('ar'\) uses pg_name '9'"):
        EmbeddedBackend().run(root)


def test_unmatched_send_names_file_and_node(tmp_path):
    root = _pair(tmp_path, {0: [send(0, 0, 1, 5, 64), send(1, 0, 1, 5, 64)], 1: [recv(0, 0, 1, 5, 64)]})
    with pytest.raises(RunDirError, match=r"workload\.0\.et: node 1 \('send1'\): unmatched send to rank 1"):
        EmbeddedBackend().run(root)


def test_dependency_on_unknown_node_is_named(tmp_path):
    root = _pair(tmp_path, {0: [comp(0, 1, (42,))], 1: [comp(0, 1)]})
    with pytest.raises(RunDirError, match=r"node 0 \('comp0'\) depends on unknown node id 42"):
        EmbeddedBackend().run(root)


def test_crossed_collectives_deadlock_and_the_report_lists_who_waits(tmp_path):
    groups = {"a": [0, 1], "b": [0, 1]}
    traces = {
        0: [coll(0, "all_reduce", 64, "a", name="ar_a"), coll(1, "all_reduce", 64, "b", (0,), "ar_b")],
        1: [coll(0, "all_reduce", 64, "b", name="ar_b"), coll(1, "all_reduce", 64, "a", (0,), "ar_a")],
    }
    root = _pair(tmp_path, traces, groups)
    with pytest.raises(SimulationDeadlock) as caught:
        EmbeddedBackend().run(root)
    message = str(caught.value)
    assert "rank 0" in message and "rank 1" in message
    assert "node 0 ('ar_a')" in message and "node 0 ('ar_b')" in message


def test_dependency_cycle_is_reported_as_deadlock(tmp_path):
    root = _pair(tmp_path, {0: [comp(0, 1, (1,)), comp(1, 1, (0,))], 1: [comp(0, 1)]})
    with pytest.raises(SimulationDeadlock, match="dependency cycle"):
        EmbeddedBackend().run(root)


def test_collectives_on_some_dimensions_only_are_refused(tmp_path):
    node = coll(0, "all_reduce", 1024)
    attr = node.attr.add(name="involved_dim")
    attr.bool_list.values.extend([True, False])
    write_run_dir(tmp_path, {0: [node], 1: [coll(0, "all_reduce", 1024)]}, single_switch(2))
    with pytest.raises(RunDirError, match=r"involved_dim \[True, False\]"):
        EmbeddedBackend().run(tmp_path)
