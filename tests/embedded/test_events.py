from astra_hetero.backends.embedded.events import EventQueue


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
