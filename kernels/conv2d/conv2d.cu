// 2D convolution, NHWC bf16, "same" padding, stride 1, as an implicit GEMM on the tensor cores:
// out[m, ko] = sum_k A[m, k] * Wt[ko, k] with m = (n, oh, ow), k = (r, s, c); A is never materialised:
// each 16-byte chunk of 8 channels is gathered by cp.async straight from the input, zero-filled in
// the padding. Weights are [KO][R][R][C] (k-contiguous, the GEMM's B^T), output [N][H][W][KO].
// Same tiling/pipeline parameters as matmul_bf16: BM, BN, BK, WM, WN, STAGES, PAD, GROUP_M.
// Problem defines: NB, H, W, C, KO, R (C % BK == 0, so a K-slice never straddles two taps).
typedef unsigned short bf16;

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

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
    // src-size 0 writes 16 zero bytes: the convolution's padding
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N_> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N_)); }

__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    unsigned a = __float_as_uint(lo), b = __float_as_uint(hi);
    a += 0x7FFFu + ((a >> 16) & 1u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (a >> 16) | (b & 0xFFFF0000u);
}

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
