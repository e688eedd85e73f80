"""Routes equal the textbook definition: shortest in hops through switches, traffic split equally among
the links to next hops on shortest paths, latency of the slowest path — computed here by one
breadth-first search per destination over the plain graph, against the router's trees-and-core
structure, on cluster fabrics and on random graphs with cycles, multi-homed hosts and twin switches."""

from __future__ import annotations

import random
from collections import deque

import pytest

from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.topology import Topology, parse_topology
from tests.embedded.rundirs import machines, single_switch


def _reference(topo: Topology, bundle_of: list[int], src: int, dst: int) -> tuple[dict[int, float], int]:
    dist = {dst: 0}
    queue = deque([dst])
    while queue:
        node = queue.popleft()
        if node != dst and not topo.is_switch[node]:
            continue  # hosts are reached, never passed through
        for k in topo.out_links[node]:
            other = topo.link_dst[k]
            if other not in dist:
                dist[other] = dist[node] + 1
                queue.append(other)
    share, latency, links = {src: 1.0}, {src: 0}, {}
    frontier = [src]
    while frontier:
        following = []
        for node in frontier:
            nxt = [
                k
                for k in topo.out_links[node]
                if dist.get(topo.link_dst[k], -9) == dist[node] - 1
                and (topo.is_switch[topo.link_dst[k]] or topo.link_dst[k] == dst)
            ]
            for k in nxt:
                hop = topo.link_dst[k]
                links[bundle_of[k]] = links.get(bundle_of[k], 0.0) + share[node] / len(nxt)
                if hop not in share and hop != dst:
                    following.append(hop)
                share[hop] = share.get(hop, 0.0) + share[node] / len(nxt)
                latency[hop] = max(latency.get(hop, 0), latency[node] + topo.link_delay_ns[k])
        frontier = following
    return links, latency[dst]


def _check_all_pairs(text: str) -> None:
    topo = parse_topology(text)
    router = Router(topo)
    hosts = range(len(topo.npus))
    for a in hosts:
        for b in hosts:
            if a == b:
                continue
            route = router.route(a, b)
            links, latency = _reference(topo, router.bundle_of, topo.npus[a], topo.npus[b])
            assert dict(route.links) == pytest.approx(links), (a, b)
            assert route.latency_ns == latency, (a, b)


def test_single_switch_and_machines_with_per_gpu_nics():
    _check_all_pairs(single_switch(5))
    _check_all_pairs(machines([400, 100, 200], 2))


def _random_topology(seed: int) -> str:
    rng = random.Random(seed)
    num_hosts, num_switches = rng.randint(3, 7), rng.randint(2, 7)
    switches = list(range(num_hosts, num_hosts + num_switches))
    links = set()
    for i, s in enumerate(switches[1:], 1):  # a random tree keeps the switches connected...
        links.add((switches[rng.randrange(i)], s))
    for _ in range(rng.randint(0, 5)):  # ...and extra edges make cycles (a core)
        a, b = rng.sample(switches, 2)
        links.add((min(a, b), max(a, b)))
    speed = {n: rng.choice([100, 400]) for n in range(num_hosts + num_switches)}
    for s in switches[: rng.randint(1, num_switches)]:  # twins: copies of a switch with its edges
        if rng.random() < 0.4:
            twin = len(switches) + num_hosts
            switches.append(twin)
            speed[twin] = speed[s]
            links |= {
                (min(twin, b if a == s else a), max(twin, b if a == s else a))
                for a, b in list(links)
                if s in (a, b)
            }
    for h in range(num_hosts):
        for s in rng.sample(switches, rng.choice([1, 1, 2])):
            links.add((h, s))
    if rng.random() < 0.3:
        links.add((0, 1))  # a direct host-host link
    # a link's rate and delay follow its ends' speeds, so a twin's links match its original's
    lines = [
        f"{a} {b} {max(speed[a], speed[b])}Gbps {0.0005 * (1 + (speed[a] == speed[b]))}ms 0"
        for a, b in sorted(links)
    ]
    num_nodes = num_hosts + len(switches)
    return (
        f"{num_nodes} {len(switches)} {len(lines)}\n{' '.join(map(str, switches))}\n"
        + "\n".join(lines)
        + "\n"
    )


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_with_cores_twins_and_multi_homed_hosts(seed):
    _check_all_pairs(_random_topology(seed))


def test_the_random_graphs_do_have_cores_and_twins():
    routers = [Router(parse_topology(_random_topology(seed))) for seed in range(40)]
    assert sum(bool(r._core) for r in routers) >= 10
    assert sum(len(set(r._twin)) < len(r._twin) for r in routers) >= 5


@pytest.mark.parametrize("topology", ["spine_leaf", "rail_optimized", "single_switch"])
def test_cluster_fabrics_from_the_topology_builder(tmp_path, topology):
    from astra_hetero.spec import parse_spec
    from astra_hetero.topology import write_topology
    from tests.conftest import make_spec_data, node_group

    data = make_spec_data(
        network={"topology": topology} | ({"oversubscription": 2.0} if topology == "spine_leaf" else {})
    )
    data["cluster"]["node_groups"].append(
        node_group("l40s", "l40s", count=1, fabric="pcie4", nic={"gbps": 200, "count": 2})
    )
    data["parallelism"] |= {"dp": 5, "global_batch_size": 20}
    spec = parse_spec(data)
    write_topology(spec, tmp_path)
    _check_all_pairs((tmp_path / "ns3/topology.txt").read_text())
