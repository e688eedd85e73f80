"""The experiment spec: strict, typed, with units in field names.

Unknown keys are rejected everywhere. Sections that accept a preset name (`model`, `gpu`,
`intra_node_fabric`) merge the preset's values under any field the user gives, so a user can start
from a preset and override any single number.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from astra_hetero.comm.catalog import known_architectures
from astra_hetero.dynamics.events import DynamicEvent
from astra_hetero.spec.catalog import fabric_catalog, gpu_catalog, model_catalog, normalize_key
from astra_hetero.spec.types import (
    BatchSize,
    Count,
    Efficiency,
    Gain,
    Gbps,
    GbytesPerS,
    Gib,
    Iterations,
    KernelOverheadUs,
    Kilobytes,
    LatencyNs,
    MarkingProbability,
    Mbps,
    Megahertz,
    Mib,
    Microseconds,
    ModelDim,
    Multiplier,
    Oversubscription,
    Probability,
    Slowdown,
    SmallCount,
    TbytesPerS,
    Tflops,
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _merge_preset(data: Any, catalog: dict[str, Any], what: str) -> Any:
    """Accept `name` or `{preset: name, **overrides}`; return the preset's fields under the overrides."""
    if isinstance(data, str):
        data = {"preset": data}
    if not isinstance(data, dict) or data.get("preset") is None:
        return data
    key = normalize_key(str(data["preset"]))
    if key not in catalog:
        raise ValueError(f"unknown {what} preset {data['preset']!r}; known: {', '.join(sorted(catalog))}")
    record = vars(catalog[key]).copy()
    record.pop("key", None)
    return {**record, **data, "preset": key}


class ModelSpec(Strict):
    """A decoder-only transformer; `preset` names one of the catalog's models."""

    preset: str | None = Field(None, description="catalog model, e.g. gpt3-175b, llama2-70b")
    num_layers: SmallCount
    hidden_size: ModelDim
    num_heads: ModelDim
    num_kv_heads: ModelDim
    ffn_size: ModelDim
    activation: Literal["gelu", "swiglu"]
    vocab_size: ModelDim
    seq_len: ModelDim
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    tied_embeddings: bool = False
    learned_position_embeddings: bool = False

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, model_catalog(), "model")

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


class GpuSpec(Strict):
    """A GPU type: a catalog preset, optionally with any number overridden.

    Its identity (`type_key`, the label in manifests and results, and the key of its cost model) is
    its own name when that differs from the preset's, else the preset key; a cluster may not hold two
    GPUs with one label but different numbers (see `ClusterSpec`).
    """

    preset: str | None = None
    name: str
    bf16_tflops: Tflops = Field(description="dense BF16 peak, TFLOP/s")
    hbm_tbps: TbytesPerS = Field(description="device memory bandwidth, TB/s")
    memory_gib: Gib
    compute_efficiency: Efficiency = Field(
        description="achievable fraction of bf16_tflops on large GEMMs (measured MAMF / peak)"
    )
    memory_efficiency: Efficiency = Field(description="achievable fraction of hbm_tbps")
    compute_multiplier: Multiplier = Field(
        1.0, description="scales both throughputs, e.g. 0.5 = half as fast as the preset it starts from"
    )
    architecture: str = Field(
        description="GPU generation (volta, ampere, ada, hopper, blackwell, cdna3): NCCL tunes by it"
    )
    num_sms: SmallCount | None = Field(
        None, description="SMs / compute units: GEMM tile and wave quantization (None: not modelled)"
    )
    boost_clock_mhz: Megahertz | None = Field(None, description="clock of the vendor's peak figure")
    sustained_fraction: Efficiency = Field(
        1.0,
        description="share of the burst compute rates held through a long saturated run (power-limit "
        "clock); multiplies compute_efficiency and the attention efficiencies",
    )
    kernel_overhead_us: KernelOverheadUs = Field(
        1.0, description="fixed cost of every kernel (launch gap and ramp), microseconds"
    )
    attention_fwd_efficiency: Efficiency | None = Field(
        None,
        description="fused attention forward at long sequences, fraction of bf16_tflops "
        "(None: compute_efficiency x 0.84, the A100's FlashAttention-2/MAMF ratio)",
    )
    attention_bwd_efficiency: Efficiency | None = Field(
        None, description="fused attention backward, fraction of bf16_tflops (None: forward x 0.87)"
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, gpu_catalog(), "gpu")

    @field_validator("architecture")
    @classmethod
    def _known_architecture(cls, value: str) -> str:
        if value not in known_architectures():
            raise ValueError(f"unknown architecture {value!r}; known: {', '.join(known_architectures())}")
        return value

    @property
    def type_key(self) -> str:
        """The GPU's label: its own name when it has one of its own, else the preset key."""
        if self.preset is not None and self.name == gpu_catalog()[self.preset].name:
            return self.preset
        return normalize_key(self.name)

    @property
    def effective_flops_per_ns(self) -> float:
        """Sustained achievable matmul rate: peak × MAMF fraction × sustained fraction × multiplier."""
        return (
            self.bf16_tflops
            * 1e3
            * self.compute_efficiency
            * self.sustained_fraction
            * self.compute_multiplier
        )

    @property
    def effective_bytes_per_ns(self) -> float:
        return self.hbm_tbps * 1e3 * self.memory_efficiency * self.compute_multiplier


