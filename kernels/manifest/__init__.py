"""Kernels as data: a manifest (TOML or JSON) plus CUDA sources becomes a KernelSpec.

``model`` is the format (pydantic models; ``schema.json`` is generated from them and shipped),
``expressions`` evaluates its arithmetic in the farm's safe expression language, ``bundle`` checks a
manifest with its files and hashes them, ``build`` turns a checked bundle into a KernelSpec whose
``"cuda"`` implementation is :class:`~kernelfarm.kernels.manifest.cuda.ManifestCudaKernel`.
"""
