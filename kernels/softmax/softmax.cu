// Row-wise softmax over the last dimension (N columns), ROWS rows per block, TPR = THREADS / ROWS
// threads per row. exp2 with log2(e) folded in. Defines as in layernorm.cu: IS_BF16, N, THREADS,
// ROWS, VEC, KEEP (row in registers, one DRAM read) or online max/sum then a re-read, LOAD_CS, STORE_CS.

#if IS_BF16
typedef unsigned short T;
#else
typedef float T;
#endif

#define NEG_INF __int_as_float(0xff800000)
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

extern "C" __global__ void __launch_bounds__(THREADS)
kf_softmax(const T* __restrict__ x, T* __restrict__ y, int M) {
    __shared__ float scratch[ROWS * WARPS_PER_ROW];
    const int row_in_block = threadIdx.x / TPR;
    const int t = threadIdx.x % TPR;
    const int lane = threadIdx.x & 31;
    const int warp_in_row = t / 32;
    const long row = (long)blockIdx.x * ROWS + row_in_block;
    const bool live = row < M;  // dead rows still take part in the barriers
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const float L2E = 1.4426950408889634f;

#if KEEP
    float vals[NVEC][VEC];
    float mx = NEG_INF;
#pragma unroll
    for (int i = 0; i < NVEC; ++i) {
        Pack p;
        if (live) p.raw = load(xr + (i * TPR + t) * VEC); else p.raw = R();
#pragma unroll
        for (int k = 0; k < VEC; ++k) { vals[i][k] = live ? to_f(p.v[k]) * L2E : NEG_INF; mx = fmaxf(mx, vals[i][k]); }
    }
    mx = row_reduce<true>(mx, scratch, row_in_block, lane, warp_in_row);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < NVEC; ++i)
#pragma unroll
        for (int k = 0; k < VEC; ++k) { vals[i][k] = exp2f(vals[i][k] - mx); sum += vals[i][k]; }
    sum = row_reduce<false>(sum, scratch, row_in_block, lane, warp_in_row);
    const float inv = 1.0f / sum;
    if (!live) return;
#pragma unroll
    for (int i = 0; i < NVEC; ++i) {
        Pack o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = from_f(vals[i][k] * inv);
        store(yr + (i * TPR + t) * VEC, o.raw);
    }
#else
    // Online softmax: running max and sum in one read, then a second read (through L2) to write.
    float mx = NEG_INF, sum = 0.f;
#pragma unroll 4
    for (int i = 0; i < NVEC; ++i) {
        if (!live) break;
        Pack p; p.raw = load(xr + (i * TPR + t) * VEC);
        float local = NEG_INF;
#pragma unroll
        for (int k = 0; k < VEC; ++k) local = fmaxf(local, to_f(p.v[k]) * L2E);
        const float next = fmaxf(mx, local);
        sum *= exp2f(mx - next);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += exp2f(to_f(p.v[k]) * L2E - next);
        mx = next;
    }
    const float row_max = row_reduce<true>(mx, scratch, row_in_block, lane, warp_in_row);
    sum = (mx == NEG_INF) ? 0.f : sum * exp2f(mx - row_max);
    sum = row_reduce<false>(sum, scratch, row_in_block, lane, warp_in_row);
    const float inv = 1.0f / sum;
    if (!live) return;
#pragma unroll 4
    for (int i = 0; i < NVEC; ++i) {
        const int col = (i * TPR + t) * VEC;
        Pack p, o; p.raw = load_ro((xr + col));
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = from_f(exp2f(to_f(p.v[k]) * L2E - row_max) * inv);
        store(yr + col, o.raw);
    }
#endif
}