class FabricSpec(Strict):
    """The intra-node interconnect of a node group: per-GPU, per-direction bandwidth."""

    preset: str | None = None
    name: str = "custom"
    kind: Literal["nvlink", "pcie", "xgmi"] = Field(
        description="link family: sets the achievable fraction and hop latency in the NCCL model"
    )
    gbytes_per_s: GbytesPerS
    latency_ns: LatencyNs

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, fabric_catalog(), "intra_node_fabric")


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(g|gb|gbps|gbit/s|gbe)?\s*$", re.IGNORECASE)


class NicSpec(Strict):
    """Scale-out NICs of one node: `400`, `"400G"` or `{gbps: 400, count: 8}`."""

    gbps: Gbps
    count: Count | None = Field(None, description="NICs per node; default one per GPU")
    latency_ns: LatencyNs = Field(
        100.0, description="GPU-to-NIC hop; kept non-zero so no ns-3 link has zero delay"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError("expected a NIC speed such as 400 or '400G'")
        if isinstance(data, int | float):
            return {"gbps": data}
        if isinstance(data, str):
            match = _RATE.match(data)
            if not match:
                raise ValueError(f"cannot read NIC speed {data!r}; write e.g. 400 or '400G'")
            return {"gbps": float(match.group(1))}
        return data


class NodeGroupSpec(Strict):
    name: str | None = None
    count: Count = Field(description="number of nodes")
    gpus_per_node: Count
    gpu: GpuSpec
    intra_node_fabric: FabricSpec
    nic: NicSpec

    @property
    def num_gpus(self) -> int:
        return self.count * self.gpus_per_node

    @property
    def nics_per_node(self) -> int:
        return self.nic.count or self.gpus_per_node


class ClusterSpec(Strict):
    node_groups: list[NodeGroupSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> ClusterSpec:
        # Unnamed groups are called group<i>; that default must not collide with a given name, or a
        # mapping naming it would draw GPUs from both groups.
        names = self.group_names
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            where = [
                f"node_groups[{i}]" + ("" if g.name is not None else " (unnamed)")
                for i, g in enumerate(self.node_groups)
                if names[i] in dupes
            ]
            raise ValueError(
                f"node group names must be unique; {', '.join(where)} are all called "
                f"{' / '.join(repr(d) for d in dupes)} (unnamed groups are called group<index>)"
            )
        return self

    @model_validator(mode="after")
    def _gpu_labels(self) -> ClusterSpec:
        """One label, one GPU: results, TP-group checks and calibration rows are keyed by the label."""
        seen: dict[str, tuple[int, GpuSpec]] = {}
        for index, group in enumerate(self.node_groups):
            label = group.gpu.type_key
            first = seen.setdefault(label, (index, group.gpu))
            if first[1] != group.gpu:
                raise ValueError(
                    f"node_groups[{index}].gpu is labelled {label!r} like node_groups[{first[0]}].gpu but "
                    f"has different numbers ({_differences(first[1], group.gpu)}); give it a name of its "
                    f"own, e.g. {{preset: {group.gpu.preset or label}, name: my-{label}, ...}}"
                )
        return self

    @property
    def group_names(self) -> list[str]:
        return [g.name or f"group{i}" for i, g in enumerate(self.node_groups)]

    @property
    def num_gpus(self) -> int:
        return sum(g.num_gpus for g in self.node_groups)

    @property
    def num_nodes(self) -> int:
        return sum(g.count for g in self.node_groups)


def _differences(a: GpuSpec, b: GpuSpec) -> str:
    left, right = a.model_dump(), b.model_dump()
    return ", ".join(f"{k} {left[k]} vs {right[k]}" for k in left if left[k] != right[k])


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
    link_model: Literal["ideal", "ns3_packets"] | Efficiency = Field(
        "ideal",
        description="embedded engine: ideal links (line rate, one-way delay); ns3_packets = each link's "
        "rate and delay as ns-3's packets and ACKs use it (from ns3/config.txt); or a number: that share "
        "of every link's rate (e.g. calibrated from short ns-3 runs)",
    )
    step_down_efficiency: Efficiency = Field(
        1.0,
        description="embedded engine: the share of its rate a link gets where traffic steps down onto it "
        "from faster links (a slower NIC behind a faster fabric), as DCQCN leaves it; 1 = ideal; calibrate "
        "against ns-3 with benchmarks/packet_fidelity.py --calibrate",
    )


class ParallelismSpec(Strict):
    tp: Count = 1
    pp: Count = 1
    dp: Count = 1
    micro_batch_size: BatchSize = 1
    global_batch_size: BatchSize = Field(description="sequences per iteration, over all replicas")
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    virtual_stages: Count = Field(
        1,
        description="model chunks per pipeline stage (Megatron-LM's virtual pipeline size); with 1f1b "
        "and more than 1 the schedule is Megatron-LM's interleaved 1F1B",
    )
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    distributed_optimizer: bool = False
    dp_bucket_mib: Mib = Field(25.0, description="gradient bucket size for overlapped DP sync")
    overlap_grad_reduce: bool = Field(
        True,
        description="reduce gradient buckets during the last backward pass (per model chunk once its "
        "last backward is done, with virtual stages); false: one reduction per chunk after the backward",
    )
    overlap_param_gather: bool = Field(
        False,
        description="distributed optimizer: all-gather each parameter bucket at the start of the "
        "iteration, waited for before its first forward use; false: blocking all-gathers after the "
        "optimizer step (Megatron-LM's default)",
    )
    grad_reduce_in_fp32: bool = Field(
        True, description="reduce gradients in FP32 (Megatron's default for BF16)"
    )
    allow_tp_across_nodes: bool = False


class MappingSpec(Strict):
    """Which node groups serve which pipeline cells (one cell = the TP group of one stage of one replica).

    `grid` names a node group for every cell: one row per pipeline stage, one entry per replica in it.
    `stages` (one name per stage, every replica alike) and `replicas` (one name per replica, every
    stage alike) are shorthands for the grids whose rows or columns repeat one name. Give at most
    one of the three. Without any, GPUs are taken in cluster order with TP innermost, then DP, then PP.
    A cell takes the next `tp` GPUs of its node group, cells taken stage by stage, replica by replica.
    """

    grid: list[list[str]] | None = Field(
        None, description="node group per cell: grid[stage][replica]; pp rows of dp names each"
    )
    stages: list[str] | None = Field(None, description="shorthand: node group per stage")
    replicas: list[str] | None = Field(None, description="shorthand: node group per replica")
    allow_idle_gpus: bool = Field(
        False,
        description="let tp·pp·dp use fewer GPUs than the cluster has; the GPUs no cell takes stay "
        "idle (a trace of one zero-duration node each, marked idle in the manifest and the result)",
    )

    @model_validator(mode="after")
    def _one(self) -> MappingSpec:
        given = [name for name in ("grid", "stages", "replicas") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of grid, stages and replicas, not {' and '.join(given)}")
        return self

    def cell_group(self, stage: int, replica: int) -> str | None:
        """The node group named for a cell, or None under the default (cluster-order) mapping."""
        if self.grid is not None:
            return self.grid[stage][replica]
        if self.stages is not None:
            return self.stages[stage]
        if self.replicas is not None:
            return self.replicas[replica]
        return None


Split = Literal["uniform", "auto"] | list[BatchSize]
LayerSplit = Literal["uniform", "auto"] | list[BatchSize] | list[list[BatchSize]]


class PartitionSpec(Strict):
    layers: LayerSplit = Field(
        "uniform",
        description="layers per stage: uniform, auto or a list of pp entries; with virtual stages also "
        "pp·v entries (one per virtual stage, in model order) or pp lists of v (per stage, per chunk)",
    )
    micro_batches: Split = Field(
        "uniform", description="micro-batches per replica: uniform, auto or an explicit list"
    )


NcclScope = Literal["intra_node", "inter_node"]


class NcclTestsTable(Strict):
    """One nccl-tests output: a path, or `{path, collective, node_group}`."""

    path: str = Field(description="output of all_reduce_perf (or friends), relative to the spec")
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"] | None = (
        Field(None, description="what it measured; default: read from the output or the file name")
    )
    node_group: str | None = Field(
        None, description="applies only to communicators whose ranks all lie in this node group"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class CollectiveSpec(Strict):
    """How the embedded engine prices communication. `model: nccl` (default) follows NCCL: per
    collective and size its algorithm and protocol, latencies and achievable bandwidth; `model: ideal`
    is ASTRA-sim's analytical model (full link rate, path latency per step)."""

    model: Literal["nccl", "ideal"] = "nccl"
    algorithm: Literal["auto", "ring", "tree", "nvls", "nvls_tree", "hierarchical"] = Field(
        "auto",
        description="nccl: auto (NCCL's choice by size) or force ring | tree | nvls | nvls_tree for "
        "all-reduce (like NCCL_ALGO); ideal: hierarchical (auto) or ring",
    )
    protocol: Literal["auto", "ll", "ll128", "simple"] = Field(
        "auto", description="nccl only: force one protocol (like NCCL_PROTO)"
    )
    nccl_tests: dict[NcclScope, list[NcclTestsTable]] = Field(
        default_factory=dict,
        description="measured nccl-tests tables that override the modelled bandwidth, by scope: "
        "intra_node (communicators inside one node) or inter_node",
    )
    max_in_flight_per_rank: Count | None = Field(
        None,
        description="collectives/sends one rank may run at once in the embedded engine; None = no limit "
        "(separate NCCL streams overlap); 1 = ASTRA-sim's rule (one communication op per NPU)",
    )

    @field_validator("nccl_tests", mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v if isinstance(v, list) else [v] for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _fits_model(self) -> CollectiveSpec:
        if self.model == "ideal":
            if self.algorithm not in ("auto", "ring", "hierarchical"):
                raise ValueError(
                    f"algorithm {self.algorithm} is NCCL's; the ideal model runs ring or hierarchical"
                )
            if self.protocol != "auto" or self.nccl_tests:
                raise ValueError("protocol and nccl_tests need model: nccl")
        elif self.algorithm == "hierarchical":
            raise ValueError(
                "algorithm hierarchical is the ideal model's; set model: ideal, or use NCCL's "
                "auto, ring, tree, nvls or nvls_tree"
            )
        return self

    @property
    def resolved_algorithm(self) -> str:
        """The algorithm the run directory records: the ideal model's default is hierarchical."""
        return "hierarchical" if self.model == "ideal" and self.algorithm == "auto" else self.algorithm


class ComputeSpec(Strict):
    """How the training framework computes (the operator formulations the cost model times)."""

    attention: Literal["fused", "unfused"] = Field(
        "fused",
        description="fused: FlashAttention-style kernels (no score matrix, recompute in the backward); "
        "unfused: scores materialised with a fused softmax, as Megatron ran before fused attention",
    )
    comm_overlap_slowdown: Slowdown = Field(
        0.0,
        description="compute kernels take (1 + this) times as long while a communication kernel of "
        "their GPU runs beside them (they share its SMs and memory bandwidth); 0 = no contention. Off "
        "by default: published measurements depend on the GPU, NCCL's channel count and the kernels",
    )


class ScopeSpec(Strict):
    """A cut-down iteration for expensive backends (packet-level ns-3): the plan is made for the whole
    model and batch (partition, memory check), then each stage keeps only its first layers and each
    replica only its first micro-batches. Gradient sync then covers only the layers kept."""

    layers_per_stage: Count | None = Field(
        None, description="transformer layers kept on each pipeline stage (at most its planned share)"
    )
    micro_batches_per_replica: BatchSize | None = Field(
        None, description="micro-batches each data-parallel replica runs (at most its planned share)"
    )

    @model_validator(mode="after")
    def _not_empty(self) -> ScopeSpec:
        if self.layers_per_stage is None and self.micro_batches_per_replica is None:
            raise ValueError("give layers_per_stage and/or micro_batches_per_replica (or drop `scope`)")
        return self


class Spec(Strict):
    name: str = "experiment"
    model: ModelSpec
    cluster: ClusterSpec
    network: NetworkSpec = NetworkSpec()
    parallelism: ParallelismSpec
    mapping: MappingSpec = MappingSpec()
    partition: PartitionSpec = PartitionSpec()
    collectives: CollectiveSpec = CollectiveSpec()
    compute: ComputeSpec = ComputeSpec()
    calibration: str | None = Field(None, description="CSV of measured operator times, relative to the spec")
    scope: ScopeSpec | None = Field(None, description="simulate a cut-down iteration (layers, micro-batches)")
    dynamics: list[DynamicEvent] = Field(
        default_factory=list, description="timed events: link rates, slow GPUs, background traffic, jitter"
    )
    iterations: Iterations = Field(1, description="back-to-back training iterations to simulate")
