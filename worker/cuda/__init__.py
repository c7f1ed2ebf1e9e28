"""CUDA-specific parts of the cuda backend (``worker/backends/cuda.py``); the measuring itself (the
isolated child, the timing function, the verifier, the roofline) is shared with every GPU backend in
``worker/measuring/``.

Module map: ``compiler`` (NVRTC in the shared process pool, cubin disk cache), ``staging`` (NVRTC's part
of the shared staging: compile jobs, NVRTC's provenance and ptxas metrics), ``loader`` (a cubin loaded
and launched in the measuring child), ``implementation`` (the one access to a spec's CUDA
implementation, and its entry names), ``device`` (NVML identity and clocks), ``provenance`` (identity
and per-measurement provenance), ``profile`` (Nsight Compute in a subprocess: command, kernel filter,
batches, the standby process, CSV), ``profile_target`` (the program ncu runs), ``ncu_profiler``
(batches and standby for a backend).

NVML and ncu are NVIDIA's, not CUDA-source specific: a Triton backend on the same GPUs would import
``device`` and ``profile`` from here. Only ``loader`` and ``profile_target`` touch CuPy, and only
inside the measuring child or the process ncu profiles: the worker process never creates a CUDA
context, so it can fork and survive faulting kernels.
"""
