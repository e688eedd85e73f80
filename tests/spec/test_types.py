"""Every number in a spec is finite, a number, and within a sane range; errors name the field path."""

from __future__ import annotations

import copy
import math

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data

# (path into the spec data, a valid value). Paths use the spec's own field names.
NUMBER_FIELDS = [
    ("cluster.node_groups[0].gpu.bf16_tflops", 989.0),
    ("cluster.node_groups[0].gpu.hbm_tbps", 3.35),
    ("cluster.node_groups[0].gpu.memory_gib", 80.0),
    ("cluster.node_groups[0].gpu.compute_efficiency", 0.5),
    ("cluster.node_groups[0].gpu.memory_efficiency", 0.5),
    ("cluster.node_groups[0].gpu.compute_multiplier", 0.5),
    ("cluster.node_groups[0].intra_node_fabric.gbytes_per_s", 450.0),
    ("cluster.node_groups[0].intra_node_fabric.latency_ns", 250.0),
    ("cluster.node_groups[1].nic.gbps", 200.0),
    ("cluster.node_groups[1].nic.latency_ns", 100.0),
    ("network.link_latency_ns", 500.0),
    ("network.oversubscription", 2.0),
    ("network.uplink_gbps", 400.0),
    ("network.dcqcn.rp_timer_us", 900.0),
    ("network.dcqcn.ewma_gain", 0.5),
    ("network.dcqcn.rate_ai_mbps", 50.0),
    ("network.ns3.link_error_rate", 0.0),
    ("parallelism.dp_bucket_mib", 25.0),
]
INT_FIELDS = [
    ("cluster.node_groups[0].count", 2),
    ("cluster.node_groups[0].nic.count", 4),
    ("network.num_spines", 2),
    ("network.ns3.buffer_size_mb", 32),
    ("parallelism.global_batch_size", 16),
    ("model.num_layers", 8),
    ("model.seq_len", 1024),
]
NON_FINITE = [math.inf, -math.inf, math.nan]
ABSURD = [1e300, -1.0, True, "fast"]


def spec_with(path: str, value):
    data = make_spec_data()
    data["cluster"]["node_groups"][0]["gpu"] = {"preset": "h100-sxm"}
    data["cluster"]["node_groups"][0]["intra_node_fabric"] = {"preset": "nvlink4"}
    data["cluster"]["node_groups"][1]["nic"] = {"gbps": 200}
    data["cluster"]["node_groups"][0]["nic"] = {"gbps": 400}
    data["network"] = {**data["network"], "dcqcn": {}, "ns3": {}}
    node = data
    steps = path.replace("[", ".").replace("]", "").split(".")
    for step in steps[:-1]:
        node = node[int(step)] if step.isdigit() else node[step]
    node[steps[-1]] = value
    return data


@pytest.mark.parametrize("path,valid", NUMBER_FIELDS + INT_FIELDS)
def test_the_valid_value_is_accepted(path, valid):
    parse_spec(spec_with(path, valid))


@pytest.mark.parametrize("bad", NON_FINITE + ABSURD, ids=repr)
@pytest.mark.parametrize("path,valid", NUMBER_FIELDS)
def test_non_finite_and_absurd_numbers_are_refused_naming_the_field(path, valid, bad):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(path, bad))
    assert caught.value.field == path


@pytest.mark.parametrize(
    "path,value",
    [
        ("cluster.node_groups[0].gpu.bf16_tflops", 1e-300),
        ("cluster.node_groups[0].gpu.compute_efficiency", 1e-300),
        ("cluster.node_groups[0].gpu.compute_multiplier", 1e-300),
        ("cluster.node_groups[1].nic.gbps", 1e-300),
        ("cluster.node_groups[0].gpu.compute_efficiency", 1.5),
    ],
)
def test_vanishing_and_out_of_range_values_are_refused(path, value):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(path, value))
    assert caught.value.field == path


@pytest.mark.parametrize("bad", NON_FINITE, ids=repr)
def test_non_finite_values_say_so(bad):
    with pytest.raises(SpecError, match="finite"):
        parse_spec(spec_with("cluster.node_groups[0].gpu.compute_efficiency", bad))


@pytest.mark.parametrize("bad", [True, 2.5, 10**30, 0, -3, "many"], ids=repr)
@pytest.mark.parametrize("path,valid", INT_FIELDS)
def test_counts_are_whole_positive_and_bounded(path, valid, bad):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(path, bad))
    assert caught.value.field == path


@pytest.mark.parametrize("key", [math.inf, math.nan, 1e300, -1.0])
def test_ecn_keys_are_link_rates_too(key):
    data = spec_with("network.ns3.ecn", {key: {"kmin_kb": 100, "kmax_kb": 400, "pmax": 0.2}})
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.field.startswith("network.ns3.ecn")


def test_nic_shorthand_goes_through_the_same_checks():
    for shorthand in (math.inf, 1e300, "1" + "0" * 400 + "G"):
        data = copy.deepcopy(make_spec_data())
        data["cluster"]["node_groups"][0]["nic"] = shorthand
        with pytest.raises(SpecError) as caught:
            parse_spec(data)
        assert caught.value.field == "cluster.node_groups[0].nic.gbps"
