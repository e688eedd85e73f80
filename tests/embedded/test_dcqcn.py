"""The DCQCN fluid model (`network.dcqcn`) against what DCQCN is known to do, and its inputs."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from astra_hetero.backends.embedded.network.dcqcn import DcqcnNetwork, FluidFlow, FluidLink
from astra_hetero.backends.embedded.network.flows import NEVER_NS
from astra_hetero.backends.embedded.rundir.dcqcn_config import DcqcnParams, read_dcqcn_config
from astra_hetero.errors import RunDirError

GBPS = 0.125  # bytes per ns
KMIN_400, KMAX_400 = 800e3, 3200e3  # what the topology writer gives 400 Gbit/s links at 32 MB
KMIN_100, KMAX_100 = 400e3, 1600e3


def ns3_defaults(**changes: float) -> DcqcnParams:
    """The spec's DCQCN defaults as config.txt writes them (HPCC's ns-3 reference setup)."""
    values = dict(
        alpha_resume_interval_ns=1000.0,
        rate_decrease_interval_ns=4000.0,
        clamp_target_rate=False,
        rp_timer_ns=900_000.0,
        ewma_gain=1 / 256,
        fast_recovery_times=1,
        rate_ai=50e6 / 8e9,
        rate_hai=100e6 / 8e9,
        min_rate=100e6 / 8e9,
        payload_bytes=1000,
        buffer_bytes=32 * 2**20,
        ecn={},
    )
    values.update(changes)
    return DcqcnParams(**values)  # type: ignore[arg-type]


def sigcomm15(**changes: float) -> DcqcnParams:
    """DCQCN's published parameters (Zhu et al., SIGCOMM 2015, section 6: 40 Gbit/s, g = 1/256, K = 55
    µs, fast recovery F = 5, R_AI = 40 Mbit/s; CNPs at most every 50 µs)."""
    return ns3_defaults(
        alpha_resume_interval_ns=55_000.0,
        rate_decrease_interval_ns=50_000.0,
        rp_timer_ns=55_000.0,
        fast_recovery_times=5,
        rate_ai=40e6 / 8e9,
        rate_hai=400e6 / 8e9,
        min_rate=10e6 / 8e9,
        **changes,
    )


def switch_link(kmin: float, kmax: float, pmax: float, params: DcqcnParams) -> FluidLink:
    return FluidLink(True, 1.0, kmin, kmax, pmax, params.buffer_bytes / 9)


def run(net: DcqcnNetwork, starts: list[tuple[int, FluidFlow]], until: int = NEVER_NS, sample=None) -> None:
    """Drive the network as the engine does: flows start at their times, steps at its wakeups."""
    pending = sorted(starts, key=lambda s: s[0])
    finished: set[FluidFlow] = set()
    while True:
        start = pending[0][0] if pending else NEVER_NS
        now = min(start, net.wakeup_ns)
        if now >= until or (not pending and starts and len(finished) == len(starts)) or now >= NEVER_NS:
            return
        if start <= net.wakeup_ns:
            finished.update(net.add(pending.pop(0)[1], now))  # type: ignore[arg-type]
        else:
            finished.update(net.step(now))  # type: ignore[arg-type]
            if sample:
                sample(now)


def sent(flow: FluidFlow, total: float) -> float:
    return total - flow.subs[0].remaining


@pytest.mark.parametrize("num_bytes", [10e6, 10e9])
def test_a_single_flow_on_an_uncongested_path_keeps_line_rate_without_marks(num_bytes):
    params = ns3_defaults()
    net = DcqcnNetwork(
        [400 * GBPS, 400 * GBPS],
        [FluidLink(False, 0.0), switch_link(KMIN_400, KMAX_400, 0.2, params)],
        params,
    )
    flow = FluidFlow(((0, 1.0), (1, 1.0)), num_bytes, None)
    run(net, [(0, flow)])
    assert flow.done_at == math.ceil(num_bytes / (400 * GBPS))
    assert net.stats()["rate_cuts"] == 0 and max(net.queue) == 0
    assert net.stats()["steps"] <= 2  # its end, whatever its size: cost does not grow with bytes


def test_flows_into_one_bottleneck_converge_to_fair_shares_with_the_queue_between_kmin_and_kmax():
    params = sigcomm15()
    n, kmin, kmax = 4, 5e3, 200e3  # SIGCOMM'15: Kmin 5 KB, Kmax 200 KB, Pmax 1 %
    links = [FluidLink(False, 0.0)] * n + [switch_link(kmin, kmax, 0.01, params)]
    net = DcqcnNetwork([40 * GBPS] * (n + 1), links, params)
    total = 1e12
    flows = [FluidFlow(((i, 1.0), (n, 1.0)), total, None) for i in range(n)]
    run(net, [(i * 2_000_000, f) for i, f in enumerate(flows)], until=60_000_000)  # staggered starts
    before, start = [sent(f, total) for f in flows], net.t
    queue: list[float] = []
    run(net, [], until=100_000_000, sample=lambda _: queue.append(net.queue[n]))
    window = net.t - start
    rates = [(sent(f, total) - b) / window / GBPS for f, b in zip(flows, before, strict=True)]  # Gbit/s
    assert all(abs(rate - 10) < 0.6 for rate in rates), rates  # each 1/4 of 40 Gbit/s
    assert sum(rates) > 0.95 * 40
    assert kmin < statistics.mean(queue) < kmax
    assert sum(q > kmin for q in queue) > 0.6 * len(queue)  # mostly marking ...
    assert max(queue) < 2 * kmax  # ... and never far above KMAX (the RP reacts once per 50 µs)
    assert net.stats()["pfc_pauses"] == 0


def test_a_400_to_100g_step_down_cuts_by_halves_then_settles_at_the_100g_rate():
    params = ns3_defaults()
    links = [FluidLink(False, 0.0), switch_link(KMIN_100, KMAX_100, 0.2, params)]
    net = DcqcnNetwork([400 * GBPS, 100 * GBPS], links, params)
    total = 1e12
    flow = FluidFlow(((0, 1.0), (1, 1.0)), total, None)
    rates: list[float] = []
    run(net, [(0, flow)], until=200_000, sample=lambda _: rates.append(flow.subs[0].rc / GBPS))
    cuts = [r for r in dict.fromkeys(rates) if r < 400]
    # the first CNP sets α = 1: each decrease interval with marks halves the rate (RC·(1 − α/2))
    assert cuts[0] == pytest.approx(200, rel=1e-3) and cuts[1] == pytest.approx(100, rel=0.01)
    first = next(i for i, r in enumerate(rates) if r < 400)
    assert min(rates) < 100  # the queue built above KMIN drains only below 100G
    # then recovery: RP_TIMER steps toward the target and gentler cuts (α decays) around 100G
    run(net, [], until=40_000_000)
    before, queued, start = sent(flow, total), net.queue[1], net.t
    run(net, [], until=80_000_000)
    rate = (sent(flow, total) - before - (net.queue[1] - queued)) / (net.t - start) / GBPS  # delivered
    assert 85 < rate <= 100.001, rate
    assert net.stats()["pfc_pauses"] == 0 and first > 0


@pytest.mark.parametrize("n, buffer_mb, pauses", [(2, 32, False), (8, 32, True), (2, 1, True)])
def test_pfc_pauses_only_once_a_queue_reaches_its_threshold(n, buffer_mb, pauses):
    """n 400G senders into one 400G port: two fill it slowly enough for DCQCN to hold the queue
    below the pause threshold of a 32 MB buffer (B/9); eight (incast) do not, nor do two with 1 MB."""
    params = ns3_defaults(buffer_bytes=buffer_mb * 2**20)
    links = [FluidLink(False, 0.0)] * n + [switch_link(KMIN_400, KMAX_400, 0.2, params)]
    net = DcqcnNetwork([400 * GBPS] * (n + 1), links, params)
    flows = [FluidFlow(((i, 1.0), (n, 1.0)), 50e6, None) for i in range(n)]
    peak: list[float] = []
    run(net, [(0, f) for f in flows], sample=lambda _: peak.append(net.queue[n]))
    threshold = params.buffer_bytes / 9
    assert (net.stats()["pfc_pauses"] > 0) == pauses
    assert max(peak) <= threshold * (1 + 1e-6)
    assert (max(peak) >= threshold * (1 - 1e-6)) == pauses
    assert all(f.done_at < NEVER_NS for f in flows)


def incast_chain(params: DcqcnParams, n: int = 4) -> tuple[DcqcnNetwork, list[int]]:
    """n GPUs at 3600G into one 400G NIC (a queue fed by n ingresses), on at 400G and down onto a
    100G NIC: study 4's shared-NIC incast. Returns the network and its three queued links."""
    links = [FluidLink(False, 0.0)] * n + [
        FluidLink(True, 1.0, KMIN_400, KMAX_400, 0.2, params.buffer_bytes / 9, n),
        FluidLink(True, 2.0, KMIN_400, KMAX_400, 0.2, params.buffer_bytes / 9, 1),
        FluidLink(True, 3.0, KMIN_100, KMAX_100, 0.2, params.buffer_bytes / 9, 1),
    ]
    net = DcqcnNetwork([3600 * GBPS] * n + [400 * GBPS, 400 * GBPS, 100 * GBPS], links, params)
    return net, [n, n + 1, n + 2]


