// The naive reference of axpb.cu: one thread per element.
extern "C" __global__ void axpb_naive(float *out, const float *x, const float *bias, float alpha, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (r < rows && c < cols) {
        out[r * cols + c] = alpha * x[r * cols + c] + bias[c];
    }
}
