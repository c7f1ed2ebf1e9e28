"""The ``@triton.jit`` functions of the Triton catalogue. Only hosts with Triton import these modules;
the kernel specs name them by module and function (``kernels/triton_kernel.py``)."""