def incast_flows(n: int, num_bytes: float) -> list[FluidFlow]:
    return [FluidFlow(((i, 1.0), (n, 1.0), (n + 1, 1.0), (n + 2, 1.0)), num_bytes, None) for i in range(n)]


def test_a_queue_filled_faster_than_the_feedback_loop_reaches_the_pause_threshold_first():
    """Four 3600G senders fill their 400G NIC's queue in microseconds, before any CNP can cut them:
    it reaches ns-3's pause threshold for four ingresses (B/3) and PFC holds the senders."""
    params = ns3_defaults()
    net, (nic, _, _) = incast_chain(params)
    flows = incast_flows(4, 20e6)
    full: list[int] = []  # instants the queue is at the threshold
    cut: list[int] = []  # instants after the first cut

    def sample(now: int) -> None:
        if net.queue[nic] >= params.buffer_bytes / 3 * (1 - 1e-6):
            full.append(now)
        if net.stats()["rate_cuts"]:
            cut.append(now)

    run(net, [(0, f) for f in flows], until=50_000, sample=sample)
    assert full and net.stats()["pfc_pauses"] >= 1
    assert full[0] < cut[0]  # at the pause threshold before the first cut
    assert sum(f.subs[0].remaining for f in flows) > 0  # held back, not sent


