// The row-wise kernels' shared machinery (layernorm, softmax): element type, vector loads and
// stores with cache hints, and the reduction of one value across the threads of a row.
// A row of N elements belongs to TPR = THREADS / ROWS threads (whole warps), ROWS rows per block;
// each thread handles NVEC vectors of VEC elements.
// Needs the row-wise -D macros: IS_BF16, N, THREADS, ROWS, VEC, LOAD_CS, STORE_CS.
#ifndef KF_ROWWISE_CUH
#define KF_ROWWISE_CUH

#include "kf/bf16.cuh"

#if IS_BF16
typedef unsigned short T;
#else
typedef float T;
#endif

#define TPR (THREADS / ROWS)
#define WARPS_PER_ROW (TPR / 32)
#define NVEC (N / (TPR * VEC))  // vectors per thread
#define VBYTES (VEC * (int)sizeof(T))

// The raw word type of a VBYTES-byte vector, so a load is a single instruction.
template <int BYTES_> struct Raw;
template <> struct Raw<2> { typedef unsigned short t; };
template <> struct Raw<4> { typedef unsigned int t; };
template <> struct Raw<8> { typedef uint2 t; };
template <> struct Raw<16> { typedef uint4 t; };
struct Two16 { uint4 a, b; };  // 32-byte vectors (fp32 x 8): two 16-byte accesses
template <> struct Raw<32> { typedef Two16 t; };
typedef Raw<VBYTES>::t R;

union Pack { R raw; T v[VEC]; };

// Cache-hinted vector loads/stores; CS = streaming (evict first), otherwise read-only path.
template <int CS, typename V> __device__ __forceinline__ V ld1(const V* p) {
    if (CS) return __ldcs(p); else return __ldg(p);
}
template <int CS> __device__ __forceinline__ Two16 ld1(const Two16* p) {
    Two16 r; const uint4* q = reinterpret_cast<const uint4*>(p);
    r.a = ld1<CS>(q); r.b = ld1<CS>(q + 1); return r;
}
template <int CS, typename V> __device__ __forceinline__ void st1(V* p, V v) {
    if (CS) __stcs(p, v); else *p = v;
}
template <int CS> __device__ __forceinline__ void st1(Two16* p, Two16 v) {
    uint4* q = reinterpret_cast<uint4*>(p); st1<CS>(q, v.a); st1<CS>(q + 1, v.b);
}
__device__ __forceinline__ R load(const T* p) { return ld1<LOAD_CS>(reinterpret_cast<const R*>(p)); }
__device__ __forceinline__ R load_ro(const T* p) { return ld1<0>(reinterpret_cast<const R*>(p)); }
__device__ __forceinline__ void store(T* p, R v) { st1<STORE_CS>(reinterpret_cast<R*>(p), v); }

__device__ __forceinline__ float to_f(T x) {
#if IS_BF16
    return bf16_to_float(x);
#else
    return x;
#endif
}
__device__ __forceinline__ T from_f(float f) {
#if IS_BF16
    return float_to_bf16(f);
#else
    return f;
#endif
}

// Sum (MAX false) or maximum (MAX true) of v over the TPR threads of a row: butterfly shuffles
// within each warp, then, for rows wider than a warp, through `scratch` (ROWS * WARPS_PER_ROW
// floats of shared memory). Every thread of the block must call it: it may hold barriers.
template <bool MAX>
__device__ __forceinline__ float row_reduce(float v, float* scratch, int row_in_block, int lane, int warp_in_row) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, other) : v + other;
    }
#if WARPS_PER_ROW > 1
    __syncthreads();  // scratch may still be read from the previous reduction
    if (lane == 0) scratch[row_in_block * WARPS_PER_ROW + warp_in_row] = v;
    __syncthreads();
    v = scratch[row_in_block * WARPS_PER_ROW];
#pragma unroll
    for (int w = 1; w < WARPS_PER_ROW; ++w) {
        float other = scratch[row_in_block * WARPS_PER_ROW + w];
        v = MAX ? fmaxf(v, other) : v + other;
    }
#endif
    return v;
}

#endif  // KF_ROWWISE_CUH
