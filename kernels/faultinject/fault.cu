// A kernel that fails on purpose, one way per MODE, to prove the worker survives each failure kind:
// 0 correct copy, 1 compile error, 2 launch failure (the launch asks for too many threads),
// 3 illegal memory access, 4 hang, 5 wrong result, 6 wrong only on some inputs (when x[0] > 1: half
// of the input seeds), which one input set can miss and a second one catches.

#if MODE == 1
this is not CUDA;
#endif

extern "C" __global__ void kf_fault(const float* __restrict__ x, float* __restrict__ y, int n,
                                    const int* __restrict__ never) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
#if MODE == 4
    // Spins forever: `never` holds ones and is never set to the sentinel.
    while (*(volatile const int*)never != 0x5eed) { }
#endif
    if (i >= n) return;
#if MODE == 3
    y[i + (1L << 40)] = x[i];  // far outside any allocation
#elif MODE == 5
    y[i] = x[i] + 1.0f;
#elif MODE == 6
    y[i] = x[0] > 1.0f ? x[i] + 1.0f : x[i];
#else
    y[i] = x[i];
#endif
}