@pytest.mark.parametrize("num_bytes", [2e6, 4e6, 4.5e6, 6e6])
def test_with_pfc_senders_into_a_slower_link_finish_at_its_rate_while_the_buffers_hold_them(num_bytes):
    """PFC keeps the 100G bottleneck busy: what the senders could not send is held in the queues
    before it, each paused in turn (the pause spreads hop by hop back to the senders). While the
    buffers on the path (B/3 + B/9 + B/9) hold what the senders inject before DCQCN cuts them to its
    floor, four senders' bytes arrive in bytes / 100G; what does not fit waits for the increase
    timer, so the bottleneck idles. Never sooner than bytes / 100G: every byte crosses it."""
    params = ns3_defaults()
    net, (nic, spine, bottleneck) = incast_chain(params)
    flows = incast_flows(4, num_bytes)
    peak = [0.0, 0.0, 0.0]

    def sample(_: int) -> None:
        for i, link in enumerate((nic, spine, bottleneck)):
            peak[i] = max(peak[i], net.queue[link])

    run(net, [(0, f) for f in flows], sample=sample)
    ideal = 4 * num_bytes / (100 * GBPS)
    done = max(f.done_at for f in flows)
    buffers = params.buffer_bytes * (1 / 3 + 2 / 9)
    assert done >= 0.999 * ideal, (done, ideal)  # 0.1 %: the last bytes are rounded
    if 4 * num_bytes <= buffers:
        assert done <= 1.01 * ideal, (done, ideal)
    else:
        assert done > 1.2 * ideal, (done, ideal)
    if 4 * num_bytes > 0.9 * buffers:  # nearly all the buffers fill: the pause spreads
        assert peak[2] >= params.buffer_bytes / 9 * (1 - 1e-6)  # the bottleneck's queue paused ...
        assert peak[1] > 0  # ... the link before it, whose own queue then grew
        assert net.stats()["pfc_pauses"] >= 2


