"""One rank class's program as data: what it depends on (`RankContext`), its nodes (`TraceNode`, by
kind) and the graph that holds them in creation order (`RankGraph`). `graph` builds it from the
schedule; `gradsync` adds the data-parallel reductions; `encode` writes it as Chakra nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

from astra_hetero.workload.blocks import DeviceBlocks, Segment

COMP, COLL, SEND, RECV = "comp", "coll", "send", "recv"


class TraceNode:
    __slots__ = (
        "id",
        "name",
        "kind",
        "data_deps",
        "ctrl_deps",
        "time_ns",
        "flops",
        "bytes",
        "comm_type",
        "group",
        "peer",
        "tag",
    )

    def __init__(self, node_id: int, name: str, kind: str, data_deps: list[int], ctrl_deps: list[int]):
        self.id = node_id
        self.name = name
        self.kind = kind
        self.data_deps = data_deps
        self.ctrl_deps = ctrl_deps
        self.time_ns = 0.0
        self.flops = 0.0
        self.bytes = 0  # tensor bytes for compute; message bytes for communication
        self.comm_type = ""
        self.group = ""  # comm-group role for collectives: "tp" | "dp" | "embedding" | "cp" | "ep" ...
        self.peer = ""  # peer role for send/recv: "prev" | "next" | "cp_prev" | "cp_next"
        self.tag = 0


@dataclass(frozen=True)
class RankContext:
    """Everything a rank class's program depends on (identical for every rank of the class)."""

    stage: int
    num_stages: int
    num_micro_batches: int
    chunks: tuple[tuple[int, int], ...]  # (first layer, one past the last) of each model chunk
    blocks: DeviceBlocks
    tp_size: int
    dp_size: int
    has_tp_group: bool
    has_dp_group: bool
    has_embedding_group: bool  # tied embeddings span the first and last stage
    activation_bytes: int
    grad_bucket_bytes: float
    layer_grad_bytes: float
    embedding_stage_grad_bytes: float  # gradients of the embedding held by virtual stage 0
    head_grad_bytes: float  # final norm, LM head (and tied-embedding copy) of the last virtual stage
    embedding_grad_bytes: int  # the tied-embedding all-reduce between first and last stage
    params_on_rank: float
    distributed_optimizer: bool
    updated_params: float  # the parameters whose optimizer states the rank holds (its shard)
    param_bytes_per_grad_byte: float
    full_recompute: bool
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = False
    # comm-group roles of the layers' own collectives ("tp", "cp", "ep", "etp", "moe") and their sizes
    group_sizes: tuple[tuple[str, int], ...] = ()
    expert_layer_grad_bytes: float = 0.0  # a MoE layer's routed-expert gradients on the rank
    edp_size: int = 1  # ranks holding the same experts (they reduce the experts' gradients)
    sharding_stage: int = 0  # ZeRO stage
    overlap_p2p_comm: bool = True

    def group_size(self, role: str) -> int:
        """Ranks in the rank's `role` communicator (1: it has none, its collectives are skipped)."""
        return dict(self.group_sizes).get(role, 1)

    @property
    def num_chunks(self) -> int:
        return len(self.chunks)

    def virtual_stage(self, chunk: int) -> int:
        return chunk * self.num_stages + self.stage

    def is_first_virtual(self, chunk: int) -> bool:
        return self.virtual_stage(chunk) == 0

    def is_last_virtual(self, chunk: int) -> bool:
        return self.virtual_stage(chunk) == self.num_stages * self.num_chunks - 1


@dataclass
class RankGraph:
    nodes: list[TraceNode] = field(default_factory=list)
    last_compute: int = -1
    # sends the next compute must wait for (pipeline sends without overlap_p2p_comm)
    held: list[int] = field(default_factory=list)

    def add(
        self, name: str, kind: str, data_deps: list[int], ctrl_deps: list[int] | None = None
    ) -> TraceNode:
        node = TraceNode(len(self.nodes), name, kind, data_deps, ctrl_deps or [])
        self.nodes.append(node)
        return node

    def compute(self, name: str, segment: Segment, data_deps: list[int]) -> int:
        if self.held:
            data_deps = [*data_deps, *(h for h in self.held if h not in data_deps)]
            self.held = []
        ctrl = [self.last_compute] if self.last_compute >= 0 and self.last_compute not in data_deps else []
        node = self.add(name, COMP, data_deps, ctrl)
        node.time_ns, node.flops, node.bytes = segment.time_ns, segment.flops, int(segment.bytes)
        self.last_compute = node.id
        return node.id

    def collective(
        self, name: str, comm_type: str, size: float, group: str, group_size: int, deps: list[int]
    ) -> int:
        """`size` is the collective's full buffer; the node carries Chakra's `comm_size`, which for an
        all-gather is each rank's input (ASTRA-sim gathers N × comm_size), for the others the buffer."""
        node = self.add(name, COLL, deps)
        if comm_type == "all_gather":
            size /= group_size
        node.comm_type, node.bytes, node.group = comm_type, int(size), group
        return node.id

    def p2p(self, name: str, kind: str, peer: str, tag: int, size: int, deps: list[int]) -> int:
        node = self.add(name, kind, deps)
        node.peer, node.tag, node.bytes = peer, tag, int(size)
        return node.id
