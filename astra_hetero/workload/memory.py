"""Per-device memory estimate under the schedule, checked against device capacity.

Mixed-precision training with Adam, widths from the precision section (`precision.py`): by default
BF16 weights (2 B/param), FP32 main gradients (4 B/param), FP32 master weights plus two moments
(12 B/param); NeMo's distributed Adam with BF16 state holds 2 + 2 + 6/dp B/param. The states are
sharded over the data-parallel ranks as the ZeRO stage says (`sharding.sharded_state_bytes`).
Activations follow Korthikanti et al. (2022), "Reducing Activation Recomputation in Large Transformer
Models", generalised to the model's FFN width, gated MLPs, grouped KV heads and head width; with fused
attention (`compute.attention: fused`) the s² score terms give way to the kernel's per-head
log-sum-exp. Context parallelism stores 1/cp of every sequence; a MoE layer stores its routing and
expert activations (`moe.moe_activation_bytes`) in place of the dense MLP's.

How many micro-batches' activations a stage holds at once is read off its own schedule: a forward pass
of a chunk stores that chunk's layers until the chunk's backward pass for the same micro-batch frees
them. That gives GPipe's m micro-batches, 1F1B's p − s, and under the interleaved schedule (v chunks
of L/(p·v) layers) Korthikanti et al.'s L·(1 + (p − 1)/(p·v)) layer-micro-batches on the first stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.spec.devices import Device
from astra_hetero.spec.schema import Spec
from astra_hetero.units import BYTES_PER_GIB
from astra_hetero.workload.costs import expert_parameters_on_rank, stage_parameters
from astra_hetero.workload.layout import Layout
from astra_hetero.workload.moe import moe_activation_bytes
from astra_hetero.workload.ops import shape_of
from astra_hetero.workload.partition import Partition, even_split
from astra_hetero.workload.precision import Dtypes
from astra_hetero.workload.schedule import FORWARD, stage_steps
from astra_hetero.workload.sharding import largest_unit_parameters, sharded_state_bytes

# CUDA context, communication buffers, allocator fragmentation: a conservative fixed reserve.
RESERVED_BYTES = 2 * BYTES_PER_GIB


@dataclass(frozen=True)
class MemoryEstimate:
    weights: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + RESERVED_BYTES

    def describe(self) -> str:
        gib = BYTES_PER_GIB
        return (
            f"weights {self.weights / gib:.1f} + gradients {self.gradients / gib:.1f} + optimizer "
            f"{self.optimizer / gib:.1f} + activations {self.activations / gib:.1f} + reserve "
            f"{RESERVED_BYTES / gib:.0f} = {self.total / gib:.1f} GiB"
        )


def activation_bytes_per_layer(spec: Spec, expert_hosts: tuple[int, bool] = (0, True)) -> float:
    """Stored activations of one layer for one micro-batch on one TP rank.

    Korthikanti et al.'s terms are BF16 tensors (2 B per element) and 1-byte dropout masks; wider
    activations scale the tensors. Under FP8 Transformer Engine saves the inputs of the linear layers
    as FP8 (1 B) — except the attention output, which the attention backward needs in BF16 besides
    the projection's FP8 copy."""
    m, par = spec.model, spec.parallelism
    s, b, h, t = m.seq_len // par.cp, par.micro_batch_size, m.hidden_size, par.tp
    sbh = s * b * h
    dt = Dtypes.from_spec(spec)
    w = dt.activation_bytes
    if par.recompute == "full":
        return w * sbh / (t if par.sequence_parallel else 1)
    if par.recompute == "selective_op":
        return op_sac_bytes_per_token(spec) * s * b
    gemm_in = dt.gemm_input_bytes  # a saved linear-layer input
    fp8_copy = gemm_in if dt.fp8 else 0
    # norm inputs (2 tensors), QKV and MLP inputs, dropout masks (2 × 1 B)
    replicated = 2.0 * w + 2.0 * gemm_in + 2.0
    queries = m.num_heads * m.head_width / h  # query (and attention output) width against h
    keys = m.num_kv_heads * m.head_width / h
    up_outputs = 2.0 if m.activation == "swiglu" else 1.0  # MLP up outputs per ffn element
    dense_ffn = m.ffn_size if m.moe is None else m.moe.shared_experts * m.moe.expert_ffn_size
    mlp = (up_outputs * w + gemm_in) * dense_ffn / h
    # Q, K and V, attention output, MLP
    sharded = w * queries + 2 * w * keys + (w + fp8_copy) * queries + mlp
    if spec.compute.attention == "fused":  # no score matrix; the FP32 row log-sum-exp per head
        scores = 4.0 * m.num_heads / h
    else:  # softmax and dropout outputs (activation format) and mask (1 B) per score; recomputed if selective
        scores = 0.0 if par.recompute == "selective" else (2.0 * w + 1.0) * m.num_heads * s / h
    replicated_share = replicated / t if par.sequence_parallel else replicated
    routed = 0.0
    if m.moe is not None:
        routed = moe_activation_bytes(shape_of(m, par, spec.compute.attention, dt, expert_hosts))
    return sbh * (replicated_share + sharded / t + scores / t) + routed


