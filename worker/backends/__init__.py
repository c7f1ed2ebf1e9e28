"""Measurement backends behind one interface (base.py): "cuda" measures on a real GPU, "replay"
serves recorded measurements from a Kernel Tuner cache file."""
