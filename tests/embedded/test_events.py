import random

from astra_hetero.backends.embedded.engine.events import EventQueue


def test_events_pop_by_time_then_priority_then_insertion_order():
    queue = EventQueue()
    for time_ns, priority, name in [(5, 1, "a"), (5, 0, "b"), (3, 2, "c"), (5, 1, "d"), (5, 0, "e")]:
        queue.push(time_ns, priority, name)
    assert [queue.pop()[2] for _ in range(len(queue))] == ["c", "b", "e", "a", "d"]


def test_sequence_numbers_belong_to_the_queue_not_the_process():
    first, second = EventQueue(), EventQueue()
    first.push(0, 0, "x")
    second.push(0, 0, "y")
    assert first.num_scheduled == second.num_scheduled == 1


def _replay(batch_priority0: bool) -> list[int]:
    """Run items whose handlers each schedule a few more (a fixed function of the item), with
    priority-0 events batched or not; return the order items ran in."""
    queue = EventQueue()
    order: list[int] = []
    next_item = 1

    def handle(item: int, now: int) -> None:
        nonlocal next_item
        rng = random.Random(item)
        for _ in range(rng.choice((0, 1, 1, 2, 3)) if next_item < 3000 else 0):
            time_ns, priority = now + rng.choice((0, 0, 2, 5)), rng.choice((0, 0, 0, 1))
            batchable = rng.random() < 0.7  # single pushes of priority 0 cut batches too
            if priority == 0 and batch_priority0 and batchable:
                queue.push_batched(time_ns, priority, next_item)
            else:
                queue.push(time_ns, priority, next_item)
            next_item += 1
        order.append(item)

    queue.push(0, 1, 0)
    while queue:
        now, _, payload = queue.pop()
        for item in payload if isinstance(payload, list) else [payload]:
            handle(item, now)
    return order


def test_batched_events_run_in_the_order_single_events_would():
    """Items scheduled while a batch runs, at its own time stamp, included."""
    batched, single = _replay(True), _replay(False)
    assert len(single) > 1000
    assert batched == single
