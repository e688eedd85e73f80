"""`link_model`: ideal links, a calibrated share of every link's rate, or each link as ns-3's packets
use it (headers, one ACK per data packet, transmission times in whole nanoseconds, ACK round trip)."""

from __future__ import annotations

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.backends.embedded.rundir.link_model import ns3_link, packet_bytes, tx_ns
from astra_hetero.errors import RunDirError
from tests.embedded.rundirs import coll, single_switch, write_run_dir

B400 = 50.0  # 400 Gbit/s in bytes per ns
HOP_NS = 500


@pytest.mark.parametrize(
    ("payload", "cc_mode", "sizes"),
    [
        (1000, 1, (1036, 48)),  # DCQCN: PPP + IPv4 + UDP + SeqTs; ACK padded to a 60-byte frame less 14
        (1000, 12, (1036, 48)),  # no congestion control: the same packets
        (4000, 1, (4036, 48)),
        (1000, 3, (1078, 76)),  # HPCC: 42 INT bytes in both
    ],
)
def test_packet_sizes(payload, cc_mode, sizes):
    assert packet_bytes(payload, cc_mode) == sizes


@pytest.mark.parametrize(
    ("gbps", "data_ns", "ack_ns"),
    [
        (400, 21, 1),  # 20.72 and 0.96 ns, rounded as ns-3 rounds
        (100, 83, 4),
        (3600, 2, 0),  # NVLink: 2.30 ns, so ns-3 moves payload faster than the nominal rate
    ],
)
def test_transmission_times_round_to_whole_nanoseconds(gbps, data_ns, ack_ns):
    rate = gbps / 8
    assert (tx_ns(1036, rate), tx_ns(48, rate)) == (data_ns, ack_ns)
    bytes_per_ns, delay_ns = ns3_link(rate, 500, 1000, 1)
    assert bytes_per_ns == pytest.approx(1000 / (data_ns + ack_ns))
    assert delay_ns == 2 * 500 + data_ns + ack_ns  # data there, ACK back, one packet per hop


def ring_all_reduce(tmp_path, link_model, config=None):
    n, size = 4, 4_000_000
    manifest = {"collective_algorithm": "ring"}
    if link_model is not None:
        manifest["link_model"] = link_model
    write_run_dir(
        tmp_path, {r: [coll(0, "all_reduce", size)] for r in range(n)}, single_switch(n), manifest=manifest
    )
    if config is not None:
        (tmp_path / "ns3/config.txt").write_bytes(config.encode(errors="surrogateescape"))
    return EmbeddedBackend().run(tmp_path).result, 2 * (n - 1) / n * size, 2 * (n - 1)


@pytest.mark.parametrize("setting", [None, "ideal"])
def test_ideal_links_are_the_default(tmp_path, setting):
    result, moved, steps = ring_all_reduce(tmp_path, setting)
    assert result.iteration_time_us * 1000 == pytest.approx(moved / B400 + steps * 2 * HOP_NS, abs=1.0)
    assert result.meta["link_model"] == "ideal"


def test_a_number_scales_only_the_rates(tmp_path):
    result, moved, steps = ring_all_reduce(tmp_path, 0.8)
    assert result.iteration_time_us * 1000 == pytest.approx(
        moved / (0.8 * B400) + steps * 2 * HOP_NS, abs=1.0
    )


def test_ns3_packets_reads_the_payload_size_from_the_ns3_config(tmp_path):
    result, moved, steps = ring_all_reduce(tmp_path, "ns3_packets", "CC_MODE 1\nPACKET_PAYLOAD_SIZE 500\n")
    per_packet_ns = tx_ns(536, B400) + tx_ns(48, B400)  # 11 + 1 ns at 400 Gbit/s
    link_delay = 2 * HOP_NS + per_packet_ns
    expected = moved / (500 / per_packet_ns) + steps * 2 * link_delay
    assert result.iteration_time_us * 1000 == pytest.approx(expected, abs=1.0)
    assert result.meta["link_model"].startswith("ns3_packets (500-byte payloads")


@pytest.mark.parametrize(
    ("setting", "config", "words"),
    [
        (1.5, None, "a number in (0, 1]"),
        ("packets", None, "'ideal', 'ns3_packets'"),
        ("ns3_packets", None, "missing"),
        ("ns3_packets", "PACKET_PAYLOAD_SIZE many\n", "must be integers"),
        ("ns3_packets", "PACKET_PAYLOAD_SIZE 100000000000000000000\n", "from 1 to 65535 bytes"),
        # read as text with no check before: a UnicodeDecodeError (exit 1)
        ("ns3_packets", "PACKET_PAYLOAD_SIZE 1000\n\udce2\n", "not UTF-8 text"),
    ],
)
def test_bad_settings_name_the_file(tmp_path, setting, config, words):
    with pytest.raises(RunDirError) as error:
        ring_all_reduce(tmp_path, setting, config)
    assert words in str(error.value)


def mixed_switch() -> str:
    """Hosts 0 and 1 on 400 Gbit/s links and host 2 on a 100 Gbit/s link to switch 3."""
    return "4 1 3\n3\n0 3 400Gbps 0.0005ms 0\n1 3 400Gbps 0.0005ms 0\n2 3 100Gbps 0.0005ms 0\n"


def test_step_down_links_are_the_switch_ports_slower_than_another_link_into_the_switch():
    from astra_hetero.backends.embedded.rundir.link_model import step_down_links
    from astra_hetero.backends.embedded.rundir.topology import parse_topology

    topology = parse_topology(mixed_switch())
    steps = step_down_links(topology)
    assert [(topology.link_src[k], topology.link_dst[k]) for k in steps] == [(3, 2)]


@pytest.mark.parametrize(("src", "dst", "slowed"), [(0, 2, True), (2, 0, False), (0, 1, False)])
def test_step_down_efficiency_slows_exactly_the_traffic_that_steps_down(tmp_path, src, dst, slowed):
    from tests.embedded.rundirs import recv, send

    size = 4_000_000
    traces = {r: [] for r in range(3)}
    traces[src] = [send(0, src, dst, 1, size)]
    traces[dst] = [recv(0, src, dst, 1, size)]
    times = []
    for efficiency in (1.0, 0.5):
        write_run_dir(tmp_path, traces, mixed_switch(), manifest={"step_down_efficiency": efficiency})
        times.append(EmbeddedBackend().run(tmp_path).result.iteration_time_us * 1000)
    bottleneck = 100 / 8 if 2 in (src, dst) else B400
    assert times[0] == pytest.approx(size / bottleneck + 2 * HOP_NS, abs=1.0)
    assert times[1] == pytest.approx(size / (bottleneck * (0.5 if slowed else 1)) + 2 * HOP_NS, abs=1.0)