def first_cut_and_peak(params: DcqcnParams, back_bytes: float) -> tuple[int, float]:
    """A 400G sender stepping down onto 100G whose ACKs return through a 100G queue holding
    `back_bytes`: when its first cut comes, and how high its queue gets."""
    links = [
        FluidLink(False, 0.0),
        switch_link(KMIN_100, KMAX_100, 0.2, params),
        switch_link(KMIN_100, KMAX_100, 0.2, params),  # the way back
    ]
    net = DcqcnNetwork([400 * GBPS, 100 * GBPS, 100 * GBPS], links, params, reverse=[-1, 2, 1])
    net.queue[2] = back_bytes
    flow = FluidFlow(((0, 1.0), (1, 1.0)), 1e9, None)
    cuts: list[int] = []
    queue: list[float] = []

    def sample(now: int) -> None:
        queue.append(net.queue[1])
        if net.stats()["rate_cuts"] and not cuts:
            cuts.append(now)

    run(net, [(0, flow)], until=300_000, sample=sample)
    return cuts[0], max(queue)


def test_cnps_delayed_by_a_queue_on_the_way_back_let_the_queue_overshoot():
    """A 400G sender steps down onto 100G; its ACKs (and CNPs) return through a queue holding 1 MB
    (80 µs at 100G). Its first cut comes that much later, and its queue overshoots by the excess
    rate times the delay."""
    params = ns3_defaults()
    cut_now, peak_now = first_cut_and_peak(params, 0.0)
    cut_late, peak_late = first_cut_and_peak(params, 1e6)
    back_ns = 1e6 / (100 * GBPS)  # what the queue on the way back delays at first
    marks_from = KMIN_100 / (300 * GBPS)  # the queue passes KMIN, filling at 300G
    assert cut_now < marks_from + 4 * params.rate_decrease_interval_ns  # a few intervals
    assert back_ns < cut_late < back_ns + marks_from + 4 * params.rate_decrease_interval_ns
    assert peak_late > peak_now + 300 * GBPS * (back_ns - marks_from) * 0.8


def test_a_sub_flow_from_a_fast_host_is_cut_while_its_slow_partner_runs_on():
    """A ring step between a 400G and a 100G host: the 400G sender's queue pair steps down onto the
    100G NIC and is cut; the 100G sender's is never marked (ns-3 keeps one RP per queue pair)."""
    params = ns3_defaults()
    # links: 0 host A (400G), 1 host B (100G), 2 switch -> B (100G), 3 switch -> A (400G)
    links = [
        FluidLink(False, 0.0),
        FluidLink(False, 0.0),
        switch_link(KMIN_100, KMAX_100, 0.2, params),
        switch_link(KMIN_400, KMAX_400, 0.2, params),
    ]
    net = DcqcnNetwork([400 * GBPS, 100 * GBPS, 100 * GBPS, 400 * GBPS], links, params)
    flow = FluidFlow(((0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)), 50e6, None)
    flow.paths = (((0, 1.0), (2, 1.0)), ((1, 1.0), (3, 1.0)))
    run(net, [(0, flow)])
    a_to_b, b_to_a = flow.subs
    assert b_to_a.first_cnp and b_to_a.done_at == math.ceil(50e6 / (100 * GBPS))
    assert not a_to_b.first_cnp and a_to_b.done_at > b_to_a.done_at
    assert flow.done_at == a_to_b.done_at  # the phase ends with its slowest transfer


@pytest.mark.parametrize(
    "rcs, expected",
    [
        ((400, 400), (200, 200)),  # equal shares while both can take them
        ((50, 400), (50, 350)),  # the slow pair keeps its rate, the other takes the rest
        ((50, 100, 400), (50, 100, 250)),
        ((150, 150, 150), (133.33, 133.33, 133.33)),
    ],
)
def test_a_host_nic_serves_its_queue_pairs_in_turn_each_up_to_its_own_rate(rcs, expected):
    """ns-3's NIC picks its queue pairs round robin, each paced at its own rate: max-min fair shares
    of the line rate (λ with Σ min(RC, λ) = C), not shares in proportion to the rates."""
    params = ns3_defaults()
    n = len(rcs)
    links = [FluidLink(False, 0.0)] + [switch_link(KMIN_400, KMAX_400, 0.2, params)] * n
    net = DcqcnNetwork([400 * GBPS] * (n + 1), links, params)
    flow = FluidFlow(((0, float(n)), *((k + 1, 1.0) for k in range(n))), 1e12, None)
    flow.paths = tuple(((0, 1.0), (k + 1, 1.0)) for k in range(n))
    net.add(flow, 0)
    for sub, rc in zip(flow.subs, rcs, strict=True):
        sub.rc = rc * GBPS
    net._dirty = True
    net._rates()
    got = [sub.x / GBPS for sub in flow.subs]
    assert got == pytest.approx(expected, rel=1e-4)
    assert sum(got) <= 400 * (1 + 1e-9)


