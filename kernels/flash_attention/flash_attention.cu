// Flash-attention forward (FA2 scheme) in bf16 with fp32 accumulation on the tensor cores
// (mma.sync m16n8k16, ldmatrix, cp.async). Q, K, V, O are [B, H, S, D] contiguous, bf16 as raw
// 16-bit words. A block owns BLOCK_M = WARPS * 16 * MT query rows of one (batch, head); each warp
// owns 16 * MT rows, so the online softmax needs only quad shuffles, no shared-memory reductions.
// K/V tiles of BLOCK_N keys stream through shared memory, STAGES (1 or 2) deep.
// Defines: S, D, CAUSAL, WARPS, MT, BLOCK_N, STAGES, PAD, MIN_BLOCKS.

#include "kf/async_copy.cuh"
#include "kf/bf16.cuh"
#include "kf/mma_sync.cuh"

#define THREADS (WARPS * 32)
#define BLOCK_M (WARPS * 16 * MT)
#define LDS (D + PAD)
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
kf_flash_attention(const bf16* __restrict__ Q, const bf16* __restrict__ K, const bf16* __restrict__ V,
                   bf16* __restrict__ O, float scale_log2) {
    extern __shared__ __align__(128) bf16 smem[];
    bf16* Qs = smem;                               // [BLOCK_M][LDS]
    bf16* Ks = Qs + BLOCK_M * LDS;                 // [STAGES][BLOCK_N][LDS]
    bf16* Vs = Ks + STAGES * BLOCK_N * LDS;        // [STAGES][BLOCK_N][LDS]

    // Causal: the longest query blocks (most key tiles) are scheduled first.
    const int qb = CAUSAL ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;
    const long head = (long)blockIdx.y * S * D;
    const int q0 = qb * BLOCK_M;
    const bf16* Qg = Q + head + (long)q0 * D;
    const bf16* Kg = K + head;
    const bf16* Vg = V + head;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane / 4, t = lane % 4;

    auto load_tile = [&](bf16* dst, const bf16* src, int rows) {
        for (int c = tid; c < rows * (D / 8); c += THREADS) {
            const int r = c / (D / 8), col = (c % (D / 8)) * 8;
            cp_async16(dst + r * LDS + col, src + (long)r * D + col);
        }
    };
    const int kv_end = CAUSAL ? min(S, q0 + BLOCK_M) : S;
    const int n_tiles = (kv_end + BLOCK_N - 1) / BLOCK_N;

    load_tile(Qs, Qg, BLOCK_M);
    load_tile(Ks, Kg, BLOCK_N);
    load_tile(Vs, Vg, BLOCK_N);
    cp_commit();

    unsigned qf[MT][D / 16][4];
    float o[MT][D / 8][4];
    float m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int d = 0; d < D / 8; ++d)
