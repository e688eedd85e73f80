"""Figure files: the formats every command that draws can write (`--figure-format`), and how a
report.md shows one. Kept apart from the plotting modules so that the command line can name the
formats without importing them."""

from __future__ import annotations

FIGURE_FORMATS = ("png", "svg", "pdf")  # by a figure file's suffix; svg and pdf are vector drawings


def markdown_figure(file_name: str, title: str = "") -> str:
    """A figure in report.md: shown inline (png, svg) or, a PDF, linked."""
    text = title or file_name
    return f"[{text} (PDF)]({file_name})" if file_name.lower().endswith(".pdf") else f"![{text}]({file_name})"
