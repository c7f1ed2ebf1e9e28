"""Measuring on a GPU, shared by every GPU backend (cuda and triton).

Module map:

- ``supervisor`` (worker process): :class:`MeasuringChild`, the parent's handle on the isolated child:
  start, pipelined send/receive, deadlines, replacement after a hang, a crash or a poisoned context.
- ``child`` (the child process, the only one that owns a CUDA context): the request loop.
- ``session`` (in the child): inputs and reference, poison, verify, time one compiled config.
- ``loader``: the seam a backend fills in, :class:`KernelLoader` ("load and launch" its compiled
  kernel); the cuda backend's is ``worker/cuda/loader.py``.
- ``timing``: the ONE timing function (CUDA events, L2 flush, noise-based stopping).
- ``verifier``: output poisoning and the check against the reference, by norm and element by element
  (the kernel's ``Tolerance``, ``kernels/tolerance.py``).
- ``faults``: which CUDA errors poison the context.
- ``stream`` (worker process): a stream of requests pipelined on the child, replies as Measurements.
- ``roofline`` and ``ceilings``: the GPU's measured ceilings (cached per GPU) and where a timing sits.
- ``catalogue``: kernel specs by name, also in processes that get only names.
- ``compile_pool`` and ``staging`` (worker process): the compile processes, and everything before the GPU
  (validity, compile-ahead, the child's message, ncu's target); a backend supplies its compiler.
- ``fake_child``: a stand-in for the child's loop, to test supervision without a GPU.

Only the child-side modules (``child``, ``session``, ``timing``, ``verifier``,
``roofline.measure_ceilings``) touch CuPy, and only inside the child (or a GPU test or benchmark):
the worker process never creates a CUDA context, so it survives faulting kernels.
"""
