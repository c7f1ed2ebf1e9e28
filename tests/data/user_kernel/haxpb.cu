// A user's half-precision kernel (test fixture): out = alpha * x + bias with one rounding (__hfma), each
// thread a tile_size_y x tile_size_x tile. <cuda_fp16.h> is the CUDA Toolkit's, not uploaded.
#include <cuda_fp16.h>

__global__ void haxpb(__half *out, const __half *x, const __half *bias, float alpha, int rows, int cols) {
    const __half a = __float2half(alpha);
    int x0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
    int y0 = blockIdx.y * block_size_y * tile_size_y + threadIdx.y;
    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < tile_size_x; j++) {
            int r = y0 + i * block_size_y;
            int c = x0 + j * block_size_x;
            if (r < rows && c < cols) {
                out[r * cols + c] = __hfma(a, x[r * cols + c], bias[c]);
            }
        }
    }
}
