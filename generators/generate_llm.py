#!/usr/bin/env python3
"""Workload-generator entry point: heterogeneous LLM training → one Chakra trace per rank.

    python generators/generate_llm.py SPEC.yaml -o RUN_DIR

Same as `astra-hetero generate`; kept here so the generator can be run from a checkout without
installing the console script. Specs live in ../examples/, calibration tables in configs/.
"""

from __future__ import annotations

import sys

from astra_hetero.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["generate", *sys.argv[1:]]))
