// The 32-bit shared-memory address that PTX instructions on shared memory (cp.async, ldmatrix,
// wgmma descriptors) take, from a generic pointer into __shared__ storage.
#ifndef KF_SHARED_MEMORY_CUH
#define KF_SHARED_MEMORY_CUH

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

#endif  // KF_SHARED_MEMORY_CUH
