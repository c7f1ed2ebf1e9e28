// Row-wise LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta, one row of N per group of
// TPR = THREADS / ROWS threads, ROWS rows per block. Statistics in fp32, two-pass variance.
// Defines: IS_BF16, N, THREADS, ROWS, VEC (elements per vector access; 32-byte vectors are two 16-byte
// accesses), KEEP (1: the row stays in registers, one DRAM read; 0: re-read through L2),
// LOAD_CS / STORE_CS (streaming cache hints: the data is touched once).

#include "kf/rowwise.cuh"

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
    const float mean = row_reduce<false>(sum, scratch, row_in_block, lane, warp_in_row) * (1.0f / N);

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
    const float rstd = rsqrtf(row_reduce<false>(sq, scratch, row_in_block, lane, warp_in_row) * (1.0f / N) + eps);
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