def op_sac_bytes_per_token(spec: Spec) -> float:
    """What torchtitan's per-op selective checkpointing (`recompute: selective_op`, see
    costs.op_sac_recompute) keeps of one layer per token on one TP rank: the checkpointed block's
    input, SDPA's output and FP32 log-sum-exp per head, the sequence-parallel reduce-scatters'
    outputs, and in BF16 the saved matrix products' outputs — wq's, wv's and w1's (column-parallel,
    1/tp each) and the last one's (w2 of a gated MLP, row-parallel: the whole width before its
    reduce-scatter; a non-gated MLP saves its up projection instead, counted in place of w1's)."""
    m, par = spec.model, spec.parallelism
    h, t, sp = m.hidden_size, par.tp, par.sequence_parallel
    w = Dtypes.from_spec(spec).activation_bytes
    queries, keys = m.num_heads * m.head_width, m.num_kv_heads * m.head_width
    kept = w * h / (t if sp else 1) + (w * queries + 4.0 * m.num_heads) / t
    if t > 1 and sp:
        kept += 2 * w * h / t
    if not Dtypes.from_spec(spec).fp8:
        dense_ffn = m.ffn_size if m.moe is None else m.moe.shared_experts * m.moe.expert_ffn_size
        kept += w * (queries + keys + dense_ffn) / t
        if m.activation == "swiglu":
            kept += w * h
    return kept


def peak_layers_in_flight(spec: Spec, stage: int, chunk_layers: Sequence[int], num_micro_batches: int) -> int:
    """Most (layer, micro-batch) activation sets the stage holds at once under its schedule."""
    par = spec.parallelism
    steps = stage_steps(par.schedule, stage, par.pp, num_micro_batches, len(chunk_layers))
    held = peak = 0
    for step in steps:
        held += chunk_layers[step.chunk] if step.kind == FORWARD else -chunk_layers[step.chunk]
        peak = max(peak, held)
    return peak


def estimate(
    spec: Spec,
    stage: int,
    num_layers: int,
    num_micro_batches: int,
    chunk_layers: Sequence[int] | None = None,
    expert_hosts: tuple[int, bool] = (0, True),
) -> MemoryEstimate:
    """`chunk_layers`: the stage's layers per model chunk (default: `num_layers` split evenly over
    the virtual stages); `expert_hosts`: under mapping.experts, holders per expert group and whether
    the device is one."""
    par, model = spec.parallelism, spec.model
    if chunk_layers is None:
        chunk_layers = even_split(num_layers, par.virtual_stages)
    params, _ = stage_parameters(model, par, stage, num_layers, expert_hosts)
    dt = Dtypes.from_spec(spec)
    experts = expert_parameters_on_rank(model, par, expert_hosts) * num_layers
    per_param = (dt.param_bytes, dt.grad_bytes, dt.optimizer_bytes)
    weights, gradients, optimizer = sharded_state_bytes(spec, params - experts, experts, per_param)
    if par.sharding_stage == 3:  # gathered units in flight: the one in use and the prefetched one,
        unit = largest_unit_parameters(spec, stage)  # and the unsharded gradients of one
        weights += 2 * dt.param_bytes * unit
        gradients += dt.grad_bytes * unit
    activations = activation_bytes_per_layer(spec, expert_hosts) * peak_layers_in_flight(
        spec, stage, chunk_layers, num_micro_batches
    )
    if par.recompute in ("full", "selective_op"):  # one layer's recomputed activations live in its backward
        activations += activation_bytes_per_layer(
            spec.model_copy(update={"parallelism": par.model_copy(update={"recompute": "none"})})
        )
    if stage == par.pp - 1:  # logits in the activation format plus FP32 softmax for the loss, of the
        per_logit = dt.activation_bytes + 4  # rank's own 1/cp of the sequence: context parallelism
        # shards the tokens and labels before the model runs (Megatron-core get_batch_on_this_cp_rank,
        # torchtitan's context_parallel buffers input_ids and labels), so the head sees s/cp tokens
        tokens = par.micro_batch_size * model.seq_len // par.cp
        activations += tokens * model.vocab_size / par.tp * per_logit
    return MemoryEstimate(weights, gradients, optimizer, activations)