CONFIG = """CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 900
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 50Mb/s
RATE_HAI 100Mb/s
MIN_RATE 100Mb/s
PACKET_PAYLOAD_SIZE 1000
BUFFER_SIZE 32
KMAX_MAP 2 100000000000 1600 400000000000 3200
KMIN_MAP 2 100000000000 400 400000000000 800
PMAX_MAP 2 100000000000 0.2 400000000000 0.2
"""


def test_the_parameters_come_from_config_txt_in_ns3_units(tmp_path: Path):
    path = tmp_path / "config.txt"
    path.write_text(CONFIG)
    params = read_dcqcn_config(path)
    assert params == ns3_defaults(ecn=params.ecn)
    assert (
        params.ecn[100_000_000_000].kmin_bytes == 400e3 and params.ecn[400_000_000_000].kmax_bytes == 3200e3
    )


def test_a_binary_config_is_refused_by_name(tmp_path: Path):
    path = tmp_path / "config.txt"
    path.write_bytes(CONFIG.encode().replace(b"RP_TIMER", b"RP_\xe2IMER"))  # a UnicodeDecodeError before
    with pytest.raises(RunDirError, match="config.txt: cannot be read \\(not UTF-8 text\\)"):
        read_dcqcn_config(path)


@pytest.mark.parametrize(
    "change, words",
    [
        ("RP_TIMER 900", "RP_TIMER missing"),
        ("RATE_AI 50Mb/s", "RATE_AI missing"),
        ("CC_MODE 1", "CC_MODE missing"),
    ],
)
def test_a_missing_key_names_the_file_and_the_key(tmp_path: Path, change, words):
    path = tmp_path / "config.txt"
    path.write_text(CONFIG.replace(change + "\n", ""))
    with pytest.raises(RunDirError, match=words) as info:
        read_dcqcn_config(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "change, words",
    [
        (("RATE_AI 50Mb/s", "RATE_AI fast"), "RATE_AI must be a rate"),
        (("CC_MODE 1", "CC_MODE 3"), "not DCQCN"),
        (("KMIN_MAP 2 100000000000 400 400000000000 800", "KMIN_MAP 1 100000000000 400"), "same link rates"),
        (("EWMA_GAIN 0.00390625", "EWMA_GAIN 2"), "EWMA_GAIN"),
        # each of these reached the fluid model before: a ValueError, an OverflowError, or a silent nan
        (("RP_TIMER 900", "RP_TIMER nan"), "RP_TIMER must be positive and at most"),
        (("RP_TIMER 900", "RP_TIMER 1e308"), "RP_TIMER must be positive and at most"),
        (("RATE_AI 50Mb/s", "RATE_AI nanMb/s"), "RATE_AI must be a rate from 0"),
        (("KMIN_MAP 2 100000000000 400", "KMIN_MAP 2 100000000000 nan"), "KMIN_MAP needs positive rates"),
        (("KMIN_MAP 2 100000000000 400", "KMIN_MAP 2 inf 400"), "KMIN_MAP must be 'N rate value"),
    ],
)
def test_malformed_values_are_refused_by_key(tmp_path: Path, change, words):
    path = tmp_path / "config.txt"
    path.write_text(CONFIG.replace(*change))
    with pytest.raises(RunDirError, match=words):
        read_dcqcn_config(path)


# --- in the engine ------------------------------------------------------------------------------------
STUDY = Path(__file__).resolve().parents[2] / "examples/studies/packet_fidelity.yaml"


def study_cluster(
    tmp_path: Path, link_model: str, dynamics: list | None = None, collectives: str | None = None
) -> Path:
    """Study 4's 8-GPU cluster (an H100 node at 400G, an A100 node at 100G, 2:1 spine) cut to one
    micro-batch: its gradient all-reduce steps down from 400G onto the A100s' NICs. `collectives`:
    the collective model (default: the spec's)."""
    import yaml

    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import parse_spec

    base = yaml.safe_load(STUDY.read_text())["base"]
    base["network"] = {**base["network"], "link_model": link_model}
    if dynamics:
        base["dynamics"] = dynamics
    base["scope"] = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
    base["parallelism"] = {**base["parallelism"], "global_batch_size": 2}
    if collectives:
        base["collectives"] = {**base["collectives"], "model": collectives}
    name = link_model + (f"-{collectives}" if collectives else "")
    return build_run_dir(parse_spec(base), tmp_path / name).root


