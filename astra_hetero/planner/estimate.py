"""A fast estimate of a candidate's iteration time, and a lower bound that no simulation can beat.

Both are built from the same pieces: per cell and model chunk, one micro-batch's forward and backward
on one TP rank (compute plus the blocks' TP collectives, which sit on the rank's compute chain), and
communication timed by the spec's own communication model (`planner.comm`: NCCL-like or ideal, on the
cluster's topology).

Estimate (ranks candidates): each replica's pipeline is run step by step through its schedule
(`planner.pipeline`), activation and gradient transfers timed with the tp ranks' sends sharing the
links; then the data-parallel end of the iteration as the generator writes it (`planner.sync`):
gradient buckets issued by the overlap rules, one stream per stage, the tied-embedding all-reduce, the
optimizer step, parameter all-gathers. Traffic of different stages and replicas is not made to share
links, so the estimate is optimistic where it contends.

Lower bound (branch and bound): a rank computes its stage's micro-batches' passes one at a time;
before its first forward the first micro-batch must have passed every earlier stage (and its
activations every link between them); after its last backward pass, that gradient must pass back to
stage 0; after a rank's last backward pass come the reductions issued then, the tied-embedding
all-reduce, its optimizer step and any parameter all-gathers after it. Every communication counts at
its time alone on the network, which the engine never beats.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.planner.comm import P2P, Op, trace_size
from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.pipeline import Passes, Replica, StageRun, run
from astra_hetero.planner.streams import expert_members, with_zero2_stream, with_zero3_stream
from astra_hetero.planner.sync import Bucket, chunk_buckets, issue_times
from astra_hetero.workload.partition import replicas_in_lockstep
from astra_hetero.workload.schedule import FORWARD, stage_steps

# The traces carry compute in whole microseconds, rounded per rank on the cumulative time (±0.5 µs
# for any prefix of a rank's work); a chain through every stage and back crosses each rank twice.
_ROUNDING_NS_PER_STAGE = 2000.0

Members = tuple[tuple[int, ...], ...]  # one communicator per TP index: its ranks, sorted (as the engine)


@dataclass(frozen=True)
class Cell:
    device_class: int
    ranks: tuple[int, ...]  # its GPUs in TP-index order


@dataclass(frozen=True)
class Assessment:
    estimate_ns: float
    bound_ns: float
    estimated: bool = True  # False: the bound only, so far (`estimate_ns` is the bound)


def assess(
    ctx: OptionContext,
    cells: list[list[Cell]],
    layers: tuple[int, ...],
    micro_batches: tuple[int, ...],
    estimate: bool = True,
    cutoff_us: float = float("inf"),
) -> Assessment:
    """Bound and estimate; with `estimate=False` the bound only (the estimate, the dearer part, is
    left for `estimated` and stands at the bound, which it never falls below). A bound that reaches
    `cutoff_us` (the best simulated time) is left there: the plan cannot win, by how much is moot."""
    plan = _Timed(ctx, cells, layers, micro_batches)
    slack = _ROUNDING_NS_PER_STAGE * ctx.shape.pp
    bound = max(0.0, plan.bound(cutoff_us * 1000 + slack) - slack)
    if not estimate:
        return Assessment(estimate_ns=bound, bound_ns=bound, estimated=False)
    return Assessment(estimate_ns=max(plan.estimate(), bound), bound_ns=bound)


def branch_bound(ctx: OptionContext, cells_per_class: dict[int, int]) -> float:
    """Below every plan of this shape and these options that puts `cells_per_class` cells on each
    device class, whatever its grid and splits: the micro-batches' layers are work units that the
    cells share at best perfectly, and one micro-batch must pass every layer, forward and backward,
    on the fastest class at best."""
    unit = {k: t.layer for k, t in ctx.floor_times.items() if cells_per_class.get(k)}
    layers = ctx.problem.base.model.num_layers
    shared = ctx.num_micro_batches * layers / sum(cells_per_class[k] / unit[k] for k in unit)
    latency = layers * min(unit.values())
    return max(0.0, max(shared, latency) - _ROUNDING_NS_PER_STAGE * ctx.shape.pp)


class _Timed:
    """One candidate's pieces, each looked up in the context's memo (candidates share most of them)."""

    def __init__(
        self,
        ctx: OptionContext,
        cells: list[list[Cell]],
        layers: tuple[int, ...],
        micro_batches: tuple[int, ...],
    ) -> None:
        self.ctx, self.cells, self.layers, self.micro_batches = ctx, cells, layers, micro_batches
        self.pp, self.dp, self.tp = ctx.shape.pp, ctx.shape.dp, ctx.shape.tp
        self.shape_cp = ctx.shape.cp
        self.chunks = [
            ctx.chunk_layers(s, layers[s], frozenset(c.device_class for c in row))
            for s, row in enumerate(cells)
        ]
        par = ctx.parallelism
        self.reduce_kind = "reduce_scatter" if par.distributed_optimizer else "all_reduce"
        self.data_parallel = self.dp * self.shape_cp > 1
        # ZeRO-3 gathers per unit while computing (and reduce-scatters per micro-batch): no parameter
        # gather after the step, and the reductions overlap the backward passes
        self.zero3 = par.sharding_stage == 3
        self.gathers = par.distributed_optimizer and self.data_parallel and not self.zero3
        self.tied = ctx.problem.base.model.tied_embeddings and self.pp > 1
        # replicas whose collectives meet every pass (wide expert groups) or micro-batch (ZeRO-2/3)
        # go at the pace of the slowest GPU class of each stage
        self.lockstep = replicas_in_lockstep(par)
        self._dp_members: dict[int, Members] = {}
        self._dp_after: dict[tuple[object, ...], float] = {}

    # --- pieces -------------------------------------------------------------------------------------
    def passes(
        self, s: int, k: int, floor: bool = False, members: tuple[tuple[str, tuple[int, ...]], ...] = ()
    ) -> Passes:
        """One micro-batch through each chunk of stage s on class k (`floor`: at the bounds' prices;
        `members`: the expert groups to price the layer's expert communication on)."""
        key = ("passes", s, self.chunks[s], k, floor, members)
        found = self.ctx.memo.get(key)
        if found is None:
            if floor:
                t = self.ctx.floor_times[k]
            else:
                t = self.ctx.times_with(k, members) if members else self.ctx.times[k]
            v = len(self.chunks[s])
            edges = [(s == 0 and c == 0, s == self.pp - 1 and c == v - 1) for c in range(v)]
            fwd = [t.forward(n, *edge) for n, edge in zip(self.chunks[s], edges, strict=True)]
            if not floor:  # the framework's per-micro-batch work runs before the first chunk's forward
                fwd[0] = (fwd[0][0] + t.host.micro_batch_ns, fwd[0][1])
            bwd = [t.backward(n, *edge) for n, edge in zip(self.chunks[s], edges, strict=True)]
            found = self.ctx.memo[key] = Passes(
                tuple(f[0] for f in fwd),
                tuple(f[1] for f in fwd),
                tuple(b[0] for b in bwd),
                tuple(b[1] for b in bwd),
            )
        return found  # type: ignore[return-value]

    def estimated_passes(self, s: int, k: int) -> Passes:
        """The passes the estimate runs (`planner.streams`): with the expert groups the layout forms,
        paced by the stage's slowest class in lockstep, and with what ZeRO-2/3's data-parallel stream
        adds where the compute cannot hide it."""
        if self.lockstep:
            k = max({c.device_class for c in self.cells[s]}, key=lambda j: sum(self.passes(s, j).fwd))
        passes = self.passes(s, k, members=expert_members(self.ctx, self.cells[s], k))
        if self.data_parallel and self.ctx.parallelism.sharding_stage == 2:
            return with_zero2_stream(self, s, k, passes)
        if self.data_parallel and self.zero3:
            return with_zero3_stream(self, s, passes)
        return passes

    def optimizer_ns(self, s: int, k: int) -> float:
        key = ("optimizer", s, self.layers[s], k)
        found = self.ctx.memo.get(key)
        if found is None:
            ctx = self.ctx
            params = ctx.params_on_rank(s, self.layers[s])
            shards = params / ctx.updated_params(s, self.layers[s])
            times = ctx.times[k]
            found = ctx.memo[key] = times.optimizer.segment(params, shards).time_ns + times.host.step_ns
        return found  # type: ignore[return-value]

    def buckets(self, s: int, k: int) -> tuple[tuple[Bucket, ...], ...]:
        key = ("buckets", s, self.chunks[s], k)
        found = self.ctx.memo.get(key)
        if found is None:
            found = self.ctx.memo[key] = chunk_buckets(self.ctx, s, self.chunks[s], self.ctx.times[k])
        return found  # type: ignore[return-value]

    def send(self, a: Cell, b: Cell, together: bool) -> float:
        """Activations (or gradients) of every TP rank of cell a to its peer in cell b (alone: the
        first rank's)."""
        key = ("send", a.ranks, b.ranks) if together else ("send", a.ranks[0], b.ranks[0])
        found = self.ctx.memo.get(key)
        if found is None:
            size, comm = self.ctx.activation_bytes, self.ctx.comm
            if together:
                found = comm.together_ns([Op(pair, P2P, size) for pair in zip(a.ranks, b.ranks, strict=True)])
            else:
                found = comm.alone_ns(Op((a.ranks[0], b.ranks[0]), P2P, size))
            self.ctx.memo[key] = found
        return found  # type: ignore[return-value]

    def collective(self, members: Members, kind: str, buffer_bytes: float, together: bool) -> float:
        """One collective per TP index (`members[i]`: its ranks): all at once, or the first alone."""
        key = ("collective", members, kind, int(buffer_bytes), together)
        found = self.ctx.memo.get(key)
        if found is None:
            ops = [Op(m, kind, trace_size(kind, buffer_bytes, len(m))) for m in members]
            comm = self.ctx.comm
            found = self.ctx.memo[key] = comm.together_ns(ops) if together else comm.alone_ns(ops[0])
        return found  # type: ignore[return-value]

    def dp_members(self, s: int) -> Members:
        """The stage's data-parallel groups, one per TP index: every replica's CP ranks of it."""
        found = self._dp_members.get(s)
        if found is None:
            found = self._dp_members[s] = tuple(
                tuple(
                    sorted(
                        cell.ranks[c * self.tp + t] for cell in self.cells[s] for c in range(self.shape_cp)
                    )
                )
                for t in range(self.tp)
            )
        return found

    def embedding_members(self, r: int) -> Members:
        first, last = self.cells[0][r], self.cells[self.pp - 1][r]
        return tuple(tuple(sorted((first.ranks[i], last.ranks[i]))) for i in range(len(first.ranks)))

    def gather_bytes(self, bucket: Bucket) -> float:
        return bucket.grad_bytes * self.ctx.dtypes.param_bytes / self.ctx.grad_width

    # --- estimate -----------------------------------------------------------------------------------
    def replica(self, r: int, ready: tuple[tuple[float, ...], ...] | None) -> Replica:
        pp, column = self.pp, [self.cells[s][r] for s in range(self.pp)]
        boundaries = pp if self.ctx.virtual_stages > 1 else pp - 1  # the last wraps to stage 0
        return Replica(
            self.ctx.parallelism.schedule,
            self.micro_batches[r],
            tuple(self.estimated_passes(s, cell.device_class) for s, cell in enumerate(column)),
            tuple(self.send(column[s], column[(s + 1) % pp], True) for s in range(boundaries)),
            tuple(self.send(column[(s + 1) % pp], column[s], True) for s in range(boundaries)),
            ready,
        )

    def run_replica(self, replica: Replica) -> tuple[StageRun, ...]:
        key = ("run", replica)
        found = self.ctx.memo.get(key)
        if found is None:
            found = self.ctx.memo[key] = run(replica)
        return found  # type: ignore[return-value]

    def estimate(self) -> float:
        pp, dp = self.pp, self.dp
        ready = self.gather_gates() if self.gathers and self.ctx.parallelism.overlap_param_gather else None
        runs = [self.run_replica(self.replica(r, ready)) for r in range(dp)]
        done = [[runs[r][s].backward_ends[-1] for r in range(dp)] for s in range(pp)]  # last compute
        if self.data_parallel and not self.zero3:
            for s in range(pp):
                synced = self.stream_end(s, runs)
                done[s] = [max(t, synced) for t in done[s]]
        if self.tied:
            for r in range(dp):
                start = max(done[0][r], done[pp - 1][r])
                end = start + self.collective(
                    self.embedding_members(r), "all_reduce", self.ctx.embedding_grad_bytes, True
                )
                done[0][r] = done[pp - 1][r] = end
        finish = 0.0
        for s in range(pp):
            stepped = [done[s][r] + self.optimizer_ns(s, self.cells[s][r].device_class) for r in range(dp)]
            end = max(stepped)
            if self.gathers and not self.ctx.parallelism.overlap_param_gather:
                for chunk in self.buckets(s, self.cells[s][0].device_class):
                    for bucket in chunk:
                        end += self.collective(
                            self.dp_members(s), "all_gather", self.gather_bytes(bucket), True
                        )
            finish = max(finish, end, *(runs[r][s].end for r in range(dp)))
        return finish

    def stream_end(self, s: int, runs: list[tuple[StageRun, ...]]) -> float:
        """When stage s's last gradient reduction ends: each starts once every replica issued it and
        the one before it on the stream is done."""
        issued = [
            issue_times(self.ctx, s, runs[r][s], self.buckets(s, self.cells[s][r].device_class))
            for r in range(self.dp)
        ]
        members, end = self.dp_members(s), 0.0
        for k, (_, bucket) in enumerate(issued[0]):
            start = max(end, max(times[k][0] for times in issued))
            end = start + self.collective(members, self.reduce_kind, bucket.grad_bytes, True)
        return end

    def gather_gates(self) -> tuple[tuple[float, ...], ...]:
        """overlap_param_gather: the all-gathers are issued at the start of the iteration (one chunk:
        its first layers first; virtual stages: chunk by chunk, each in bucket order), and a chunk's
        first forward pass waits for the bucket that holds its first layers (the last of its plan)."""
        gates = []
        for s in range(self.pp):
            plan = self.buckets(s, self.cells[s][0].device_class)
            order = (
                [(0, i) for i in reversed(range(len(plan[0])))]
                if len(plan) == 1
                else [(c, i) for c in range(len(plan)) for i in range(len(plan[c]))]
            )
            members, elapsed, ready = self.dp_members(s), 0.0, [0.0] * len(plan)
            for c, i in order:
                elapsed += self.collective(members, "all_gather", self.gather_bytes(plan[c][i]), True)
                if i == len(plan[c]) - 1:
                    ready[c] = elapsed
            gates.append(tuple(ready))
        return tuple(gates)

    # --- lower bound --------------------------------------------------------------------------------
    def bound(self, enough_ns: float = float("inf")) -> float:
        """The largest of the chains below (or the first that reaches `enough_ns`: the plan is
        bounded out then, and the rest need not be worked out)."""
        best = 0.0
        for r in range(self.dp):
            column = [self.cells[s][r] for s in range(self.pp)]
            first_post = self.after_last_backward(0, r)
            before_fwd = before_bwd = 0.0
            for s, cell in enumerate(column):
                p = self.passes(s, cell.device_class, floor=True)
                own = before_fwd + self.micro_batches[r] * self.busy(s, cell.device_class)
                post = first_post if s == 0 else self.after_last_backward(s, r)
                best = max(best, own + post, own + before_bwd + first_post)
                if best >= enough_ns:
                    return best
                if s < self.pp - 1:  # sends wait for the whole pass
                    before_fwd += p.fwd[0] + self.send(cell, column[s + 1], False)
                    before_bwd += p.bwd[0] + self.send(column[s + 1], cell, False)
        return best

    def busy(self, s: int, k: int) -> float:
        """How long one micro-batch holds a rank of stage s on class k: its passes' compute, not the
        collectives after a pass's last compute."""
        key = ("busy", s, self.chunks[s], k)
        found = self.ctx.memo.get(key)
        if found is None:
            p = self.passes(s, k, floor=True)
            found = self.ctx.memo[key] = sum(p.fwd) - sum(p.fwd_tail) + sum(p.bwd) - sum(p.bwd_tail)
        return found  # type: ignore[return-value]

    def after_last_backward(self, s: int, r: int) -> float:
        """What a rank of stage s, replica r must still do, one thing after another, after its last
        backward pass."""
        k = self.cells[s][r].device_class
        total = self.optimizer_ns(s, k)
        if self.data_parallel and not self.zero3:  # ZeRO-3's last reduction: left out (it may be small)
            total += self.data_parallel_after(s, r, k)
        if self.tied and s in (0, self.pp - 1):
            total += self.collective(
                self.embedding_members(r), "all_reduce", self.ctx.embedding_grad_bytes, False
            )
        return total

    def data_parallel_after(self, s: int, r: int, k: int) -> float:
        """The gradient reductions issued after the last backward pass and the parameter gathers
        after the optimizer step, one after another, each alone."""
        par, plan = self.ctx.parallelism, self.buckets(s, k)
        interleaved = par.overlap_grad_reduce and len(plan) > 1
        order = self.backward_chunks(s, r) if interleaved else None
        own = (s, k, order)  # replicas of this plan alike at stage s share it
        found = self._dp_after.get(own)
        if found is not None:
            return found
        members = self.dp_members(s)
        key = ("dp_after", s, self.chunks[s], k, members, order)
        found = self.ctx.memo.get(key)
        if found is None:
            found = 0.0
            for bucket in self.reductions_after_backward(s, r, plan):
                found += self.collective(members, self.reduce_kind, bucket.grad_bytes, False)
            if self.gathers and not par.overlap_param_gather:
                for chunk in plan:
                    for bucket in chunk:
                        found += self.collective(members, "all_gather", self.gather_bytes(bucket), False)
            self.ctx.memo[key] = found
        self._dp_after[own] = found  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def reductions_after_backward(self, s: int, r: int, plan: tuple[tuple[Bucket, ...], ...]) -> list[Bucket]:
        """The reductions issued only once the last backward pass is done."""
        par = self.ctx.parallelism
        if not par.overlap_grad_reduce:
            return [b for chunk in plan for b in chunk]
        if len(plan) == 1:
            return list(plan[0][-1:])  # the bucket the pass's last gradients close
        order = self.backward_chunks(s, r)
        last = len(order) - 1
        last_backward = {c: i for i, c in enumerate(order)}
        return [b for c in range(len(plan)) if last_backward[c] + s >= last for b in plan[c]]

    def backward_chunks(self, s: int, r: int) -> tuple[int, ...]:
        """The chunk of each backward pass of stage s in replica r, in program order (the schedule's,
        as `pipeline.run` runs them), without running the pipeline."""
        schedule, m = self.ctx.parallelism.schedule, self.micro_batches[r]
        v = len(self.chunks[0])
        key = ("backward_chunks", schedule, s, m, v)
        found = self.ctx.memo.get(key)
        if found is None:
            steps = stage_steps(schedule, s, self.pp, m, v)
            found = self.ctx.memo[key] = tuple(step.chunk for step in steps if step.kind != FORWARD)
        return found  # type: ignore[return-value]
