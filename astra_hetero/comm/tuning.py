"""NCCL's choice of algorithm and protocol for one collective, and the time it predicts.

NCCL (src/graph/tuning.cc) prices every enabled (algorithm, protocol) pair as
`latency + bytes / algorithm bandwidth` and runs the cheapest. This module does the same with the
constants of `nccl.yaml`; the bandwidths come from the cluster's links (the caller measures them on
the topology with each link kind's achievable fraction) instead of NCCL's channel search:

- ring: bus bandwidth = the rings' achievable rate (the slowest link they cross), × 0.5 for LL (capped
  by NCCL's LL ceiling), × 0.92 for LL128; algorithm bandwidth = bus × N / steps.
- tree (all-reduce): each GPU's intra-node chain moves 2·S per direction, and each node moves S per
  direction across 2 nodes and 2·S across more (double binary tree): algorithm bandwidth =
  0.92 × min(intra / 2, network or network / 2), with NCCL's LL/LL128 factors and size correction.
- nvls (all-reduce inside one NVSwitch node, Hopper and later): each GPU sends and receives S·(1 + 1/N)
  through the switch at NCCL's NVLS efficiency; nvls_tree adds trees across nodes as above.
- latency: NCCL's base latency plus its per-hop latency for every step, by the link class crossed;
  where a public measurement gives the step of an architecture (`hop_latency_us_by_architecture`), that
  one; never below the measured floor of the scope (`latency_floor_us`: one node, several).

Sizes are NCCL's: `total_bytes` is the whole buffer (all-gather output, reduce-scatter input).
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.comm.catalog import NcclConstants, table_row

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = "all_reduce", "all_gather", "reduce_scatter"
RING_KINDS = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER)
_TREE_CORRECTION_SIZES = 23  # NCCL corrects tree all-reduce for log2(bytes / 64) in [0, 23)


@dataclass(frozen=True)
class Communicator:
    """What the tuner knows of a communicator. Rates are achievable GB/s (bytes per ns)."""

    num_ranks: int
    num_nodes: int
    ranks_per_node: int  # the most members on one node
    oldest_cc: int  # smallest compute capability among the members: it picks NCCL's table row
    newest_cc: int
    intra_class: str  # latency class of intra-node hops: "nvlink" or "pci"
    nvls_fabric: bool  # the members of every node share an NVLink switch
    ring_busbw: float  # bus bandwidth of NCCL's rings over the members
    intra_gbs: float  # one member's intra-node rate (inf with one member per node)
    net_gbs: float  # one node's rate into the network for this communicator (inf on one node)
    channels: int = 1  # rings run in parallel (one per member of a node)
    net_hop_floor_us: float = 0.0  # the topology's own inter-node path latency, when NCCL's is lower


@dataclass(frozen=True)
class Choice:
    algorithm: str
    protocol: str
    latency_us: float
    algbw_gbs: float  # total bytes / (time - latency)

    def time_us(self, total_bytes: float) -> float:
        return self.latency_us + total_bytes / (1000.0 * self.algbw_gbs)


def num_steps(kind: str, num_ranks: int) -> int:
    return 2 * (num_ranks - 1) if kind == ALL_REDUCE else num_ranks - 1


def bus_factor(kind: str, num_ranks: int) -> float:
    """nccl-tests' bus bandwidth / algorithm bandwidth (doc/PERFORMANCE.md)."""
    if kind in RING_KINDS:
        return num_steps(kind, num_ranks) / num_ranks
    if kind == "all_to_all":
        return (num_ranks - 1) / num_ranks
    return 1.0


def candidates(c: NcclConstants, comm: Communicator, kind: str, total_bytes: float) -> list[Choice]:
    """Every (algorithm, protocol) NCCL would consider for this collective, with its price."""
    if kind not in RING_KINDS:
        raise ValueError(f"NCCL's tuner prices {', '.join(RING_KINDS)}, not {kind}")
    row = table_row(comm.oldest_cc)
    nvls = row in c.nvls_efficiency and comm.nvls_fabric and comm.ranks_per_node >= 2
    algorithms = ["ring"]
    if kind == ALL_REDUCE:
        algorithms.append("tree")
        if nvls:
            algorithms.append("nvls" if comm.num_nodes == 1 else "nvls_tree")
    # LL128 by default only over NVLink, and across generations only from Hopper on (tuning.cc)
    ll128 = (comm.ranks_per_node == 1 or comm.intra_class == "nvlink") and (
        comm.oldest_cc == comm.newest_cc or comm.oldest_cc >= 90
    )
    choices = []
    for algorithm in algorithms:
        protocols = ("simple",) if algorithm.startswith("nvls") else ("ll", "ll128", "simple")
        for protocol in protocols:
            if protocol == "ll128" and not ll128:
                continue
            bandwidth = _algbw(c, comm, kind, algorithm, protocol, total_bytes)
            if bandwidth > 0:
                latency = max(
                    _latency_us(c, comm, kind, algorithm, protocol, total_bytes), c.floor_us(comm.num_nodes)
                )
                choices.append(Choice(algorithm, protocol, latency, bandwidth))
    return choices


