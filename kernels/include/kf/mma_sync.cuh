// Warp-level bf16 tensor-core math (sm_80+): ldmatrix loads 8x8 b16 tiles from shared memory into
// the fragment layout that mma.sync m16n8k16 (fp32 accumulation) takes.
// Two spellings of each, for the two calling styles of the kernels: fragments as four references or
// as an array (ldmatrix), B fragment as an array or as two registers (mma).
#ifndef KF_MMA_SYNC_CUH
#define KF_MMA_SYNC_CUH

#include "kf/shared_memory.cuh"

__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4(unsigned* r, const void* p) { ldsm_x4(r[0], r[1], r[2], r[3], p); }
// Transposed: a K-major tile read as the B operand of a row-major product (flash attention's V).
__device__ __forceinline__ void ldsm_x4_t(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

// c[0..3] += A (16x16, a[0..3]) * B (16x8, b0 b1), bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) { mma16816(c, a, b[0], b[1]); }

#endif  // KF_MMA_SYNC_CUH
