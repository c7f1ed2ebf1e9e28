// bf16 as raw 16-bit words: NVRTC then needs no cuda_bf16.h, and the host side (CuPy has no bfloat16
// dtype) stores the same bits as uint16. Conversions round to nearest even like cvt.rn.bf16.f32 and
// like kernels/cuda_dtypes.py, so a kernel's output and its reference round alike.
// Identifiers here are lower-case: kernels pass their sizes as upper-case -D macros (M, N, K, C, ...).
#ifndef KF_BF16_CUH
#define KF_BF16_CUH

typedef unsigned short bf16;

__device__ __forceinline__ float bf16_to_float(unsigned short x) { return __uint_as_float(((unsigned int)x) << 16); }

__device__ __forceinline__ unsigned short float_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return (unsigned short)(u >> 16);
}

// Two floats as one 32-bit word of two bf16 (lo in the low half): one store for a pair of outputs.
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    unsigned a = __float_as_uint(lo), b = __float_as_uint(hi);
    a += 0x7FFFu + ((a >> 16) & 1u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (a >> 16) | (b & 0xFFFF0000u);
}

#endif  // KF_BF16_CUH
