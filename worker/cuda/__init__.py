"""Real-GPU measurement pieces of the cuda backend.

Module map: ``compiler`` (NVRTC in a process pool, cubin disk cache), ``bench`` (the one timing
function), ``verify`` (poison + relative-error check), ``device`` (NVML identity and clocks),
``child`` (the process that owns the CUDA context), ``isolation`` (parent side: timeouts, restarts),
``profile`` (Nsight Compute in a subprocess), ``roofline`` (ceilings and bound classification).

Only ``child``, ``bench``, ``verify`` and ``roofline.measure_ceilings`` touch CuPy, and only inside
the measuring child (or a GPU test/benchmark): the worker process itself never creates a CUDA
context, so it can fork and survive faulting kernels.
"""
