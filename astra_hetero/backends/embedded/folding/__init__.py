"""Folding: finding interchangeable ranks in a run directory and simulating one per class, exactly."""
