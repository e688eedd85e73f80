"""The one progress-bar layout every long command shows (description, bar, done/total, elapsed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(console: Console | None = None, quiet: bool = False, transient: bool = False) -> Progress:
    """A rich progress bar to use as a context manager; rich is imported here, not at start-up."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=transient,
    )