def choose(
    c: NcclConstants,
    comm: Communicator,
    kind: str,
    total_bytes: float,
    algorithm: str = "auto",
    protocol: str = "auto",
) -> Choice:
    """The cheapest candidate, among those allowed by `algorithm`/`protocol` (NCCL_ALGO/NCCL_PROTO)."""
    allowed = [
        x
        for x in candidates(c, comm, kind, total_bytes)
        if algorithm in ("auto", x.algorithm) and protocol in ("auto", x.protocol)
    ]
    if not allowed:
        raise ValueError(
            f"no algorithm/protocol available for {kind} on {comm.num_ranks} ranks over {comm.num_nodes} "
            f"node(s) with algorithm {algorithm} and protocol {protocol}"
        )
    return min(allowed, key=lambda x: x.time_us(total_bytes))


def ll_max_busbw(c: NcclConstants, comm: Communicator) -> float:
    limits = c.ll_max_busbw_gbs
    if comm.num_nodes == 1:
        return float(limits["single_node"][table_row(comm.oldest_cc)])
    return float(limits["two_nodes"] if comm.num_nodes == 2 else limits["more_nodes"])


def _algbw(
    c: NcclConstants, comm: Communicator, kind: str, algorithm: str, protocol: str, total_bytes: float
) -> float:
    if algorithm == "ring":
        bus = comm.ring_busbw
        if protocol == "ll":
            bus = min(ll_max_busbw(c, comm), bus * c.ring_ll_factor)
        elif protocol == "ll128":
            bus *= c.ring_ll128_factor
        return bus * comm.num_ranks / num_steps(kind, comm.num_ranks)
    across = comm.net_gbs if comm.num_nodes <= 2 else comm.net_gbs / 2  # S or 2·S per node and direction
    if algorithm == "tree":
        simple = c.tree_allreduce_factor * min(comm.intra_gbs / 2, across)
        if protocol == "ll":
            bandwidth = min(2 * simple * c.tree_ll_factor, ll_max_busbw(c, comm)) / 2
        elif protocol == "ll128":
            single = comm.num_nodes == 1
            bandwidth = simple * (
                c.tree_ll128_factor_single_node if single else c.tree_ll128_factor_multi_node
            )
        else:
            bandwidth = simple
        return bandwidth * _tree_correction(c, protocol, total_bytes)
    efficiency = c.nvls_efficiency[table_row(comm.oldest_cc)]
    per_node = comm.ranks_per_node
    if algorithm == "nvls":
        return efficiency * comm.intra_gbs * comm.num_ranks / (comm.num_ranks + 1)
    return min(efficiency * comm.intra_gbs * per_node / (per_node + 1), across)  # nvls_tree


def _tree_correction(c: NcclConstants, protocol: str, total_bytes: float) -> float:
    index = int(total_bytes) // 64
    index = index.bit_length() - 1  # NCCL's log2i: -1 below 64 bytes
    return c.tree_correction[protocol][index] if 0 <= index < _TREE_CORRECTION_SIZES else 1.0


def _latency_us(
    c: NcclConstants, comm: Communicator, kind: str, algorithm: str, protocol: str, total_bytes: float
) -> float:
    nodes, row = comm.num_nodes, table_row(comm.oldest_cc)
    net_algorithm = "tree" if algorithm == "ring" and comm.ranks_per_node == 1 else algorithm
    inter = max(c.hop_us("net", net_algorithm, protocol), comm.net_hop_floor_us)
    log_nodes = nodes.bit_length() - 1
    base = c.base_latency_us[algorithm][protocol]
    if algorithm == "ring":
        intra = c.hop_us(comm.intra_class, "ring", protocol, row)
        if nodes > 1:  # each step still posts to the network
            simple = protocol == "simple"
            intra = max(intra, c.net_overhead_us * (c.net_overhead_simple_factor if simple else 1.0))
        steps = num_steps(kind, comm.num_ranks)
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if kind == ALL_REDUCE else nodes - 1)
        latency = base + (steps - inter_steps) * intra + inter_steps * inter
        plateau = kind == ALL_REDUCE and protocol == "simple" and nodes > 1
        if plateau and total_bytes / (comm.channels * comm.num_ranks) >= 64:
            era = "ampere_and_later" if comm.oldest_cc >= 80 else "before_ampere"
            latency *= c.ring_plateau_factor[era]
        return latency
    if algorithm == "tree":
        intra = c.hop_us(comm.intra_class, "tree", protocol, row)
        return base + 2 * ((comm.ranks_per_node - 1) * intra + log_nodes * inter)
    intra = c.hop_us("nvlink", algorithm, protocol, row)  # NVLS runs over the NVLink switch
    if algorithm == "nvls":
        return intra
    return base + intra + 2 * log_nodes * inter  # nvls_tree


def p2p_choice(
    c: NcclConstants, latency_class: str, achievable_gbs: float, num_bytes: float, floor_us: float = 0.0
) -> Choice:
    """One send of `num_bytes` over a path of `latency_class` whose achievable rate is `achievable_gbs`."""
    protocol = "ll" if num_bytes <= c.p2p_ll_threshold_bytes else "simple"
    hop = c.hop_us(latency_class, "ring", protocol)
    if latency_class == "net":
        hop = max(hop, floor_us)
    bandwidth = achievable_gbs * (c.ring_ll_factor if protocol == "ll" else 1.0)
    return Choice("p2p", protocol, c.base_latency_us["ring"][protocol] + hop, bandwidth)
