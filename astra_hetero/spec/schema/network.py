"""The network section: the fabric between nodes, DCQCN and ns-3 settings, the engine's link model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.types import (
    Count,
    Efficiency,
    Gain,
    Gbps,
    Kilobytes,
    LatencyNs,
    MarkingProbability,
    Mbps,
    Microseconds,
    Oversubscription,
    Probability,
)


class DcqcnSpec(Strict):
    """DCQCN congestion control (ns-3 CC_MODE 1). Defaults follow the HPCC/ns-3 RDMA reference setup."""

    enabled: bool = True
    alpha_resume_interval_us: Microseconds = 1.0
    rate_decrease_interval_us: Microseconds = 4.0
    clamp_target_rate: bool = False
    rp_timer_us: Microseconds = 900.0
    ewma_gain: Gain = 0.00390625
    fast_recovery_times: Count = 1
    rate_ai_mbps: Mbps = 50.0
    rate_hai_mbps: Mbps = 100.0
    min_rate_mbps: Mbps = 100.0


class EcnThreshold(Strict):
    kmin_kb: Kilobytes
    kmax_kb: Kilobytes
    pmax: MarkingProbability

    @model_validator(mode="after")
    def _order(self) -> EcnThreshold:
        if self.kmin_kb > self.kmax_kb:
            raise ValueError(f"kmin_kb {self.kmin_kb} exceeds kmax_kb {self.kmax_kb}")
        return self


class Ns3Spec(Strict):
    buffer_size_mb: Count = 32
    packet_payload_bytes: Count = 1000
    enable_trace: bool = Field(False, description="packet trace; tens of MB even for tiny runs")
    ecn: dict[Gbps, EcnThreshold] = Field(
        default_factory=dict, description="per link rate in Gbit/s; rates not given are derived"
    )
    link_error_rate: Probability = Field(
        0.0, description="keep 0: a non-zero rate is known to hang the ns-3 backend"
    )


class NetworkSpec(Strict):
    topology: Literal["single_switch", "spine_leaf", "rail_optimized"] = "spine_leaf"
    nodes_per_leaf: Count = Field(4, description="spine_leaf: nodes whose NICs share one leaf")
    oversubscription: Oversubscription = Field(1.0, description="leaf downlink : uplink bandwidth ratio")
    num_spines: Count | None = Field(None, description="default: derived from oversubscription")
    uplink_gbps: Gbps | None = Field(None, description="leaf-spine link rate; default: fastest NIC")
    link_latency_ns: LatencyNs = 500.0
    dcqcn: DcqcnSpec = DcqcnSpec()
    ns3: Ns3Spec = Ns3Spec()
    link_model: Literal["ideal", "ns3_packets", "dcqcn", "auto"] | Efficiency = Field(
        "ideal",
        description="embedded engine: ideal links (line rate, one-way delay); ns3_packets = each link's "
        "rate and delay as ns-3's packets and ACKs use it (from ns3/config.txt); dcqcn = ns3_packets with "
        "DCQCN simulated as a fluid (rates, ECN-marking queues, PFC; parameters from ns3/config.txt); "
        "auto = that fluid model on links where rates step down or leaves are oversubscribed, the flow "
        "model elsewhere; or a number: that share of every link's rate (e.g. calibrated from short ns-3 "
        "runs)",
    )
    step_down_efficiency: Efficiency = Field(
        1.0,
        description="embedded engine: the share of its rate a link gets where traffic steps down onto it "
        "from faster links (a slower NIC behind a faster fabric), as DCQCN leaves it; 1 = ideal; calibrate "
        "against ns-3 with benchmarks/packet_fidelity.py --calibrate",
    )

    @model_validator(mode="after")
    def _fluid_model(self) -> NetworkSpec:
        if self.link_model in ("dcqcn", "auto"):
            if self.step_down_efficiency != 1:
                raise ValueError(
                    f"step_down_efficiency {self.step_down_efficiency:g} with link_model {self.link_model}: "
                    "the DCQCN fluid model simulates what that factor calibrates; leave it at 1"
                )
            if not self.dcqcn.enabled:
                raise ValueError(f"link_model {self.link_model} simulates DCQCN, but dcqcn.enabled is false")
        return self

    def uplinks(
        self, needed_gbps: Sequence[float], fastest_nic_gbps: float, num_access: int | None = None
    ) -> tuple[int, list[float]]:
        """(spines, uplink Gbit/s per entry of `needed_gbps`) joining `num_access` access switches
        (default: one per entry) that need `needed_gbps` up each (their downlinks / oversubscription);
        the one rule the topology and the work bounds use.

        ns-3 keeps one interface per neighbour, so parallel links cannot add capacity: an access
        switch's uplink bandwidth is spines × uplink rate. Given `num_spines`, the rate follows
        (rounded up to whole Gbit/s); given `uplink_gbps`, the spine count follows. Given neither,
        uplinks run at the fastest NIC's rate with as many spines as the busiest access switch
        needs, but no more spines than access switches (at least two, for two paths): beyond that a
        spine adds a switch, not bandwidth, so the uplinks to each spine are bundled into one faster
        link, sized for the busiest access switch (two leaves of 8 × 400G NICs get two spines at
        1600G, not eight at 400G; a cluster with at least as many leaves as a leaf has NICs keeps one
        400G uplink per NIC)."""
        if self.num_spines is not None:
            rates = [self.uplink_gbps or math.ceil(n / self.num_spines) for n in needed_gbps]
            return self.num_spines, rates
        if self.uplink_gbps is not None:
            spines = max(math.ceil(n / self.uplink_gbps - 1e-9) for n in needed_gbps)
            return spines, [self.uplink_gbps] * len(needed_gbps)
        busiest = max(needed_gbps)
        count = len(needed_gbps) if num_access is None else num_access
        spines = min(math.ceil(busiest / fastest_nic_gbps - 1e-9), max(2, count))
        uplink = max(fastest_nic_gbps, math.ceil(busiest / spines - 1e-9))
        return spines, [float(uplink)] * len(needed_gbps)
