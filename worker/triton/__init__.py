"""Triton-specific parts of the triton backend (``worker/backends/triton.py``); measuring itself (the
isolated child, the one timing function, the verifier, the roofline) is shared with every GPU
backend in ``worker/measuring/``, and NVML identity and Nsight Compute batches come from
``worker/cuda/``.

Module map: ``compiler`` (ahead-of-time ``triton.compile`` for the GPU's architecture in a process
pool, into Triton's on-disk cache), ``staging`` (Triton's part of the shared staging: compile jobs,
Triton's provenance and metrics), ``loader`` (a compiled kernel loaded and launched on CuPy buffers in the
measuring child; the kernel names ncu filters on), ``warm_kernel`` (each compile process's first
compile).

Triton is imported only by the compile processes, the measuring child and the program ncu
profiles, never by the worker process itself, and never on a CPU-only install.
"""
