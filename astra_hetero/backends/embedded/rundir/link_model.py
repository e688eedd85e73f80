"""How the flow model treats each link (`network.link_model` in the spec, `link_model` in the manifest):
`ideal` (line rate, one-way delay), a number (that share of the line rate, e.g. calibrated), or
`ns3_packets`: what ASTRA-sim's ns-3 backend makes of the link, derived from `ns3/config.txt`.

ns-3 (the HPCC RDMA stack) cuts a message into packets of PACKET_PAYLOAD_SIZE bytes, each with PPP (2) +
IPv4 (20) + UDP (8) + SeqTs (6) header bytes, plus an INT header for the congestion controls that use
one (HPCC 5 × 8 + 2 bytes, TIMELY 8, PINT 1; DCQCN none). The receiver answers every data packet with an
ACK: a qbb header (12 + INT) padded to 26 bytes, + IPv4 + PPP = 48 bytes. A device holds its link for
each packet's transmission time *rounded to whole nanoseconds* (ns-3's time resolution), so a 1036-byte
packet takes 21 ns at 400 Gbit/s (20.7 exact) but 2 ns at 3600 Gbit/s (2.3 exact). A message completes
when its last ACK is back at the sender: each message pays the path's delay twice. (Sources:
astra-network-ns3 `RdmaHw::GetNxtPacket`, `RdmaHw::ReceiveUdp`, `SeqTsHeader`, `qbbHeader`,
`QbbNetDevice::TransmitStart`, `DataRate::CalculateBitsTxTime`; astra-sim's `qp_finish`.)

So with `ns3_packets`, every directed link gets
    rate  = payload / (tx_ns(data packet) + tx_ns(ACK))     the ACKs of data flowing the other way
    delay = 2 × delay + tx_ns(data packet) + tx_ns(ACK)     data there, ACK back; store-and-forward
which, at 1000-byte payloads, is 90.9 % of 400 Gbit/s, 92.0 % of 100 Gbit/s, and 111 % of 3600 and
2400 Gbit/s NVLink links. Ring collectives, which ASTRA-sim runs, load both directions of every link
they use, so the ACK share is right for them; data that flows one way only (a pipeline send) is
charged the ACK share it does not pay (4.5 % at 400 Gbit/s).

Congestion control is not simulated, but where it costs most is known from the topology alone: a
*step-down* link, one a switch feeds from faster links (a 100 Gbit/s NIC's downlink behind 400 Gbit/s
spines, a shared NIC behind an NVSwitch). Senders start at their own line rate, the queue in front of
the slower link fills, and DCQCN cuts them below that link's rate and recovers slowly. The manifest's
`step_down_efficiency` (from the spec, calibrated against ns-3 by benchmarks/packet_fidelity.py) is the
share of its rate such a link delivers; 1 leaves the links alone.

`dcqcn` simulates the congestion control instead (`network.dcqcn`, a fluid model driven by the same
`ns3/config.txt`) on the links as `ns3_packets` gives them; `auto` does so on the links where rates
step down or leaves are oversubscribed (`network.fluid_links.fluid_link_set`) and leaves the others
to the flow model's sharing; a fabric with no such link runs as `ns3_packets`. Neither takes a
`step_down_efficiency` (that factor stands in for what they simulate).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.rundir.dcqcn_config import read_config_values
from astra_hetero.backends.embedded.rundir.topology import Topology
from astra_hetero.errors import RunDirError

PPP_BYTES, IPV4_BYTES, UDP_BYTES, SEQ_TS_BYTES = 2, 20, 8, 6
QBB_BASE_BYTES = 12  # sport, dport, flags, pg (2 each) and seq (4)
ACK_MIN_QBB_BYTES = 60 - 14 - 20  # ns-3 pads an ACK's payload as if to a 60-byte Ethernet frame
# INT header bytes by ns-3 CC_MODE (3 HPCC, 7 TIMELY, 10 HPCC-PINT at one byte); others carry none.
INT_BYTES = {3: 5 * 8 + 2, 7: 8, 10: 1}
DEFAULT_PAYLOAD_BYTES = 1000  # ns-3's own default PACKET_PAYLOAD_SIZE
MAX_PAYLOAD_BYTES = 65_535  # an IP packet's largest total length (RFC 791); a payload cannot be more
FLUID_MODELS = ("dcqcn", "auto")  # link models that simulate DCQCN on top of ns3_packets' links


def packet_bytes(payload_bytes: int, cc_mode: int) -> tuple[int, int]:
    """(data packet, ACK) sizes on the wire."""
    int_bytes = INT_BYTES.get(cc_mode, 0)
    data = payload_bytes + PPP_BYTES + IPV4_BYTES + UDP_BYTES + SEQ_TS_BYTES + int_bytes
    ack = max(ACK_MIN_QBB_BYTES, QBB_BASE_BYTES + int_bytes) + IPV4_BYTES + PPP_BYTES
    return data, ack


def tx_ns(num_bytes: int, bytes_per_ns: float) -> int:
    """Transmission time as ns-3 schedules it: rounded to the nearest nanosecond."""
    return int(num_bytes / bytes_per_ns + 0.5)


def ns3_link(bytes_per_ns: float, delay_ns: int, payload_bytes: int, cc_mode: int) -> tuple[float, int]:
    """(payload bytes per ns, delay ns) of one directed link as ns-3's packets use it."""
    data, ack = packet_bytes(payload_bytes, cc_mode)
    # at least 1 ns: past 8 Tbit/s a packet rounds to no time at all in ns-3, which no rate can mirror
    per_packet_ns = max(1, tx_ns(data, bytes_per_ns) + tx_ns(ack, bytes_per_ns))
    return payload_bytes / per_packet_ns, 2 * delay_ns + per_packet_ns


