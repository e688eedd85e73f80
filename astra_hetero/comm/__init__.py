"""Communication models shared by the generator and the embedded engine.

NCCL constants (catalog), its algorithm/protocol choice (tuning), nccl-tests tables (nccl_tests,
measured).
"""
