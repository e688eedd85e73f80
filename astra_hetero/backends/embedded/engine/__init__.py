"""The discrete-event engines (static and dynamic) and the workload and communication they run."""
