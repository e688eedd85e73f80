"""`link_efficiency`: ns-3's per-packet overheads (headers, one ACK per data packet) as the share of
every link's rate that carries payload in the flow model."""

from __future__ import annotations

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.backends.embedded.packets import packet_efficiency
from astra_hetero.errors import RunDirError
from tests.embedded.rundirs import coll, single_switch, write_run_dir

B400 = 50.0  # 400 Gbit/s in bytes per ns
HOP_NS = 500


@pytest.mark.parametrize(
    ("payload", "cc_mode", "expected"),
    [
        (1000, 1, 1000 / (1000 + 36 + 48)),  # DCQCN: 36 header bytes, a 48-byte ACK
        (1000, 12, 1000 / 1084),  # no congestion control: the same packets
        (4000, 1, 4000 / 4084),
        (1000, 3, 1000 / (1000 + 36 + 42 + 22 + 54)),  # HPCC: INT in the data packet and in the ACK
    ],
)
def test_packet_efficiency_counts_data_headers_and_one_ack_per_packet(payload, cc_mode, expected):
    assert packet_efficiency(payload, cc_mode) == pytest.approx(expected)


def ring_all_reduce(tmp_path, link_efficiency, config=None):
    n, size = 4, 4_000_000
    manifest = {"collective_algorithm": "ring"}
    if link_efficiency is not None:
        manifest["link_efficiency"] = link_efficiency
    write_run_dir(
        tmp_path, {r: [coll(0, "all_reduce", size)] for r in range(n)}, single_switch(n), manifest=manifest
    )
    if config is not None:
        (tmp_path / "ns3/config.txt").write_text(config)
    bandwidth_ns = 2 * (n - 1) / n * size / B400
    latency_ns = 2 * (n - 1) * 2 * HOP_NS
    return EmbeddedBackend().run(tmp_path).result, bandwidth_ns, latency_ns


@pytest.mark.parametrize("setting", [None, "ideal"])
def test_ideal_links_are_the_default(tmp_path, setting):
    result, bandwidth_ns, latency_ns = ring_all_reduce(tmp_path, setting)
    assert result.iteration_time_us * 1000 == pytest.approx(bandwidth_ns + latency_ns, abs=1.0)
    assert result.meta["link_efficiency"] == 1.0


def test_a_number_scales_only_the_bandwidth_term(tmp_path):
    result, bandwidth_ns, latency_ns = ring_all_reduce(tmp_path, 0.8)
    assert result.iteration_time_us * 1000 == pytest.approx(bandwidth_ns / 0.8 + latency_ns, abs=1.0)


def test_ns3_packets_reads_the_payload_size_from_the_ns3_config(tmp_path):
    config = "CC_MODE 1\nPACKET_PAYLOAD_SIZE 500\n"
    result, bandwidth_ns, latency_ns = ring_all_reduce(tmp_path, "ns3_packets", config)
    factor = 500 / (500 + 36 + 48)
    assert result.meta["link_efficiency"] == pytest.approx(factor)
    assert result.iteration_time_us * 1000 == pytest.approx(bandwidth_ns / factor + latency_ns, abs=1.0)


@pytest.mark.parametrize(
    ("setting", "config", "words"),
    [
        (1.5, None, "a number in (0, 1]"),
        ("packets", None, "'ideal', 'ns3_packets'"),
        ("ns3_packets", None, "missing"),
        ("ns3_packets", "PACKET_PAYLOAD_SIZE many\n", "must be integers"),
    ],
)
def test_bad_settings_name_the_file(tmp_path, setting, config, words):
    with pytest.raises(RunDirError) as error:
        ring_all_reduce(tmp_path, setting, config)
    assert words in str(error.value)
