"""The kernel catalogue: one folder per CUDA kernel (template + spec) and recorded landscapes."""
