// The worked example of docs/EXTENDING.md: out = a * x + y, fp32.
// BLOCK threads per block, ITEMS elements per thread (strided by the whole grid, so loads coalesce).
extern "C" __global__ void axpy(const float* __restrict__ x, const float* __restrict__ y,
                                float* __restrict__ out, float a, int n) {
    const int threads = gridDim.x * BLOCK;
    const int first = blockIdx.x * BLOCK + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * threads;
        if (i < n) out[i] = a * x[i] + y[i];
    }
}
