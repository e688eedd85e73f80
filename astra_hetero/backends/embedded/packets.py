"""The share of a link's rate that carries payload: ns-3's per-packet overheads as one factor on every
link of the flow model (`network.link_efficiency` in the spec, `link_efficiency` in the manifest).

ASTRA-sim's ns-3 backend (the HPCC RDMA stack) cuts a message into packets of PACKET_PAYLOAD_SIZE
bytes. Each data packet carries PPP (2) + IPv4 (20) + UDP (8) + SeqTs (6) header bytes, plus an INT
header for the congestion controls that use one (HPCC: 5 hops × 8 + 2 bytes; TIMELY: an 8-byte
timestamp; PINT: 1 byte; none for DCQCN). The receiver answers every data packet with an ACK on the
reverse direction: qbb header (12 + INT) padded to 26 bytes, + IPv4 (20) + PPP (2) = 48 bytes without
INT. (Source: astra-network-ns3 `RdmaHw::GetNxtPacket`, `RdmaHw::ReceiveUdp`, `SeqTsHeader`,
`qbbHeader`.) ns-3's point-to-point links model neither preamble nor inter-frame gap.

In the collectives ASTRA-sim runs (rings through switches) a link direction that carries data also
carries the ACKs of the data flowing the other way, so payload moves at

    payload / (payload + data headers + ACK)    e.g. 1000 / (1000 + 36 + 48) = 92.3 % with DCQCN.

One factor for every link is exact for such symmetric traffic and pessimistic by the ACK share
(48 / 1084 = 4.4 %) for data that flows one way only; the flow model has no reverse-direction ACK load.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.topology import Topology
from astra_hetero.errors import RunDirError

PPP_BYTES, IPV4_BYTES, UDP_BYTES, SEQ_TS_BYTES = 2, 20, 8, 6
QBB_BASE_BYTES = 12  # sport, dport, flags, pg (2 each) and seq (4)
ACK_MIN_QBB_BYTES = 60 - 14 - 20  # ns-3 pads an ACK's payload as if to a 60-byte Ethernet frame
# INT header bytes by ns-3 CC_MODE (3 HPCC, 7 TIMELY, 10 HPCC-PINT at one byte); others carry none.
INT_BYTES = {3: 5 * 8 + 2, 7: 8, 10: 1}
DEFAULT_PAYLOAD_BYTES = 1000  # ns-3's own default PACKET_PAYLOAD_SIZE


def packet_efficiency(payload_bytes: int, cc_mode: int) -> float:
    """payload / (payload + data headers + one ACK) for ns-3 packets of `payload_bytes`."""
    int_bytes = INT_BYTES.get(cc_mode, 0)
    data_headers = PPP_BYTES + IPV4_BYTES + UDP_BYTES + SEQ_TS_BYTES + int_bytes
    ack = max(ACK_MIN_QBB_BYTES, QBB_BASE_BYTES + int_bytes) + IPV4_BYTES + PPP_BYTES
    return payload_bytes / (payload_bytes + data_headers + ack)


def link_efficiency(root: Path, manifest: dict[str, Any]) -> float:
    """The factor the run directory asks for: 1 (ideal, the default), a number, or `ns3_packets`."""
    setting = manifest.get("link_efficiency", "ideal")
    where = f"{root / rundir.MANIFEST}: link_efficiency"
    if setting in ("ideal", None):
        return 1.0
    if setting == "ns3_packets":
        return packet_efficiency(*_payload_and_cc_mode(root / rundir.NS3_CONFIG))
    if isinstance(setting, int | float) and not isinstance(setting, bool) and 0 < setting <= 1:
        return float(setting)
    raise RunDirError(f"{where} must be 'ideal', 'ns3_packets' or a number in (0, 1], not {setting!r}")


def with_link_efficiency(topology: Topology, factor: float) -> Topology:
    if factor == 1.0:
        return topology
    return replace(topology, link_bytes_per_ns=[rate * factor for rate in topology.link_bytes_per_ns])


def _payload_and_cc_mode(config: Path) -> tuple[int, int]:
    if not config.is_file():
        raise RunDirError(f"{config}: missing (link_efficiency ns3_packets reads the packet size from it)")
    values: dict[str, str] = {}
    for line in config.read_text().splitlines():
        key, _, value = line.strip().partition(" ")
        values[key] = value.strip()
    try:
        payload = int(values.get("PACKET_PAYLOAD_SIZE", DEFAULT_PAYLOAD_BYTES))
        cc_mode = int(values.get("CC_MODE", 1))
    except ValueError as exc:
        raise RunDirError(f"{config}: PACKET_PAYLOAD_SIZE and CC_MODE must be integers ({exc})") from None
    if payload <= 0:
        raise RunDirError(f"{config}: PACKET_PAYLOAD_SIZE must be positive, not {payload}")
    return payload, cc_mode
