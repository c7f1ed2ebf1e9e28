// Row-wise softmax over the last dimension (N columns), ROWS rows per block, TPR = THREADS / ROWS
// threads per row. exp2 with log2(e) folded in. Defines as in layernorm.cu: IS_BF16, N, THREADS,
// ROWS, VEC, KEEP (row in registers, one DRAM read) or online max/sum then a re-read, LOAD_CS, STORE_CS.

#include "kf/rowwise.cuh"

#define NEG_INF __int_as_float(0xff800000)

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