#pragma unroll
            for (int v = 0; v < 4; ++v) o[i][d][v] = 0.f;
        m_run[i][0] = m_run[i][1] = NEG_INF;
        l_run[i][0] = l_run[i][1] = 0.f;
    }

    for (int j = 0; j < n_tiles; ++j) {
        const int stage = (STAGES == 2) ? (j & 1) : 0;
        if (STAGES == 2 && j + 1 < n_tiles) {
            load_tile(Ks + ((j + 1) & 1) * BLOCK_N * LDS, Kg + (long)(j + 1) * BLOCK_N * D, BLOCK_N);
            load_tile(Vs + ((j + 1) & 1) * BLOCK_N * LDS, Vg + (long)(j + 1) * BLOCK_N * D, BLOCK_N);
            cp_commit();
            cp_wait<1>();
        } else if (STAGES == 1 && j > 0) {
            load_tile(Ks, Kg + (long)j * BLOCK_N * D, BLOCK_N);
            load_tile(Vs, Vg + (long)j * BLOCK_N * D, BLOCK_N);
            cp_commit();
            cp_wait<0>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk)
                    ldsm_x4(qf[i][kk], Qs + ((warp * MT + i) * 16 + (lane % 16)) * LDS + kk * 16 + (lane / 16) * 8);
        }
        const bf16* ks = Ks + stage * BLOCK_N * LDS;
        const bf16* vs = Vs + stage * BLOCK_N * LDS;

        // S = Q K^T for this warp's rows and the tile's BLOCK_N keys
        float s[MT][BLOCK_N / 8][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int n = 0; n < BLOCK_N / 8; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) s[i][n][v] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
            for (int n = 0; n < BLOCK_N / 8; n += 2) {
                unsigned b[4];
                ldsm_x4(b, ks + (n * 8 + (lane % 8) + (lane / 16) * 8) * LDS + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma16816(s[i][n], qf[i][kk], b[0], b[1]);
                    mma16816(s[i][n + 1], qf[i][kk], b[2], b[3]);
                }
            }
        }

        // Online softmax (log2 domain). Each thread holds rows g and g + 8 of each m-tile.
        const int k0 = j * BLOCK_N;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const int row0 = q0 + (warp * MT + i) * 16 + g;
            float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
            for (int n = 0; n < BLOCK_N / 8; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    float x = s[i][n][v] * scale_log2;
                    if (CAUSAL) {
                        const int key = k0 + n * 8 + t * 2 + (v & 1);
                        const int row = row0 + (v >> 1) * 8;
                        if (key > row) x = NEG_INF;
                    }
                    s[i][n][v] = x;
                    mx[v >> 1] = fmaxf(mx[v >> 1], x);
                }
            float alpha[2], m_use[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                const float m_new = fmaxf(m_run[i][h], mx[h]);
                m_use[h] = (m_new == NEG_INF) ? 0.f : m_new;  // a row with no visible key yet
                alpha[h] = exp2f(m_run[i][h] - m_use[h]);
                m_run[i][h] = m_new;
            }
            float rs[2] = {0.f, 0.f};
#pragma unroll
            for (int n = 0; n < BLOCK_N / 8; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const float p = exp2f(s[i][n][v] - m_use[v >> 1]);
                    s[i][n][v] = p;
                    rs[v >> 1] += p;
                }
#pragma unroll
            for (int h = 0; h < 2; ++h) l_run[i][h] = l_run[i][h] * alpha[h] + rs[h];  // quad-partial sum
#pragma unroll
            for (int d = 0; d < D / 8; ++d) {
                o[i][d][0] *= alpha[0]; o[i][d][1] *= alpha[0];
                o[i][d][2] *= alpha[1]; o[i][d][3] *= alpha[1];
            }
        }

        // O += P V: P's accumulator layout is the A-operand layout of the next mma.
#pragma unroll
        for (int kc = 0; kc < BLOCK_N / 16; ++kc) {
            unsigned pa[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                pa[i][0] = pack_bf16(s[i][2 * kc][0], s[i][2 * kc][1]);
                pa[i][1] = pack_bf16(s[i][2 * kc][2], s[i][2 * kc][3]);
                pa[i][2] = pack_bf16(s[i][2 * kc + 1][0], s[i][2 * kc + 1][1]);
                pa[i][3] = pack_bf16(s[i][2 * kc + 1][2], s[i][2 * kc + 1][3]);
            }
#pragma unroll
            for (int d = 0; d < D / 8; d += 2) {
                unsigned b[4];
                ldsm_x4_t(b, vs + (kc * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LDS + d * 8 + (lane / 16) * 8);
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma16816(o[i][d], pa[i], b[0], b[1]);
                    mma16816(o[i][d + 1], pa[i], b[2], b[3]);
                }
            }
        }
        __syncthreads();  // this stage is overwritten by the next iteration's (or the one after's) loads
    }

#pragma unroll
    for (int i = 0; i < MT; ++i) {
        float inv[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float l = l_run[i][h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            inv[h] = 1.f / l;
        }
        const int r = (warp * MT + i) * 16 + g;
        bf16* Og = O + head + (long)(q0 + r) * D;
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
            const int c = d * 8 + t * 2;
            *reinterpret_cast<unsigned*>(Og + c) = pack_bf16(o[i][d][0] * inv[0], o[i][d][1] * inv[0]);
            *reinterpret_cast<unsigned*>(Og + 8L * D + c) = pack_bf16(o[i][d][2] * inv[1], o[i][d][3] * inv[1]);
        }
    }
}
