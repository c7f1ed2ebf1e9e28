// Single-channel 2D image convolution with an F x F filter (cross-correlation, "valid" on an input
// pre-padded by F - 1 rows and columns): out[y][x] = sum_{i,j} in[y + i][x + j] * filter[i][j].
//
// The compile-heavy kernel of the catalogue: the filter loops and the TY x TX register tile are
// fully unrolled, so one config is up to F*F*TY*TX (3,600 at F = 15) FMAs of straight-line code,
// and NVRTC spends seconds per config on it. That is the case the farm's compile-ahead pool exists
// for.
//
// Compile-time problem: H, W (output size), F (filter size). Tunables: BX x BY threads per block
// (one dimensional block, decoded here), TX x TY outputs per thread (strided by BX / BY so a warp's
// loads stay contiguous), PAD (one float of padding per shared-memory row against bank conflicts),
// FILTER_SMEM (stage the filter in shared memory instead of broadcast loads through the read-only
// cache).

#define IN_W (W + F - 1)
#define TILE_H (BY * TY + F - 1)
#define TILE_W (BX * TX + F - 1)

extern "C" __global__ void __launch_bounds__(BX * BY)
    kf_image_conv(const float* __restrict__ input, const float* __restrict__ filter, float* __restrict__ output) {
    __shared__ float tile[TILE_H][TILE_W + PAD];
#if FILTER_SMEM
    __shared__ float weights[F * F];
    for (int k = threadIdx.x; k < F * F; k += BX * BY) weights[k] = filter[k];
#define WEIGHT(k) weights[k]
#else
#define WEIGHT(k) __ldg(filter + (k))
#endif

    const int tx = threadIdx.x % BX;
    const int ty = threadIdx.x / BX;
    constexpr int blocks_x = W / (BX * TX);
    const int x0 = (blockIdx.x % blocks_x) * (BX * TX);
    const int y0 = (blockIdx.x / blocks_x) * (BY * TY);

    for (int i = ty; i < TILE_H; i += BY) {
        const float* row = input + (size_t)(y0 + i) * IN_W + x0;
        for (int j = tx; j < TILE_W; j += BX) tile[i][j] = __ldg(row + j);
    }
    __syncthreads();

    float acc[TY][TX];
#pragma unroll
    for (int a = 0; a < TY; ++a) {
#pragma unroll
        for (int b = 0; b < TX; ++b) acc[a][b] = 0.0f;
    }

#pragma unroll
    for (int i = 0; i < F; ++i) {
#pragma unroll
        for (int j = 0; j < F; ++j) {
            const float w = WEIGHT(i * F + j);
#pragma unroll
            for (int a = 0; a < TY; ++a) {
#pragma unroll
                for (int b = 0; b < TX; ++b) acc[a][b] = fmaf(tile[ty + a * BY + i][tx + b * BX + j], w, acc[a][b]);
            }
        }
    }

#pragma unroll
    for (int a = 0; a < TY; ++a) {
#pragma unroll
        for (int b = 0; b < TX; ++b) output[(size_t)(y0 + ty + a * BY) * W + x0 + tx + b * BX] = acc[a][b];
    }
}
