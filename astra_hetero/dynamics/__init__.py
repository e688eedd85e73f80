"""Dynamic clusters: timed events (link rates, slow GPUs, background traffic, jitter) over iterations.

`events` validates the spec's `dynamics:` list; `selection` resolves each event to the ranks and
topology links it touches (written to the run directory as `dynamics.json`), and the embedded engine
applies them as timed events (`backends/embedded/engine/timed.py`).
"""
