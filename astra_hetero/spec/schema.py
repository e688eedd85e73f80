"""The experiment spec: strict, typed, with units in field names.

Unknown keys are rejected everywhere. Sections that accept a preset name (`model`, `gpu`,
`intra_node_fabric`) merge the preset's values under any field the user gives, so a user can start
from a preset and override any single number.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from astra_hetero.spec.catalog import fabric_catalog, gpu_catalog, model_catalog, normalize_key


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


Fraction = Annotated[float, Field(gt=0, le=1)]


class ModelSpec(Strict):
    """A decoder-only transformer; `preset` names one of the catalog's models."""

    preset: str | None = Field(None, description="catalog model, e.g. gpt3-175b, llama2-70b")
    num_layers: PositiveInt
    hidden_size: PositiveInt
    num_heads: PositiveInt
    num_kv_heads: PositiveInt
    ffn_size: PositiveInt
    activation: Literal["gelu", "swiglu"]
    vocab_size: PositiveInt
    seq_len: PositiveInt
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
    """A GPU type: a catalog preset, optionally with any number overridden."""

    preset: str | None = None
    name: str
    bf16_tflops: PositiveFloat = Field(description="dense BF16 peak, TFLOP/s")
    hbm_tbps: PositiveFloat = Field(description="device memory bandwidth, TB/s")
    memory_gib: PositiveFloat
    compute_efficiency: Fraction = Field(description="achievable fraction of bf16_tflops")
    memory_efficiency: Fraction = Field(description="achievable fraction of hbm_tbps")
    compute_multiplier: PositiveFloat = Field(
        1.0, description="scales both throughputs, e.g. 0.5 = half as fast as the preset it starts from"
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, gpu_catalog(), "gpu")

    @property
    def type_key(self) -> str:
        """Identifies the GPU type for grouping and calibration lookups."""
        return self.preset or normalize_key(self.name)

    @property
    def effective_flops_per_ns(self) -> float:
        return self.bf16_tflops * 1e3 * self.compute_efficiency * self.compute_multiplier

    @property
    def effective_bytes_per_ns(self) -> float:
        return self.hbm_tbps * 1e3 * self.memory_efficiency * self.compute_multiplier


class FabricSpec(Strict):
    """The intra-node interconnect of a node group: per-GPU, per-direction bandwidth."""

    preset: str | None = None
    name: str = "custom"
    gbytes_per_s: PositiveFloat
    latency_ns: Annotated[float, Field(ge=0)]

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, fabric_catalog(), "intra_node_fabric")


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(g|gb|gbps|gbit/s|gbe)?\s*$", re.IGNORECASE)


class NicSpec(Strict):
    """Scale-out NICs of one node: `400`, `"400G"` or `{gbps: 400, count: 8}`."""

    gbps: PositiveFloat
    count: PositiveInt | None = Field(None, description="NICs per node; default one per GPU")
    latency_ns: Annotated[float, Field(ge=0)] = Field(
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
    count: PositiveInt = Field(description="number of nodes")
    gpus_per_node: PositiveInt
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
        names = [g.name for g in self.node_groups if g.name is not None]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node group names must be unique; repeated: {', '.join(dupes)}")
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


class DcqcnSpec(Strict):
    """DCQCN congestion control (ns-3 CC_MODE 1). Defaults follow the HPCC/ns-3 RDMA reference setup."""

    enabled: bool = True
    alpha_resume_interval_us: PositiveFloat = 1.0
    rate_decrease_interval_us: PositiveFloat = 4.0
    clamp_target_rate: bool = False
    rp_timer_us: PositiveFloat = 900.0
    ewma_gain: Fraction = 0.00390625
    fast_recovery_times: PositiveInt = 1
    rate_ai_mbps: PositiveFloat = 50.0
    rate_hai_mbps: PositiveFloat = 100.0
    min_rate_mbps: PositiveFloat = 100.0


class EcnThreshold(Strict):
    kmin_kb: PositiveFloat
    kmax_kb: PositiveFloat
    pmax: Fraction

    @model_validator(mode="after")
    def _order(self) -> EcnThreshold:
        if self.kmin_kb > self.kmax_kb:
            raise ValueError(f"kmin_kb {self.kmin_kb} exceeds kmax_kb {self.kmax_kb}")
        return self


class Ns3Spec(Strict):
    buffer_size_mb: PositiveInt = 32
    packet_payload_bytes: PositiveInt = 1000
    enable_trace: bool = Field(False, description="packet trace; tens of MB even for tiny runs")
    ecn: dict[float, EcnThreshold] = Field(
        default_factory=dict, description="per link rate in Gbit/s; rates not given are derived"
    )
    link_error_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="keep 0: a non-zero rate is known to hang the ns-3 backend"
    )


