// 2D convolution, NHWC bf16, "same" padding, stride 1, as an implicit GEMM on the tensor cores:
// out[m, ko] = sum_k A[m, k] * Wt[ko, k] with m = (n, oh, ow), k = (r, s, c); A is never materialised:
// each 16-byte chunk of 8 channels is gathered by cp.async straight from the input, zero-filled in
// the padding. Weights are [KO][R][R][C] (k-contiguous, the GEMM's B^T), output [N][H][W][KO].
// Same tiling/pipeline parameters as matmul_bf16: BM, BN, BK, WM, WN, STAGES, PAD, GROUP_M.
// Problem defines: NB, H, W, C, KO, R (C % BK == 0, so a K-slice never straddles two taps).
#include "kf/async_copy.cuh"
#include "kf/bf16.cuh"
#include "kf/mma_sync.cuh"

#define M (NB * H * W)
#define N KO
#define K (R * R * C)
#define PADHW (R / 2)
#define THREADS (WM * WN * 32)
#define WTM (BM / WM)   // warp tile
#define WTN (BN / WN)
#define MT (WTM / 16)   // mma tiles per warp
#define NT (WTN / 8)
#define LDS (BK + PAD)  // shared-memory row length in elements
#define A_CHUNKS (BM * BK / 8)  // 16-byte chunks per stage
#define B_CHUNKS (BN * BK / 8)

extern "C" __global__ void __launch_bounds__(THREADS)
kf_conv2d(const bf16* __restrict__ X, const bf16* __restrict__ Wt, bf16* __restrict__ Y) {
    extern __shared__ __align__(128) bf16 smem[];
    bf16* As = smem;                          // [STAGES][BM][LDS]
    bf16* Bs = smem + STAGES * BM * LDS;      // [STAGES][BN][LDS]

    const int blocks_m = M / BM, blocks_n = N / BN;
    const int pid = blockIdx.x;
    const int group = pid / (GROUP_M * blocks_n);
    const int first_m = group * GROUP_M;
    const int group_rows = min(blocks_m - first_m, GROUP_M);
    const int bm = first_m + (pid % (GROUP_M * blocks_n)) % group_rows;
    const int bn = (pid % (GROUP_M * blocks_n)) / group_rows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const bf16* Bg = Wt + (long)bn * BN * K;

    auto load_stage = [&](int stage, int k0) {
        bf16* as = As + stage * BM * LDS;
        bf16* bs = Bs + stage * BN * LDS;
        const int tap = k0 / C, c0 = k0 % C;  // one filter tap (fr, fs) per K-slice
        const int fr = tap / R, fs = tap % R;
#pragma unroll
        for (int c = tid; c < A_CHUNKS; c += THREADS) {
            const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            const int m = bm * BM + r;
            const int n = m / (H * W), rem = m % (H * W);
            const int ih = rem / W + fr - PADHW, iw = rem % W + fs - PADHW;
            const bool valid = ih >= 0 && ih < H && iw >= 0 && iw < W;
            const bf16* src = valid ? X + (((long)n * H + ih) * W + iw) * C + c0 + kc : X;
            cp_async16_zfill(as + r * LDS + kc, src, valid);
        }
#pragma unroll
        for (int c = tid; c < B_CHUNKS; c += THREADS) {
            const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            cp_async16(bs + r * LDS + kc, Bg + (long)r * K + k0 + kc);
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;

    const int KT = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s * BK);
        cp_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_wait<STAGES - 2>();
        __syncthreads();  // stage kt landed for every thread; stage kt-1 is free to overwrite
        const int next = kt + STAGES - 1;
        if (next < KT) load_stage(next % STAGES, next * BK);
        cp_commit();

        const bf16* as = As + (kt % STAGES) * BM * LDS + (wm * WTM) * LDS;
        const bf16* bs = Bs + (kt % STAGES) * BN * LDS + (wn * WTN) * LDS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MT][4], bfr[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i)
                ldsm_x4(af[i][0], af[i][1], af[i][2], af[i][3],
                        as + (i * 16 + (lane % 16)) * LDS + kk + (lane / 16) * 8);
#pragma unroll
            for (int j = 0; j < NT; j += 2)
                ldsm_x4(bfr[j][0], bfr[j][1], bfr[j + 1][0], bfr[j + 1][1],
                        bs + (j * 8 + (lane % 8) + (lane / 16) * 8) * LDS + kk + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma16816(acc[i][j], af[i], bfr[j]);
        }
    }
    cp_wait<0>();

    const int g = lane / 4, t = lane % 4;
    bf16* Cg = Y + (long)(bm * BM + wm * WTM) * N + bn * BN + wn * WTN;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int r = i * 16 + g, c = j * 8 + t * 2;
            *reinterpret_cast<unsigned*>(Cg + (long)r * N + c) = pack_bf16(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<unsigned*>(Cg + (long)(r + 8) * N + c) = pack_bf16(acc[i][j][2], acc[i][j][3]);
        }
}
