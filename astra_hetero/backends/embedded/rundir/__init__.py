"""Reading and validating a run directory into plain data for the engine (`reader.SimInput`)."""
