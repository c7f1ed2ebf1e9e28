// A user's kernel (test fixture of the kernel-manifest tests): out = alpha * x + bias, bias per
// column; each thread computes a tile_size_y x tile_size_x tile, strided like Kernel Tuner's examples.
// Deliberately a plain C++ function: the manifest's "auto" linkage wraps it in C linkage, as Kernel Tuner does.
#include "axpb_common.h"

__global__ void axpb(float *out, const float *x, const float *bias, float alpha, int rows, int cols) {
    int x0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
    int y0 = blockIdx.y * block_size_y * tile_size_y + threadIdx.y;
    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < tile_size_x; j++) {
            int r = y0 + i * block_size_y;
            int c = x0 + j * block_size_x;
            if (r < rows && c < cols) {
                out[r * cols + c] = axpb_value(alpha, x[r * cols + c], bias[c]);
            }
        }
    }
}