def test_dcqcn_in_the_engine_folds_exactly_and_slows_the_step_down(tmp_path):
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    flow = EmbeddedBackend(timeline=False).run(study_cluster(tmp_path, "ns3_packets")).result
    root = study_cluster(tmp_path, "dcqcn")
    folded = EmbeddedBackend(timeline=False).run(root).result
    plain = EmbeddedBackend(timeline=False, fold=False).run(root).result
    assert folded.iteration_time_us == plain.iteration_time_us
    assert folded.meta["folding"]["rank_classes"] < folded.num_ranks
    assert folded.iteration_time_us > flow.iteration_time_us  # DCQCN's cuts at the 400G -> 100G step
    assert folded.meta["dcqcn"]["rate_cuts"] > 0
    assert folded.meta["link_model"].startswith("dcqcn: DCQCN fluid model on ns3_packets")


def test_dcqcn_refuses_a_calibrated_step_down_efficiency():
    from pydantic import ValidationError

    from astra_hetero.spec.schema import NetworkSpec

    with pytest.raises(ValidationError, match="step_down_efficiency"):
        NetworkSpec(link_model="dcqcn", step_down_efficiency=0.66)
    with pytest.raises(ValidationError, match="dcqcn.enabled"):
        NetworkSpec(link_model="auto", dcqcn={"enabled": False})


def test_dcqcn_with_dynamics_events_folds_exactly(tmp_path):
    """Two iterations with a NIC slowed for a while and background traffic onto the A100 node: the
    dynamic engine runs the fluid model too, folded or rank by rank alike."""
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    events = [
        {
            "event": "link_rate",
            "node_group": "a100",
            "node": 0,
            "kind": "nic",
            "factor": 0.5,
            "start_ms": 0.5,
            "end_ms": 3,
        },
        {
            "event": "background_traffic",
            "from": {"node_group": "h100", "node": 0},
            "to": {"node_group": "a100", "node": 0},
            "gbps": 50,
            "start_ms": 1,
            "end_ms": 6,
        },
    ]
    root = study_cluster(tmp_path, "dcqcn", dynamics=events)
    folded = EmbeddedBackend(timeline=False, iterations=2).run(root).result
    plain = EmbeddedBackend(timeline=False, iterations=2, fold=False).run(root).result
    assert folded.iteration_time_us == plain.iteration_time_us
    assert folded.meta["dcqcn"]["rate_cuts"] > 0 and folded.meta["iterations"] == 2


def test_auto_takes_the_fluid_model_only_where_rates_step_down_or_leaves_are_oversubscribed(tmp_path):
    from astra_hetero.backends.embedded.network.fluid_links import fluid_link_set, heights
    from astra_hetero.backends.embedded.rundir.topology import read_topology

    topo = read_topology(study_cluster(tmp_path, "auto") / "ns3/topology.txt")
    height = heights(topo)
    gbps = [round(r * 8) for r in topo.link_bytes_per_ns]
    chosen = fluid_link_set(topo)
    down_to_100g = {
        k
        for k in range(topo.num_links)
        if height[topo.link_src[k]] == 2 and gbps[k] == 100 and height[topo.link_dst[k]] == 1
    }  # leaf -> the A100s' 100G NICs
    h100_leaf = {
        topo.link_dst[k] for k in range(topo.num_links) if gbps[k] == 400 and height[topo.link_src[k]] == 1
    }
    uplinks = {  # the H100 leaf's: 4 x 400G NICs below, 2 x 400G spines above (the A100 leaf's are not)
        k for k in range(topo.num_links) if topo.link_src[k] in h100_leaf and height[topo.link_dst[k]] == 3
    }
    assert down_to_100g and uplinks and chosen == down_to_100g | uplinks


