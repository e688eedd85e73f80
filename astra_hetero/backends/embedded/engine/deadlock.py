"""The report of a simulation that cannot finish: the ranks that wait, and on what."""

from __future__ import annotations

from astra_hetero.backends.embedded.engine.workload import FlatWorkload

_MAX_REPORTED = 8


def deadlock_report(w: FlatWorkload, end_ns: list[int], pending: list[int]) -> str:
    """Which ranks wait on issued nodes that can never complete, or that none do (a cycle)."""
    waiting: dict[int, list[int]] = {}
    for g, end in enumerate(end_ns):
        if end < 0 and pending[g] == 0:
            waiting.setdefault(w.rank_of[g], []).append(g)
    lines = [
        f"deadlock: {end_ns.count(-1)} nodes never ran; "
        f"{len(waiting)} ranks wait on issued nodes that cannot complete:"
    ]
    for rank in sorted(waiting)[:_MAX_REPORTED]:
        nodes = ", ".join(w.describe(g, with_file=False) for g in waiting[rank][:_MAX_REPORTED])
        lines.append(f"  rank {w.ranks[rank]} ({w.paths[rank]}): {nodes}")
    if len(waiting) > _MAX_REPORTED:
        lines.append(f"  ... and {len(waiting) - _MAX_REPORTED} more ranks")
    if not waiting:
        lines.append("  none: the remaining nodes wait on each other (a dependency cycle)")
    return "\n".join(lines)
