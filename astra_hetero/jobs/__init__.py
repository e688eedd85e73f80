"""Several training jobs on one cluster: ownership of GPUs, each job as a spec of its own, and one run
directory holding every job (disjoint rank ranges, comm groups of their own)."""