def test_auto_on_a_fabric_without_step_downs_is_the_flow_model(tmp_path):
    import yaml

    from astra_hetero.backends.embedded.backend import EmbeddedBackend
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import parse_spec

    base = yaml.safe_load(STUDY.read_text())["base"]
    base["cluster"]["node_groups"][1] = {**base["cluster"]["node_groups"][0], "name": "h100b"}
    base["mapping"] = {"replicas": ["h100", "h100b"]}
    base["scope"] = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
    base["parallelism"] = {**base["parallelism"], "global_batch_size": 2}
    results = {}
    for model in ("auto", "ns3_packets"):
        base["network"] = {"topology": "spine_leaf", "nodes_per_leaf": 1, "link_model": model}
        root = build_run_dir(parse_spec(base), tmp_path / model).root
        results[model] = EmbeddedBackend(timeline=False).run(root).result
    assert results["auto"].iteration_time_us == results["ns3_packets"].iteration_time_us
    assert "dcqcn" not in results["auto"].meta


def test_each_message_of_a_ring_starts_a_new_queue_pair_at_line_rate():
    """ASTRA-sim sends a ring's steps as messages in turn, each on a new queue pair in ns-3: each
    starts at line rate, learns nothing from the one before, and is cut again at a step-down."""
    params = ns3_defaults()
    times, cuts = [], []
    for messages in (1, 2):
        links = [FluidLink(False, 0.0), switch_link(KMIN_100, KMAX_100, 0.2, params)]
        net = DcqcnNetwork([400 * GBPS, 100 * GBPS], links, params)
        flow = FluidFlow(((0, 1.0), (1, 1.0)), 20e6, None)
        flow.messages = messages
        run(net, [(0, flow)])
        times.append(flow.done_at)
        cuts.append(net.stats()["rate_cuts"])
    assert times[1] > times[0] > 20e6 / (100 * GBPS)  # slower than the bottleneck, more so in two
    assert cuts[1] >= cuts[0] + 3  # the second message's first cuts: 400 -> 200 -> 100 -> below


def test_the_pause_threshold_grows_with_the_ingresses_that_feed_a_queue():
    """ns-3 pauses an ingress whose share of the buffer reaches (B − used)/8: n alike ingresses into one
    queue pause at q = n·B/(8 + n) — B/9 for one, B/3 for four (`SwitchMmu::GetPfcThreshold`)."""
    params = ns3_defaults()
    for n, share in ((1, 1 / 9), (4, 1 / 3)):
        queue = FluidLink(True, 1.0, KMIN_400, KMAX_400, 0.2, params.buffer_bytes / 9, ingress=4)
        net = DcqcnNetwork([400 * GBPS] * (n + 1), [FluidLink(False, 0.0)] * n + [queue], params)
        flows = [FluidFlow(((i, 1.0), (n, 1.0)), 1e9, None) for i in range(n)]
        run(net, [(0, f) for f in flows], until=1)
        assert net.pfc_at[n] == pytest.approx(share * params.buffer_bytes)


# --- per-member collectives (ASTRA-sim's rings start and end rank by rank) -----------------------------
def two_member_ring(params: DcqcnParams, size: float) -> tuple[DcqcnNetwork, FluidFlow]:
    """A 2-member ring all-reduce between hosts A and B (100G each, through one switch): path 0 is
    A -> B, path 1 B -> A, two messages of `size` each (2(N − 1) steps), each forwarding what the
    other sent."""
    links = [
        FluidLink(False, 0.0),  # 0: A's own link
        switch_link(KMIN_100, KMAX_100, 0.2, params),  # 1: switch -> B
        FluidLink(False, 0.0),  # 2: B's own link
        switch_link(KMIN_100, KMAX_100, 0.2, params),  # 3: switch -> A
    ]
    net = DcqcnNetwork([100 * GBPS] * 4, links, params)
    flow = FluidFlow(((0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)), 2 * size, None)
    flow.paths = (((0, 1.0), (1, 1.0)), ((2, 1.0), (3, 1.0)))
    flow.messages, flow.after = 2, (1, 0)
    return net, flow


def run_ring(delta: int, held: bool, size: float = 8e6) -> tuple[FluidFlow, list[tuple[int, int, int]]]:
    """A starts at 0, B joins at `delta` (`held`: A's path goes alone until then; else both start at
    `delta`, as when the collective waits for its last member)."""
    net, flow = two_member_ring(ns3_defaults(), size)
    net.paths_done.clear()
    flow.path_ends = []
    started = 0 if held else delta
    if held:
        flow.held = [False, True]
    net.add(flow, started)
    ends = []
    released = not held
    while flow.done_at == NEVER_NS:
        now = net.wakeup_ns
        if not released and delta <= now:
            net.release(flow, [1], delta)
            released = True
            continue
        net.step(now)
        ends += [(path, at, len(flow.subs)) for _, path, at in net.paths_done]
        net.paths_done.clear()
    return flow, ends


