// C = A @ B^T in bf16 (fp32 accumulation) with Hopper's warpgroup MMA (wgmma, sm_90a).
// A is M x K, B is N x K, C is M x N, row-major, bf16 as raw 16-bit words. Operands go global ->
// shared memory by cp.async (STAGES deep) into the non-swizzled "core matrix" layout (8 rows x 16
// bytes contiguous) that wgmma reads through shared-memory descriptors; each warpgroup (4 warps)
// computes MT blocks of 64 x BN with one wgmma m64nBNk16 per block and k16 step.
// One wgmma group stays in flight while the next tile's copies are issued.
// Defines: M, N, K, BN, WGS (warpgroups along M), MT, BK, STAGES, GROUP_M, LOAD_MAP (0: a thread per
// 16-byte chunk, consecutive threads on consecutive rows; 1: thread pairs read a row's 32-byte sector).
// Descriptors: leading byte offset = distance between core matrices along K, stride byte offset =
// along M/N (measured: the swapped reading gives wrong results on an H100).

#include "kf/async_copy.cuh"
#include "kf/bf16.cuh"

#define THREADS (WGS * 128)
#define BM (64 * WGS * MT)
#define A_CHUNKS (BM * BK / 8)
#define B_CHUNKS (BN * BK / 8)
#define KCORES (BK / 8)  // core matrices along K in a tile row-block

// Shared-memory matrix descriptor, no swizzle: start address, leading (K) and stride (M/N) byte offsets.
__device__ __forceinline__ unsigned long long make_desc(const void* p, unsigned lead, unsigned stride) {
    unsigned long long d = 0;
    d |= (unsigned long long)((smem_addr(p) & 0x3FFFF) >> 4);
    d |= (unsigned long long)((lead >> 4) & 0x3FFF) << 16;
    d |= (unsigned long long)((stride >> 4) & 0x3FFF) << 32;
    return d;
}

__device__ __forceinline__ void wgmma_n64(float* d, unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n128(float* d, unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n256(float* d, unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_bn(float* d, unsigned long long da, unsigned long long db) {
#if BN == 64
    wgmma_n64(d, da, db);
#elif BN == 128
    wgmma_n128(d, da, db);
#else
    wgmma_n256(d, da, db);
#endif
}

// Byte offset of the 16-byte chunk (row r, k-chunk kc) in the core-matrix layout of a tile.
__device__ __forceinline__ int core_offset(int r, int kc) { return ((r / 8) * KCORES + kc) * 128 + (r % 8) * 16; }

extern "C" __global__ void __launch_bounds__(THREADS)
kf_matmul_bf16_wgmma(const bf16* __restrict__ A, const bf16* __restrict__ B, bf16* __restrict__ C) {
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned char* As = smem;                              // [STAGES][BM * BK * 2 bytes]
    unsigned char* Bs = smem + STAGES * BM * BK * 2;       // [STAGES][BN * BK * 2 bytes]

    const int blocks_m = M / BM, blocks_n = N / BN;
    const int pid = blockIdx.x;
    const int group = pid / (GROUP_M * blocks_n);
    const int first_m = group * GROUP_M;
    const int group_rows = min(blocks_m - first_m, GROUP_M);
    const int bm = first_m + (pid % (GROUP_M * blocks_n)) % group_rows;
    const int bn = (pid % (GROUP_M * blocks_n)) / group_rows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp / 4, wq = warp % 4;  // warpgroup, warp within it
    const bf16* Ag = A + (long)bm * BM * K;
    const bf16* Bg = B + (long)bn * BN * K;

    auto load_stage = [&](int stage, int k0) {
        unsigned char* as = As + stage * BM * BK * 2;
        unsigned char* bs = Bs + stage * BN * BK * 2;
        // consecutive threads take consecutive rows: one core matrix = 8 threads' 128 contiguous bytes
#pragma unroll
        for (int c = tid; c < A_CHUNKS; c += THREADS) {
#if LOAD_MAP
            const int r = (c / 2) % BM, kc = (c / 2 / BM) * 2 + (c % 2);
#else
            const int r = c % BM, kc = c / BM;
#endif
            cp_async16(as + core_offset(r, kc), Ag + (long)r * K + k0 + kc * 8);
        }
#pragma unroll
        for (int c = tid; c < B_CHUNKS; c += THREADS) {
#if LOAD_MAP
            const int r = (c / 2) % BN, kc = (c / 2 / BN) * 2 + (c % 2);
#else
            const int r = c % BN, kc = c / BN;
#endif
            cp_async16(bs + core_offset(r, kc), Bg + (long)r * K + k0 + kc * 8);
        }
    };

    float acc[MT][BN / 2];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int v = 0; v < BN / 2; ++v) acc[i][v] = 0.f;

    const int KT = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s * BK);
        cp_commit();
    }
    const unsigned LEAD = 128, STRIDE = KCORES * 128;

    for (int kt = 0; kt < KT; ++kt) {
        cp_wait<STAGES - 2>();
        // cp.async wrote through the generic proxy; wgmma reads through the async proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();

        const unsigned char* as = As + (kt % STAGES) * BM * BK * 2;
        const unsigned char* bs = Bs + (kt % STAGES) * BN * BK * 2;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            const unsigned long long db = make_desc(bs + kk * 2 * 128, LEAD, STRIDE);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int row_block = (wg * MT + i) * 64;  // first row of this 64-row block in the tile
                const unsigned long long da = make_desc(as + (row_block / 8) * KCORES * 128 + kk * 2 * 128, LEAD, STRIDE);
                wgmma_bn(acc[i], da, db);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Keep this tile's wgmma in flight; the previous one must be done (in every warpgroup)
        // before its stage is refilled.
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < KT) load_stage(next % STAGES, next * BK);
        cp_commit();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    cp_wait<0>();

    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = bm * BM + (wg * MT + i) * 64 + wq * 16 + g;
        bf16* Cg = C + (long)row * N + bn * BN;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + t * 2;
            *reinterpret_cast<unsigned*>(Cg + c) = pack_bf16(acc[i][j * 4 + 0], acc[i][j * 4 + 1]);
            *reinterpret_cast<unsigned*>(Cg + 8L * N + c) = pack_bf16(acc[i][j * 4 + 2], acc[i][j * 4 + 3]);
        }
    }
}
