// C = A @ B in fp32 on the SIMT cores (FFMA). A is M x K, B is K x N, C is M x N, row-major.
// A block computes a BM x BN tile of C, stepping through K in slices of BK held in shared memory
// (A transposed, so both operands are read as float4 along M / N). Each thread accumulates a
// TM x TN register tile, laid out as float4 chunks strided across the block tile so that a warp's
// shared-memory reads and global stores are contiguous.
// Defines: M, N, K, BM, BN, BK, TM, TN (multiples of 4), PREFETCH (1: double-buffered shared memory,
// the next slice is loaded into registers while the current one is multiplied), PAD (floats of
// padding per transposed-A row against bank conflicts), GROUP_M (blocks along M sharing a column
// band of B, for L2 reuse).

#define THREADS ((BM / TM) * (BN / TN))
#define TX (BN / TN)               // threads along N
#define ROW_STRIDE (4 * BM / TM)   // distance between a thread's float4 chunks along M
#define COL_STRIDE (4 * BN / TN)   // ... along N
#define A_LOADS (BM * BK / 4 / THREADS)
#define B_LOADS (BK * BN / 4 / THREADS)
#define STAGES (PREFETCH ? 2 : 1)
#define AS_LD (BM + PAD)

extern "C" __global__ void __launch_bounds__(THREADS)
kf_matmul_fp32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[STAGES][BK][AS_LD];
    __shared__ __align__(16) float Bs[STAGES][BK][BN];

    // Grouped rasterization: GROUP_M consecutive blocks walk down M before moving along N.
    const int blocks_m = M / BM, blocks_n = N / BN;
    const int pid = blockIdx.x;
    const int group = pid / (GROUP_M * blocks_n);
    const int first_m = group * GROUP_M;
    const int group_rows = min(blocks_m - first_m, GROUP_M);
    const int bm = first_m + (pid % (GROUP_M * blocks_n)) % group_rows;
    const int bn = (pid % (GROUP_M * blocks_n)) / group_rows;

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const float* Ablk = A + (long)bm * BM * K;
    const float* Bblk = B + (long)bn * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    float4 ra[A_LOADS], rb[B_LOADS];
    auto load_global = [&](int k0) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BK / 4), kk = (idx % (BK / 4)) * 4;
            ra[l] = __ldg(reinterpret_cast<const float4*>(Ablk + (long)r * K + k0 + kk));
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            rb[l] = __ldg(reinterpret_cast<const float4*>(Bblk + (long)(k0 + r) * N + c));
        }
    };
    auto store_shared = [&](int s) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BK / 4), kk = (idx % (BK / 4)) * 4;
            As[s][kk + 0][r] = ra[l].x; As[s][kk + 1][r] = ra[l].y;
            As[s][kk + 2][r] = ra[l].z; As[s][kk + 3][r] = ra[l].w;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[s][r][c]) = rb[l];
        }
    };
    auto compute = [&](int s) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&As[s][k][i * ROW_STRIDE + ty * 4]);
                a[i * 4 + 0] = v.x; a[i * 4 + 1] = v.y; a[i * 4 + 2] = v.z; a[i * 4 + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[s][k][j * COL_STRIDE + tx * 4]);
                b[j * 4 + 0] = v.x; b[j * 4 + 1] = v.y; b[j * 4 + 2] = v.z; b[j * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    };

#if PREFETCH
    load_global(0);
    store_shared(0);
    __syncthreads();
    int s = 0;
    for (int k0 = BK; k0 < K; k0 += BK) {
        load_global(k0);  // in flight while the current slice is multiplied
        compute(s);
        store_shared(s ^ 1);
        __syncthreads();
        s ^= 1;
    }
    compute(s);
#else
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_global(k0);
        store_shared(0);
        __syncthreads();
        compute(0);
        __syncthreads();
    }
#endif

    float* Cblk = C + (long)bm * BM * N + (long)bn * BN;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = (i / 4) * ROW_STRIDE + ty * 4 + (i % 4);
#pragma unroll
        for (int j = 0; j < TN / 4; ++j) {
            const int col = j * COL_STRIDE + tx * 4;
            *reinterpret_cast<float4*>(Cblk + (long)row * N + col) =
                make_float4(acc[i][j * 4 + 0], acc[i][j * 4 + 1], acc[i][j * 4 + 2], acc[i][j * 4 + 3]);
        }
    }
}