@pytest.mark.parametrize("delta", [0, 200_000, 2_000_000])
def test_a_member_that_issues_early_sends_at_once_and_the_ring_waits_for_the_late_members_share(delta):
    """A 2-member ring where A issues Δ before B: A's first message goes at once and arrives at its
    solo time whatever Δ; the ring ends no earlier than B's own bytes take from Δ on. Issued together
    (Δ = 0) it is the ring that waits for both. Starting early is not always faster: once A's first
    message is there, B sends its two messages at once and its NIC serves them in turn (ns-3's NIC
    round-robins its queue pairs), so B's first arrives later than alone and A's second waits for it
    — with Δ past A's first message: Δ + 2m/C for B's two, then m/C for A's second (m = 8 MB, C =
    100G; no queue builds: nothing steps down)."""
    size = 8e6
    early, _ = run_ring(delta, held=True, size=size)
    together, _ = run_ring(delta, held=False, size=size)
    message, rate = size, 100 * GBPS
    first = next(sub for sub in early.subs if sub.path == 0 and sub.message == 0)
    assert first.done_at == pytest.approx(message / rate, abs=2)
    assert early.done_at >= delta + 2 * message / rate
    if delta == 0:
        assert early.done_at == together.done_at
    if delta >= 2_000_000:
        assert early.done_at == pytest.approx(delta + 3 * message / rate, abs=3)
        assert together.done_at == pytest.approx(delta + 2 * message / rate, abs=3)


def test_a_held_path_sends_nothing_until_its_sender_joins():
    net, flow = two_member_ring(ns3_defaults(), 8e6)
    flow.held = [False, True]
    net.add(flow, 0)
    while net.wakeup_ns < 1_000_000:
        net.step(net.wakeup_ns)
    assert flow.started == [1, 0]  # A's first message only: its second forwards B's first
    assert flow.subs[0].done_at < 1_000_000  # ... which has arrived long since
    net.release(flow, [1], 1_000_000)
    assert flow.started == [1, 2]  # B sends its first and, having A's, its second at once
    while flow.done_at == NEVER_NS:
        net.step(net.wakeup_ns)
    assert flow.started == [2, 2]


def test_each_path_reports_when_its_last_message_arrives():
    """A member's part ends with its last incoming message (ASTRA-sim's ring ends a rank's stream
    on its last receive): each path's end is reported once, the later of them is the flow's end."""
    flow, ends = run_ring(500_000, held=True)
    assert sorted(path for path, _, _ in ends) == [0, 1]
    assert max(at for _, at, _ in ends) == flow.done_at


def test_per_member_collectives_in_the_engine_fold_exactly_and_start_and_end_rank_by_rank(tmp_path):
    """On study 4's 8-GPU cluster under `dcqcn` with ASTRA-sim's collectives (`ideal`, as study 4's
    `dcqcn` points run them): folded and rank-by-rank runs give the same spans;
    the H100 and A100 members of a gradient all-reduce start it at their own issue and end it at
    their own last receive; the flow model keeps one start and one end per collective."""
    from collections import Counter, defaultdict

    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    root = study_cluster(tmp_path, "dcqcn", collectives="ideal")
    folded = EmbeddedBackend().run(root).spans
    plain = EmbeddedBackend(fold=False).run(root).spans
    assert Counter(folded) == Counter(plain)
    grads = defaultdict(list)  # the gradient all-reduces: each across an H100 and an A100 rank
    for span in plain:
        if span.kind == "comm" and span.name.startswith("dp."):
            grads[span.name].append(span)
    assert any(len({s.start_ns for s in spans}) > 1 for spans in grads.values())
    assert any(len({s.end_ns for s in spans}) > 1 for spans in grads.values())
    flow = EmbeddedBackend(fold=False).run(study_cluster(tmp_path, "ns3_packets", collectives="ideal")).spans
    ends_by_start = defaultdict(set)  # a collective's members start together and end together
    for span in flow:
        if span.kind == "comm" and span.name.startswith("dp."):
            ends_by_start[(span.name, span.start_ns)].add(span.end_ns)
    assert ends_by_start and all(len(ends) == 1 for ends in ends_by_start.values())
