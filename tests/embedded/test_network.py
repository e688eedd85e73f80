"""Max-min fair sharing: closed cases, and incremental updates agreeing with a full recomputation."""

from __future__ import annotations

import random

import pytest

from astra_hetero.backends.embedded.network.flows import Flow, FlowNetwork


def _flow(links: dict[int, float], num_bytes: float = 1e6) -> Flow:
    return Flow(tuple(sorted(links.items())), num_bytes, None)


def test_two_flows_on_one_link_each_get_half():
    net = FlowNetwork([10.0])
    a, b = _flow({0: 1.0}), _flow({0: 1.0})
    net.add(a, 0)
    net.add(b, 0)
    assert (a.rate, b.rate) == (5.0, 5.0)


def test_max_min_gives_the_unused_share_to_the_unconstrained_flow_and_back():
    net = FlowNetwork([10.0, 4.0])
    a, b, c = _flow({0: 1.0}), _flow({0: 1.0, 1: 1.0}), _flow({1: 1.0})
    for f in (a, b, c):
        net.add(f, 0)
    assert (a.rate, b.rate, c.rate) == pytest.approx((8.0, 2.0, 2.0))
    changed = net.remove(c, 0)
    assert set(changed) == {a, b}
    assert (a.rate, b.rate) == pytest.approx((6.0, 4.0))


def test_a_coflow_using_a_link_twice_moves_at_half_its_rate():
    net = FlowNetwork([10.0])
    ring = _flow({0: 2.0})
    net.add(ring, 0)
    assert ring.rate == 5.0


def test_progress_is_kept_across_rate_changes():
    net = FlowNetwork([10.0])
    a, b = _flow({0: 1.0}, 100.0), _flow({0: 1.0}, 100.0)
    net.add(a, 0)
    assert a.finish_time(0) == 10
    net.add(b, 4)  # a has 60 bytes left, now at rate 5
    assert a.finish_time(4) == 16


def _is_max_min_fair(net: FlowNetwork, flows: list[Flow]) -> bool:
    for link, users in enumerate(net.users):
        if sum(w * f.rate for f, w in users.items()) > net.capacity[link] * (1 + 1e-9):
            return False
    for f in flows:  # every flow has a saturated link on which no flow is faster
        if not any(
            sum(w * g.rate for g, w in net.users[link].items()) >= net.capacity[link] * (1 - 1e-9)
            and all(g.rate <= f.rate * (1 + 1e-9) for g in net.users[link])
            for link, _ in f.links
        ):
            return False
    return True


@pytest.mark.parametrize("seed", range(8))
def test_incremental_updates_stay_max_min_fair(seed):
    rng = random.Random(seed)
    net = FlowNetwork([rng.choice([1.0, 2.0, 4.0, 8.0]) for _ in range(12)])
    live: list[Flow] = []
    for step in range(60):
        if live and rng.random() < 0.4:
            net.remove(live.pop(rng.randrange(len(live))), step)
        else:
            links = {link: rng.choice([0.5, 1.0, 2.0]) for link in rng.sample(range(12), rng.randint(1, 4))}
            live.append(_flow(links))
            net.add(live[-1], step)
        assert _is_max_min_fair(net, live)
