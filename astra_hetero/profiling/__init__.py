"""Measured operator times for the calibration table: `astra-hetero profile` (see `run.py`)."""