HostsOf = Callable[[int], tuple[int, bool]]  # rank -> (expert holders per group, holds experts)


def _no_experts(rank: int) -> tuple[int, bool]:
    return (0, True)


def cell_estimates(
    spec: Spec, layout: Layout, partition: Partition, hosts_of: HostsOf = _no_experts
) -> Iterator[tuple[int, int, Device, MemoryEstimate]]:
    """(stage, replica, the cell's first device, its estimate) for every pipeline cell: a cell's TP
    ranks share one node group, so one device stands for them all."""
    known: dict[tuple, MemoryEstimate] = {}  # `estimate` is a function of its arguments: replicas share it
    for stage in range(spec.parallelism.pp):
        chunk_layers = partition.layers_per_chunk[stage]
        for replica in range(spec.parallelism.dp):
            device = layout.devices[layout.rank_of(stage, replica, 0)]
            hosts = hosts_of(device.rank)
            count = partition.micro_batches_per_replica[replica]
            key = (stage, count, tuple(chunk_layers) if chunk_layers is not None else None, hosts)
            need = known.get(key)
            if need is None:
                layers = partition.layers_per_stage[stage]
                need = known[key] = estimate(spec, stage, layers, count, chunk_layers, hosts)
            yield stage, replica, device, need


def check_memory(spec: Spec, layout: Layout, partition: Partition, hosts_of: HostsOf = _no_experts) -> None:
    """Raise InfeasiblePlan naming the first stage and device whose estimate exceeds its capacity."""
    for stage, replica, device, need in cell_estimates(spec, layout, partition, hosts_of):
        if need.total > device.spec.gpu.memory_gib * BYTES_PER_GIB:
            raise InfeasiblePlan(
                "parallelism",
                f"stage {stage} of replica {replica} on {device.spec.gpu.name} (node group "
                f"{device.group_name!r}, rank {device.rank}) needs {need.total / BYTES_PER_GIB:.1f} GiB "
                f"but has {device.spec.gpu.memory_gib:g} GiB ({need.describe()}); try more pipeline "
                "stages, sequence_parallel, recompute, distributed_optimizer or a higher zero_stage"
                + (", or fewer virtual_stages" if spec.parallelism.virtual_stages > 1 else ""),
            )


def peak_by_gpu(
    spec: Spec, layout: Layout, partition: Partition, hosts_of: HostsOf = _no_experts
) -> dict[str, dict[str, float | int]]:
    """Per GPU type, the estimate of its fullest device against its capacity (GiB), and where that
    device sits: what a run summary shows of memory."""
    peaks: dict[str, dict[str, float | int]] = {}
    for stage, replica, device, need in cell_estimates(spec, layout, partition, hosts_of):
        peak = need.total / BYTES_PER_GIB
        if device.gpu_type not in peaks or peak > peaks[device.gpu_type]["peak_gib"]:
            peaks[device.gpu_type] = {
                "peak_gib": round(peak, 3),
                "capacity_gib": device.spec.gpu.memory_gib,
                "stage": stage,
                "replica": replica,
            }
    return peaks


def max_layers_that_fit(
    spec: Spec, layout: Layout, stage: int, max_micro_batches: int, hosts_of: HostsOf = _no_experts
) -> int:
    """The most layers `stage` can hold on every device that serves it (0 if not even one fits).

    With virtual stages every chunk is taken as large as the largest: activations held only grow with
    a chunk's size, so whichever way the layers are then split over the chunks, they fit."""
    cells = [layout.devices[layout.rank_of(stage, r, 0)] for r in range(spec.parallelism.dp)]
    fitting = 0
    v = spec.parallelism.virtual_stages
    for layers in range(v, spec.model.num_layers + 1):
        chunks = [-(-layers // v)] * v
        if any(
            estimate(spec, stage, layers, max_micro_batches, chunks, hosts).total > memory * BYTES_PER_GIB
            for memory, hosts in {(d.spec.gpu.memory_gib, hosts_of(d.rank)) for d in cells}
        ):
            break
        fitting = layers
    return fitting
