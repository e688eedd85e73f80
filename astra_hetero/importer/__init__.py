"""`astra-hetero import`: an existing ASTRA-sim study (its traces, system, network, remote-memory and
comm-group files, as its own command line names them) as a run directory that every backend runs —
the real ASTRA-sim binaries with exactly the study's files, the embedded engine under ASTRA-sim's own
semantics — optionally with a heterogeneity overlay (`overlay`)."""
