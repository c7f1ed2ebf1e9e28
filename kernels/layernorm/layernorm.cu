// Row-wise LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta, one row of N per group of
// TPR = THREADS / ROWS threads, ROWS rows per block. Statistics in fp32, two-pass variance.
// Defines: IS_BF16, N, THREADS, ROWS, VEC (elements per vector access; 32-byte vectors are two 16-byte
// accesses), KEEP (1: the row stays in registers, one DRAM read; 0: re-read through L2),
// LOAD_CS / STORE_CS (streaming cache hints: the data is touched once).

#if IS_BF16
typedef unsigned short T;
#else
typedef float T;
#endif

#define TPR (THREADS / ROWS)
#define WARPS_PER_ROW (TPR / 32)
#define NVEC (N / (TPR * VEC))  // vectors per thread
#define VBYTES (VEC * (int)sizeof(T))

template <int B> struct Raw;
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
    return __uint_as_float(((unsigned int)x) << 16);
#else
    return x;
#endif
}
__device__ __forceinline__ T from_f(float f) {
#if IS_BF16
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return (unsigned short)(u >> 16);
#else
    return f;
#endif
}

__device__ __forceinline__ float row_sum(float v, float* scratch, int row_in_block, int lane, int warp_in_row) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
#if WARPS_PER_ROW > 1
    __syncthreads();  // scratch may still be read from the previous reduction
    if (lane == 0) scratch[row_in_block * WARPS_PER_ROW + warp_in_row] = v;
    __syncthreads();
    v = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS_PER_ROW; ++w) v += scratch[row_in_block * WARPS_PER_ROW + w];
#endif
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
kf_layernorm(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
             T* __restrict__ y, int M, float eps) {
    __shared__ float scratch[ROWS * WARPS_PER_ROW];
    const int row_in_block = threadIdx.x / TPR;
    const int t = threadIdx.x % TPR;
    const int lane = threadIdx.x & 31;
    const int warp_in_row = t / 32;
    const long row = (long)blockIdx.x * ROWS + row_in_block;
    // Rows past M still take part in the barriers; they only skip memory.
    const bool live = row < M;
    const T* xr = x + row * N;
    T* yr = y + row * N;

    float sum = 0.f;
#if KEEP
    float vals[NVEC][VEC];
#pragma unroll
    for (int i = 0; i < NVEC; ++i) {
        Pack p;
        if (live) p.raw = load(xr + (i * TPR + t) * VEC); else p.raw = R();
#pragma unroll
        for (int k = 0; k < VEC; ++k) { vals[i][k] = live ? to_f(p.v[k]) : 0.f; sum += vals[i][k]; }
    }
#else
#pragma unroll 4
    for (int i = 0; i < NVEC; ++i) {
        if (!live) break;
        Pack p; p.raw = load(xr + (i * TPR + t) * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += to_f(p.v[k]);
    }
#endif
    const float mean = row_sum(sum, scratch, row_in_block, lane, warp_in_row) * (1.0f / N);

    float sq = 0.f;
#if KEEP
#pragma unroll
    for (int i = 0; i < NVEC; ++i)
#pragma unroll
        for (int k = 0; k < VEC; ++k) { float d = vals[i][k] - mean; sq += live ? d * d : 0.f; }
#else
#pragma unroll 4
    for (int i = 0; i < NVEC; ++i) {
        if (!live) break;
        Pack p; p.raw = load_ro((xr + (i * TPR + t) * VEC));
#pragma unroll
        for (int k = 0; k < VEC; ++k) { float d = to_f(p.v[k]) - mean; sq += d * d; }
    }
#endif
    const float rstd = rsqrtf(row_sum(sq, scratch, row_in_block, lane, warp_in_row) * (1.0f / N) + eps);
    if (!live) return;

#if KEEP
#pragma unroll
#else
#pragma unroll 4
#endif
    for (int i = 0; i < NVEC; ++i) {
        const int col = (i * TPR + t) * VEC;
        Pack g, b, o;
        g.raw = load_ro((gamma + col));
        b.raw = load_ro((beta + col));
#if KEEP
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = from_f((vals[i][k] - mean) * rstd * to_f(g.v[k]) + to_f(b.v[k]));
#else
        Pack p; p.raw = load_ro((xr + col));
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = from_f((to_f(p.v[k]) - mean) * rstd * to_f(g.v[k]) + to_f(b.v[k]));
#endif
        store(yr + col, o.raw);
    }
}
