"""A plan's shape: tensor, pipeline and data parallel degrees (tp, pp, dp)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    tp: int
    pp: int
    dp: int

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def num_cells(self) -> int:
        return self.pp * self.dp
