"""The rule every run directory's compute nodes obey, imported or not: a compute node takes time.

A trace whose compute nodes all carry `duration_micros` 0 (roofline off) says nothing about how long
they take, and simulating them as instants is a silent wrong number (ASTRA-sim's LLM trace generator
writes exactly such roofline traces: `num_ops`, `tensor_size`, no duration). So, per rank:

- roofline on (the run directory's system file sets `roofline-enabled`): GPU compute nodes are timed
  from `num_ops` and `tensor_size` (trace.decode), which they must carry;
- roofline off, and some compute node of the trace has a duration: durations are replayed (a 0 in such
  a trace is a kernel under a microsecond: 1 ns, as ASTRA-sim takes it);
- roofline off, and no compute node of the trace has a duration: an error naming the node — naming the
  system file that does not enable roofline when the nodes carry roofline data — unless the manifest
  marks the rank idle (`ranks[i].idle`: the generator gives a GPU that serves no stage one empty
  compute node, because ASTRA-sim needs a trace per NPU).
"""

from __future__ import annotations

from pathlib import Path

from astra_hetero.backends.embedded.trace.records import RankTrace
from astra_hetero.errors import RunDirError


def check_compute_times(trace: RankTrace, path: Path, idle: bool, system_file: Path | None) -> None:
    """`trace` of the file `path` (a twin's trace may stand for it); `idle`: the manifest marks its
    rank idle; `system_file`: the run directory's ASTRA-sim system file, if any."""
    if trace.untimed < 0 or idle:
        return
    node = trace.describe(trace.untimed)
    if trace.untimed_roofline:
        if system_file is None:
            raise RunDirError(
                f"{path}: {node} is a roofline compute node (num_ops and tensor_size, no duration), and "
                "the run directory has no ASTRA-sim system file to time it with; import the study with "
                "`astra-hetero import ... --system-configuration SYSTEM.json` (a system file that sets "
                '"roofline-enabled": 1, "peak-perf" and "local-mem-bw")'
            )
        raise RunDirError(
            f"{system_file}: does not enable roofline, but the compute nodes of {path} are roofline "
            f'nodes (num_ops and tensor_size, no duration: {node}); set "roofline-enabled": 1 with '
            '"peak-perf" (TFLOP/s) and "local-mem-bw" (GB/s) in it, or give the nodes durations'
        )
    raise RunDirError(
        f"{path}: {node} takes no time: no compute node of this trace has a duration (duration_micros "
        "is 0 for all) and none carries roofline data (num_ops, tensor_size) to time it with"
    )
