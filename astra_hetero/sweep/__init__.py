"""Sweeps: many variants of one spec, each run in its own run directory, combined into one table."""

from astra_hetero.sweep.plan import Sweep, SweepPoint, load_sweep
from astra_hetero.sweep.run import PointOutcome, run_sweep

__all__ = ["PointOutcome", "Sweep", "SweepPoint", "load_sweep", "run_sweep"]
