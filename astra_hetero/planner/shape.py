"""A plan's shape: tensor, pipeline, data and context parallel degrees (tp, pp, dp, cp)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    tp: int
    pp: int
    dp: int
    cp: int = 1

    @property
    def cell(self) -> int:
        """GPUs of one pipeline cell: the TP groups of its CP ranks."""
        return self.tp * self.cp

    @property
    def num_gpus(self) -> int:
        return self.cell * self.pp * self.dp

    @property
    def num_cells(self) -> int:
        return self.pp * self.dp

    @property
    def label(self) -> str:
        """`tp2·pp2·dp2`, or `tp2·cp2·pp2·dp2` with context parallelism."""
        cp = f"·cp{self.cp}" if self.cp > 1 else ""
        return f"tp{self.tp}{cp}·pp{self.pp}·dp{self.dp}"
