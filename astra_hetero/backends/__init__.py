"""Backends execute a run directory and return a `RunResult`; see `base.py` for the registry."""
