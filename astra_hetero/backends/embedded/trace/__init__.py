"""Decoding Chakra traces into numpy columns (`records.RankTrace`); comparing trace files byte-wise."""
