"""Measurement backends behind one contract (base.py): "cuda" measures on a real GPU, "replay"
serves recorded measurements from a Kernel Tuner cache file, "fake" makes up deterministic timings
on the CPU. tests/worker/test_backend_contract.py runs the same suite over every one."""