class NetworkSpec(Strict):
    topology: Literal["single_switch", "spine_leaf", "rail_optimized"] = "spine_leaf"
    nodes_per_leaf: PositiveInt = Field(4, description="spine_leaf: nodes whose NICs share one leaf")
    oversubscription: Annotated[float, Field(ge=1)] = Field(
        1.0, description="leaf downlink : uplink bandwidth ratio"
    )
    num_spines: PositiveInt | None = Field(None, description="default: derived from oversubscription")
    uplink_gbps: PositiveFloat | None = Field(None, description="leaf-spine link rate; default: fastest NIC")
    link_latency_ns: Annotated[float, Field(ge=0)] = 500.0
    dcqcn: DcqcnSpec = DcqcnSpec()
    ns3: Ns3Spec = Ns3Spec()
    link_model: Literal["ideal", "ns3_packets"] | Fraction = Field(
        "ideal",
        description="embedded engine: ideal links (line rate, one-way delay); ns3_packets = each link's "
        "rate and delay as ns-3's packets and ACKs use it (from ns3/config.txt); or a number: that share "
        "of every link's rate (e.g. calibrated from short ns-3 runs)",
    )
    step_down_efficiency: Fraction = Field(
        1.0,
        description="embedded engine: the share of its rate a link gets where traffic steps down onto it "
        "from faster links (a slower NIC behind a faster fabric), as DCQCN leaves it; 1 = ideal; calibrate "
        "against ns-3 with benchmarks/packet_fidelity.py --calibrate",
    )


class ParallelismSpec(Strict):
    tp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt = 1
    micro_batch_size: PositiveInt = 1
    global_batch_size: PositiveInt = Field(description="sequences per iteration, over all replicas")
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    distributed_optimizer: bool = False
    dp_bucket_mib: PositiveFloat = Field(25.0, description="gradient bucket size for overlapped DP sync")
    grad_reduce_in_fp32: bool = Field(
        True, description="reduce gradients in FP32 (Megatron's default for BF16)"
    )
    allow_tp_across_nodes: bool = False


class MappingSpec(Strict):
    """Which node groups serve which pipeline stages or data-parallel replicas.

    Give at most one of `stages` (one node-group name per stage) and `replicas` (one per replica).
    Without either, GPUs are taken in cluster order with TP innermost, then DP, then PP.
    """

    stages: list[str] | None = None
    replicas: list[str] | None = None

    @model_validator(mode="after")
    def _one(self) -> MappingSpec:
        if self.stages is not None and self.replicas is not None:
            raise ValueError("give either stages or replicas, not both")
        return self


Split = Literal["uniform", "auto"] | list[PositiveInt]


class PartitionSpec(Strict):
    layers: Split = Field("uniform", description="layers per stage: uniform, auto or an explicit list")
    micro_batches: Split = Field(
        "uniform", description="micro-batches per replica: uniform, auto or an explicit list"
    )


class CollectiveSpec(Strict):
    algorithm: Literal["ring", "hierarchical"] = Field(
        "hierarchical", description="how multi-node collectives run (NCCL-like hierarchical or one ring)"
    )
    max_in_flight_per_rank: PositiveInt | None = Field(
        None,
        description="collectives/sends one rank may run at once in the embedded engine; None = no limit "
        "(separate NCCL streams overlap); 1 = ASTRA-sim's rule (one communication op per NPU)",
    )


class ScopeSpec(Strict):
    """A cut-down iteration for expensive backends (packet-level ns-3): the plan is made for the whole
    model and batch (partition, memory check), then each stage keeps only its first layers and each
    replica only its first micro-batches. Gradient sync then covers only the layers kept."""

    layers_per_stage: PositiveInt | None = Field(
        None, description="transformer layers kept on each pipeline stage (at most its planned share)"
    )
    micro_batches_per_replica: PositiveInt | None = Field(
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
    calibration: str | None = Field(None, description="CSV of measured operator times, relative to the spec")
    scope: ScopeSpec | None = Field(None, description="simulate a cut-down iteration (layers, micro-batches)")