def apply_link_model(topology: Topology, root: Path, manifest: dict[str, Any]) -> tuple[Topology, str]:
    """The topology as the run directory's `link_model` and `step_down_efficiency` ask, and a note
    saying what was applied."""
    topology, note = _packets(topology, root, manifest)
    efficiency = manifest.get("step_down_efficiency", 1.0)
    if not _is_fraction(efficiency):
        raise RunDirError(
            f"{root / rundir.MANIFEST}: step_down_efficiency must be a number in (0, 1], not {efficiency!r}"
        )
    if efficiency != 1 and manifest.get("link_model") in FLUID_MODELS:
        raise RunDirError(
            f"{root / rundir.MANIFEST}: step_down_efficiency {efficiency:g} with link_model "
            f"{manifest['link_model']}: the fluid model simulates what that factor calibrates; leave it at 1"
        )
    if efficiency == 1:
        return topology, note
    steps = step_down_links(topology)
    rates = [rate * efficiency if k in steps else rate for k, rate in enumerate(topology.link_bytes_per_ns)]
    return replace(topology, link_bytes_per_ns=rates), (
        f"{note}; {efficiency:g} of the rate on {len(steps)} step-down links"
    )


def step_down_links(topology: Topology) -> set[int]:
    """Directed links out of a switch that some other link into that switch is faster than."""
    fastest_in: dict[int, list[tuple[float, int]]] = {}
    for k in range(topology.num_links):
        fastest_in.setdefault(topology.link_dst[k], []).append(
            (topology.link_bytes_per_ns[k], topology.link_src[k])
        )
    steps = set()
    for k in range(topology.num_links):
        node, rate = topology.link_src[k], topology.link_bytes_per_ns[k]
        if topology.is_switch[node] and any(
            other > rate * (1 + 1e-9)
            for other, src in fastest_in.get(node, [])
            if src != topology.link_dst[k]
        ):
            steps.add(k)
    return steps


def _is_fraction(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1


def _packets(topology: Topology, root: Path, manifest: dict[str, Any]) -> tuple[Topology, str]:
    setting = manifest.get("link_model", "ideal")
    if setting in ("ideal", None):
        return topology, "ideal"
    if setting == "ns3_packets" or setting in FLUID_MODELS:
        payload, cc_mode = _payload_and_cc_mode(root / rundir.NS3_CONFIG)
        links = [
            ns3_link(rate, delay, payload, cc_mode)
            for rate, delay in zip(topology.link_bytes_per_ns, topology.link_delay_ns, strict=True)
        ]
        note = f"ns3_packets ({payload}-byte payloads, CC_MODE {cc_mode})"
        if setting in FLUID_MODELS:
            note = f"{setting}: DCQCN fluid model on {note}"
        return replace(
            topology, link_bytes_per_ns=[r for r, _ in links], link_delay_ns=[d for _, d in links]
        ), note
    if _is_fraction(setting):
        return replace(topology, link_bytes_per_ns=[r * setting for r in topology.link_bytes_per_ns]), (
            f"{setting:g} of every link's rate"
        )
    raise RunDirError(
        f"{root / rundir.MANIFEST}: link_model must be 'ideal', 'ns3_packets', 'dcqcn', 'auto' or a number "
        f"in (0, 1], not {setting!r}"
    )


def _payload_and_cc_mode(config: Path) -> tuple[int, int]:
    values = read_config_values(config, "ns3_packets")
    try:
        payload = int(values.get("PACKET_PAYLOAD_SIZE", DEFAULT_PAYLOAD_BYTES))
        cc_mode = int(values.get("CC_MODE", 1))
    except ValueError as exc:
        raise RunDirError(f"{config}: PACKET_PAYLOAD_SIZE and CC_MODE must be integers ({exc})") from None
    if not 0 < payload <= MAX_PAYLOAD_BYTES:
        raise RunDirError(
            f"{config}: PACKET_PAYLOAD_SIZE must be from 1 to {MAX_PAYLOAD_BYTES} bytes, not {payload}"
        )
    return payload, cc_mode
