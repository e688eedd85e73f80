"""Workload generation: operator cost model, placement, partition, schedule, per-rank Chakra graphs."""
